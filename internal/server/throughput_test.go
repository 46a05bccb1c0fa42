package server

import (
	"strings"
	"testing"
	"time"
)

// The periodic line carries mistralrs's MTP segment for an interval with
// verified guesses: acceptance over the interval and 1 + accepted per
// verified sequence; an interval without guesses has none.
func TestThroughputLineMTPSegment(t *testing.T) {
	s := newEngineStats(nil)
	s.PrefixCacheLookup()
	s.TokensProcessed(100)
	s.SpeculativeStats(4, 16, 6, []int{3, 2, 1, 0})
	s.SpeculativeStats(2, 8, 6, []int{2, 2, 2})
	line, ok := s.intervalLine(time.Second)
	if !ok || !strings.Contains(line, ", MTP accept 50.0% (len 3.00), ") {
		t.Errorf("line %q, want the segment MTP accept 50.0%% (len 3.00)", line)
	}
	s.TokensProcessed(10)
	if line, _ := s.intervalLine(time.Second); strings.Contains(line, "MTP") {
		t.Errorf("an interval without guesses: %q", line)
	}
}
