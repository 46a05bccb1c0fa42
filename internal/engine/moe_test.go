package engine_test

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
)

var (
	moeOnce  sync.Once
	moeModel *loader.Model
	moeErr   error
)

// tinyMoE is a small random qwen3moe (4 experts, 2 used) of a
// batch-invariant weight type.
func tinyMoE(t testing.TB) *loader.Model {
	t.Helper()
	moeOnce.Do(func() {
		moeModel, moeErr = randomModel("tiny-moe", model.RandomConfig{Arch: "qwen3moe", Layers: 2, Embd: 256, FF: 512,
			Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 384, ContextLen: 2048, Experts: 4, ExpertUsed: 2, ExpertFF: 256, Seed: 9})
	})
	if moeErr != nil {
		t.Fatal(moeErr)
	}
	return moeModel
}

// A mixture-of-experts model gives each request the tokens it gets alone
// when requests share batches (their tokens grouped by expert), with
// chunked prefill and with prefix-cache hits, paged or contiguous.
func TestMoEBatchedOutputMatchesAlone(t *testing.T) {
	m := tinyMoE(t)
	if c := m.Net.Config; c.Arch != "qwen3moe" || c.Experts != 4 || c.ExpertUsed != 2 {
		t.Fatalf("config %+v", c)
	}
	reqs := requests(12, 12, 120)
	if raceEnabled {
		reqs = requests(8, 4, 40)
	}
	for _, r := range reqs {
		r.Sampling.Logprobs = true
	}
	ref, refRec := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1; o.PrefixCacheN = 0 }))
	want, wantLP := generateLogprobs(t, ref, refRec, reqs, false)
	distinct := map[string]bool{}
	for _, w := range want {
		distinct[w.Text] = true
	}
	if len(distinct) < len(reqs)/2 {
		t.Fatalf("only %d distinct answers to %d prompts", len(distinct), len(reqs))
	}
	cases := []struct {
		name string
		opts engine.Options
		warm bool // run every request alone first: the batch hits the prefix cache
	}{
		{name: "paged", opts: opts(nil)},
		{name: "paged-chunked-prefill", opts: opts(func(o *engine.Options) { o.MaxNumBatchedTokens = 40 })},
		{name: "paged-prefix-hits", opts: opts(nil), warm: true},
		{name: "contiguous-prefix-hits", opts: opts(func(o *engine.Options) { o.PagedAttn = "off"; o.MaxNumBatchedTokens = 64 }), warm: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, rec := newEngine(t, m, c.opts)
			if c.warm {
				generateLogprobs(t, e, rec, reqs, false)
			}
			got, gotLP := generateLogprobs(t, e, rec, reqs, true)
			for i := range reqs {
				if !slices.Equal(got[i].Tokens, want[i].Tokens) {
					t.Errorf("request %d (prompt %d tokens): batched %v\nalone %v", i, len(reqs[i].Prompt), got[i].Tokens, want[i].Tokens)
				} else if !slices.Equal(gotLP[i], wantLP[i]) {
					// The same bits: grouping by expert changes nothing.
					t.Errorf("request %d: logprobs batched %v\nalone %v", i, gotLP[i], wantLP[i])
				}
				if got[i].FinishReason != engine.FinishLength {
					t.Errorf("request %d: finish reason %s", i, got[i].FinishReason)
				}
			}
			checkIdle(t, e, rec)
			defer rec.lock()()
			if rec.maxRunning < 2 {
				t.Errorf("at most %d sequences ran at once", rec.maxRunning)
			}
			if c.warm && rec.hits < len(reqs)/2 {
				t.Errorf("%d prefix-cache hits for %d repeated prompts", rec.hits, len(reqs))
			}
			t.Logf("max running %d, hits %d", rec.maxRunning, rec.hits)
		})
	}
}

// A second request with the same long prompt reuses its KV blocks and
// generates the same tokens.
func TestMoEPrefixCacheHit(t *testing.T) {
	e, rec := newEngine(t, tinyMoE(t), opts(nil))
	req := &engine.Request{Prompt: longPrompt(200, 3), Sampling: greedy(), MaxTokens: 6, IgnoreEOS: true}
	first := runAlone(t, e, []*engine.Request{req})[0]
	second := runAlone(t, e, []*engine.Request{req})[0]
	if first.CachedTokens != 0 || second.CachedTokens != 192 {
		t.Errorf("cached tokens %d then %d, want 0 then 192", first.CachedTokens, second.CachedTokens)
	}
	if !slices.Equal(first.Tokens, second.Tokens) {
		t.Errorf("tokens differ: %v vs %v", first.Tokens, second.Tokens)
	}
	defer rec.lock()()
	if rec.hits != 1 {
		t.Errorf("%d prefix-cache hits", rec.hits)
	}
}

// generateLogprobs runs reqs one after the other (together false), or
// together in shared batches (every request is submitted before the
// scheduler's second step, as runTogether does), and returns their results
// and the bits of the sampled tokens' logprobs.
func generateLogprobs(t *testing.T, e *engine.Engine, rec *recorder, reqs []*engine.Request, together bool) ([]*engine.Result, [][]uint32) {
	t.Helper()
	res := make([]*engine.Result, len(reqs))
	lps := make([][]uint32, len(reqs))
	errs := make([]error, len(reqs))
	run := func(i int) {
		res[i], errs[i] = e.Generate(context.Background(), reqs[i], func(o engine.Output) error {
			if o.Logprob != nil {
				lps[i] = append(lps[i], math.Float32bits(o.Logprob.Logprob))
			}
			return nil
		})
	}
	if !together {
		for i := range reqs {
			run(i)
		}
	} else {
		gate := make(chan struct{})
		rec.mu.Lock()
		rec.gate = gate
		want := rec.lookups + len(reqs)
		rec.mu.Unlock()
		var wg sync.WaitGroup
		for i := range reqs {
			wg.Go(func() { run(i) })
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			rec.mu.Lock()
			all := rec.lookups >= want
			rec.mu.Unlock()
			if all {
				break
			}
		}
		rec.mu.Lock()
		rec.gate = nil
		rec.mu.Unlock()
		close(gate)
		wg.Wait()
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if len(lps[i]) != res[i].CompletionTokens {
			t.Fatalf("request %d: %d logprobs for %d tokens", i, len(lps[i]), res[i].CompletionTokens)
		}
	}
	return res, lps
}
