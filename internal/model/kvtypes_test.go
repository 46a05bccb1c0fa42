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
// It stores rows rotated where a pool of those types does (rotK, rotV:
// the model then rotates what it stores, as for the pool).
type roundingCache struct {
	*kvcache.ContiguousCache
	kt, vt     kvcache.Type
	rotK, rotV bool
}

func newRoundingCache(c model.Config, n int, kt, vt kvcache.Type) roundingCache {
	rk, rv := kvcache.NewTypedPool(c.KVShape(), 4, 1, kt, vt).NewSeq().Rotated()
	return roundingCache{modeltest.NewContiguous(c, n), kt, vt, rk, rv}
}

func (c roundingCache) Rotated() (k, v bool) { return c.rotK, c.rotV }

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
					return newRoundingCache(c, n, pr[0], pr[1])
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

// A cache that stores rows rotated changes nothing but what is stored:
// over float32 rows, the logits are those of the unrotated cache to
// float32 rounding (keys and queries by one matrix, values and the output
// by another; qwen3's heads of 64 values), and the stored rows are not
// the model's (the rotation ran). A missing or wrong back-rotation of the
// output moves the logits by O(1).
func TestRotatedCacheSameAttention(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	runs := []modeltest.SeqRun{
		{Tokens: []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49}, Steps: []int{3, 1, 9}},
		{Tokens: []int32{2, 4, 6, 8, 10, 12, 14}, Steps: []int{3, 2, 2}},
	}
	defer func(was func(model.Config, int) model.KVCache) { modeltest.NewTestCache = was }(modeltest.NewTestCache)
	cfg := modeltest.FixtureConfigs()["qwen3"]
	cfg.Type = kernels.F32
	m, _ := modeltest.LoadFixture(t, cfg)
	if m.Config.HeadDim%64 != 0 {
		t.Fatalf("head dim %d: the fixture would not rotate", m.Config.HeadDim)
	}
	var plain, rotated []roundingCache
	modeltest.NewTestCache = func(c model.Config, n int) model.KVCache {
		rc := roundingCache{modeltest.NewContiguous(c, n), kvcache.F32, kvcache.F32, false, false}
		plain = append(plain, rc)
		return rc
	}
	want := modeltest.RunBatched(t, m, pool, runs, true)
	for _, rot := range [][2]bool{{true, true}, {true, false}, {false, true}} {
		modeltest.NewTestCache = func(c model.Config, n int) model.KVCache {
			rc := roundingCache{modeltest.NewContiguous(c, n), kvcache.F32, kvcache.F32, rot[0], rot[1]}
			rotated = append(rotated, rc)
			return rc
		}
		got := modeltest.RunBatched(t, m, pool, runs, true)
		var worst float64
		for i := range runs {
			for s := range want[i] {
				for j := range want[i][s] {
					worst = max(worst, math.Abs(float64(got[i][s][j]-want[i][s][j])))
				}
			}
		}
		if worst > 1e-4 {
			t.Errorf("rotated keys %v, values %v: logits differ from the unrotated cache's by up to %g", rot[0], rot[1], worst)
		}
		t.Logf("rotated keys %v, values %v: largest logit difference %.2e", rot[0], rot[1], worst)
	}
	// The rows stored differ (layer 0, position 0, of the first sequence).
	p, r := plain[0].Span(0, 0), rotated[0].Span(0, 0)
	kd := m.Config.KDim()
	same := true
	for j := range kd {
		same = same && p.K[j] == r.K[j]
	}
	if same {
		t.Error("the rotated cache stores the keys as computed")
	}
}
