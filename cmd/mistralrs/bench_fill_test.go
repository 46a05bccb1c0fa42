package main

import (
	"slices"
	"testing"

	"mistralrs/internal/demo"
	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/model"
)

// The depth fill runs in chunks of benchFillChunk tokens; the cache it
// leaves must be the one a single pass over the same tokens leaves (chunked
// prefill is exact), so a decode after it gives the same logits. A chunk
// at the wrong position would not.
func TestBenchFillChunks(t *testing.T) {
	m, err := demo.LoadRandom()
	if err != nil {
		t.Fatal(err)
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	depth := benchFillChunk + 37
	for _, kvt := range []benchKV{{kvcache.F16, kvcache.F16, true}, {kvcache.Q8_0, kvcache.Q4_0, true}} {
		b, err := newBenchRun(m, pool, depth, 0, 1, kvt)
		if err != nil {
			t.Fatal(err)
		}
		if n := b.cache.Len(); n != depth {
			t.Fatalf("%v: the fill left %d positions, want %d", kvt, n, depth)
		}
		if _, err := b.once(); err != nil {
			t.Fatal(err)
		}
		chunked := slices.Clone(b.logits)

		// The same tokens in one pass.
		one, err := newBenchRun(m, pool, 0, 0, 1, kvt)
		if err != nil {
			t.Fatal(err)
		}
		if one.cache, err = benchCache(m.Net.Config.KVShape(), depth+2, kvt); err != nil {
			t.Fatal(err)
		}
		in := &model.SeqInput{Tokens: b.fillTok, Cache: one.cache}
		if err := m.Net.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
			t.Fatal(err)
		}
		one.depth, one.genTok = depth, b.genTok
		if _, err := one.once(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(chunked, one.logits) {
			t.Errorf("%v: logits after a chunked fill differ from those after one pass", kvt)
		}
	}
}
