package model_test

import (
	"math"
	"os"
	"testing"

	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
	"mistralrs/internal/model/llama"
	"mistralrs/internal/model/modeltest"
	"mistralrs/internal/model/nn"
)

func TestMain(m *testing.M) { os.Exit(modeltest.Main(m)) }

// TestBatchMatchesSingle checks that sequences of different lengths in one
// batch (prefill next to decode) get the logits they get alone.
func TestBatchMatchesSingle(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, typ := range []kernels.Type{kernels.F32, kernels.Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			cfg := modeltest.FixtureConfigs()["qwen2"]
			cfg.Type = typ
			m, _ := modeltest.LoadFixture(t, cfg)
			runs := []modeltest.SeqRun{
				{Tokens: []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37}, Steps: []int{7, 1, 1, 1}},
				{Tokens: []int32{2, 4, 6, 8, 10, 12, 14}, Steps: []int{3, 2, 1, 1}},
				{Tokens: []int32{3, 6, 9}, Steps: []int{0, 0, 2, 1}},
			}
			alone := modeltest.RunBatched(t, m, pool, runs, false)
			batched := modeltest.RunBatched(t, m, pool, runs, true)
			for i := range runs {
				for s := range alone[i] {
					for j := range alone[i][s] {
						if d := math.Abs(float64(alone[i][s][j] - batched[i][s][j])); d > 1e-5 {
							t.Fatalf("sequence %d step %d logit %d: alone %v, batched %v", i, s, j, alone[i][s][j], batched[i][s][j])
						}
					}
				}
			}
		})
	}
}

// TestGroupedAttentionBits: attending four queries at a time (tokens of a
// head, or the query heads of a KV head) gives exactly the bits of attending
// each query alone, in prefill, decode and mixed batches, with and without
// GQA, head_dim 32 and 64.
func TestGroupedAttentionBits(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	runs := []modeltest.SeqRun{
		{Tokens: []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49}, Steps: []int{3, 1, 9}},
		{Tokens: []int32{2, 4, 6, 8, 10, 12, 14}, Steps: []int{3, 2, 2}},
		{Tokens: []int32{3, 6, 9, 12, 15, 18}, Steps: []int{0, 5, 1}},
	}
	for _, name := range []string{"llama", "llama-tied", "qwen3"} {
		t.Run(name, func(t *testing.T) {
			cfg := modeltest.FixtureConfigs()[name]
			cfg.Type = kernels.F32
			m, _ := modeltest.LoadFixture(t, cfg)
			defer func(was int) { nn.AttnGroupMax = was }(nn.AttnGroupMax)
			nn.AttnGroupMax = 1
			alone := modeltest.RunBatched(t, m, pool, runs, true)
			for _, size := range []int{4, 6, 16} {
				nn.AttnGroupMax = size
				grouped := modeltest.RunBatched(t, m, pool, runs, true)
				// The last step had groups of four or more (the shared path ran).
				most := modeltest.LargestGroup(m)
				if most < 4 {
					t.Fatalf("groups of %d: the largest group of the last step has %d queries", size, most)
				}
				for i := range runs {
					for s := range alone[i] {
						for j := range alone[i][s] {
							if math.Float32bits(alone[i][s][j]) != math.Float32bits(grouped[i][s][j]) {
								t.Fatalf("groups of %d: sequence %d step %d logit %d: query by query %v, grouped %v", size, i, s, j, alone[i][s][j], grouped[i][s][j])
							}
						}
					}
				}
			}
		})
	}
}

// TestF16Cache: with keys and values stored as halves, attention grouping
// still gives the bits of query-by-query attention, and the logits stay
// close to those of a float32 cache.
func TestF16Cache(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	runs := []modeltest.SeqRun{
		{Tokens: []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49}, Steps: []int{3, 1, 9}},
		{Tokens: []int32{2, 4, 6, 8, 10, 12, 14}, Steps: []int{3, 2, 2}},
	}
	for _, name := range []string{"llama", "qwen3"} {
		t.Run(name, func(t *testing.T) {
			cfg := modeltest.FixtureConfigs()[name]
			cfg.Type = kernels.F32
			m, _ := modeltest.LoadFixture(t, cfg)
			f32 := modeltest.RunBatched(t, m, pool, runs, true)
			defer func() {
				modeltest.NewTestCache = func(cfg model.Config, n int) model.KVCache { return modeltest.NewContiguous(cfg, n) }
			}()
			modeltest.NewTestCache = func(cfg model.Config, n int) model.KVCache { return modeltest.NewContiguousF16(cfg, n) }
			defer func(was int) { nn.AttnGroupMax = was }(nn.AttnGroupMax)
			nn.AttnGroupMax = 1
			alone := modeltest.RunBatched(t, m, pool, runs, true)
			nn.AttnGroupMax = 16
			grouped := modeltest.RunBatched(t, m, pool, runs, true)
			var worst float64
			for i := range runs {
				for s := range alone[i] {
					for j := range alone[i][s] {
						if math.Float32bits(alone[i][s][j]) != math.Float32bits(grouped[i][s][j]) {
							t.Fatalf("sequence %d step %d logit %d: query by query %v, grouped %v", i, s, j, alone[i][s][j], grouped[i][s][j])
						}
						worst = max(worst, math.Abs(float64(grouped[i][s][j]-f32[i][s][j])))
					}
				}
			}
			// Halves keep 11 significant bits: logits of order one move by
			// about 1e-3.
			if worst > 2e-2 || worst == 0 {
				t.Errorf("largest logit change from a float32 cache: %g", worst)
			}
			t.Logf("largest logit change from a float32 cache: %g", worst)
		})
	}
}

// TestCacheReuse rewinds a cache (Pos < Len) and checks that the result is
// the same as with a fresh cache.
func TestCacheReuse(t *testing.T) {
	cfg := modeltest.FixtureConfigs()["llama"]
	cfg.Type = kernels.F32
	m, _ := modeltest.LoadFixture(t, cfg)
	V := m.Config.Vocab
	cache := modeltest.NewContiguous(m.Config, 0)
	got, want := make([]float32, V), make([]float32, V)
	if err := m.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{{Tokens: []int32{1, 2, 3, 4, 5, 6}, Cache: cache}}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{{Tokens: []int32{7, 8}, Pos: 3, Cache: cache, Logits: got}}}); err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 5 {
		t.Errorf("cache length %d after rewinding to 3 and adding 2", cache.Len())
	}
	fresh := modeltest.NewContiguous(m.Config, 0)
	if err := m.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{{Tokens: []int32{1, 2, 3, 7, 8}, Cache: fresh, Logits: want}}}); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-5 {
			t.Fatalf("logit %d: rewound cache %v, fresh %v", i, got[i], want[i])
		}
	}
}

func TestForwardErrors(t *testing.T) {
	cfg := modeltest.FixtureConfigs()["llama-tied"]
	cfg.Type = kernels.Q8_0
	m, _ := modeltest.LoadFixture(t, cfg)
	V := m.Config.Vocab
	c := modeltest.NewContiguous(m.Config, 8)
	shared := modeltest.NewContiguous(m.Config, 8)
	cases := map[string]*model.Batch{
		"empty batch":      {},
		"no tokens":        {Seqs: []*model.SeqInput{{Cache: c}}},
		"no cache":         {Seqs: []*model.SeqInput{{Tokens: []int32{1}}}},
		"gap":              {Seqs: []*model.SeqInput{{Tokens: []int32{1}, Pos: 1, Cache: c}}},
		"token range":      {Seqs: []*model.SeqInput{{Tokens: []int32{int32(V)}, Cache: c}}},
		"negative token":   {Seqs: []*model.SeqInput{{Tokens: []int32{-1}, Cache: c}}},
		"logits length":    {Seqs: []*model.SeqInput{{Tokens: []int32{1}, Cache: c, Logits: make([]float32, V-1)}}},
		"alllogits length": {Seqs: []*model.SeqInput{{Tokens: []int32{1, 2}, Cache: c, AllLogits: make([]float32, V)}}},
		"shared cache":     {Seqs: []*model.SeqInput{{Tokens: []int32{1}, Cache: shared}, {Tokens: []int32{1}, Cache: shared}}},
		"cache full":       {Seqs: []*model.SeqInput{{Tokens: make([]int32, 9), Cache: c}}},
	}
	for name, b := range cases {
		if err := m.Forward(nil, b); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
		if c.Len() != 0 {
			t.Errorf("%s: cache changed to %d positions", name, c.Len())
		}
	}
	// The model still works after the errors.
	if err := m.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{{Tokens: []int32{1, 2}, Cache: c}}}); err != nil {
		t.Fatal(err)
	}
}

func TestConfig(t *testing.T) {
	cfg := modeltest.FixtureConfigs()["qwen3"]
	cfg.Type = kernels.F16
	m, _ := modeltest.LoadFixture(t, cfg)
	c := m.Config
	if c.Arch != "qwen3" || c.HeadDim != 64 || c.ValueDim != 64 || c.Heads != 8 || c.KVHeads != 4 ||
		c.Vocab != 64 || !c.TiedOutput || !c.RopeNeox || c.RopeDim != 64 || c.RopeBase != 1e6 {
		t.Errorf("config %+v", c)
	}
	lm := m.Network().(*llama.Model)
	if lm.Output != lm.TokEmbd || lm.Layers[1].QNorm == nil || lm.Layers[0].QBias != nil {
		t.Errorf("tensors not wired as expected")
	}
	cfg = modeltest.FixtureConfigs()["llama"]
	cfg.Type = kernels.Q4_K
	m, _ = modeltest.LoadFixture(t, cfg)
	c = m.Config
	if c.RopeNeox || c.TiedOutput || c.RopeScaling != "linear" || c.RopeScale != 2 || m.Network().(*llama.Model).RopeFreqs == nil || c.KVHeads != 2 {
		t.Errorf("config %+v", c)
	}
}

// Hidden gives every token's final normed state, as the float64 reference
// computes it, in chunks and alongside logits alike.
func TestHiddenStates(t *testing.T) {
	for _, name := range []string{"llama", "qwen3"} {
		t.Run(name, func(t *testing.T) {
			cfg := modeltest.FixtureConfigs()[name]
			cfg.Type = kernels.F32
			m, f := modeltest.LoadFixture(t, cfg)
			ref := &modeltest.Ref{Cfg: cfg.WithDefaults(), F: f, Neox: cfg.Arch != "llama"}
			ref.Logits(t, modeltest.FixtureTokens)
			E := m.Config.Embd
			cache := modeltest.NewContiguous(m.Config, 0)
			n := len(modeltest.FixtureTokens)
			first, rest := make([]float32, 5*E), make([]float32, (n-5)*E)
			if err := m.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{{Tokens: modeltest.FixtureTokens[:5], Cache: cache, Hidden: first}}}); err != nil {
				t.Fatal(err)
			}
			last := make([]float32, m.Config.Vocab)
			if err := m.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{{Tokens: modeltest.FixtureTokens[5:], Pos: 5, Cache: cache, Hidden: rest, Logits: last}}}); err != nil {
				t.Fatal(err)
			}
			got := append(first, rest...)
			var worst float64
			for i := range n {
				for d := range E {
					worst = math.Max(worst, math.Abs(float64(got[i*E+d])-ref.HiddenStates[i][d]))
				}
			}
			if worst > 1e-4 {
				t.Errorf("largest difference from the reference hidden states: %g", worst)
			}
			if err := m.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{{Tokens: modeltest.FixtureTokens[:2], Cache: modeltest.NewContiguous(m.Config, 0), Hidden: make([]float32, E)}}}); err == nil {
				t.Error("a Hidden buffer of the wrong length was accepted")
			}
		})
	}
}
