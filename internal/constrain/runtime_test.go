package constrain

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"weak"
)

// testEnum is a schema of a string enum of n values, distinct per seed.
func testEnum(n, seed int) string {
	var b strings.Builder
	b.WriteString(`{"type":"string","enum":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"value-%d-%d"`, seed, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// testRequired is an object schema of n required integer properties.
func testRequired(n int) string {
	var props, req []string
	for i := range n {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"integer"}`, i))
		req = append(req, fmt.Sprintf(`"p%d"`, i))
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(req, ",") + `]}`
}

// testAlternatives is a Lark grammar whose start rule has n alternatives.
func testAlternatives(n int) string {
	var b strings.Builder
	b.WriteString("start: ")
	for i := range n {
		if i > 0 {
			b.WriteString(" | ")
		}
		fmt.Fprintf(&b, `"a%d"`, i)
	}
	return b.String() + "\n"
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Bytes is within a factor of 1.5 of what the Go heap holds for a grammar,
// its program and its matcher after masks at a few states, on the 128k
// Llama 3 vocabulary.
func TestBytesHonest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds large grammars")
	}
	v := mtRealVocab(t, "llama-bpe")
	mask := make([]bool, v.Size())
	cases := []struct {
		name     string
		compile  func() (*Grammar, error)
		prefixes []string
	}{
		{"enum 9000", func() (*Grammar, error) { return FromJSONSchema([]byte(testEnum(9000, 1))) }, []string{``, `"`, `"value-1-`}},
		{"50 properties", func() (*Grammar, error) { return FromJSONSchema([]byte(jsFiftyProps())) }, []string{``, `{`}},
		{"2000 required", func() (*Grammar, error) { return FromJSONSchema([]byte(testRequired(2000))) }, []string{``, `{`, `{"p0": 1`}},
		{"json object", func() (*Grammar, error) { return JSONObject(), nil }, []string{``, `{`, `{"a": "b`, `{"a": [1, {"b": tr`}},
		{"lark 5000", func() (*Grammar, error) { return FromLark(testAlternatives(5000)) }, []string{``, `a`, `a1`}},
	}
	for _, c := range cases {
		before := heapInUse()
		g, err := c.compile()
		if err != nil {
			t.Fatal(c.name, err)
		}
		m, err := g.Matcher(v)
		if err != nil {
			t.Fatal(c.name, err)
		}
		for _, p := range c.prefixes {
			m.Allowed(mustAdvance(t, m, m.Start(), p), mask)
		}
		held := heapInUse() - before
		got := g.Bytes()
		ratio := float64(got) / float64(held)
		t.Logf("%s: Bytes %d, heap %d (%.2f)", c.name, got, held, ratio)
		if ratio < 1/1.5 || ratio > 1.5 {
			t.Errorf("%s: Bytes says %d, the heap holds %d: a factor of %.2f", c.name, got, held, ratio)
		}
		runtime.KeepAlive(g)
	}
}

// A Grammar's matcher lives with it: the same one for a vocabulary, freed
// with the Grammar (nothing else refers to it), and Bytes counts its
// caches, which DropCaches empties.
func TestGrammarKeepsItsMatcher(t *testing.T) {
	v := mtVocab(smallVocab...)
	g, err := FromJSONSchema([]byte(testEnum(50, 0)))
	if err != nil {
		t.Fatal(err)
	}
	own := g.Bytes()
	if err := g.Prepare(); err != nil {
		t.Fatal(err)
	}
	prepared := g.Bytes()
	m, err := g.Matcher(v)
	if err != nil {
		t.Fatal(err)
	}
	if m2, _ := g.Matcher(v); m2 != m {
		t.Fatal("a second Matcher over the same vocabulary")
	}
	if other, _ := g.Matcher(mtVocab(smallVocab...)); other == m {
		t.Fatal("the Matcher of another vocabulary shared")
	}
	fresh := g.Bytes()
	m.Allowed(mustAdvance(t, m, m.Start(), `"value-0-`), make([]bool, v.Size()))
	used := g.Bytes()
	if own <= 0 || prepared <= own || fresh <= prepared || used <= fresh {
		t.Errorf("Bytes: rules %d, prepared %d, with matchers %d, after a mask %d: each should grow", own, prepared, fresh, used)
	}
	g.DropCaches()
	if dropped := g.Bytes(); dropped >= used {
		t.Errorf("Bytes after DropCaches %d, before %d", dropped, used)
	}
	if _, ok := m.AdvanceBytes(m.Start(), []byte(`"value-0-49"`)); !ok {
		t.Error("the matcher fails after DropCaches")
	}
	wm := weak.Make(m)
	g, m = nil, nil
	runtime.GC()
	runtime.GC()
	if wm.Value() != nil {
		t.Error("a matcher outlives its grammar")
	}
}

// A start rule past the matcher's limits is Prepare's error, and it names
// the limit.
func TestPrepareNamesTheLimit(t *testing.T) {
	g, err := FromLark(testAlternatives(20_000))
	if err != nil {
		t.Fatal(err)
	}
	err = g.Prepare()
	if err == nil || !strings.Contains(err.Error(), "MaxStacks") || !strings.Contains(err.Error(), "16384") {
		t.Errorf("20,000 alternatives: %v, want an error naming MaxStacks", err)
	}
	// 50,000 (the case) are over the size limit already.
	if _, err := FromLark(testAlternatives(50_000)); err == nil || !strings.Contains(err.Error(), "MaxGrammarSize") {
		t.Errorf("50,000 alternatives: %v, want an error naming MaxGrammarSize", err)
	}
	// A chain of rules deeper than MaxStackDepth before the first byte.
	deep := grammarOf(t, func(b *Builder) int {
		r := b.Rule("r0")
		first := r
		for i := 1; i <= MaxStackDepth+1; i++ {
			next := b.Rule(fmt.Sprintf("r%d", i))
			b.Alt(r, Ref(next), Bytes(Byte('x')))
			r = next
		}
		b.Alt(r, Bytes(Byte('y')))
		return first
	})
	if err := deep.Prepare(); err == nil || !strings.Contains(err.Error(), "MaxStackDepth") {
		t.Errorf("deep start: %v, want an error naming MaxStackDepth", err)
	}
	if _, err := NewMatcher(deep, mtVocab(smallVocab...)); err == nil || !strings.Contains(err.Error(), "MaxStackDepth") {
		t.Errorf("NewMatcher: %v, want Prepare's error", err)
	}
}

// Regex and Lark grammars over MaxGrammarSize elements are refused as they
// are built.
func TestGrammarSizeLimit(t *testing.T) {
	long := strings.Repeat("ab", MaxGrammarSize/2+1)
	if _, err := FromRegex(long); err == nil || !strings.Contains(err.Error(), "MaxGrammarSize") {
		t.Errorf("regex of %d bytes: %v", len(long), err)
	}
	if _, err := FromLark(`start: "` + long + `"`); err == nil || !strings.Contains(err.Error(), "MaxGrammarSize") {
		t.Errorf("lark literal of %d bytes: %v", len(long), err)
	}
	if _, err := FromLark(testAlternatives(MaxGrammarSize / 4)); err == nil || !strings.Contains(err.Error(), "MaxGrammarSize") {
		t.Errorf("lark of %d alternatives: %v", MaxGrammarSize/4, err)
	}
	if _, err := FromRegex(strings.Repeat("ab", MaxGrammarSize/4)); err != nil {
		t.Errorf("regex under the limit: %v", err)
	}
}

// fixpoint agrees with the naive iteration it replaced on random grammars.
func TestFixpointAgreesWithIteration(t *testing.T) {
	naive := func(rules []Rule, set func(ByteSet) bool) []bool {
		ok := make([]bool, len(rules))
		for changed := true; changed; {
			changed = false
			for i, r := range rules {
				if ok[i] {
					continue
				}
				for _, a := range r.Alts {
					if !slices.ContainsFunc(a, func(e Elem) bool {
						if e.Rule < 0 {
							return !set(e.Set)
						}
						return !ok[e.Rule]
					}) {
						ok[i], changed = true, true
						break
					}
				}
			}
		}
		return ok
	}
	rng := rand.New(rand.NewPCG(1, 2))
	sets := []func(ByteSet) bool{
		func(ByteSet) bool { return false },
		func(s ByteSet) bool { return s != ByteSet{} },
		func(ByteSet) bool { return true },
	}
	for range 500 {
		rules := make([]Rule, 1+rng.IntN(12))
		for i := range rules {
			for range rng.IntN(4) {
				var a Seq
				for range rng.IntN(4) {
					switch rng.IntN(3) {
					case 0:
						a = append(a, Bytes(ByteSet{}))
					case 1:
						a = append(a, Bytes(Byte('a')))
					default:
						a = append(a, Ref(rng.IntN(len(rules))))
					}
				}
				rules[i].Alts = append(rules[i].Alts, a)
			}
		}
		for k, set := range sets {
			if got, want := fixpoint(rules, set), naive(rules, set); !slices.Equal(got, want) {
				t.Fatalf("set %d, rules %v: got %v, want %v", k, rules, got, want)
			}
		}
	}
}

// Large schemas compile in time linear in their size: BenchmarkCompileLarge
// reports it per case (a 9,000-value enum, 5,000 required properties,
// 20,000 Lark alternatives), compile and Prepare.
func BenchmarkCompileLarge(b *testing.B) {
	cases := []struct {
		name    string
		compile func() (*Grammar, error)
	}{
		{"enum9000", func() (*Grammar, error) { return FromJSONSchema([]byte(testEnum(9000, 1))) }},
		{"required5000", func() (*Grammar, error) { return FromJSONSchema([]byte(testRequired(5000))) }},
		{"lark20000", func() (*Grammar, error) { return FromLark(testAlternatives(20_000)) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				g, err := c.compile()
				if err != nil {
					b.Fatal(err)
				}
				_ = g.Prepare() // lark20000 is refused here, past MaxStacks
			}
		})
	}
}

// Matchers stay correct while their caches are dropped and measured from
// other goroutines (run with -race).
func TestDropCachesConcurrent(t *testing.T) {
	v := mtVocab(smallVocab...)
	g, err := FromJSONSchema([]byte(testEnum(200, 0)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	for w := range 4 {
		go func() {
			mask := make([]bool, v.Size())
			ok := true
			for i := range 200 {
				m, err := g.Matcher(v)
				if err != nil {
					ok = false
					break
				}
				st, adv := m.AdvanceBytes(m.Start(), fmt.Appendf(nil, `"value-0-%d`, (i*7+w)%200))
				if !adv {
					ok = false
					break
				}
				m.Allowed(st, mask)
				if end, adv := m.AdvanceBytes(st, []byte(`"`)); !adv || !end.Complete() {
					ok = false
					break
				}
			}
			done <- ok
		}()
	}
	go func() {
		for range 200 {
			g.DropCaches()
			_ = g.Bytes()
		}
		done <- true
	}()
	for range 5 {
		if !<-done {
			t.Error("a matcher failed while its caches were dropped")
		}
	}
}

// fixpoint looks at each element once: a chain of 5,000 rules, each
// productive only once the next is, costs 5,000 tests of byte sets, not
// one sweep of the grammar per link (which made 5,000 required properties
// take seconds).
func TestFixpointLinear(t *testing.T) {
	const n = 5000
	rules := make([]Rule, n)
	for i := range rules {
		a := Seq{Bytes(Byte('a'))}
		if i+1 < n {
			a = append(a, Ref(i+1))
		}
		rules[i].Alts = []Seq{a}
	}
	calls := 0
	ok := fixpoint(rules, func(ByteSet) bool { calls++; return true })
	if !ok[0] || calls != n {
		t.Errorf("start productive %v after %d tests of byte sets, want true after %d", ok[0], calls, n)
	}
}
