package engine_test

import (
	"slices"
	"strings"
	"testing"

	"mistralrs/internal/engine"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/model"
)

// A gemma3 model (sliding-window layers, prompts longer than the window)
// generates the same tokens alone and batched, with chunked prefill,
// prefix-cache hits, paged and contiguous caches.
func TestGemma3Engine(t *testing.T) {
	m, err := randomModel("gemma3", model.RandomConfig{Arch: "gemma3", Layers: 3, Embd: 256, FF: 512, Heads: 4, KVHeads: 2,
		HeadDim: 64, Vocab: 384, ContextLen: 2048, SlidingWindow: 16, SlidingPattern: 3, Seed: 8})
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Net.Config; c.Arch != "gemma3" || !slices.Equal(c.SlidingLayers, []bool{true, true, false}) {
		t.Fatalf("config %+v", c)
	}
	reqs := requests(8, 12, 120)
	if raceEnabled {
		reqs = requests(6, 4, 40)
	}
	ref, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1; o.PrefixCacheN = 0 }))
	want := runAlone(t, ref, reqs)
	distinct := map[int32]bool{}
	for _, r := range want {
		for _, tok := range r.Tokens {
			distinct[tok] = true
		}
	}
	// (A random model with a tied output can end up repeating its input
	// token: then nothing here would depend on the attention.)
	if len(distinct) < len(reqs)*reqs[0].MaxTokens/3 {
		t.Errorf("the model generates only %d distinct tokens", len(distinct))
	}
	// The engine's greedy tokens are the model's own, fed one at a time
	// into a contiguous cache of floats (the engine's pinned to f32 too;
	// the default, f16, rounds keys and values).
	ref32, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1; o.PrefixCacheN = 0; o.CacheType = "f32" }))
	want32 := runAlone(t, ref32, reqs)
	checked := 0
	for i, r := range reqs {
		if r.Sampling.Temperature != 0 || len(r.Prompt) <= 16 {
			continue
		}
		checked++
		if got := modelGreedy(t, m.Net, r.Prompt, r.MaxTokens); !slices.Equal(got, want32[i].Tokens) {
			t.Errorf("request %d: engine %v, model %v", i, want32[i].Tokens, got)
		}
	}
	if checked == 0 {
		t.Fatal("no greedy request with a prompt longer than the window")
	}
	for _, c := range []struct {
		name string
		opts engine.Options
		warm bool
	}{
		{"paged", opts(nil), false},
		{"paged-chunked-prefill", opts(func(o *engine.Options) { o.MaxNumBatchedTokens = 24 }), false},
		{"paged-prefix-hits", opts(nil), true},
		{"contiguous-prefix-hits", opts(func(o *engine.Options) { o.PagedAttn = "off"; o.MaxNumBatchedTokens = 64 }), true},
		// A pool of 160 positions: sequences are preempted and come back,
		// their sliding rows given back and taken again (prefix hits as
		// far as the kept rows allow).
		{"paged-preemption", opts(func(o *engine.Options) { o.ContextLen = 160; o.MaxDecodeStepsBeforePrefill = 2 }), false},
		{"paged-preemption-warm", opts(func(o *engine.Options) { o.ContextLen = 160 }), true},
	} {
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
			}
			checkIdle(t, e, rec)
			defer rec.lock()()
			if rec.maxRunning < 2 {
				t.Errorf("at most %d sequences ran at once", rec.maxRunning)
			}
			if c.warm && !strings.Contains(c.name, "preemption") && rec.hits < len(reqs)/2 {
				t.Errorf("%d prefix-cache hits for %d repeated prompts", rec.hits, len(reqs))
			}
			if strings.Contains(c.name, "preemption") && rec.preempted == 0 && !raceEnabled { // (-race: shorter prompts fit)
				t.Errorf("no preemption with a pool of 160 positions")
			}
		})
	}
}

// modelGreedy runs m directly: the prompt, then n argmax tokens.
func modelGreedy(t *testing.T, m *model.Model, prompt []int32, n int) []int32 {
	t.Helper()
	cache := kvcache.NewContiguousCache(m.Config.KVShape(), len(prompt)+n, false)
	logits := make([]float32, m.Config.Vocab)
	in := &model.SeqInput{Tokens: prompt, Cache: cache, Logits: logits}
	var out []int32
	for len(out) < n {
		if err := m.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
			t.Fatal(err)
		}
		best := int32(0)
		for j, v := range logits {
			if v > logits[best] {
				best = int32(j)
			}
		}
		out = append(out, best)
		in.Pos += len(in.Tokens)
		in.Tokens = []int32{best}
	}
	return out
}
