package engine_test

import (
	"slices"
	"testing"

	"mistralrs/internal/engine"
	"mistralrs/internal/model"
)

// --no-cache-rotation reaches the pool: with q4_0 keys and values (heads
// of 64 values) the log-probabilities move when it is set; with f16, which
// is never rotated, they do not.
func TestCacheRotationOption(t *testing.T) {
	m, err := randomModel("rot", model.RandomConfig{Arch: "llama", Layers: 2, Embd: 256, FF: 512, Heads: 4, KVHeads: 2,
		HeadDim: 64, Vocab: 384, ContextLen: 512, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	r := greedyRequests(1, 8, 60)[0]
	r.Sampling.Logprobs, r.Sampling.TopLogprobs = true, 5
	run := func(typ string, off bool) []float32 {
		e, _ := newEngine(t, m, opts(func(o *engine.Options) { o.CacheType = typ; o.NoCacheRotation = off }))
		return topLogprobs(t, e, r)
	}
	if on, off := run("q4_0", false), run("q4_0", true); slices.Equal(on, off) {
		t.Error("q4_0: the same log-probabilities with and without --no-cache-rotation")
	}
	if on, off := run("f16", false), run("f16", true); !slices.Equal(on, off) {
		t.Errorf("f16: --no-cache-rotation changed the log-probabilities:\n%v\n%v", on, off)
	}
}
