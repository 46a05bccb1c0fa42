package constrain

import (
	"math/rand/v2"
	"regexp"
	"testing"
	"unicode/utf8"
)

// testMatcherAgrees runs g through the Matcher on samples drawn from g and
// their mutations: the Matcher accepts a string (consumes it and is
// Complete) exactly when want says so.
func testMatcherAgrees(t *testing.T, name string, g *Grammar, seed uint64, want func(string) bool) {
	t.Helper()
	var toks [][]byte
	for c := range 256 {
		toks = append(toks, []byte{byte(c)})
	}
	m, err := NewMatcher(g, NewVocab(toks))
	if err != nil {
		t.Errorf("NewMatcher(%s): %v", name, err)
		return
	}
	gen := newTestGen(g, seed)
	var samples []string
	for range 50 {
		samples = append(samples, gen.sample(14, 80))
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	bad := 0
	for _, c := range append(testCandidates(rng, samples, 300), samples...) {
		st, ok := m.AdvanceBytes(m.Start(), []byte(c))
		if got, w := ok && st.Complete(), want(c); got != w {
			t.Errorf("%s: Matcher on %q: %v, want %v", name, c, got, w)
			if bad++; bad > 5 {
				return
			}
		}
	}
}

// TestRegexMatcher runs the regex grammars through the Matcher: it agrees
// with regexp.
func TestRegexMatcher(t *testing.T) {
	for i, p := range testRegexPatterns {
		g, err := FromRegex(p)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`^(?:` + p + `)$`)
		testMatcherAgrees(t, p, g, uint64(i), func(s string) bool { return utf8.ValidString(s) && re.MatchString(s) })
	}
}

// TestLarkMatcher runs the Lark grammars of the tests through the Matcher:
// it agrees with the test recognizer.
func TestLarkMatcher(t *testing.T) {
	srcs := []string{testLarkJSON, `start: ("(" start ")")*`}
	for _, c := range testLarkRegular {
		srcs = append(srcs, c.lark)
	}
	for i, src := range srcs {
		g, err := FromLark(src)
		if err != nil {
			t.Fatal(err)
		}
		testMatcherAgrees(t, src, g, uint64(i), func(s string) bool { return testAccepts(g, s) })
	}
}
