package engine_test

import (
	"slices"
	"testing"

	"mistralrs/internal/engine"
	"mistralrs/internal/model"
)

// Every architecture decodes speculatively with a draft of its own family
// (one layer of the same random weights) and with n-gram proposals, and
// gives the greedy tokens it gives without speculation: verification runs
// several positions through the model's forward pass at once and rolls the
// rejected ones back, which for gemma3 includes the sliding-window blocks.
func TestFamiliesSpeculative(t *testing.T) {
	families := []model.RandomConfig{
		{Arch: "gemma3", Embd: 256, FF: 512, Heads: 4, KVHeads: 2, HeadDim: 64, SlidingWindow: 16, SlidingPattern: 3},
		{Arch: "phi3", Embd: 256, FF: 512, Heads: 4, KVHeads: 2, OrigCtx: 512, RopeDim: 48, RopeFreqs: true},
		{Arch: "qwen3moe", Embd: 256, FF: 512, Heads: 4, KVHeads: 2, HeadDim: 64, Experts: 4, ExpertUsed: 2, ExpertFF: 256},
		{Arch: "llama", Embd: 256, FF: 256, Heads: 4, KVHeads: 2, Experts: 4, ExpertUsed: 2}, // mixtral
		{Arch: "qwen2moe", Embd: 256, FF: 256, Heads: 4, KVHeads: 2, Experts: 4, ExpertUsed: 2, ExpertFF: 256},
	}
	for _, cfg := range families {
		name := cfg.Arch
		if cfg.Experts > 0 && cfg.Arch == "llama" {
			name = "mixtral"
		}
		t.Run(name, func(t *testing.T) {
			cfg.Vocab, cfg.ContextLen, cfg.Seed = 384, 2048, 31
			target, draft := cfg, cfg
			target.Layers, draft.Layers = 3, 1
			m, err := randomModel(cfg.Arch+"-target", target)
			if err != nil {
				t.Fatal(err)
			}
			d, err := randomModel(cfg.Arch+"-draft", draft)
			if err != nil {
				t.Fatal(err)
			}
			reqs := greedyRequests(6, 24, 60)
			if raceEnabled {
				reqs = greedyRequests(4, 8, 30)
			}
			ref, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1 }))
			want := runConcurrently(t, ref, cloneRequests(reqs))
			for _, c := range []struct {
				name string
				mod  func(*engine.Options)
			}{
				{"draft", func(o *engine.Options) { o.Draft = d; o.SpecTokens = 4 }},
				{"ngram", func(o *engine.Options) { o.SpecNgram = 2; o.SpecTokens = 4 }},
			} {
				e, rec := newEngine(t, m, opts(c.mod))
				got := runConcurrently(t, e, cloneRequests(reqs))
				for i := range reqs {
					if !slices.Equal(got[i].Tokens, want[i].Tokens) {
						t.Errorf("%s: request %d: speculative %v\nplain %v", c.name, i, got[i].Tokens, want[i].Tokens)
					}
				}
				checkIdle(t, e, rec)
				// The draft proposes at every step; n-gram lookups find
				// nothing to copy in short random generations.
				unlock := rec.lock()
				if c.name == "draft" && (rec.specProposed == 0 || rec.specAccepted == 0 && !raceEnabled) {
					t.Errorf("%s: %d of %d guesses accepted", c.name, rec.specAccepted, rec.specProposed)
				}
				unlock()
			}
		})
	}
}
