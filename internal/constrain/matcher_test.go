package constrain

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Grammars of the runtime's tests, written with the Builder.

// mtJSON is a JSON grammar by hand: objects with string keys, arrays,
// strings (escapes, UTF-8 multi-byte sequences), numbers, literals, and
// whitespace between tokens. The start rule is a value surrounded by
// optional whitespace unless bare, when it is an object with nothing
// after its closing brace (so that the grammar can be Final).
func mtJSON(t testing.TB, bare bool) *Grammar {
	t.Helper()
	b := NewBuilder()
	value := b.Rule("value")
	object := b.Rule("object")
	array := b.Rule("array")
	str := b.Rule("string")
	number := b.Rule("number")
	var wsSet ByteSet
	for _, c := range " \t\n\r" {
		wsSet.Add(byte(c))
	}
	ws := b.Star(Bytes(wsSet))

	b.Alt(value, Ref(object))
	b.Alt(value, Ref(array))
	b.Alt(value, Ref(str))
	b.Alt(value, Ref(number))
	for _, lit := range []string{"true", "false", "null"} {
		b.Alt(value, Literal(lit)...)
	}

	member := b.Rule("member")
	b.Alt(member, Ref(str), Ref(ws), Bytes(Byte(':')), Ref(ws), Ref(value))
	members := b.Star(Bytes(Byte(',')), Ref(ws), Ref(member), Ref(ws))
	b.Alt(object, Bytes(Byte('{')), Ref(ws), Bytes(Byte('}')))
	b.Alt(object, Bytes(Byte('{')), Ref(ws), Ref(member), Ref(ws), Ref(members), Bytes(Byte('}')))

	elems := b.Star(Bytes(Byte(',')), Ref(ws), Ref(value), Ref(ws))
	b.Alt(array, Bytes(Byte('[')), Ref(ws), Bytes(Byte(']')))
	b.Alt(array, Bytes(Byte('[')), Ref(ws), Ref(value), Ref(ws), Ref(elems), Bytes(Byte(']')))

	// Characters of a string: printable ASCII but '"' and '\', escapes,
	// and well-formed UTF-8 sequences (lead byte, continuation bytes).
	char := b.Rule("char")
	plain := Range(0x20, 0x7f)
	plain[0] &^= 1 << '"'
	plain[1] &^= 1 << ('\\' - 64)
	b.Alt(char, Bytes(plain))
	var esc ByteSet
	for _, c := range `"\/bfnrt` {
		esc.Add(byte(c))
	}
	hex := Range('0', '9')
	hex.AddRange('a', 'f')
	hex.AddRange('A', 'F')
	b.Alt(char, Bytes(Byte('\\')), Bytes(esc))
	b.Alt(char, Bytes(Byte('\\')), Bytes(Byte('u')), Bytes(hex), Bytes(hex), Bytes(hex), Bytes(hex))
	cont := Bytes(Range(0x80, 0xbf))
	b.Alt(char, Bytes(Range(0xc2, 0xdf)), cont)
	b.Alt(char, Bytes(Range(0xe0, 0xef)), cont, cont)
	b.Alt(char, Bytes(Range(0xf0, 0xf4)), cont, cont, cont)
	chars := b.Star(Ref(char))
	b.Alt(str, Bytes(Byte('"')), Ref(chars), Bytes(Byte('"')))

	digit := Bytes(Range('0', '9'))
	digits := b.Star(digit)
	intPart := b.Rule("int")
	b.Alt(intPart, Bytes(Byte('0')))
	b.Alt(intPart, Bytes(Range('1', '9')), Ref(digits))
	sign := b.Rule("sign")
	b.Alt(sign, Bytes(Byte('-')))
	b.Alt(sign)
	frac := b.Rule("frac")
	b.Alt(frac, Bytes(Byte('.')), digit, Ref(digits))
	b.Alt(frac)
	exp := b.Rule("exp")
	var e, pm ByteSet
	e.Add('e')
	e.Add('E')
	pm.Add('+')
	pm.Add('-')
	expSign := b.Rule("expsign")
	b.Alt(expSign, Bytes(pm))
	b.Alt(expSign)
	b.Alt(exp, Bytes(e), Ref(expSign), digit, Ref(digits))
	b.Alt(exp)
	b.Alt(number, Ref(sign), Ref(intPart), Ref(frac), Ref(exp))

	root := b.Rule("root")
	if bare {
		b.Alt(root, Ref(object))
	} else {
		b.Alt(root, Ref(ws), Ref(value), Ref(ws))
	}
	g, err := b.Grammar(root)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// mtDigits is [0-9]+.
func mtDigits(t testing.TB) *Grammar {
	t.Helper()
	b := NewBuilder()
	root := b.Rule("root")
	d := Bytes(Range('0', '9'))
	b.Alt(root, d, Ref(b.Star(d)))
	g, err := b.Grammar(root)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// mtKeywords is a keyword alternation with shared prefixes, a keyword that
// is a prefix of another, and a comma-separated list of them.
func mtKeywords(t testing.TB) *Grammar {
	t.Helper()
	b := NewBuilder()
	kw := b.Rule("kw")
	for _, w := range []string{"alpha", "alphabet", "beta", "gamma", "gamut", " delta", "in", "int", "interface"} {
		b.Alt(kw, Literal(w)...)
	}
	root := b.Rule("root")
	b.Alt(root, Ref(kw), Ref(b.Star(append(Literal(", "), Ref(kw))...)))
	g, err := b.Grammar(root)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// mtVocab builds a vocabulary from strings; "" is a special token.
func mtVocab(toks ...string) *Vocab {
	bs := make([][]byte, len(toks))
	for i, s := range toks {
		if s != "" {
			bs[i] = []byte(s)
		}
	}
	return NewVocab(bs)
}

// allowedSet is the set of allowed tokens' texts, sorted.
func allowedSet(m *Matcher, st *State) []string {
	mask := make([]bool, m.v.Size())
	m.Allowed(st, mask)
	var out []string
	for id, ok := range mask {
		if ok {
			out = append(out, string(m.v.Token(int32(id))))
		}
	}
	slices.Sort(out)
	return out
}

func mustMatcher(t testing.TB, g *Grammar, v *Vocab) *Matcher {
	t.Helper()
	m, err := NewMatcher(g, v)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustAdvance(t testing.TB, m *Matcher, st *State, s string) *State {
	t.Helper()
	n, ok := m.AdvanceBytes(st, []byte(s))
	if !ok {
		t.Fatalf("cannot advance by %q", s)
	}
	return n
}

func grammarOf(t testing.TB, build func(b *Builder) int) *Grammar {
	t.Helper()
	b := NewBuilder()
	g, err := b.Grammar(build(b))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var smallVocab = []string{"", "a", "b", "c", "ab", "abc", "bc", "ca", "cat", "car", "dog", "do", "g", "t", "r",
	"(", ")", "((", "))", "()", "0", "1", "12", "123", "x", "{", "}", "\"", "\" ", "true", "tr", "ue", "", " "}

func TestLiteral(t *testing.T) {
	g := grammarOf(t, func(b *Builder) int {
		r := b.Rule("r")
		b.Alt(r, Literal("abc")...)
		return r
	})
	m := mustMatcher(t, g, mtVocab(smallVocab...))
	st := m.Start()
	if got, want := allowedSet(m, st), []string{"a", "ab", "abc"}; !slices.Equal(got, want) {
		t.Fatalf("start: %q, want %q", got, want)
	}
	if st.Complete() || st.Final() {
		t.Fatal("start complete")
	}
	st = mustAdvance(t, m, st, "a")
	if got, want := allowedSet(m, st), []string{"b", "bc"}; !slices.Equal(got, want) {
		t.Fatalf("after a: %q, want %q", got, want)
	}
	st = mustAdvance(t, m, st, "bc")
	if !st.Complete() || !st.Final() {
		t.Fatal("abc not final")
	}
	if got := allowedSet(m, st); len(got) != 0 {
		t.Fatalf("after abc: %q allowed", got)
	}
	if _, ok := m.AdvanceBytes(st, []byte("a")); ok {
		t.Fatal("advanced past the end")
	}
	if _, ok := m.AdvanceBytes(m.Start(), []byte("abd")); ok {
		t.Fatal("abd accepted")
	}
}

func TestAlternation(t *testing.T) {
	g := grammarOf(t, func(b *Builder) int {
		r := b.Rule("r")
		b.Alt(r, Literal("cat")...)
		b.Alt(r, Literal("car")...)
		b.Alt(r, Literal("dog")...)
		return r
	})
	m := mustMatcher(t, g, mtVocab(smallVocab...))
	if got, want := allowedSet(m, m.Start()), []string{"c", "ca", "cat", "car", "do", "dog"}; !slices.Equal(got, sorted(want)) {
		t.Fatalf("start: %q, want %q", got, sorted(want))
	}
	st := mustAdvance(t, m, m.Start(), "ca")
	if got, want := allowedSet(m, st), []string{"r", "t"}; !slices.Equal(got, want) {
		t.Fatalf("after ca: %q, want %q", got, want)
	}
	for _, s := range []string{"cat", "car", "dog"} {
		if st := mustAdvance(t, m, m.Start(), s); !st.Final() {
			t.Errorf("%s not final", s)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestRepetition(t *testing.T) {
	m := mustMatcher(t, mtDigits(t), mtVocab(smallVocab...))
	st := m.Start()
	if st.Complete() {
		t.Fatal("empty input complete for [0-9]+")
	}
	if got, want := allowedSet(m, st), []string{"0", "1", "12", "123"}; !slices.Equal(got, want) {
		t.Fatalf("start: %q, want %q", got, want)
	}
	st = mustAdvance(t, m, st, "1")
	if !st.Complete() || st.Final() {
		t.Fatalf("after 1: complete %v final %v, want complete, not final", st.Complete(), st.Final())
	}
	// Right recursion runs in constant stack: the state repeats.
	st2 := mustAdvance(t, m, st, "123")
	if st2 != st {
		t.Error("digit loop does not come back to the same state")
	}
	if len(st2.tops) != 1 || st2.tops[0].parent != nil {
		t.Errorf("digit loop grows its stack: %d tops", len(st2.tops))
	}
}

func TestNestedRules(t *testing.T) {
	// S ::= '(' S ')' S | ε: balanced parentheses.
	g := grammarOf(t, func(b *Builder) int {
		s := b.Rule("s")
		b.Alt(s, Bytes(Byte('(')), Ref(s), Bytes(Byte(')')), Ref(s))
		b.Alt(s)
		return s
	})
	m := mustMatcher(t, g, mtVocab(smallVocab...))
	st := m.Start()
	if !st.Complete() || st.Final() {
		t.Fatal("start should be complete and not final")
	}
	if got, want := allowedSet(m, st), []string{"(", "((", "()"}; !slices.Equal(got, want) {
		t.Fatalf("start: %q, want %q", got, want)
	}
	st = mustAdvance(t, m, st, "((")
	if st.Complete() {
		t.Fatal("(( complete")
	}
	if got, want := allowedSet(m, st), []string{"(", "((", "()", ")", "))"}; !slices.Equal(got, want) {
		t.Fatalf("after ((: %q, want %q", got, want)
	}
	st = mustAdvance(t, m, st, "))")
	if !st.Complete() {
		t.Fatal("(()) not complete")
	}
	if _, ok := m.AdvanceBytes(st, []byte(")")); ok {
		t.Fatal("unbalanced accepted")
	}
}

func TestEmptyAlternative(t *testing.T) {
	// r ::= 'a' o 'c'; o ::= 'b' | ε
	g := grammarOf(t, func(b *Builder) int {
		r, o := b.Rule("r"), b.Rule("o")
		b.Alt(o, Bytes(Byte('b')))
		b.Alt(o)
		b.Alt(r, Bytes(Byte('a')), Ref(o), Bytes(Byte('c')))
		return r
	})
	m := mustMatcher(t, g, mtVocab(smallVocab...))
	st := mustAdvance(t, m, m.Start(), "a")
	if got, want := allowedSet(m, st), []string{"b", "bc", "c", "ca", "car", "cat"}; !slices.Equal(got, want[:3]) {
		t.Fatalf("after a: %q, want %q", got, want[:3])
	}
	for _, s := range []string{"ac", "abc"} {
		if st := mustAdvance(t, m, m.Start(), s); !st.Final() {
			t.Errorf("%s not final", s)
		}
	}
	if _, ok := m.AdvanceBytes(m.Start(), []byte("abb")); ok {
		t.Fatal("abb accepted")
	}
}

func TestCompleteNotFinal(t *testing.T) {
	// r ::= "ab" 'c'*: complete after ab, never final.
	g := grammarOf(t, func(b *Builder) int {
		r := b.Rule("r")
		b.Alt(r, append(Literal("ab"), Ref(b.Star(Bytes(Byte('c')))))...)
		return r
	})
	m := mustMatcher(t, g, mtVocab(smallVocab...))
	st := mustAdvance(t, m, m.Start(), "ab")
	if !st.Complete() || st.Final() {
		t.Fatalf("ab: complete %v final %v", st.Complete(), st.Final())
	}
	if got, want := allowedSet(m, st), []string{"c"}; !slices.Equal(got, want) {
		t.Fatalf("after ab: %q, want %q", got, want)
	}
}

func TestSpecialTokensNeverAllowed(t *testing.T) {
	// Anything: every byte, any number of times.
	g := grammarOf(t, func(b *Builder) int { return b.Star(Bytes(Range(0, 255))) })
	v := mtVocab(smallVocab...)
	m := mustMatcher(t, g, v)
	mask := make([]bool, v.Size())
	m.Allowed(m.Start(), mask)
	for id, ok := range mask {
		if ok != (len(v.Token(int32(id))) > 0) {
			t.Errorf("token %d %q: allowed %v", id, v.Token(int32(id)), ok)
		}
	}
	if _, ok := m.Advance(m.Start(), 0); ok {
		t.Error("empty token advanced")
	}
	if _, ok := m.Advance(m.Start(), int32(v.Size())); ok {
		t.Error("out of range token advanced")
	}
	if _, ok := m.Advance(m.Start(), -1); ok {
		t.Error("negative token advanced")
	}
}

func TestUnproductiveAlternativesDropped(t *testing.T) {
	// r ::= 'a' dead | 'b'; dead ::= 'x' dead (never finishes), and an
	// alternative through an empty byte set: neither may be entered.
	g := &Grammar{Rules: []Rule{
		{Name: "r", Alts: []Seq{{Bytes(Byte('a')), Ref(1)}, {Bytes(Byte('b'))}, {Bytes(Byte('c')), Bytes(ByteSet{})}}},
		{Name: "dead", Alts: []Seq{{Bytes(Byte('x')), Ref(1)}}},
	}}
	m := mustMatcher(t, g, mtVocab(smallVocab...))
	if got, want := allowedSet(m, m.Start()), []string{"b"}; !slices.Equal(got, want) {
		t.Fatalf("start: %q, want %q", got, want)
	}
	g = &Grammar{Rules: []Rule{{Name: "r", Alts: []Seq{{Bytes(ByteSet{})}}}}}
	if _, err := NewMatcher(g, mtVocab(smallVocab...)); err == nil {
		t.Fatal("grammar matching nothing accepted")
	}
}

func TestStackDepthLimit(t *testing.T) {
	// s ::= '(' s ')' | 'x': each '(' deepens the stack by one.
	g := grammarOf(t, func(b *Builder) int {
		s := b.Rule("s")
		b.Alt(s, Bytes(Byte('(')), Ref(s), Bytes(Byte(')')))
		b.Alt(s, Bytes(Byte('x')))
		return s
	})
	m := mustMatcher(t, g, mtVocab(smallVocab...))
	st := m.Start()
	n := 0
	for ; n < 2*MaxStackDepth; n++ {
		next, ok := m.Advance(st, 15) // "("
		if !ok {
			break
		}
		st = next
	}
	if n < MaxStackDepth-2 || n > MaxStackDepth {
		t.Fatalf("refused after %d opening parentheses, want about %d", n, MaxStackDepth)
	}
	got := allowedSet(m, st)
	if !slices.Contains(got, "x") || slices.Contains(got, "(") {
		t.Fatalf("at the depth limit: %q", got)
	}
	// Near the limit, inside a context (so masks are relative to it), the
	// mask agrees with Advance token by token.
	st = m.Start()
	for k := range MaxStackDepth {
		if k >= MaxStackDepth-4 {
			mask := make([]bool, m.v.Size())
			m.Allowed(st, mask)
			for id := range mask {
				_, ok := m.Advance(st, int32(id))
				if ok != mask[id] {
					t.Fatalf("depth %d: token %q mask %v, advance %v", k, m.v.Token(int32(id)), mask[id], ok)
				}
			}
		}
		var ok bool
		if st, ok = m.Advance(st, 15); !ok {
			break
		}
	}
}

func TestStackCountLimit(t *testing.T) {
	// r ::= o o o ... (n times); o ::= 'a' | ε: after the start every o
	// may come next, one stack each.
	build := func(n int) *Grammar {
		return grammarOf(t, func(b *Builder) int {
			o := b.Rule("o")
			b.Alt(o, Bytes(Byte('a')))
			b.Alt(o)
			r := b.Rule("r")
			seq := make([]Elem, n)
			for i := range seq {
				seq[i] = Ref(o)
			}
			b.Alt(r, seq...)
			return r
		})
	}
	v := mtVocab(smallVocab...)
	m := mustMatcher(t, build(MaxStacks), v)
	if got := len(m.Start().tops); got != MaxStacks {
		t.Fatalf("%d stacks, want %d", got, MaxStacks)
	}
	if _, err := NewMatcher(build(MaxStacks+1), v); err == nil {
		t.Fatal("start state over MaxStacks accepted")
	}
}

func TestCacheReset(t *testing.T) {
	// A tiny budget drops the cache at every call; results must not change.
	v := mtVocab(smallVocab...)
	g := mtJSON(t, false)
	ref := mustMatcher(t, g, v)
	m := mustMatcher(t, g, v)
	m.budget = budgets{cache: 1, mask: 1, walk: 1 << 30}
	text := `{"ab": [12, true, "cat"], "c": {}}`
	st, rst := m.Start(), ref.Start()
	for i := range len(text) {
		if got, want := allowedSet(m, st), allowedSet(ref, rst); !slices.Equal(got, want) {
			t.Fatalf("at %q: %q, want %q", text[:i], got, want)
		}
		st = mustAdvance(t, m, st, text[i:i+1])
		rst = mustAdvance(t, ref, rst, text[i:i+1])
	}
	if !st.Complete() || st.Complete() != rst.Complete() {
		t.Fatal("document not complete")
	}
	if m.c.gen < 10 {
		t.Fatalf("cache generation %d: the budget did not drop the cache", m.c.gen)
	}
}

func TestForeignState(t *testing.T) {
	v := mtVocab(smallVocab...)
	a, b := mustMatcher(t, mtDigits(t), v), mustMatcher(t, mtDigits(t), v)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic on another matcher's state")
		}
	}()
	b.Advance(a.Start(), 20)
}

// The reference: a naive pushdown simulation straight over the Grammar
// (no flattening, no tail calls, no interning, no caches), to check the
// Matcher against something that shares none of its code.

type refFrame struct{ rule, alt, idx int }

type refState struct {
	stacks   [][]refFrame // tops last, all at byte sets
	complete bool
}

func refExpand(g *Grammar, st []refFrame, out *refState, seen map[string]bool) {
	k := make([]byte, 0, 12*len(st))
	for _, f := range st {
		k = binary.LittleEndian.AppendUint32(k, uint32(f.rule))
		k = binary.LittleEndian.AppendUint32(k, uint32(f.alt))
		k = binary.LittleEndian.AppendUint32(k, uint32(f.idx))
	}
	if seen[string(k)] {
		return
	}
	seen[string(k)] = true
	if len(st) == 0 {
		out.complete = true
		return
	}
	top := st[len(st)-1]
	seq := g.Rules[top.rule].Alts[top.alt]
	if top.idx == len(seq) {
		rest := slices.Clone(st[:len(st)-1])
		if len(rest) > 0 {
			rest[len(rest)-1].idx++
		}
		refExpand(g, rest, out, seen)
		return
	}
	e := seq[top.idx]
	if e.Rule < 0 {
		out.stacks = append(out.stacks, st)
		return
	}
	for a := range g.Rules[e.Rule].Alts {
		refExpand(g, append(slices.Clone(st), refFrame{e.Rule, a, 0}), out, seen)
	}
}

func refStart(g *Grammar) refState {
	var out refState
	seen := map[string]bool{}
	for a := range g.Rules[g.Start].Alts {
		refExpand(g, []refFrame{{g.Start, a, 0}}, &out, seen)
	}
	return out
}

func refAdvance(g *Grammar, s refState, b []byte) (refState, bool) {
	for _, c := range b {
		var out refState
		seen := map[string]bool{}
		for _, st := range s.stacks {
			top := st[len(st)-1]
			set := g.Rules[top.rule].Alts[top.alt][top.idx].Set
			if set.Has(c) {
				next := slices.Clone(st)
				next[len(next)-1].idx++
				refExpand(g, next, &out, seen)
			}
		}
		if len(out.stacks) == 0 && !out.complete {
			return out, false
		}
		s = out
	}
	return s, true
}

func TestReferenceSmall(t *testing.T) {
	// Every string up to length 4 over a small alphabet, on the hand JSON
	// grammar: the matcher and the reference agree on acceptance and
	// completeness.
	g := mtJSON(t, false)
	m := mustMatcher(t, g, mtVocab(smallVocab...))
	alphabet := []byte(`{}[]":,0.-e1a \`)
	var rec func(prefix []byte, st *State, rs refState)
	rec = func(prefix []byte, st *State, rs refState) {
		if st.Complete() != rs.complete {
			t.Fatalf("%q: complete %v, reference %v", prefix, st.Complete(), rs.complete)
		}
		if len(prefix) == 4 {
			return
		}
		for _, c := range alphabet {
			p := append(slices.Clone(prefix), c)
			ns, ok := m.AdvanceBytes(st, []byte{c})
			nrs, rok := refAdvance(g, rs, []byte{c})
			if ok != rok {
				t.Fatalf("%q: accepted %v, reference %v", p, ok, rok)
			}
			if ok {
				rec(p, ns, nrs)
			}
		}
	}
	rec(nil, m.Start(), refStart(g))
}

func TestJSONDocuments(t *testing.T) {
	g := mtJSON(t, false)
	m := mustMatcher(t, g, mtVocab(smallVocab...))
	good := []string{
		`{}`, `[]`, ` {"a": 1} `, `{"a":[1,2.5e-3,{"b":null}],"c":"\u00e9\n","d":true}`,
		`"日本"`, `-0.5E+10`, `[[[[]]]]`, "\"\xc3\xa9\"",
	}
	bad := []string{`{`, `{"a"}`, `[1,]`, `01`, `"\x"`, "\"\xc3\"", "\"\x80\"", `{"a":1,}`, `tru`, "\"a\nb\""}
	for _, s := range good {
		st, ok := m.AdvanceBytes(m.Start(), []byte(s))
		if !ok || !st.Complete() {
			t.Errorf("%q: ok %v, refused or incomplete", s, ok)
		}
	}
	for _, s := range bad {
		if st, ok := m.AdvanceBytes(m.Start(), []byte(s)); ok && st.Complete() {
			t.Errorf("%q accepted", s)
		}
	}
	bareM := mustMatcher(t, mtJSON(t, true), mtVocab(smallVocab...))
	if st := mustAdvance(t, bareM, bareM.Start(), `{"a":{}}`); !st.Final() {
		t.Error("bare object not final")
	}
	if st := mustAdvance(t, m, m.Start(), `{"a":{}}`); !st.Complete() || st.Final() {
		t.Error("object with trailing whitespace allowed: want complete, not final")
	}
}

// checkMaskExact compares the mask of st with a brute-force check over
// the whole vocabulary on a second Matcher (its own caches), reached by
// the same bytes, and with the reference on a sample of tokens.
func checkMaskExact(t *testing.T, m, brute *Matcher, g *Grammar, st *State, prefix []byte, rs refState, rng *rand.Rand, sample int) []bool {
	t.Helper()
	v := m.v
	mask := make([]bool, v.Size())
	m.Allowed(st, mask)
	bst, ok := brute.AdvanceBytes(brute.Start(), prefix)
	if !ok {
		t.Fatalf("brute matcher refuses prefix %q", prefix)
	}
	if bst.Complete() != st.Complete() || bst.Final() != st.Final() || st.Complete() != rs.complete {
		t.Fatalf("at %q: complete %v/%v/%v (matcher/brute/reference)", prefix, st.Complete(), bst.Complete(), rs.complete)
	}
	for id := range v.Size() {
		tb := v.Token(int32(id))
		_, ok := brute.AdvanceBytes(bst, tb)
		ok = ok && len(tb) > 0
		if ok != mask[id] {
			t.Fatalf("at %q: token %d %q mask %v, brute force %v", prefix, id, tb, mask[id], ok)
		}
	}
	for range sample {
		id := rng.IntN(v.Size())
		tb := v.Token(int32(id))
		if len(tb) == 0 {
			continue
		}
		_, ok := refAdvance(g, rs, tb)
		if ok != mask[id] {
			t.Fatalf("at %q: token %d %q mask %v, reference %v", prefix, id, tb, mask[id], ok)
		}
	}
	return mask
}

// randomWalk follows random allowed tokens from the start, checking the
// mask at every state. So that walks nest and leave strings and numbers
// rather than wander in whitespace, it picks among one-byte tokens 30% of
// the time, among tokens with a JSON punctuation byte 30%, among tokens
// that are not all whitespace 30%, else among all allowed tokens.
func randomWalk(t *testing.T, g *Grammar, v *Vocab, seed uint64, steps, sample int) {
	m := mustMatcher(t, g, v)
	brute := mustMatcher(t, g, v)
	rng := rand.New(rand.NewPCG(seed, 1))
	st, rs := m.Start(), refStart(g)
	var prefix []byte
	for range steps {
		mask := checkMaskExact(t, m, brute, g, st, prefix, rs, rng, sample)
		var all, short, solid, structural []int32
		for id, ok := range mask {
			if ok {
				all = append(all, int32(id))
				tb := v.Token(int32(id))
				if len(tb) == 1 {
					short = append(short, int32(id))
				}
				if len(bytes.TrimSpace(tb)) > 0 {
					solid = append(solid, int32(id))
				}
				if bytes.ContainsAny(tb, `{}[]",:`) {
					structural = append(structural, int32(id))
				}
			}
		}
		if len(all) == 0 {
			if !st.Final() {
				t.Fatalf("at %q: nothing allowed but not final", prefix)
			}
			return
		}
		pick := all
		switch r := rng.IntN(10); {
		case r < 3 && len(short) > 0:
			pick = short
		case r < 6 && len(structural) > 0:
			pick = structural
		case r < 9 && len(solid) > 0:
			pick = solid
		}
		tok := pick[rng.IntN(len(pick))]
		next, ok := m.Advance(st, tok)
		if !ok {
			t.Fatalf("at %q: allowed token %d %q refused by Advance", prefix, tok, v.Token(tok))
		}
		tb := v.Token(tok)
		if rs, ok = refAdvance(g, rs, tb); !ok {
			t.Fatalf("at %q: reference refuses allowed token %q", prefix, tb)
		}
		st, prefix = next, append(prefix, tb...)
	}
	if testing.Verbose() {
		t.Logf("walk %d: %.200q", seed, prefix)
	}
}

func TestMaskExactSmallVocab(t *testing.T) {
	// Every byte as a token, plus multi-byte ones.
	toks := []string{""}
	for c := range 256 {
		toks = append(toks, string([]byte{byte(c)}))
	}
	toks = append(toks, smallVocab...)
	toks = append(toks, `{"`, `":`, `",`, `"}`, `},`, `[{`, `\u`, `\n`, "é", "日本", "\xe6", "\x97\xa5", "1e", "e+", "0.", "-1", "nul", "alse", "alp", "habet", ", ", "gam", "ut", " d", "elta", "interf", "ace")
	v := mtVocab(toks...)
	for _, tc := range []struct {
		name string
		g    *Grammar
	}{{"json", mtJSON(t, false)}, {"object", mtJSON(t, true)}, {"digits", mtDigits(t)}, {"keywords", mtKeywords(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(20) {
				randomWalk(t, tc.g, v, seed, 40, 100)
			}
		})
	}
}

func TestMaskExactRealVocab(t *testing.T) {
	for _, name := range []string{"llama-bpe", "llama-spm"} {
		t.Run(name, func(t *testing.T) {
			v := mtRealVocab(t, name)
			steps, walks := 30, 3
			if testing.Short() {
				steps, walks = 10, 1
			}
			for _, tc := range []struct {
				name string
				g    *Grammar
			}{{"json", mtJSON(t, false)}, {"object", mtJSON(t, true)}, {"digits", mtDigits(t)}, {"keywords", mtKeywords(t)}} {
				t.Run(tc.name, func(t *testing.T) {
					for seed := range uint64(walks) {
						randomWalk(t, tc.g, v, seed, steps, 100)
					}
				})
			}
		})
	}
}

func TestMatcherConcurrent(t *testing.T) {
	// Two goroutines share each of two matchers (one with warm caches);
	// run with -race.
	v := mtVocab(smallVocab...)
	g := mtJSON(t, false)
	warm, cold := mustMatcher(t, g, v), mustMatcher(t, g, v)
	text := `{"ab": [12, true, "cat"], "c": {"do": "g"}}`
	want := make([][]string, len(text))
	st := warm.Start()
	for i := range len(text) {
		want[i] = allowedSet(warm, st)
		st = mustAdvance(t, warm, st, text[i:i+1])
	}
	done := make(chan string)
	for w := range 4 {
		m := warm
		if w%2 == 1 {
			m = cold
		}
		go func() {
			st := m.Start()
			for i := range len(text) {
				if got := allowedSet(m, st); !slices.Equal(got, want[i]) {
					done <- fmt.Sprintf("worker %d at %q: %q, want %q", w, text[:i], got, want[i])
					return
				}
				var ok bool
				if st, ok = m.AdvanceBytes(st, []byte(text[i:i+1])); !ok {
					done <- "refused"
					return
				}
			}
			done <- ""
		}()
	}
	for range 4 {
		if msg := <-done; msg != "" {
			t.Error(msg)
		}
	}
}
