package model_test

import (
	"fmt"
	"math"
	"testing"

	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/model"
	"mistralrs/internal/model/modeltest"
	"mistralrs/internal/model/nn"
)

// roundingCache is a float32 cache whose rows are rounded through a cache
// type on the way in: what attention over a cache of that type must see.
type roundingCache struct {
	*kvcache.ContiguousCache
	kt, vt kvcache.Type
}

func (c roundingCache) Put(layer, pos int, k, v []float32) {
	round := func(t kvcache.Type, x []float32) []float32 {
		w := make([]uint16, t.Words(len(x)))
		kvcache.EncodeRow(t, w, x)
		y := make([]float32, len(x))
		kvcache.DecodeRows(y, t, w, len(w), 0, len(x), 1)
		return y
	}
	c.ContiguousCache.Put(layer, pos, round(c.kt, k), round(c.vt, v))
}

// TestTypedCacheAttention: attention over a paged cache of each type gives
// the bits of float32 attention over the same rows rounded through that
// type (the decoded rows go through the float32 kernels in the order of
// positions), grouped or query by query, across blocks of 4 positions.
func TestTypedCacheAttention(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	runs := []modeltest.SeqRun{
		{Tokens: []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49}, Steps: []int{3, 1, 9}},
		{Tokens: []int32{2, 4, 6, 8, 10, 12, 14}, Steps: []int{3, 2, 2}},
	}
	pairs := [][2]kvcache.Type{{kvcache.BF16, kvcache.BF16}, {kvcache.Q8_0, kvcache.Q8_0}, {kvcache.Q4_0, kvcache.Q4_0},
		{kvcache.F8E4M3, kvcache.F8E4M3}, {kvcache.F16, kvcache.Q8_0}, {kvcache.Q8_0, kvcache.F32}}
	defer func(was func(model.Config, int) model.KVCache) { modeltest.NewTestCache = was }(modeltest.NewTestCache)
	defer func(was int) { nn.AttnGroupMax = was }(nn.AttnGroupMax)
	for _, name := range []string{"llama", "qwen3"} {
		cfg := modeltest.FixtureConfigs()[name]
		cfg.Type = kernels.F32
		m, _ := modeltest.LoadFixture(t, cfg)
		for _, pr := range pairs {
			t.Run(fmt.Sprintf("%s/%s-%s", name, pr[0], pr[1]), func(t *testing.T) {
				modeltest.NewTestCache = func(c model.Config, n int) model.KVCache {
					return roundingCache{modeltest.NewContiguous(c, n), pr[0], pr[1]}
				}
				nn.AttnGroupMax = 1
				want := modeltest.RunBatched(t, m, pool, runs, true)
				modeltest.NewTestCache = func(c model.Config, n int) model.KVCache {
					return kvcache.NewTypedPool(c.KVShape(), 4, (n+3)/4, pr[0], pr[1]).NewSeq()
				}
				for _, g := range []int{1, 16} {
					nn.AttnGroupMax = g
					got := modeltest.RunBatched(t, m, pool, runs, true)
					for i := range runs {
						for s := range want[i] {
							for j := range want[i][s] {
								if math.Float32bits(got[i][s][j]) != math.Float32bits(want[i][s][j]) {
									t.Fatalf("groups of %d: sequence %d step %d logit %d: %v, float32 over rounded rows %v", g, i, s, j, got[i][s][j], want[i][s][j])
								}
							}
						}
					}
				}
			})
		}
	}
}
