package engine_test

import (
	"slices"
	"sync"
	"testing"

	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
)

var (
	phi3Once  sync.Once
	phi3Model *loader.Model
	phi3Err   error
)

// phi3Tiny is a small random phi3 model (fused projections, partial
// rotary, LongRoPE factors) with a batch-invariant weight type.
func phi3Tiny(t testing.TB) *loader.Model {
	t.Helper()
	phi3Once.Do(func() {
		phi3Model, phi3Err = randomModel("phi3-tiny", model.RandomConfig{Arch: "phi3", Layers: 2, Embd: 256, FF: 512, Heads: 4, KVHeads: 2,
			Vocab: 384, ContextLen: 2048, OrigCtx: 512, RopeDim: 48, RopeFreqs: true, Seed: 21})
	})
	if phi3Err != nil {
		t.Fatal(phi3Err)
	}
	return phi3Model
}

// A phi3 model generates through the engine the tokens it generates alone:
// in batches, with chunked prefill, with prefix-cache hits and paged or
// contiguous caches.
func TestPhi3Engine(t *testing.T) {
	m := phi3Tiny(t)
	if m.Net.Config.Arch != "phi3" {
		t.Fatalf("loaded %s", m.Net.Config.Arch)
	}
	reqs := requests(8, 12, 120)
	if raceEnabled {
		reqs = requests(6, 4, 40)
	}
	ref, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1; o.PrefixCacheN = 0 }))
	want := runAlone(t, ref, reqs)
	cases := []struct {
		name string
		opts engine.Options
		warm bool
	}{
		{name: "paged", opts: opts(nil)},
		{name: "paged-chunked-prefill-prefix-hits", opts: opts(func(o *engine.Options) { o.MaxNumBatchedTokens = 24 }), warm: true},
		{name: "contiguous-prefix-hits", opts: opts(func(o *engine.Options) { o.PagedAttn = "off" }), warm: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, rec := newEngine(t, m, c.opts)
			if c.warm {
				runAlone(t, e, reqs)
			}
			got := runTogether(t, e, rec, reqs)
			for i := range reqs {
				if !slices.Equal(got[i].Tokens, want[i].Tokens) {
					t.Errorf("request %d (prompt %d tokens): batched %v\nalone %v", i, len(reqs[i].Prompt), got[i].Tokens, want[i].Tokens)
				}
				if len(got[i].Tokens) != reqs[i].MaxTokens {
					t.Errorf("request %d: %d tokens, want %d", i, len(got[i].Tokens), reqs[i].MaxTokens)
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
			t.Logf("max running %d, hits %d, max blocks %d/%d", rec.maxRunning, rec.hits, rec.maxBlocks, rec.blocksTotal)
		})
	}
}
