package engine_test

import (
	"slices"
	"testing"

	"mistralrs/internal/engine"
)

func tokensOf(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(i % 200)
	}
	return p
}

// A prompt too big for the free blocks is passed over by smaller ones for
// max-decode-steps-before-prefill steps; then younger running sequences
// make room for it.
func TestSchedulerStarvedPrompt(t *testing.T) {
	e, _ := newEngine(t, tiny(t), opts(func(o *engine.Options) {
		o.BlockSize = 4
		o.PrefixCacheN = 0
		o.MaxDecodeStepsBeforePrefill = 2
	}))
	s := e.TestScheduler(12)
	a := s.Add(tokensOf(16), 3) // 4 blocks
	if got := s.Step(); got[a] != 16 {
		t.Fatalf("step 1: %v", got)
	}
	b := s.Add(tokensOf(34), 5) // 9 blocks: 7 are free
	c := s.Add(tokensOf(8), 20) // 2 blocks each
	d := s.Add(tokensOf(8), 20)
	if got := s.Step(); got[a] != 1 || got[b] != 0 || got[c] != 8 || got[d] != 8 {
		t.Fatalf("step 2: %v: c and d should pass b", got)
	}
	s.Step() // a finishes; b has waited 2 steps
	if r := s.Running(); !slices.Equal(r, []uint64{c, d}) {
		t.Fatalf("after step 3 running %v", r)
	}
	got := s.Step() // b is starved: d, the youngest, makes room
	if got[b] != 34 || got[c] != 1 || got[d] != 0 {
		t.Fatalf("step 4: %v", got)
	}
	if r, w := s.Running(), s.Waiting(); !slices.Equal(r, []uint64{c, b}) || !slices.Equal(w, []uint64{d}) {
		t.Fatalf("after step 4 running %v waiting %v", r, w)
	}
	for range 100 {
		s.Step()
	}
	if r, w := s.Running(), s.Waiting(); len(r)+len(w) != 0 {
		t.Fatalf("still running %v waiting %v", r, w)
	}
	if used, err := s.Pool(); used != 0 || err != nil {
		t.Fatalf("pool: %d used, %v", used, err)
	}
}

// A starved prompt that would not fit even with every younger sequence
// preempted preempts nobody, but nobody passes it any more.
func TestSchedulerStarvedPromptBlocksQueue(t *testing.T) {
	e, _ := newEngine(t, tiny(t), opts(func(o *engine.Options) {
		o.BlockSize = 4
		o.PrefixCacheN = 0
		o.MaxDecodeStepsBeforePrefill = 1
	}))
	s := e.TestScheduler(12)
	a := s.Add(tokensOf(32), 50) // 8 blocks, for a long time
	s.Step()
	b := s.Add(tokensOf(24), 2) // 6 blocks: 4 are free
	c := s.Add(tokensOf(4), 50) // 1 block
	s.Step()                    // c passes b
	s.Step()                    // b starved: preempting c frees too little
	d := s.Add(tokensOf(4), 2)
	got := s.Step()
	if got[d] != 0 || got[c] != 1 {
		t.Fatalf("step 4: %v: d must not pass the starved b, c keeps running", got)
	}
	if r, w := s.Running(), s.Waiting(); !slices.Equal(r, []uint64{a, c}) || !slices.Equal(w, []uint64{b, d}) {
		t.Fatalf("running %v waiting %v", r, w)
	}
	s.Finish(a)
	if got := s.Step(); got[b] != 24 || got[d] != 4 {
		t.Fatalf("after a: %v", got)
	}
}

// When a decode needs a block and none is free, the youngest running
// sequence goes back to the queue; its own full blocks stay cached, so it
// resumes from them.
func TestSchedulerPreemptsYoungestAndResumesFromCache(t *testing.T) {
	e, _ := newEngine(t, tiny(t), opts(func(o *engine.Options) { o.BlockSize = 4 }))
	s := e.TestScheduler(6)
	a := s.Add(tokensOf(12), 10)
	b := s.Add(tokensOf(12)[1:], 10) // no shared prefix with a
	s.Step()                         // 3 blocks each: the pool is full
	got := s.Step()                  // a needs a 4th block for its 13th token: b goes
	if got[a] != 1 || got[b] != 0 {
		t.Fatalf("step 2: %v", got)
	}
	if r, w := s.Running(), s.Waiting(); !slices.Equal(r, []uint64{a}) || !slices.Equal(w, []uint64{b}) {
		t.Fatalf("running %v waiting %v", r, w)
	}
	s.Finish(a)
	// b had 2 full blocks cached (its third held its last token); a's
	// blocks went to the free list after them, so b's survive.
	if got := s.Step(); got[b] != 12-8 {
		t.Fatalf("b resumed computing %v tokens, want 4 after 8 cached", got[b])
	}
	if used, err := s.Pool(); used != 3 || err != nil {
		t.Fatalf("pool: %d used, %v", used, err)
	}
}
