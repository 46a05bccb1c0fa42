package sampler

import "strings"

// StopMatcher finds stop strings in streamed text. Generated text is pushed piece by piece (as
// decoded, e.g. one token at a time); Push returns the part that can be shown now and holds back
// any tail that might be the start of a stop string, so that a stop string split across tokens is
// still caught and never shown. When a stop string completes, it and everything after it are
// dropped and Push reports the stop.
//
// The result depends only on the concatenated text, never on how it was split: the stop string
// that completes first (earliest end) wins, and among those ending at the same place the one that
// starts first.
//
// Stop token ids are not its business: the caller checks sampled ids against the tokenizer's
// end-of-generation tokens and the request's stop tokens before decoding them.
type StopMatcher struct {
	stops   []string
	held    string
	stopped bool
	matched string
}

// NewStopMatcher returns a matcher for the given stop strings; empty strings are ignored, and with
// none at all every piece passes straight through.
func NewStopMatcher(stops []string) *StopMatcher {
	m := &StopMatcher{}
	for _, s := range stops {
		if s != "" {
			m.stops = append(m.stops, s)
		}
	}
	return m
}

// Push adds a piece of generated text. It returns the text that is safe to emit now and whether a
// stop string has completed (then the generation should end; later pushes return "", true).
func (m *StopMatcher) Push(piece string) (emit string, stopped bool) {
	if m.stopped {
		return "", true
	}
	if len(m.stops) == 0 {
		return piece, false
	}
	text := m.held + piece
	bestStart, bestEnd := -1, 0
	for _, s := range m.stops {
		// The first occurrence of s is its earliest end.
		if i := strings.Index(text, s); i >= 0 {
			if end := i + len(s); bestStart < 0 || end < bestEnd || (end == bestEnd && i < bestStart) {
				bestStart, bestEnd = i, end
				m.matched = s
			}
		}
	}
	if bestStart >= 0 {
		m.stopped = true
		m.held = ""
		return text[:bestStart], true
	}
	keep := m.partial(text)
	m.held = text[len(text)-keep:]
	return text[:len(text)-keep], false
}

// partial returns the length of the longest suffix of text that is a proper prefix of a stop
// string.
func (m *StopMatcher) partial(text string) int {
	best := 0
	for _, s := range m.stops {
		for n := min(len(s)-1, len(text)); n > best; n-- {
			if strings.HasSuffix(text, s[:n]) {
				best = n
				break
			}
		}
	}
	return best
}

// Flush returns the held-back text at the end of the generation (nothing after a stop).
func (m *StopMatcher) Flush() string {
	h := m.held
	m.held = ""
	return h
}

// Stopped reports whether a stop string has completed.
func (m *StopMatcher) Stopped() bool { return m.stopped }

// Matched returns the stop string that ended the generation, or "".
func (m *StopMatcher) Matched() string {
	if !m.stopped {
		return ""
	}
	return m.matched
}
