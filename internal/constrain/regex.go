package constrain

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of the regular expression and Lark compilers.
const (
	// MaxRepeat is the largest bound of a counted repetition: x{n,m} in a
	// regular expression (RE2's own limit, which the parser enforces, also
	// on nested counts) and x ~ n..m in Lark.
	MaxRepeat = 1000
	// MaxExpansion is the most grammar elements that expanding counted
	// repetitions may add to one grammar (each repetition costs its upper
	// bound, or its lower bound when unbounded, per element of the repeated
	// item's separator plus one). A repetition's item is compiled once and
	// referred to, so the cost does not multiply with the item's size.
	MaxExpansion = 100_000
	// MaxGrammarSize is the most elements (Grammar.Size) a grammar compiled
	// from a regular expression, a Lark grammar or a JSON schema may have
	// (about 80 bytes each once prepared for matching): a larger one is
	// refused as it is built, before it takes much memory or time (compiling
	// and preparing 200,000 elements takes a few hundred milliseconds).
	MaxGrammarSize = 200_000
)

// FromRegex compiles a regular expression into a grammar whose sentences
// are exactly the strings the expression matches in full (as if it were
// written ^(?:pattern)$), as valid UTF-8.
//
// The syntax is Go's (RE2, regexp/syntax with Perl flags): literals,
// escapes, character classes with Unicode classes (\pL, \p{Greek}, [[:alpha:]],
// \d \w \s), negated classes, . (any character but newline; with (?s) any
// character), concatenation, alternation, grouping (capturing or not; names
// are ignored), repetition * + ? {n} {n,} {n,m} (greedy or not: the same
// language), flags (?i) (Unicode simple case folding), (?s), (?m), (?U).
// Matching is over runes: classes and . match whole UTF-8 encoded
// characters, never a surrogate or an invalid byte.
//
// Empty-width assertions: ^ and \A are accepted only where nothing can
// precede them (the start of the pattern, possibly inside groups,
// alternations and optional parts), $ and \z only where nothing can follow
// them; there they mean nothing, since the grammar is anchored at both
// ends anyway. Anywhere else, and \b or \B anywhere, is an error naming the
// assertion.
//
// Limits: counted repetitions up to MaxRepeat (RE2's own limit),
// MaxExpansion grammar elements of expanded repetitions in all, and
// MaxGrammarSize elements in the whole grammar. A pattern
// that matches no string at all (an empty class such as [^\x00-\x{10FFFF}])
// is an error.
func FromRegex(pattern string) (g *Grammar, err error) {
	defer catchTooLarge(&err)
	b := newRxBuilder()
	start := b.rule("regex")
	seq, ok, err := b.regex(pattern, "regex")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("regex `%s` matches no string", pattern)
	}
	b.alt(start, seq...)
	return b.finish(start)
}

// rxBuilder builds the grammars of this file and lark.go. Unlike Builder
// it keeps the star rules it made, so that finish can rewrite the ones
// whose body may match the empty string (x* with x nullable would be left
// recursive), and it shares compiled character classes.
type rxBuilder struct {
	rules    []Rule
	loops    []int // rules made by star: alternatives {body, Ref(self)} and {}
	classes  map[string]rxClass
	utf8     map[string]Elem
	expanded int
	never    int // a rule with no alternatives (matches nothing), or -1
	size     int // elements so far, as Grammar.Size counts them
}

// rxTooLarge is the panic of a builder whose grammar outgrows
// MaxGrammarSize; catchTooLarge turns it into the compiler's error.
type rxTooLarge struct{}

func catchTooLarge(err *error) {
	if r := recover(); r != nil {
		if _, ok := r.(rxTooLarge); !ok {
			panic(r)
		}
		*err = fmt.Errorf("grammar too large: over %d elements (MaxGrammarSize)", MaxGrammarSize)
	}
}

type rxClass struct {
	e  Elem
	ok bool
}

func newRxBuilder() *rxBuilder {
	return &rxBuilder{classes: map[string]rxClass{}, utf8: map[string]Elem{}, never: -1}
}

func (b *rxBuilder) rule(name string) int {
	b.rules = append(b.rules, Rule{Name: name})
	return len(b.rules) - 1
}

func (b *rxBuilder) fresh(prefix string) int {
	return b.rule(fmt.Sprintf("%s#%d", prefix, len(b.rules)))
}

// alt adds an alternative to rule r (a copy of elems).
func (b *rxBuilder) alt(r int, elems ...Elem) {
	if b.size += len(elems) + 1; b.size > MaxGrammarSize {
		panic(rxTooLarge{})
	}
	b.rules[r].Alts = append(b.rules[r].Alts, append(Seq{}, elems...))
}

// one returns seq as one element: itself if it has one, else a reference to
// a new rule.
func (b *rxBuilder) one(prefix string, seq Seq) Elem {
	if len(seq) == 1 {
		return seq[0]
	}
	r := b.fresh(prefix)
	b.alt(r, seq...)
	return Ref(r)
}

// star adds a rule matching zero or more of body.
func (b *rxBuilder) star(prefix string, body Seq) int {
	r := b.fresh(prefix + "/star")
	b.alt(r, append(append(Seq{}, body...), Ref(r))...)
	b.alt(r)
	b.loops = append(b.loops, r)
	return r
}

// nothing is a rule that matches nothing.
func (b *rxBuilder) nothing() Elem {
	if b.never < 0 {
		b.never = b.rule("nothing")
	}
	return Ref(b.never)
}

// repeat returns the elements matching min to max (max < 0: any number) of
// x, with sep between consecutive ones. x must match something.
func (b *rxBuilder) repeat(prefix string, x, sep Seq, min, max int) (Seq, error) {
	if min > MaxRepeat || max > MaxRepeat {
		return nil, fmt.Errorf("repetition count %d is over the limit of %d", slices.Max([]int{min, max}), MaxRepeat)
	}
	if max >= 0 && min > max {
		return nil, fmt.Errorf("repetition {%d,%d}: minimum over maximum", min, max)
	}
	if n := slices.Max([]int{min, max}); n > 1 {
		b.expanded += n * (len(sep) + 1)
	}
	if b.expanded > MaxExpansion {
		return nil, fmt.Errorf("counted repetitions expand to over %d grammar elements", MaxExpansion)
	}
	if max == 0 || len(x) == 0 {
		return Seq{}, nil
	}
	e := b.one(prefix, x)
	sx := append(append(Seq{}, sep...), e)
	if min == 0 {
		if len(sep) == 0 {
			return b.upTo(prefix, sx, max), nil
		}
		// x (sep x){0,max-1} | ε
		more := max - 1
		if max < 0 {
			more = -1
		}
		first := append(Seq{e}, b.upTo(prefix, sx, more)...)
		q := b.fresh(prefix + "/opt")
		b.alt(q, first...)
		b.alt(q)
		return Seq{Ref(q)}, nil
	}
	out := Seq{e}
	for i := 1; i < min; i++ {
		out = append(out, sx...)
	}
	more := -1
	if max >= 0 {
		more = max - min
	}
	return append(out, b.upTo(prefix, sx, more)...), nil
}

// upTo returns the elements matching up to k of sx (k < 0: any number).
func (b *rxBuilder) upTo(prefix string, sx Seq, k int) Seq {
	if k < 0 {
		return Seq{Ref(b.star(prefix, sx))}
	}
	prev := -1
	for range k {
		r := b.fresh(prefix + "/upto")
		body := append(Seq{}, sx...)
		if prev >= 0 {
			body = append(body, Ref(prev))
		}
		b.alt(r, body...)
		b.alt(r)
		prev = r
	}
	if prev < 0 {
		return nil
	}
	return Seq{Ref(prev)}
}

// finish rewrites star rules over nullable bodies and validates.
func (b *rxBuilder) finish(start int) (*Grammar, error) {
	b.fixLoops()
	g := &Grammar{Rules: b.rules, Start: start}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return g, nil
}

// fixLoops rewrites every star rule S ::= body S | ε whose body can match
// the empty string (which makes S left recursive) into S ::= body' S | ε,
// body' matching what body matches but the empty string: the same
// language. body' is built with non-empty versions of the nullable rules
// it starts with (for A ::= X1 .. Xn all nullable, A' ::= X1' X2..Xn |
// X2' X3..Xn | .. | Xn').
func (b *rxBuilder) fixLoops() {
	null := nullable(b.rules)
	ne := map[int]int{}
	var neRule func(r int) int
	neAlts := func(s Seq) []Seq {
		for _, e := range s {
			if e.Rule < 0 || !null[e.Rule] {
				return []Seq{s}
			}
		}
		var out []Seq
		for i, e := range s {
			if n := neRule(e.Rule); n >= 0 {
				out = append(out, append(Seq{Ref(n)}, s[i+1:]...))
			}
		}
		return out
	}
	neRule = func(r int) int {
		if !null[r] {
			return r
		}
		if n, ok := ne[r]; ok {
			return n
		}
		n := b.rule(b.rules[r].Name + "/nonempty")
		null = append(null, false)
		ne[r] = n
		var alts []Seq
		for _, a := range b.rules[r].Alts {
			for _, x := range neAlts(a) {
				// n ::= n (from a star rule r ::= x r, x nullable) adds
				// nothing: drop it.
				if len(x) == 1 && x[0] == Ref(n) {
					continue
				}
				alts = append(alts, x)
			}
		}
		b.rules[n].Alts = alts
		if len(alts) == 0 {
			ne[r] = -1 // r matches only the empty string
		}
		return ne[r]
	}
	for _, s := range b.loops {
		alts := b.rules[s].Alts
		body := alts[0][:len(alts[0])-1]
		nullBody := true
		for _, e := range body {
			if e.Rule < 0 || !null[e.Rule] {
				nullBody = false
				break
			}
		}
		if !nullBody {
			continue
		}
		rest := neAlts(body)
		switch len(rest) {
		case 0:
			b.rules[s].Alts = []Seq{{}}
		case 1:
			b.rules[s].Alts = []Seq{append(append(Seq{}, rest[0]...), Ref(s)), {}}
		default:
			n := b.fresh(b.rules[s].Name + "/body")
			b.rules[n].Alts = rest
			b.rules[s].Alts = []Seq{{Ref(n), Ref(s)}, {}}
		}
	}
}

// regex parses and compiles pattern; ok is false when it matches nothing.
func (b *rxBuilder) regex(pattern, prefix string) (seq Seq, ok bool, err error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, false, fmt.Errorf("regex: %w", err)
	}
	if err := rxCheckAssertions(re, true, true); err != nil {
		return nil, false, fmt.Errorf("regex `%s`: %w", pattern, err)
	}
	seq, ok, err = b.compileRegex(re, prefix)
	if err != nil {
		return nil, false, fmt.Errorf("regex `%s`: %w", pattern, err)
	}
	return seq, ok, nil
}

func rxAssertionName(op syntax.Op) string {
	switch op {
	case syntax.OpBeginLine:
		return "^ (start of line, (?m))"
	case syntax.OpEndLine:
		return "$ (end of line, (?m))"
	case syntax.OpBeginText:
		return `^ or \A (start of text)`
	case syntax.OpEndText:
		return `$ or \z (end of text)`
	case syntax.OpWordBoundary:
		return `\b (word boundary)`
	case syntax.OpNoWordBoundary:
		return `\B (not a word boundary)`
	}
	return op.String()
}

// rxZeroWidth reports whether re matches only the empty string at any
// position (an assertion, or an empty group).
func rxZeroWidth(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpBeginText, syntax.OpEndLine, syntax.OpEndText:
		return true
	case syntax.OpCapture:
		return rxZeroWidth(re.Sub[0])
	}
	return false
}

// rxCheckAssertions refuses assertions but ^ where nothing precedes it and $
// where nothing follows it.
func rxCheckAssertions(re *syntax.Regexp, atStart, atEnd bool) error {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpBeginText:
		if !atStart {
			return fmt.Errorf("empty-width assertion %s is only supported at the start of the pattern", rxAssertionName(re.Op))
		}
	case syntax.OpEndLine, syntax.OpEndText:
		if !atEnd {
			return fmt.Errorf("empty-width assertion %s is only supported at the end of the pattern", rxAssertionName(re.Op))
		}
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return fmt.Errorf("unsupported empty-width assertion %s", rxAssertionName(re.Op))
	case syntax.OpConcat:
		for i, s := range re.Sub {
			st := atStart && !slices.ContainsFunc(re.Sub[:i], func(r *syntax.Regexp) bool { return !rxZeroWidth(r) })
			en := atEnd && !slices.ContainsFunc(re.Sub[i+1:], func(r *syntax.Regexp) bool { return !rxZeroWidth(r) })
			if err := rxCheckAssertions(s, st, en); err != nil {
				return err
			}
		}
	case syntax.OpAlternate, syntax.OpCapture, syntax.OpQuest:
		for _, s := range re.Sub {
			if err := rxCheckAssertions(s, atStart, atEnd); err != nil {
				return err
			}
		}
	case syntax.OpRepeat:
		if re.Max != 1 {
			atStart, atEnd = false, false
		}
		return rxCheckAssertions(re.Sub[0], atStart, atEnd)
	case syntax.OpStar, syntax.OpPlus:
		return rxCheckAssertions(re.Sub[0], false, false)
	}
	return nil
}

// compileRegex returns the elements matching re; ok is false when re
// matches nothing.
func (b *rxBuilder) compileRegex(re *syntax.Regexp, prefix string) (Seq, bool, error) {
	switch re.Op {
	case syntax.OpNoMatch:
		return nil, false, nil
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return Seq{}, true, nil
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return nil, false, fmt.Errorf("unsupported empty-width assertion %s", rxAssertionName(re.Op))
	case syntax.OpLiteral:
		return b.literal(prefix, re.Rune, re.Flags&syntax.FoldCase != 0)
	case syntax.OpCharClass:
		e, ok := b.class(prefix, re.Rune)
		return Seq{e}, ok, nil
	case syntax.OpAnyCharNotNL:
		e, ok := b.class(prefix, []rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune})
		return Seq{e}, ok, nil
	case syntax.OpAnyChar:
		e, ok := b.class(prefix, []rune{0, unicode.MaxRune})
		return Seq{e}, ok, nil
	case syntax.OpCapture:
		return b.compileRegex(re.Sub[0], prefix)
	case syntax.OpConcat:
		var out Seq
		for _, s := range re.Sub {
			seq, ok, err := b.compileRegex(s, prefix)
			if err != nil || !ok {
				return nil, false, err
			}
			out = append(out, seq...)
		}
		return out, true, nil
	case syntax.OpAlternate:
		var alts []Seq
		for _, s := range re.Sub {
			seq, ok, err := b.compileRegex(s, prefix)
			if err != nil {
				return nil, false, err
			}
			if ok {
				alts = append(alts, seq)
			}
		}
		switch len(alts) {
		case 0:
			return nil, false, nil
		case 1:
			return alts[0], true, nil
		}
		r := b.fresh(prefix + "/alt")
		for _, a := range alts {
			b.alt(r, a...)
		}
		return Seq{Ref(r)}, true, nil
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		min, max := re.Min, re.Max
		switch re.Op {
		case syntax.OpStar:
			min, max = 0, -1
		case syntax.OpPlus:
			min, max = 1, -1
		case syntax.OpQuest:
			min, max = 0, 1
		}
		seq, ok, err := b.compileRegex(re.Sub[0], prefix)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			// Zero repetitions of nothing is the empty string.
			return Seq{}, min == 0, nil
		}
		out, err := b.repeat(prefix, seq, nil, min, max)
		return out, err == nil, err
	}
	return nil, false, fmt.Errorf("unsupported regular expression operator %v", re.Op)
}

// literal returns the elements matching the runes rs (each any of its
// simple case folds when fold is set); ok is false when a rune cannot be
// encoded (a surrogate).
func (b *rxBuilder) literal(prefix string, rs []rune, fold bool) (Seq, bool, error) {
	if b.size+len(rs) > MaxGrammarSize {
		panic(rxTooLarge{})
	}
	var out Seq
	for _, r := range rs {
		if !utf8.ValidRune(r) {
			return nil, false, nil
		}
		if fold {
			orbit := []rune{r}
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				orbit = append(orbit, f)
			}
			if len(orbit) > 1 {
				slices.Sort(orbit)
				ranges := make([]rune, 0, 2*len(orbit))
				for _, f := range orbit {
					ranges = append(ranges, f, f)
				}
				e, _ := b.class(prefix, ranges)
				out = append(out, e)
				continue
			}
		}
		out = append(out, Literal(string(r))...)
	}
	return out, true, nil
}

// class returns an element matching one UTF-8 encoded rune of ranges (pairs
// lo, hi, inclusive); ok is false when no rune is in them. Surrogates are
// never matched.
func (b *rxBuilder) class(prefix string, ranges []rune) (Elem, bool) {
	key := fmt.Sprint(ranges)
	if c, ok := b.classes[key]; ok {
		return c.e, c.ok
	}
	root := &rxU8Node{}
	for i := 0; i+1 < len(ranges); i += 2 {
		rxUTF8Ranges(max(ranges[i], 0), min(ranges[i+1], unicode.MaxRune), root.add)
	}
	c := rxClass{ok: len(root.edges) > 0}
	if c.ok {
		c.e = b.emitUTF8(prefix, root)
	}
	b.classes[key] = c
	return c.e, c.ok
}

// rxUTF8Ranges calls emit with sequences of byte ranges whose products are
// exactly the UTF-8 encodings of the runes lo..hi, surrogates excepted (the
// classic compilation of rune ranges to UTF-8: split by encoded length,
// then until each byte position is one range).
func rxUTF8Ranges(lo, hi rune, emit func([][2]byte)) {
	if lo > hi {
		return
	}
	if lo <= 0xDFFF && hi >= 0xD800 {
		rxUTF8Ranges(lo, 0xD7FF, emit)
		rxUTF8Ranges(0xE000, hi, emit)
		return
	}
	for _, m := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= m && hi > m {
			rxUTF8Ranges(lo, m, emit)
			rxUTF8Ranges(m+1, hi, emit)
			return
		}
	}
	if hi <= 0x7F {
		emit([][2]byte{{byte(lo), byte(hi)}})
		return
	}
	for i := 1; i < 4; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				rxUTF8Ranges(lo, lo|m, emit)
				rxUTF8Ranges((lo|m)+1, hi, emit)
				return
			}
			if hi&m != m {
				rxUTF8Ranges(lo, hi&^m-1, emit)
				rxUTF8Ranges(hi&^m, hi, emit)
				return
			}
		}
	}
	var a, z [utf8.UTFMax]byte
	n := utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(z[:], hi)
	seq := make([][2]byte, n)
	for i := range n {
		seq[i] = [2]byte{a[i], z[i]}
	}
	emit(seq)
}

// rxU8Node is a trie of byte-range sequences.
type rxU8Node struct {
	edges []rxU8Edge
}

type rxU8Edge struct {
	lo, hi byte
	next   *rxU8Node // nil: the last byte
}

func (n *rxU8Node) add(seq [][2]byte) {
	r := seq[0]
	if len(seq) == 1 {
		n.edges = append(n.edges, rxU8Edge{lo: r[0], hi: r[1]})
		return
	}
	for _, e := range n.edges {
		if e.lo == r[0] && e.hi == r[1] && e.next != nil {
			e.next.add(seq[1:])
			return
		}
	}
	c := &rxU8Node{}
	n.edges = append(n.edges, rxU8Edge{lo: r[0], hi: r[1], next: c})
	c.add(seq[1:])
}

// emitUTF8 turns a trie into an element: a byte set when every sequence
// is one byte long, else a rule per distinct subtree (edges leading to equal
// subtrees are merged into one byte set, and equal subtrees are shared
// across classes), so that the alternatives of a rule start with disjoint
// byte sets.
func (b *rxBuilder) emitUTF8(prefix string, n *rxU8Node) Elem {
	var last ByteSet
	type group struct {
		set  ByteSet
		next Elem
	}
	var groups []group
	for _, e := range n.edges {
		if e.next == nil {
			last.AddRange(e.lo, e.hi)
			continue
		}
		next := b.emitUTF8(prefix, e.next)
		i := slices.IndexFunc(groups, func(g group) bool { return g.next == next })
		if i < 0 {
			groups = append(groups, group{next: next})
			i = len(groups) - 1
		}
		groups[i].set.AddRange(e.lo, e.hi)
	}
	if len(groups) == 0 {
		return Bytes(last)
	}
	var key strings.Builder
	fmt.Fprintf(&key, "%x", last)
	for _, g := range groups {
		fmt.Fprintf(&key, "|%x>%d:%x", g.set, g.next.Rule, g.next.Set)
	}
	if e, ok := b.utf8[key.String()]; ok {
		return e
	}
	r := b.fresh(prefix + "/utf8")
	if last != (ByteSet{}) {
		b.alt(r, Bytes(last))
	}
	for _, g := range groups {
		b.alt(r, Bytes(g.set), g.next)
	}
	b.utf8[key.String()] = Ref(r)
	return Ref(r)
}
