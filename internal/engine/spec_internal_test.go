package engine

import (
	"context"
	"slices"
	"sync"
	"testing"

	"mistralrs/internal/demo"
	"mistralrs/internal/sampler"
)

// scripted proposes the reference continuation of a sequence, with the
// guess at position wrongAt of each proposal replaced by a wrong token.
type scripted struct {
	ref     []int32 // the greedy tokens after the prompt
	wrongAt int
	vocab   int32
}

func (p *scripted) propose(seqs []*seq, want func(*seq) int) int {
	for _, sq := range seqs {
		gen := len(sq.tokens) - sq.promptLen
		sq.draft = sq.draft[:0]
		for i := range want(sq) {
			tok := p.ref[gen+i]
			if i == p.wrongAt {
				tok = (tok + 1) % p.vocab
			}
			sq.draft = append(sq.draft, tok)
		}
	}
	return 0
}

type specCounts struct {
	mu                         sync.Mutex
	drafts, proposed, accepted int
	perPos                     []int
	drops                      int
}

func (c *specCounts) record(st Stats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drafts += st.SpecDrafts
	c.proposed += st.SpecProposed
	c.accepted += st.SpecAccepted
	for i, n := range st.SpecAcceptedPerPos {
		if i >= len(c.perPos) {
			c.perPos = append(c.perPos, 0)
		}
		c.perPos[i] += n
	}
	c.drops += st.SpecStagedDrops
}

// The speculative counters after scripted proposals: every proposal of 4
// has 3 right guesses, the last one (3 guesses, the token limit) all right.
func TestSpeculativeCountersScripted(t *testing.T) {
	m, err := demo.LoadRandom()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{MaxSeqs: 4, MaxNumBatchedTokens: 512, MaxDecodeStepsBeforePrefill: 8, BlockSize: 16, MemoryMB: 16, PrefixCacheN: 16,
		Threads: 1, SpecTokens: 4, EmbeddingStepTokens: 64}
	e, err := New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	req := func() *Request {
		return &Request{Prompt: []int32{1, 40, 50, 60, 70}, MaxTokens: 21, IgnoreEOS: true,
			Sampling: sampler.Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1}}
	}
	ref, err := e.Generate(context.Background(), req(), nil)
	if err != nil {
		t.Fatal(err)
	}
	obs := &specCounts{}
	e.SetStatsSink(obs.record)
	e.mu.Lock()
	e.prop = &scripted{ref: ref.Tokens, wrongAt: 3, vocab: int32(e.VocabSize())}
	e.mu.Unlock()
	var outs []Output
	res, err := e.Generate(context.Background(), req(), func(o Output) error { outs = append(outs, o); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, ref.Tokens) || len(outs) != 21 {
		t.Fatalf("tokens %v (%d outputs), want %v", res.Tokens, len(outs), ref.Tokens)
	}
	// One step per verification: its outputs share the step's time.
	steps := 1
	for i := 1; i < len(outs); i++ {
		if !outs[i].Time.Equal(outs[i-1].Time) {
			steps++
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.drafts != 5 || obs.proposed != 4*4+3 || obs.accepted != 3*5 || !slices.Equal(obs.perPos, []int{5, 5, 5, 0}) || obs.drops != 0 {
		t.Errorf("drafts %d proposed %d accepted %d per position %v drops %d; want 5, 19, 15, [5 5 5 0], 0",
			obs.drafts, obs.proposed, obs.accepted, obs.perPos, obs.drops)
	}
	if steps != 1+5 {
		t.Errorf("outputs came in %d steps, want 6 (the prompt's, then 5 verifications)", steps)
	}
}

// A draft model whose forward pass fails turns speculation off for the
// sequences of that pass, which go on without guesses.
func TestDraftFailureTurnsSpeculationOff(t *testing.T) {
	m, err := demo.LoadRandom()
	if err != nil {
		t.Fatal(err)
	}
	p := newDraftProposer(m, nil, false)
	mk := func() *seq {
		sq := newSeq(&Request{Prompt: []int32{1, 2, 3}, MaxTokens: 10, Sampling: sampler.Params{Temperature: 0}}, 10, nil)
		sq.spec = true
		return sq
	}
	a, b := mk(), mk()
	b.ds = p.state(a) // one cache for two sequences: the forward pass refuses the batch
	if failed := p.propose([]*seq{a, b}, func(*seq) int { return 3 }); failed != 2 {
		t.Fatalf("%d failed, want 2", failed)
	}
	for _, sq := range []*seq{a, b} {
		if sq.spec || len(sq.draft) != 0 || sq.ds != nil {
			t.Errorf("after the failure: spec %v, draft %v, state %v", sq.spec, sq.draft, sq.ds)
		}
	}
	// A sequence alone proposes.
	c := mk()
	if failed := p.propose([]*seq{c}, func(*seq) int { return 3 }); failed != 0 || len(c.draft) != 3 || len(c.draftQ) != 3*m.Net.Config.Vocab {
		t.Fatalf("failed %d, draft %v, %d distribution values", failed, c.draft, len(c.draftQ))
	}
}

func TestNgramLookup(t *testing.T) {
	cases := []struct {
		toks   []int32
		n, k   int
		want   []int32
		reason string
	}{
		{[]int32{1, 2, 3, 9, 1, 2, 3}, 3, 2, []int32{9, 1}, "the tokens after the earlier 1 2 3"},
		{[]int32{1, 2, 3, 9, 1, 2, 3}, 3, 6, []int32{9, 1, 2, 3, 9, 1}, "past the end: the loop goes on"},
		{[]int32{5, 5, 5}, 2, 4, []int32{5, 5, 5, 5}, "a repeated token"},
		{[]int32{1, 2, 7, 2, 8, 4, 2}, 3, 2, []int32{8, 4}, "the latest match of the longest suffix (2)"},
		{[]int32{1, 2, 3, 4}, 3, 3, nil, "no earlier occurrence"},
		{[]int32{7}, 3, 3, nil, "too short"},
	}
	for _, c := range cases {
		if got := ngramLookup(nil, c.toks, c.n, c.k); !slices.Equal(got, c.want) {
			t.Errorf("%v n=%d k=%d: %v, want %v (%s)", c.toks, c.n, c.k, got, c.want, c.reason)
		}
	}
}
