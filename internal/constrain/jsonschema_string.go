package constrain

// Strings of JSON schemas: any string, strings of bounded length, and
// strings matching patterns and formats, which go through a DFA over the
// JSON-encoded bytes (regexp/syntax program → NFA over bytes → subset
// construction → minimisation → one rule per state).

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// formats maps the supported values of "format" to anchored Go regexps
// of a plain subset of each (see the top of jsonschema.go).
var jsFormats = func() map[string]string {
	const (
		date = `[12]\d{3}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))` +
			`|(?:[12]\d(?:0[48]|[2468][048]|[13579][26])|(?:1[26]|2[048])00)-02-29`
		time  = `(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)`
		label = `[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?`
		octet = `(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)`
	)
	return map[string]string{
		"date":      `^(?:` + date + `)$`,
		"time":      `^` + time + `$`,
		"date-time": `^(?:` + date + `)T` + time + `$`,
		"uuid":      `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
		"ipv4":      `^(?:` + octet + `\.){3}` + octet + `$`,
		"hostname":  `^` + label + `(?:\.` + label + `){0,3}$`,
		"email":     `^[a-zA-Z0-9_+-]{1,30}(?:\.[a-zA-Z0-9_+-]{1,20})?@` + label + `(?:\.` + label + `){1,3}$`,
		"uri":       `^https?://` + label + `(?:\.` + label + `){0,3}(?:/[a-zA-Z0-9._~-]{0,20}){0,4}$`,
	}
}()

func (c *jsc) stringKw(s *jval, kw, path string) (string, bool) {
	v := s.get(kw)
	if v == nil {
		return "", false
	}
	if v.kind != jString {
		c.fail(kw, path, "must be a string")
	}
	return v.s, true
}

// str compiles the string part of s.
func (c *jsc) str(s *jval, path string) int {
	pat, hasPat := c.stringKw(s, "pattern", path)
	format, hasFormat := c.stringKw(s, "format", path)
	lo := c.count(s, "minLength", path, 0)
	hi := c.count(s, "maxLength", path, -1)
	if hi >= 0 && lo > hi {
		return -1
	}
	if hasFormat {
		if _, ok := jsFormats[format]; !ok {
			names := make([]string, 0, len(jsFormats))
			for k := range jsFormats {
				names = append(names, k)
			}
			sort.Strings(names)
			c.unsupported("format", path, "format %q (supported: %s)", format, strings.Join(names, ", "))
		}
	}
	if !hasPat && !hasFormat {
		if lo == 0 && hi < 0 {
			return c.anyString()
		}
		return c.countedString(lo, hi)
	}
	key := fmt.Sprintf("%t%q|%t%q|%d|%d", hasPat, pat, hasFormat, format, lo, hi)
	if r, ok := c.strs[key]; ok {
		return r
	}
	var d *jsDFA
	if hasFormat {
		d = c.regexDFA(jsFormats[format], "format", path)
	}
	if hasPat {
		p := c.regexDFA(pat, "pattern", path)
		if d == nil {
			d = p
		} else {
			d = c.checkDFA(jsProduct(d, p, &c.work), "pattern", path)
		}
	}
	if lo > 0 || hi >= 0 {
		d = c.checkDFA(jsProduct(d, c.lengthDFA(lo, hi, path), &c.work), "maxLength", path)
	}
	r := -1
	if d != nil {
		r = c.fresh("string")
		c.alt(r, Bytes(Byte('"')), Ref(c.emitDFA(d, Literal(`"`))))
	}
	c.strs[key] = r
	return r
}

// jsonChar is one character of a JSON string, as one code point: raw
// UTF-8 (≥ U+0020, not '"' or '\') or an escape (\uXXXX not a surrogate).
func (c *jsc) jsonChar() int {
	return c.named("char", func(r int) {
		ascii := Range(0x20, 0x7f)
		ascii[0] &^= 1 << '"'
		ascii[1] &^= 1 << ('\\' - 64)
		c.alt(r, Bytes(ascii))
		for _, seq := range jsUTF8Seqs(0x80, unicode.MaxRune, nil) {
			elems := make([]Elem, len(seq))
			for i, s := range seq {
				elems[i] = Bytes(s)
			}
			c.alt(r, elems...)
		}
		hex := Range('0', '9')
		hex.AddRange('a', 'f')
		hex.AddRange('A', 'F')
		hex4 := c.named("hex4", func(h int) {
			first := Range('0', '9')
			first.AddRange('a', 'c')
			first.AddRange('A', 'C')
			first.AddRange('e', 'f')
			first.AddRange('E', 'F')
			c.alt(h, Bytes(first), Bytes(hex), Bytes(hex), Bytes(hex))
			d := Byte('d')
			d.Add('D')
			c.alt(h, Bytes(d), Bytes(Range('0', '7')), Bytes(hex), Bytes(hex))
		})
		esc := c.named("escape", func(e int) {
			var simple ByteSet
			for _, b := range []byte(`"\/bfnrt`) {
				simple.Add(b)
			}
			c.alt(e, Bytes(simple))
			c.alt(e, Bytes(Byte('u')), Ref(hex4))
		})
		c.alt(r, Bytes(Byte('\\')), Ref(esc))
	})
}

// anyString is any JSON string: string ::= '"' rest; rest ::= '"' | char rest.
func (c *jsc) anyString() int {
	return c.named("string", func(r int) {
		rest := c.named("string.rest", func(t int) {
			c.alt(t, Bytes(Byte('"')))
			c.alt(t, Ref(c.jsonChar()), Ref(t))
		})
		c.alt(r, Bytes(Byte('"')), Ref(rest))
	})
}

// countedString is a string of lo to hi characters (hi < 0: no maximum):
// a chain of rules, one per count.
func (c *jsc) countedString(lo, hi int) int {
	key := fmt.Sprintf("count|%d|%d", lo, hi)
	if r, ok := c.strs[key]; ok {
		return r
	}
	last := hi
	if hi < 0 {
		last = lo
	}
	states := make([]int, last+1)
	for i := range states {
		states[i] = c.fresh("chars")
	}
	for i, r := range states {
		if i >= lo {
			c.alt(r, Bytes(Byte('"')))
		}
		switch {
		case i < last:
			c.alt(r, Ref(c.jsonChar()), Ref(states[i+1]))
		case hi < 0:
			c.alt(r, Ref(c.jsonChar()), Ref(r))
		}
	}
	r := c.fresh("string")
	c.alt(r, Bytes(Byte('"')), Ref(states[0]))
	c.strs[key] = r
	return r
}

// jsKeyAlphabet is what extra property names are made of: no escapes.
var jsKeyAlphabet = [][2]rune{{0x20, '"' - 1}, {'"' + 1, '\\' - 1}, {'\\' + 1, unicode.MaxRune}}

// keyExcept is a JSON string without escapes other than each of names.
func (c *jsc) keyExcept(names []string) int {
	if len(names) == 0 {
		return c.anyString()
	}
	key := "key|" + strings.Join(names, "\x00")
	if r, ok := c.strs[key]; ok {
		return r
	}
	type node struct {
		id   int32
		kids map[rune]*node
		end  bool
	}
	n := newJSNFA()
	free := n.add()
	n.accept[free] = true
	n.runes(free, free, jsKeyAlphabet)
	root := &node{id: n.add(), kids: map[rune]*node{}}
	nodes := []*node{root}
	for _, name := range names {
		if strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == '"' || r == '\\' }) {
			continue // never an extra key: nothing to exclude
		}
		at := root
		for _, r := range name {
			next := at.kids[r]
			if next == nil {
				next = &node{id: n.add(), kids: map[rune]*node{}}
				at.kids[r] = next
				nodes = append(nodes, next)
			}
			at = next
		}
		at.end = true
	}
	for _, nd := range nodes {
		n.accept[nd.id] = !nd.end
		var used [][2]rune
		for r, kid := range nd.kids {
			n.runes(nd.id, kid.id, [][2]rune{{r, r}})
			used = append(used, [2]rune{r, r})
		}
		n.runes(nd.id, free, jsSubtract(jsKeyAlphabet, used))
	}
	d := c.checkDFA(n.dfa(root.id, &c.work), "properties", "")
	r := c.fresh("key")
	c.alt(r, Bytes(Byte('"')), Ref(c.emitDFA(d, Literal(`"`))))
	c.strs[key] = r
	return r
}

// emitDFA adds one rule per state of d: for each target state the bytes
// leading there, then that state's rule; an accepting state also has the
// alternative final. It returns the start state's rule.
func (c *jsc) emitDFA(d *jsDFA, final []Elem) int {
	rules := make([]int, len(d.next))
	for i := range rules {
		rules[i] = c.fresh("dfa")
	}
	sets := make([]ByteSet, len(d.next))
	for s, row := range d.next {
		var targets []int32
		for cl, t := range row {
			if t < 0 {
				continue
			}
			if sets[t] == (ByteSet{}) {
				targets = append(targets, t)
			}
			for w := range sets[t] {
				sets[t][w] |= d.classes[cl][w]
			}
		}
		for _, t := range targets {
			c.alt(rules[s], Bytes(sets[t]), Ref(rules[t]))
			sets[t] = ByteSet{}
		}
		if d.accept[s] {
			c.alt(rules[s], final...)
		}
	}
	return rules[0]
}

// ---- rune ranges and UTF-8 ----

// jsNormRanges sorts and merges rune ranges.
func jsNormRanges(rs [][2]rune) [][2]rune {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b [2]rune) int { return int(a[0] - b[0]) })
	var out [][2]rune
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// jsSubtract is a minus b.
func jsSubtract(a, b [][2]rune) [][2]rune {
	a, b = jsNormRanges(a), jsNormRanges(b)
	var out [][2]rune
	for _, r := range a {
		lo := r[0]
		for _, x := range b {
			if x[1] < lo || x[0] > r[1] {
				continue
			}
			if x[0] > lo {
				out = append(out, [2]rune{lo, x[0] - 1})
			}
			lo = x[1] + 1
		}
		if lo <= r[1] {
			out = append(out, [2]rune{lo, r[1]})
		}
	}
	return out
}

// jsUTF8Seqs appends to out the byte-set sequences whose concatenations are
// exactly the UTF-8 encodings of lo..hi, surrogates left out (each
// sequence's sets are ranges, and every choice of bytes is valid UTF-8).
func jsUTF8Seqs(lo, hi rune, out [][]ByteSet) [][]ByteSet {
	if lo > hi {
		return out
	}
	if lo <= 0xdfff && hi >= 0xd800 {
		out = jsUTF8Seqs(lo, 0xd7ff, out)
		return jsUTF8Seqs(0xe000, hi, out)
	}
	for _, m := range []rune{0x7f, 0x7ff, 0xffff} {
		if lo <= m && hi > m {
			out = jsUTF8Seqs(lo, m, out)
			return jsUTF8Seqs(m+1, hi, out)
		}
	}
	if hi < 0x80 {
		return append(out, []ByteSet{Range(byte(lo), byte(hi))})
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				out = jsUTF8Seqs(lo, lo|m, out)
				return jsUTF8Seqs((lo|m)+1, hi, out)
			}
			if hi&m != m {
				out = jsUTF8Seqs(lo, (hi&^m)-1, out)
				return jsUTF8Seqs(hi&^m, hi, out)
			}
		}
	}
	var a, b [4]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	seq := make([]ByteSet, n)
	for i := range n {
		seq[i] = Range(a[i], b[i])
	}
	return append(out, seq)
}

// ---- NFA over bytes ----

type jsEdge struct {
	set ByteSet
	to  int32
}

type jsNFA struct {
	eps    [][]int32
	edges  [][]jsEdge
	accept []bool
	chains map[string]int32 // shared chain states: (sets, target) → state
}

func newJSNFA() *jsNFA { return &jsNFA{chains: map[string]int32{}} }

func (n *jsNFA) add() int32 {
	n.eps = append(n.eps, nil)
	n.edges = append(n.edges, nil)
	n.accept = append(n.accept, false)
	return int32(len(n.eps) - 1)
}

func (n *jsNFA) epsTo(a, b int32) { n.eps[a] = append(n.eps[a], b) }

// chain adds a path from from through seq to to, sharing the states of
// equal tails.
func (n *jsNFA) chain(from int32, seq []ByteSet, to int32) {
	cur := to
	var key []byte
	key = binary.LittleEndian.AppendUint32(key, uint32(to))
	for i := len(seq) - 1; i >= 1; i-- {
		for _, w := range seq[i] {
			key = binary.LittleEndian.AppendUint64(key, w)
		}
		if s, ok := n.chains[string(key)]; ok {
			cur = s
			continue
		}
		s := n.add()
		n.edges[s] = append(n.edges[s], jsEdge{seq[i], cur})
		n.chains[string(key)] = s
		cur = s
	}
	n.edges[from] = append(n.edges[from], jsEdge{seq[0], cur})
}

func (n *jsNFA) lit(from int32, s string, to int32) {
	seq := make([]ByteSet, len(s))
	for i := range len(s) {
		seq[i] = Byte(s[i])
	}
	n.chain(from, seq, to)
}

// runes adds transitions from from to to reading one code point of rs as
// it appears inside a JSON string: '"', '\' and control characters by
// their escapes (short or \u00XX), the rest as UTF-8.
func (n *jsNFA) runes(from, to int32, rs [][2]rune) {
	rs = jsNormRanges(rs)
	specials := [][2]rune{{0, 0x1f}, {'"', '"'}, {'\\', '\\'}}
	if len(jsSubtract([][2]rune{{0, 0x1f}}, rs)) == 0 {
		hex := Range('0', '9')
		hex.AddRange('a', 'f')
		hex.AddRange('A', 'F')
		n.chain(from, []ByteSet{Byte('\\'), Byte('u'), Byte('0'), Byte('0'), Range('0', '1'), hex}, to)
		var short ByteSet
		for _, b := range []byte("bfnrt") {
			short.Add(b)
		}
		n.chain(from, []ByteSet{Byte('\\'), short}, to)
	} else {
		for _, r := range rs {
			for x := r[0]; x <= min(r[1], 0x1f); x++ {
				if e, _ := jsEscape(x); !strings.HasPrefix(e, `\u`) {
					n.lit(from, e, to)
				}
				n.lit(from, fmt.Sprintf(`\u%04x`, x), to)
			}
		}
	}
	for _, r := range rs {
		for _, q := range []rune{'"', '\\'} {
			if r[0] <= q && q <= r[1] {
				e, _ := jsEscape(q)
				n.lit(from, e, to)
			}
		}
	}
	for _, r := range jsSubtract(rs, specials) {
		for _, seq := range jsUTF8Seqs(r[0], r[1], nil) {
			n.chain(from, seq, to)
		}
	}
}

var jsAnyRunes = [][2]rune{{0, unicode.MaxRune}}

// ---- DFA over bytes ----

// jsDFA is a DFA over byte classes: bytes of a class always go to the
// same state. State 0 is the start; next[s][class] is -1 for none.
type jsDFA struct {
	classOf [256]int16
	classes []ByteSet // the bytes of each class
	next    [][]int32
	accept  []bool
}

func (d *jsDFA) setClasses(classOf [256]int16, n int) {
	d.classOf = classOf
	d.classes = make([]ByteSet, n)
	for b, cl := range classOf {
		d.classes[cl].Add(byte(b))
	}
}

// Work limits of the automata of one schema, all patterns together (in
// elementary steps): past the first a pattern is refused as too complex
// (subset construction, products); past the second automata are left
// unminimised.
const (
	jsMaxDFAWork      = 4 << 20
	jsMaxMinimizeWork = 32 << 20
)

// dfa is the subset construction from start, trimmed and minimised; nil
// when it would exceed jsMaxDFAStates or the work left (*work, counted
// down; minimisation has its own, larger allowance).
func (n *jsNFA) dfa(start int32, work *[2]int) *jsDFA {
	// Byte classes: the coarsest partition that no edge's set splits.
	var classOf [256]int16
	nclass := 1
	seen := map[ByteSet]bool{}
	for _, es := range n.edges {
		for _, e := range es {
			if seen[e.set] {
				continue
			}
			seen[e.set] = true
			ids := map[[2]int16]int16{}
			for b := range classOf {
				k := [2]int16{classOf[b], 0}
				if e.set.Has(byte(b)) {
					k[1] = 1
				}
				id, ok := ids[k]
				if !ok {
					id = int16(len(ids))
					ids[k] = id
				}
				classOf[b] = id
			}
			nclass = len(ids)
		}
	}
	d := &jsDFA{}
	d.setClasses(classOf, nclass)
	inSet := map[ByteSet][]int16{} // the classes of an edge's set
	classesIn := func(s ByteSet) []int16 {
		if cs, ok := inSet[s]; ok {
			return cs
		}
		var cs []int16
		for cl, bs := range d.classes {
			if s.Has(firstByte(bs)) {
				cs = append(cs, int16(cl))
			}
		}
		inSet[s] = cs
		return cs
	}

	stamp := make([]int32, len(n.eps))
	gen := int32(0)
	closure := func(set []int32) []int32 {
		gen++
		var out []int32
		stack := slices.Clone(set)
		for len(stack) > 0 {
			q := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if stamp[q] == gen {
				continue
			}
			stamp[q] = gen
			out = append(out, q)
			stack = append(stack, n.eps[q]...)
		}
		work[0] -= len(out)
		slices.Sort(out)
		return out
	}
	keyOf := func(set []int32) string {
		b := make([]byte, 0, 4*len(set))
		for _, q := range set {
			b = binary.LittleEndian.AppendUint32(b, uint32(q))
		}
		return string(b)
	}
	var sets [][]int32
	ids := map[string]int32{}
	raw := map[string]int32{} // pre-closure target sets → state
	addState := func(set []int32) int32 {
		k := keyOf(set)
		if id, ok := ids[k]; ok {
			return id
		}
		id := int32(len(sets))
		ids[k] = id
		sets = append(sets, set)
		var acc bool
		for _, q := range set {
			acc = acc || n.accept[q]
		}
		d.accept = append(d.accept, acc)
		row := make([]int32, nclass)
		for i := range row {
			row[i] = -1
		}
		d.next = append(d.next, row)
		return id
	}
	addState(closure([]int32{start}))
	tgt := make([][]int32, nclass)
	for s := 0; s < len(sets); s++ {
		if len(sets) > jsMaxDFAStates || work[0] < 0 {
			return nil
		}
		for cl := range tgt {
			tgt[cl] = tgt[cl][:0]
		}
		for _, q := range sets[s] {
			for _, e := range n.edges[q] {
				cs := classesIn(e.set)
				work[0] -= len(cs)
				for _, cl := range cs {
					tgt[cl] = append(tgt[cl], e.to)
				}
			}
		}
		for cl := range tgt {
			if len(tgt[cl]) == 0 {
				continue
			}
			t := slices.Compact(slices.Sorted(slices.Values(tgt[cl])))
			work[0] -= len(t)
			k := keyOf(t)
			id, ok := raw[k]
			if !ok {
				id = addState(closure(t))
				raw[k] = id
			}
			d.next[s][cl] = id
		}
	}
	return d.minimize(work)
}

func firstByte(s ByteSet) byte {
	for w, x := range s {
		if x != 0 {
			return byte(w*64 + bits.TrailingZeros64(x))
		}
	}
	return 0
}

// minimize drops the states that cannot reach an accepting one and, work
// permitting, merges equivalent states (Moore's algorithm); state 0 stays
// the start. With no string accepted the result has no states.
func (d *jsDFA) minimize(work *[2]int) *jsDFA {
	n := len(d.next)
	nclass := len(d.classes)
	rev := make([][]int32, n)
	for s := range d.next {
		for _, t := range d.next[s] {
			if t >= 0 {
				rev[t] = append(rev[t], int32(s))
			}
		}
	}
	live := make([]bool, n)
	var stack []int32
	for s := range n {
		if d.accept[s] {
			live[s] = true
			stack = append(stack, int32(s))
		}
	}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, p := range rev[s] {
			if !live[p] {
				live[p] = true
				stack = append(stack, p)
			}
		}
	}
	out := &jsDFA{classOf: d.classOf, classes: d.classes}
	if n == 0 || !live[0] {
		return out
	}
	// class[s]: the block of s (-1: dead). Moore's refinement from
	// accept / non-accept; past the work limit it is abandoned for the
	// trivial partition (each live state alone), which is still right.
	class := make([]int32, n)
	for s := range n {
		switch {
		case !live[s]:
			class[s] = -1
		case d.accept[s]:
			class[s] = 1
		}
	}
	blocks := 0
	sig := make([]byte, 0, 4*(nclass+1))
	for {
		work[1] -= n * (nclass + 1)
		if work[1] < 0 {
			for s := range n {
				class[s] = int32(s)
				if !live[s] {
					class[s] = -1
				}
			}
			break
		}
		ids := map[string]int32{}
		next := make([]int32, n)
		for s := range n {
			if class[s] < 0 {
				next[s] = -1
				continue
			}
			sig = binary.LittleEndian.AppendUint32(sig[:0], uint32(class[s]))
			for _, t := range d.next[s] {
				c := int32(-1)
				if t >= 0 {
					c = class[t]
				}
				sig = binary.LittleEndian.AppendUint32(sig, uint32(c))
			}
			id, ok := ids[string(sig)]
			if !ok {
				id = int32(len(ids))
				ids[string(sig)] = id
			}
			next[s] = id
		}
		class = next
		if len(ids) == blocks {
			break
		}
		blocks = len(ids)
	}
	// Renumber blocks in visiting order from the start.
	order := map[int32]int32{}
	var walk []int32
	visit := func(s int32) int32 {
		b := class[s]
		id, ok := order[b]
		if !ok {
			id = int32(len(walk))
			order[b] = id
			walk = append(walk, s)
		}
		return id
	}
	visit(0)
	for k := 0; k < len(walk); k++ {
		s := walk[k]
		row := make([]int32, nclass)
		for cl, t := range d.next[s] {
			row[cl] = -1
			if t >= 0 && class[t] >= 0 {
				row[cl] = visit(t)
			}
		}
		out.next = append(out.next, row)
		out.accept = append(out.accept, d.accept[s])
	}
	return out
}

// jsProduct is the intersection of a and b (nil when too large).
func jsProduct(a, b *jsDFA, work *[2]int) *jsDFA {
	if a == nil || b == nil {
		return nil
	}
	var classOf [256]int16
	pairs := map[[2]int16]int16{}
	var ofClass [][2]int16
	for x := range classOf {
		k := [2]int16{a.classOf[x], b.classOf[x]}
		id, ok := pairs[k]
		if !ok {
			id = int16(len(ofClass))
			pairs[k] = id
			ofClass = append(ofClass, k)
		}
		classOf[x] = id
	}
	d := &jsDFA{}
	d.setClasses(classOf, len(ofClass))
	if len(a.next) == 0 || len(b.next) == 0 {
		return d
	}
	ids := map[[2]int32]int32{{0, 0}: 0}
	states := [][2]int32{{0, 0}}
	for k := 0; k < len(states); k++ {
		work[0] -= len(ofClass)
		if len(states) > jsMaxDFAStates || work[0] < 0 {
			return nil
		}
		p := states[k]
		d.accept = append(d.accept, a.accept[p[0]] && b.accept[p[1]])
		row := make([]int32, len(ofClass))
		for cl, ab := range ofClass {
			ta, tb := a.next[p[0]][ab[0]], b.next[p[1]][ab[1]]
			if ta < 0 || tb < 0 {
				row[cl] = -1
				continue
			}
			q := [2]int32{ta, tb}
			id, ok := ids[q]
			if !ok {
				id = int32(len(states))
				ids[q] = id
				states = append(states, q)
			}
			row[cl] = id
		}
		d.next = append(d.next, row)
	}
	return d.minimize(work)
}

// checkDFA fails on a DFA too large; an empty DFA (no string) is nil.
func (c *jsc) checkDFA(d *jsDFA, kw, path string) *jsDFA {
	if d == nil {
		c.fail(kw, path, "too complex: its automaton would exceed %d states or the work limit of a schema", jsMaxDFAStates)
	}
	if len(d.next) == 0 {
		return nil
	}
	return d
}

// lengthDFA is the strings of lo to hi code points (hi < 0: no maximum).
func (c *jsc) lengthDFA(lo, hi int, path string) *jsDFA {
	last := hi
	if hi < 0 {
		last = lo
	}
	if last > jsMaxDFAStates {
		c.fail("maxLength", path, "too large with pattern or format (over %d)", jsMaxDFAStates)
	}
	n := newJSNFA()
	states := make([]int32, last+1)
	for i := range states {
		states[i] = n.add()
	}
	for i, s := range states {
		n.accept[s] = i >= lo
		switch {
		case i < last:
			n.runes(s, states[i+1], jsAnyRunes)
		case hi < 0:
			n.runes(s, s, jsAnyRunes)
		}
	}
	return c.checkDFA(n.dfa(states[0], &c.work), "maxLength", path)
}

// regexDFA compiles a JSON Schema pattern (unanchored unless ^ / $ say
// otherwise) into a DFA over the JSON-encoded bytes of matching strings.
func (c *jsc) regexDFA(pattern, kw, path string) *jsDFA {
	if d, ok := c.dfas[pattern]; ok {
		return d
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		c.fail(kw, path, "invalid regular expression: %v", err)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		c.fail(kw, path, "invalid regular expression: %v", err)
	}
	type key struct {
		pc            uint32
		consumed, end bool
	}
	n := newJSNFA()
	ids := map[key]int32{}
	var queue []key
	state := func(k key) int32 {
		if id, ok := ids[k]; ok {
			return id
		}
		id := n.add()
		ids[k] = id
		queue = append(queue, k)
		return id
	}
	// After a match not anchored at the end, anything may follow.
	post := n.add()
	n.accept[post] = true
	n.runes(post, post, jsAnyRunes)
	// Before it, anything (at least one code point, then ^ fails).
	start := n.add()
	n.epsTo(start, state(key{uint32(prog.Start), false, false}))
	pre := n.add()
	n.runes(start, pre, jsAnyRunes)
	n.runes(pre, pre, jsAnyRunes)
	n.epsTo(pre, state(key{uint32(prog.Start), true, false}))
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		id := ids[k]
		in := &prog.Inst[k.pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			n.epsTo(id, state(key{in.Out, k.consumed, k.end}))
			n.epsTo(id, state(key{in.Arg, k.consumed, k.end}))
		case syntax.InstCapture, syntax.InstNop:
			n.epsTo(id, state(key{in.Out, k.consumed, k.end}))
		case syntax.InstEmptyWidth:
			op := syntax.EmptyOp(in.Arg)
			if op&^(syntax.EmptyBeginText|syntax.EmptyEndText) != 0 {
				c.unsupported(kw, path, "%q: \\b, \\B and multi-line ^ $ are not supported", pattern)
			}
			if op&syntax.EmptyBeginText != 0 && k.consumed {
				continue
			}
			n.epsTo(id, state(key{in.Out, k.consumed, k.end || op&syntax.EmptyEndText != 0}))
		case syntax.InstMatch:
			if k.end {
				n.accept[id] = true
			} else {
				n.epsTo(id, post)
			}
		case syntax.InstFail:
		default:
			if !k.end {
				n.runes(id, state(key{in.Out, true, false}), jsInstRunes(in))
			}
		}
		if len(n.eps) > 8*jsMaxDFAStates {
			c.fail(kw, path, "%q is too complex", pattern)
		}
	}
	d := n.dfa(start, &c.work)
	if d == nil {
		c.fail(kw, path, "%q is too complex: its automaton would exceed %d states or the work limit of a schema", pattern, jsMaxDFAStates)
	}
	if len(d.next) == 0 {
		c.fail(kw, path, "%q matches no string", pattern)
	}
	c.dfas[pattern] = d
	return d
}

// jsInstRunes is the code points a rune instruction reads.
func jsInstRunes(in *syntax.Inst) [][2]rune {
	switch in.Op {
	case syntax.InstRune1:
		return [][2]rune{{in.Rune[0], in.Rune[0]}}
	case syntax.InstRuneAny:
		return jsAnyRunes
	case syntax.InstRuneAnyNotNL:
		return [][2]rune{{0, '\n' - 1}, {'\n' + 1, unicode.MaxRune}}
	}
	if len(in.Rune) == 1 {
		r0 := in.Rune[0]
		rs := [][2]rune{{r0, r0}}
		if syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
			for r := unicode.SimpleFold(r0); r != r0; r = unicode.SimpleFold(r) {
				rs = append(rs, [2]rune{r, r})
			}
		}
		return rs
	}
	var rs [][2]rune
	for i := 0; i+1 < len(in.Rune); i += 2 {
		rs = append(rs, [2]rune{in.Rune[i], in.Rune[i+1]})
	}
	return rs
}
