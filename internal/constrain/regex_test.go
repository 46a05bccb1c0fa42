package constrain

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// testRecognizer decides whether a grammar derives a string: the ends of
// each rule from each position, memoized (the grammar has no left
// recursion, so the recursion stops).
type testRecognizer struct {
	g    *Grammar
	s    string
	memo map[[2]int][]int
	busy map[[2]int]bool
}

func testAccepts(g *Grammar, s string) bool {
	t := &testRecognizer{g: g, s: s, memo: map[[2]int][]int{}, busy: map[[2]int]bool{}}
	return slices.Contains(t.ends(g.Start, 0), len(s))
}

func (t *testRecognizer) ends(r, pos int) []int {
	key := [2]int{r, pos}
	if e, ok := t.memo[key]; ok {
		return e
	}
	if t.busy[key] {
		panic(fmt.Sprintf("left recursion through %s at %d", t.g.Rules[r].Name, pos))
	}
	t.busy[key] = true
	var out []int
	for _, a := range t.g.Rules[r].Alts {
		out = append(out, t.seqEnds(a, pos)...)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	t.memo[key] = out
	delete(t.busy, key)
	return out
}

func (t *testRecognizer) seqEnds(a Seq, pos int) []int {
	cur := []int{pos}
	for _, e := range a {
		var next []int
		for _, p := range cur {
			if e.Rule < 0 {
				if p < len(t.s) && e.Set.Has(t.s[p]) {
					next = append(next, p+1)
				}
				continue
			}
			next = append(next, t.ends(e.Rule, p)...)
		}
		slices.Sort(next)
		cur = slices.Compact(next)
		if len(cur) == 0 {
			break
		}
	}
	return cur
}

// testGen draws random sentences of a grammar: random alternatives, and,
// past a depth or a length, the alternatives that finish soonest (least
// derivation height), so that every draw ends. A byte set gives a random
// member (the UTF-8 compilation makes every member of every set valid).
type testGen struct {
	g      *Grammar
	rng    *rand.Rand
	height []int // least derivation height per rule; -1: never finishes
}

func newTestGen(g *Grammar, seed uint64) *testGen {
	t := &testGen{g: g, rng: rand.New(rand.NewPCG(seed, 1)), height: make([]int, len(g.Rules))}
	for i := range t.height {
		t.height[i] = -1
	}
	for changed := true; changed; {
		changed = false
		for i, r := range g.Rules {
			for _, a := range r.Alts {
				if h := t.altHeight(a); h >= 0 && (t.height[i] < 0 || h < t.height[i]) {
					t.height[i], changed = h, true
				}
			}
		}
	}
	return t
}

func (t *testGen) altHeight(a Seq) int {
	h := 1
	for _, e := range a {
		if e.Rule >= 0 {
			if t.height[e.Rule] < 0 {
				return -1
			}
			h = max(h, t.height[e.Rule]+1)
		}
	}
	return h
}

func (t *testGen) sample(maxDepth, maxLen int) string {
	var out []byte
	var expand func(r, depth int)
	expand = func(r, depth int) {
		var alts []Seq
		least := -1
		for _, a := range t.g.Rules[r].Alts {
			if h := t.altHeight(a); h >= 0 {
				alts = append(alts, a)
				if least < 0 || h < least {
					least = h
				}
			}
		}
		if depth > maxDepth || len(out) > maxLen {
			alts = slices.DeleteFunc(alts, func(a Seq) bool { return t.altHeight(a) != least })
		}
		a := alts[t.rng.IntN(len(alts))]
		for _, e := range a {
			if e.Rule >= 0 {
				expand(e.Rule, depth+1)
				continue
			}
			var members []byte
			for c := range 256 {
				if e.Set.Has(byte(c)) {
					members = append(members, byte(c))
				}
			}
			out = append(out, members[t.rng.IntN(len(members))])
		}
	}
	expand(t.g.Start, 0)
	return string(out)
}

// testPool is what mutations insert: ASCII, UTF-8 length boundaries, case
// fold partners, and invalid bytes.
var testPool = []string{"a", "b", "z", "A", "Z", "0", "9", " ", "\n", "\t", "-", ".", "_", "+", "(", ")", "\"", "\\",
	"é", "ß", "ẞ", "K", "\u212a", "Ω", "α", "ω", "日", "本", "😀", "\x00", "\x7f", "\u0080", "\u07ff", "\u0800",
	"\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0010ffff", "\xff", "\xc0", "\xed\xa0\x80", "\xe2\x82"}

// testCandidates mutates samples into near misses: deletions, insertions,
// replacements, truncations, concatenations.
func testCandidates(rng *rand.Rand, samples []string, n int) []string {
	out := []string{""}
	var pool []string
	pool = append(pool, testPool...)
	for _, s := range samples {
		for _, r := range s {
			pool = append(pool, string(r))
		}
	}
	pick := func() string { return pool[rng.IntN(len(pool))] }
	for range n {
		s := samples[rng.IntN(len(samples))]
		i := 0
		if len(s) > 0 {
			i = rng.IntN(len(s) + 1)
		}
		switch rng.IntN(7) {
		case 0: // delete a byte
			if len(s) > 0 {
				j := rng.IntN(len(s))
				s = s[:j] + s[j+1:]
			}
		case 1: // delete a rune
			if len(s) > 0 {
				rs := []rune(s)
				j := rng.IntN(len(rs))
				s = string(rs[:j]) + string(rs[j+1:])
			}
		case 2: // insert
			s = s[:i] + pick() + s[i:]
		case 3: // replace a rune
			if rs := []rune(s); len(rs) > 0 {
				j := rng.IntN(len(rs))
				s = string(rs[:j]) + pick() + string(rs[j+1:])
			}
		case 4: // truncate
			s = s[:i]
		case 5: // concatenate
			s += samples[rng.IntN(len(samples))]
		case 6: // duplicate a piece
			j := i + rng.IntN(len(s)-i+1)
			s = s[:j] + s[i:j] + s[j:]
		}
		out = append(out, s)
	}
	return out
}

// testRegexPatterns are the patterns the compiled grammars are checked
// against regexp on.
var testRegexPatterns = []string{
	`[0-9]+`,
	`abc`,
	`a|b|cd`,
	`(ab|cd)*e`,
	`[a-zA-Z_][a-zA-Z0-9_]*`,
	`\d{3}-\d{4}`,
	`a{2,5}`,
	`(a|bc){0,3}`,
	`x{3,}y?`,
	`(?i)hello`,
	`(?i)straße|k`,
	`[^a-z]`,
	`.{1,3}`,
	`(?s).{2}`,
	`\p{Greek}+`,
	`[α-ω]+ [А-я]?`,
	`[\x{80}-\x{10FFFF}]{1,2}`,
	`[\x{7F}-\x{801}\x{FFFF}-\x{10000}\x{D7FF}-\x{E000}]+`,
	`日本語?`,
	`((a|b)c)+d?`,
	`(a*)*`,
	`(a?b?)+c`,
	`(|a)+b`,
	`((a?)*b?)*c{0,2}`,
	`^abc$`,
	`\Aa|b\z`,
	`(?m)^a$`,
	`(^a)?b`,
	`\pL\pN*`,
	`[+-]?\d+(\.\d+)?([eE][+-]?\d+)?`,
	`[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4}`,
	`\s*\w+\s*`,
	`\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])`,
	`(a|ab)(c|bcd)(d*)`,
	`[\p{Han}\p{Hiragana}]{1,4}`,
	`\x{10FFFF}|\x{0}`,
	`[^\n]*\n`,
	`[\s\S]{2}`,
	`(a{2}){2,3}`,
	`(?U)a+?b*`,
	`"([^"\\]|\\.)*"`,
	`[[:alpha:]][[:digit:]]+`,
	`(?i)[a-cσ]+`,
	`(?:(?:x|y){1,2}z){2}`,
	`[^\x00-\x{10FFFF}]|ok`,
}

// testAgree checks g against re on samples drawn from g (which must all
// match) and their mutations (accepted exactly when valid UTF-8 that re
// matches).
func testAgree(t *testing.T, name string, g *Grammar, re *regexp.Regexp, seed uint64, extra ...string) {
	t.Helper()
	gen := newTestGen(g, seed)
	var samples []string
	for range 150 {
		s := gen.sample(30, 60)
		if !utf8.ValidString(s) {
			t.Errorf("%s: sample %q is not valid UTF-8", name, s)
		}
		if !re.MatchString(s) {
			t.Errorf("%s: sample %q does not match %v", name, s, re)
		}
		if !testAccepts(g, s) {
			t.Errorf("%s: recognizer refuses its own sample %q", name, s)
		}
		samples = append(samples, s)
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	cands := append(testCandidates(rng, samples, 1500), extra...)
	checked, negatives := 0, 0
	for _, c := range cands {
		want := utf8.ValidString(c) && re.MatchString(c)
		if got := testAccepts(g, c); got != want {
			t.Errorf("%s: %q accepted=%v, regexp (and UTF-8 validity) says %v", name, c, got, want)
			if checked++; checked > 10 {
				return
			}
		}
		if !want {
			negatives++
		}
	}
	if negatives < 50 {
		t.Errorf("%s: only %d negative candidates", name, negatives)
	}
}

func TestRegexAgreesWithRegexp(t *testing.T) {
	for i, p := range testRegexPatterns {
		g, err := FromRegex(p)
		if err != nil {
			t.Errorf("FromRegex(%q): %v", p, err)
			continue
		}
		re := regexp.MustCompile(`^(?:` + p + `)$`)
		testAgree(t, p, g, re, uint64(i), testPool...)
	}
}

// TestUTF8Ranges checks the rune range compilation exhaustively: the
// products of the byte ranges are exactly the encodings of the range's
// runes.
func TestRegexUTF8Ranges(t *testing.T) {
	ranges := [][2]rune{{0, unicode.MaxRune}, {0x7F, 0x80}, {0x7FF, 0x800}, {0xFFFF, 0x10000}, {0xD7FF, 0xE000},
		{0x80, 0x7FF}, {0x123, 0x4567}, {0x10000, 0x10FFFF}, {0x3B1, 0x3C9}, {0x1F600, 0x1F64F}, {0xDA00, 0xDB00}}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 12 {
		a, b := rune(rng.IntN(unicode.MaxRune+1)), rune(rng.IntN(unicode.MaxRune+1))
		ranges = append(ranges, [2]rune{min(a, b), max(a, b)})
	}
	for _, r := range ranges {
		lo, hi := r[0], r[1]
		count := 0
		seen := map[rune]bool{}
		rxUTF8Ranges(lo, hi, func(seq [][2]byte) {
			buf := make([]byte, len(seq))
			var walk func(i int)
			walk = func(i int) {
				if i == len(seq) {
					c, n := utf8.DecodeRune(buf)
					if n != len(buf) || c == utf8.RuneError && n == 1 || c < lo || c > hi || seen[c] {
						t.Fatalf("range %x-%x: bytes %x decode to %x (width %d)", lo, hi, buf, c, n)
					}
					seen[c] = true
					count++
					return
				}
				for x := int(seq[i][0]); x <= int(seq[i][1]); x++ {
					buf[i] = byte(x)
					walk(i + 1)
				}
			}
			walk(0)
		})
		want := int(hi - lo + 1)
		if s, e := max(lo, 0xD800), min(hi, 0xDFFF); s <= e {
			want -= int(e - s + 1)
		}
		if count != want {
			t.Errorf("range %x-%x: %d encodings, want %d", lo, hi, count, want)
		}
	}
}

// TestRegexClassRulesDeterministic checks that the rules compiled from
// character classes have alternatives starting with disjoint byte sets.
func TestRegexClassRulesDeterministic(t *testing.T) {
	for _, p := range []string{`\pL`, `\p{Greek}`, `.`, `[^a]`, `(?i)[a-z\x{100}-\x{17F}]`, `[\x{800}-\x{801}\x{803}\x{1000}-\x{1005}\x{1010}-\x{3FFF}]`, `[\p{Han}\p{Hiragana}]`} {
		g, err := FromRegex(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range g.Rules {
			if !strings.Contains(r.Name, "/utf8") {
				continue
			}
			var seen ByteSet
			for _, a := range r.Alts {
				if len(a) == 0 || a[0].Rule >= 0 {
					t.Fatalf("%s: rule %s has an alternative not starting with bytes", p, r.Name)
				}
				for i := range seen {
					if seen[i]&a[0].Set[i] != 0 {
						t.Errorf("%s: rule %s: alternatives overlap", p, r.Name)
					}
					seen[i] |= a[0].Set[i]
				}
			}
		}
		if n := g.Size(); n > 4000 {
			t.Errorf("%s: grammar of %d elements", p, n)
		}
	}
}

func TestRegexErrors(t *testing.T) {
	for _, c := range []struct{ pattern, want string }{
		{`a(b`, "missing closing )"},
		{`a[b`, "missing closing ]"},
		{`*a`, "missing argument to repetition operator"},
		{`a\bb`, `\b (word boundary)`},
		{`\Bx`, `\B (not a word boundary)`},
		{`a^b`, `^ or \A (start of text) is only supported at the start`},
		{`a$b`, `$ or \z (end of text) is only supported at the end`},
		{`(?m)a^b`, `^ (start of line, (?m)) is only supported at the start`},
		{`(^a)*`, `only supported at the start`},
		{`a?^b`, `only supported at the start`},
		{`a{1001}`, "invalid repeat count"},
		{`(a{1000}){2}`, "invalid repeat count"},
		{strings.Repeat(`a{1000}`, 101), "expand to over 100000 grammar elements"},
		{`[^\x00-\x{10FFFF}]`, "matches no string"},
		{`\x{D800}`, "matches no string"},
		{`a(?=b)`, "invalid or unsupported Perl syntax"},
	} {
		_, err := FromRegex(c.pattern)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FromRegex(%.40q) = %v, want an error with %q", c.pattern, err, c.want)
		}
	}
}

// TestRegexNullableLoops checks that repetitions of patterns matching the
// empty string compile (no left recursion) to the right language.
func TestRegexNullableLoops(t *testing.T) {
	for _, p := range []string{`(a*)*`, `(a?)+`, `(|a)*`, `((a?)*b?)*`, `(a*b*)*c`, `(a*|b)+`, `((a|)(b|))*`, `(()|a){2,}`} {
		g, err := FromRegex(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		re := regexp.MustCompile(`^(?:` + p + `)$`)
		for _, s := range []string{"", "a", "aa", "ab", "ba", "abab", "bbaa", "c", "abc", "x", "aab", "abba"} {
			if got, want := testAccepts(g, s), re.MatchString(s); got != want {
				t.Errorf("%s on %q: %v, want %v", p, s, got, want)
			}
		}
	}
}
