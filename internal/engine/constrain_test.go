package engine_test

import (
	"context"
	"slices"
	"testing"

	"mistralrs/internal/constrain"
	"mistralrs/internal/demo"
	"mistralrs/internal/engine"
	"mistralrs/internal/sampler"
)

// digits is the grammar of exactly n ASCII digits.
func digits(t *testing.T, n int) *constrain.Grammar {
	t.Helper()
	b := constrain.NewBuilder()
	r := b.Rule("digits")
	elems := make([]constrain.Elem, n)
	for i := range elems {
		elems[i] = constrain.Bytes(constrain.Range('0', '9'))
	}
	b.Alt(r, elems...)
	g, err := b.Grammar(r)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// anything accepts every byte string.
func anything(t *testing.T) *constrain.Grammar {
	t.Helper()
	b := constrain.NewBuilder()
	var all constrain.ByteSet
	all.AddRange(0, 255)
	star := b.Star(constrain.Bytes(all))
	g, err := b.Grammar(star)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A constrained answer follows its grammar whatever the sampling, stops
// when the grammar can take nothing more (reason stop), and ends with
// reason length when the token limit comes first.
func TestConstrainedOutput(t *testing.T) {
	e, rec := newEngine(t, tiny(t), opts(nil))
	g := digits(t, 6)
	for s := range 8 {
		seed := uint64(s)
		req := &engine.Request{Prompt: promptOf(9), MaxTokens: 40, Grammar: g, N: 2,
			Sampling: sampler.Params{Temperature: 1.5, TopP: 1, RepetitionPenalty: 1, Seed: &seed}}
		res, _ := collectChoices(t, e, req)
		for i, r := range res {
			if r.FinishReason != engine.FinishStop || len(r.Text) != 6 || !allDigits(r.Text) {
				t.Fatalf("seed %d choice %d: %q (%s), want 6 digits and stop", s, i, r.Text, r.FinishReason)
			}
		}
	}
	short := &engine.Request{Prompt: promptOf(9), MaxTokens: 3, Grammar: g, Sampling: greedy()}
	if r := runConcurrently(t, e, []*engine.Request{short})[0]; r.FinishReason != engine.FinishLength || len(r.Text) != 3 || !allDigits(r.Text) {
		t.Errorf("limit inside the grammar: %q (%s), want 3 digits and length", r.Text, r.FinishReason)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.blocksUsed != 0 {
		t.Errorf("%d blocks used when idle", rec.blocksUsed)
	}
}

func allDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// With the grammar of anything, the tokens are the unconstrained ones
// (on the demo model: every token but the control ones renders text;
// tokens that render nothing, like tiny's unused ones, are never allowed
// under a constraint).
func TestConstrainedAnythingIsFree(t *testing.T) {
	m, err := demo.LoadRandom()
	if err != nil {
		t.Fatal(err)
	}
	e, _ := newEngine(t, m, opts(nil))
	g := anything(t)
	for _, p := range [][]int32{promptOf(5), promptOf(33)} {
		free := runConcurrently(t, e, []*engine.Request{{Prompt: p, MaxTokens: 30, Sampling: greedy()}})[0]
		cons := runConcurrently(t, e, []*engine.Request{{Prompt: p, MaxTokens: 30, Sampling: greedy(), Grammar: g}})[0]
		if !slices.Equal(free.Tokens, cons.Tokens) {
			t.Errorf("constrained by anything: %v\nfree: %v", cons.Tokens, free.Tokens)
		}
	}
	_ = context.Background
}

// Speculative guesses are checked against the grammar: constrained greedy
// answers are the same with and without speculation.
func TestConstrainedSpeculative(t *testing.T) {
	m := tiny(t)
	plain, _ := newEngine(t, m, opts(nil))
	g, err := constrain.FromRegex(`([a-z]{2,6} ){3,12}[0-9]{1,4}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(*engine.Options){
		func(o *engine.Options) { o.Draft = m; o.SpecTokens = 4 },
		func(o *engine.Options) { o.Draft = tinyDraft(t); o.SpecTokens = 3 },
		func(o *engine.Options) { o.SpecNgram = 2; o.SpecTokens = 5 },
	} {
		spec, rec := newEngine(t, m, opts(mod))
		for i := range 6 {
			req := func() *engine.Request {
				return &engine.Request{Prompt: promptOf(4 + 3*i), MaxTokens: 60, Grammar: g, Sampling: greedy()}
			}
			want := runConcurrently(t, plain, []*engine.Request{req()})[0]
			got := runConcurrently(t, spec, []*engine.Request{req()})[0]
			if got.Text != want.Text || got.FinishReason != want.FinishReason {
				t.Fatalf("prompt %d: %q (%s), without speculation %q (%s)", i, got.Text, got.FinishReason, want.Text, want.FinishReason)
			}
		}
		rec.mu.Lock()
		if rec.specDrafts == 0 {
			t.Error("no guess was verified")
		}
		rec.mu.Unlock()
	}
}
