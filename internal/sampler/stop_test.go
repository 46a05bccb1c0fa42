package sampler

import (
	"strings"
	"testing"
)

// reference applies the stop rule to the whole text at once.
func reference(text string, stops []string) (out string, stopped bool, matched string) {
	bestStart, bestEnd := -1, 0
	for _, s := range stops {
		if s == "" {
			continue
		}
		if i := strings.Index(text, s); i >= 0 {
			if end := i + len(s); bestStart < 0 || end < bestEnd || (end == bestEnd && i < bestStart) {
				bestStart, bestEnd, matched = i, end, s
			}
		}
	}
	if bestStart < 0 {
		return text, false, ""
	}
	return text[:bestStart], true, matched
}

// splits calls fn with every way to cut text into non-empty pieces at the given cut points.
func splits(text string, cuts []int, fn func([]string)) {
	n := len(cuts)
	for mask := 0; mask < 1<<n; mask++ {
		var pieces []string
		last := 0
		for i, c := range cuts {
			if mask&(1<<i) != 0 {
				pieces = append(pieces, text[last:c])
				last = c
			}
		}
		pieces = append(pieces, text[last:])
		fn(pieces)
	}
}

func runeCuts(text string) []int {
	var cuts []int
	for i := range text {
		if i > 0 {
			cuts = append(cuts, i)
		}
	}
	return cuts
}

func byteCuts(text string) []int {
	var cuts []int
	for i := 1; i < len(text); i++ {
		cuts = append(cuts, i)
	}
	return cuts
}

func TestStopMatcherAllSplits(t *testing.T) {
	cases := []struct {
		text  string
		stops []string
	}{
		{"Hello world", []string{"wor"}},
		{"Hello world", []string{"xyz"}},
		{"aaab", []string{"aab"}},
		{"abababc", []string{"ababc"}},
		{"abcd", []string{"abcd", "bc"}},
		{"xabx", []string{"b", "ab"}},
		{"the end.", []string{"end", "the end"}},
		{"ab<|im_end|>tail", []string{"<|im_end|>", "<|im"}},
		{"no <stop here", []string{"<stop>"}},
		{"end: <st", []string{"<stop>"}},
		{"User: hi\nUser:", []string{"\nUser:"}},
		{"héllo wörld", []string{"ö"}},
		{"日本語テキスト", []string{"語テ", "キスト"}},
		{"xx", []string{"", "x"}},
		{"abc", nil},
		{"aXbXc", []string{"Xc", "bX"}},
	}
	for _, c := range cases {
		want, wantStopped, wantMatched := reference(c.text, c.stops)
		check := func(pieces []string) {
			m := NewStopMatcher(c.stops)
			var out strings.Builder
			stopped := false
			for _, p := range pieces {
				e, s := m.Push(p)
				out.WriteString(e)
				if !strings.HasPrefix(want, out.String()) {
					t.Fatalf("%q stops %q split %q: emitted %q, not a prefix of %q", c.text, c.stops, pieces, out.String(), want)
				}
				if s {
					stopped = true
					break
				}
			}
			if !stopped {
				out.WriteString(m.Flush())
			}
			if out.String() != want || stopped != wantStopped || m.Stopped() != wantStopped || m.Matched() != wantMatched {
				t.Fatalf("%q stops %q split %q: emitted %q stopped %v (%q), want %q %v (%q)",
					c.text, c.stops, pieces, out.String(), stopped, m.Matched(), want, wantStopped, wantMatched)
			}
		}
		splits(c.text, runeCuts(c.text), check)
		if len(c.text) <= 14 {
			splits(c.text, byteCuts(c.text), check)
		}
	}
}

func TestStopMatcherHoldsBack(t *testing.T) {
	m := NewStopMatcher([]string{"</s>", "STOP"})
	steps := []struct {
		in, out string
		stopped bool
	}{
		{"Hello <", "Hello ", false},
		{"/", "", false},
		{"b>", "</b>", false},
		{" S", " ", false},
		{"TO", "", false},
		{"P and more", "", true},
		{"ignored", "", true},
	}
	for i, s := range steps {
		out, stopped := m.Push(s.in)
		if out != s.out || stopped != s.stopped {
			t.Fatalf("step %d: Push(%q) = %q, %v; want %q, %v", i, s.in, out, stopped, s.out, s.stopped)
		}
	}
	if m.Flush() != "" || m.Matched() != "STOP" {
		t.Error("text after a stop leaked, or the wrong stop was reported")
	}

	m = NewStopMatcher([]string{"###"})
	if out, _ := m.Push("a ##"); out != "a " {
		t.Fatalf("got %q", out)
	}
	if f := m.Flush(); f != "##" {
		t.Errorf("Flush = %q, want the held %q", f, "##")
	}
	if m.Stopped() || m.Matched() != "" {
		t.Error("reported a stop that did not happen")
	}

	m = NewStopMatcher(nil)
	if out, stopped := m.Push("anything <"); out != "anything <" || stopped {
		t.Error("no stops: text should pass through")
	}
}
