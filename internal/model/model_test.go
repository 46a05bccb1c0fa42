package model

import (
	"math"
	"slices"
	"testing"

	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/model/llama"
	"mistralrs/internal/model/nn"
)

// maxDiff returns max |got-want| and max |want|.
func maxDiff(got []float32, want []float64) (diff, scale float64) {
	for i, w := range want {
		diff = math.Max(diff, math.Abs(float64(got[i])-w))
		scale = math.Max(scale, math.Abs(w))
	}
	return diff, scale
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

var fixtureTokens = []int32{1, 17, 5, 33, 60, 2, 9, 41, 12, 0}

// TestForwardMatchesReference compares prefill and decode logits with the
// float64 oracle for every architecture and weight type.
func TestForwardMatchesReference(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	for name, cfg := range fixtureConfigs() {
		for _, typ := range allTypes {
			// -short and -race (which checks the model code, not the kernels) take a few types.
			if (testing.Short() || raceEnabled) && typ != kernels.F32 && typ != kernels.Q4_K && typ != kernels.Q8_0 {
				continue
			}
			t.Run(name+"/"+typ.String(), func(t *testing.T) {
				cfg.Type = typ
				m, f := loadFixture(t, cfg)
				ref := &refModel{cfg: cfg.WithDefaults(), f: f, neox: cfg.Arch != "llama"}
				want := ref.logits(t, fixtureTokens)
				V := m.Config.Vocab
				tol := tolerance(typ)
				var worst float64
				defer func() { t.Logf("max |diff|/max(1,max |logit|) = %.3g (tolerance %.3g)", worst, tol) }()
				check := func(what string, pos int, got []float32) {
					t.Helper()
					d, s := maxDiff(got, want[pos])
					worst = math.Max(worst, d/math.Max(s, 1))
					if d > tol*math.Max(s, 1) {
						t.Errorf("%s at position %d: max |diff| %.3g (max |logit| %.3g), tolerance %.3g", what, pos, d, s, tol*math.Max(s, 1))
					}
				}
				cache := newContiguous(m.Config, 0)
				const prefill = 6
				all := make([]float32, prefill*V)
				last := make([]float32, V)
				err := m.Forward(pool, &Batch{Seqs: []*SeqInput{{Tokens: fixtureTokens[:prefill], Cache: cache, AllLogits: all, Logits: last}}})
				if err != nil {
					t.Fatal(err)
				}
				for i := range prefill {
					check("prefill", i, all[i*V:(i+1)*V])
				}
				if !slices.Equal(last, all[(prefill-1)*V:]) {
					t.Errorf("Logits differ from the last row of AllLogits")
				}
				for pos := prefill; pos < len(fixtureTokens); pos++ {
					err := m.Forward(pool, &Batch{Seqs: []*SeqInput{{Tokens: fixtureTokens[pos : pos+1], Pos: pos, Cache: cache, Logits: last}}})
					if err != nil {
						t.Fatal(err)
					}
					check("decode", pos, last)
				}
				if cache.Len() != len(fixtureTokens) {
					t.Errorf("cache holds %d positions, want %d", cache.Len(), len(fixtureTokens))
				}
			})
		}
	}
}

// newContiguous is a float32 contiguous cache of n positions (n <= 0: the
// context length) for a model of configuration cfg.
func newContiguous(cfg Config, n int) *kvcache.ContiguousCache {
	if n <= 0 {
		n = cfg.ContextLen
	}
	return kvcache.NewContiguousCache(cfg.KVShape(), n, false)
}

// newContiguousF16 is newContiguous storing halves.
func newContiguousF16(cfg Config, n int) *kvcache.ContiguousCache {
	if n <= 0 {
		n = cfg.ContextLen
	}
	return kvcache.NewContiguousCache(cfg.KVShape(), n, true)
}

// newTestCache makes the caches of runBatched (tests switch it to F16).
var newTestCache = func(cfg Config, n int) KVCache { return newContiguous(cfg, n) }

// run feeds steps of tokens for one or more sequences and returns the last
// logits of each sequence after each step.
type seqRun struct {
	tokens []int32
	steps  []int // tokens per step (0: sequence idle in that step)
}

func runBatched(t *testing.T, m *Model, p *kernels.Pool, runs []seqRun, together bool) [][][]float32 {
	t.Helper()
	V := m.Config.Vocab
	out := make([][][]float32, len(runs))
	caches := make([]KVCache, len(runs))
	pos := make([]int, len(runs))
	for i := range runs {
		caches[i] = newTestCache(m.Config, 64)
	}
	nsteps := len(runs[0].steps)
	for s := range nsteps {
		var b Batch
		for i, r := range runs {
			n := r.steps[s]
			if n == 0 {
				continue
			}
			in := &SeqInput{Tokens: r.tokens[pos[i] : pos[i]+n], Pos: pos[i], Cache: caches[i], Logits: make([]float32, V)}
			out[i] = append(out[i], in.Logits)
			pos[i] += n
			if together {
				b.Seqs = append(b.Seqs, in)
			} else if err := m.Forward(p, &Batch{Seqs: []*SeqInput{in}}); err != nil {
				t.Fatal(err)
			}
		}
		if together {
			if err := m.Forward(p, &b); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// TestBatchMatchesSingle checks that sequences of different lengths in one
// batch (prefill next to decode) get the logits they get alone.
func TestBatchMatchesSingle(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, typ := range []kernels.Type{kernels.F32, kernels.Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			cfg := fixtureConfigs()["qwen2"]
			cfg.Type = typ
			m, _ := loadFixture(t, cfg)
			runs := []seqRun{
				{tokens: []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37}, steps: []int{7, 1, 1, 1}},
				{tokens: []int32{2, 4, 6, 8, 10, 12, 14}, steps: []int{3, 2, 1, 1}},
				{tokens: []int32{3, 6, 9}, steps: []int{0, 0, 2, 1}},
			}
			alone := runBatched(t, m, pool, runs, false)
			batched := runBatched(t, m, pool, runs, true)
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
	runs := []seqRun{
		{tokens: []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49}, steps: []int{3, 1, 9}},
		{tokens: []int32{2, 4, 6, 8, 10, 12, 14}, steps: []int{3, 2, 2}},
		{tokens: []int32{3, 6, 9, 12, 15, 18}, steps: []int{0, 5, 1}},
	}
	for _, name := range []string{"llama", "llama-tied", "qwen3"} {
		t.Run(name, func(t *testing.T) {
			cfg := fixtureConfigs()[name]
			cfg.Type = kernels.F32
			m, _ := loadFixture(t, cfg)
			defer func(was int) { nn.AttnGroupMax = was }(nn.AttnGroupMax)
			nn.AttnGroupMax = 1
			alone := runBatched(t, m, pool, runs, true)
			for _, size := range []int{4, 6, 16} {
				nn.AttnGroupMax = size
				grouped := runBatched(t, m, pool, runs, true)
				// The last step had groups of four or more (the shared path ran).
				most := m.st.LargestGroup()
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
	runs := []seqRun{
		{tokens: []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49}, steps: []int{3, 1, 9}},
		{tokens: []int32{2, 4, 6, 8, 10, 12, 14}, steps: []int{3, 2, 2}},
	}
	for _, name := range []string{"llama", "qwen3"} {
		t.Run(name, func(t *testing.T) {
			cfg := fixtureConfigs()[name]
			cfg.Type = kernels.F32
			m, _ := loadFixture(t, cfg)
			f32 := runBatched(t, m, pool, runs, true)
			defer func() { newTestCache = func(cfg Config, n int) KVCache { return newContiguous(cfg, n) } }()
			newTestCache = func(cfg Config, n int) KVCache { return newContiguousF16(cfg, n) }
			defer func(was int) { nn.AttnGroupMax = was }(nn.AttnGroupMax)
			nn.AttnGroupMax = 1
			alone := runBatched(t, m, pool, runs, true)
			nn.AttnGroupMax = 16
			grouped := runBatched(t, m, pool, runs, true)
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
	cfg := fixtureConfigs()["llama"]
	cfg.Type = kernels.F32
	m, _ := loadFixture(t, cfg)
	V := m.Config.Vocab
	cache := newContiguous(m.Config, 0)
	got, want := make([]float32, V), make([]float32, V)
	if err := m.Forward(nil, &Batch{Seqs: []*SeqInput{{Tokens: []int32{1, 2, 3, 4, 5, 6}, Cache: cache}}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(nil, &Batch{Seqs: []*SeqInput{{Tokens: []int32{7, 8}, Pos: 3, Cache: cache, Logits: got}}}); err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 5 {
		t.Errorf("cache length %d after rewinding to 3 and adding 2", cache.Len())
	}
	fresh := newContiguous(m.Config, 0)
	if err := m.Forward(nil, &Batch{Seqs: []*SeqInput{{Tokens: []int32{1, 2, 3, 7, 8}, Cache: fresh, Logits: want}}}); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-5 {
			t.Fatalf("logit %d: rewound cache %v, fresh %v", i, got[i], want[i])
		}
	}
}

func TestForwardErrors(t *testing.T) {
	cfg := fixtureConfigs()["llama-tied"]
	cfg.Type = kernels.Q8_0
	m, _ := loadFixture(t, cfg)
	V := m.Config.Vocab
	c := newContiguous(m.Config, 8)
	shared := newContiguous(m.Config, 8)
	cases := map[string]*Batch{
		"empty batch":      {},
		"no tokens":        {Seqs: []*SeqInput{{Cache: c}}},
		"no cache":         {Seqs: []*SeqInput{{Tokens: []int32{1}}}},
		"gap":              {Seqs: []*SeqInput{{Tokens: []int32{1}, Pos: 1, Cache: c}}},
		"token range":      {Seqs: []*SeqInput{{Tokens: []int32{int32(V)}, Cache: c}}},
		"negative token":   {Seqs: []*SeqInput{{Tokens: []int32{-1}, Cache: c}}},
		"logits length":    {Seqs: []*SeqInput{{Tokens: []int32{1}, Cache: c, Logits: make([]float32, V-1)}}},
		"alllogits length": {Seqs: []*SeqInput{{Tokens: []int32{1, 2}, Cache: c, AllLogits: make([]float32, V)}}},
		"shared cache":     {Seqs: []*SeqInput{{Tokens: []int32{1}, Cache: shared}, {Tokens: []int32{1}, Cache: shared}}},
		"cache full":       {Seqs: []*SeqInput{{Tokens: make([]int32, 9), Cache: c}}},
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
	if err := m.Forward(nil, &Batch{Seqs: []*SeqInput{{Tokens: []int32{1, 2}, Cache: c}}}); err != nil {
		t.Fatal(err)
	}
}

func TestConfig(t *testing.T) {
	cfg := fixtureConfigs()["qwen3"]
	cfg.Type = kernels.F16
	m, _ := loadFixture(t, cfg)
	c := m.Config
	if c.Arch != "qwen3" || c.HeadDim != 64 || c.ValueDim != 64 || c.Heads != 8 || c.KVHeads != 4 ||
		c.Vocab != 64 || !c.TiedOutput || !c.RopeNeox || c.RopeDim != 64 || c.RopeBase != 1e6 {
		t.Errorf("config %+v", c)
	}
	lm := m.net.(*llama.Model)
	if lm.Output != lm.TokEmbd || lm.Layers[1].QNorm == nil || lm.Layers[0].QBias != nil {
		t.Errorf("tensors not wired as expected")
	}
	cfg = fixtureConfigs()["llama"]
	cfg.Type = kernels.Q4_K
	m, _ = loadFixture(t, cfg)
	c = m.Config
	if c.RopeNeox || c.TiedOutput || c.RopeScaling != "linear" || c.RopeScale != 2 || m.net.(*llama.Model).RopeFreqs == nil || c.KVHeads != 2 {
		t.Errorf("config %+v", c)
	}
}

// Hidden gives every token's final normed state, as the float64 reference
// computes it, in chunks and alongside logits alike.
func TestHiddenStates(t *testing.T) {
	for _, name := range []string{"llama", "qwen3"} {
		t.Run(name, func(t *testing.T) {
			cfg := fixtureConfigs()[name]
			cfg.Type = kernels.F32
			m, f := loadFixture(t, cfg)
			ref := &refModel{cfg: cfg.WithDefaults(), f: f, neox: cfg.Arch != "llama"}
			ref.logits(t, fixtureTokens)
			E := m.Config.Embd
			cache := newContiguous(m.Config, 0)
			n := len(fixtureTokens)
			first, rest := make([]float32, 5*E), make([]float32, (n-5)*E)
			if err := m.Forward(nil, &Batch{Seqs: []*SeqInput{{Tokens: fixtureTokens[:5], Cache: cache, Hidden: first}}}); err != nil {
				t.Fatal(err)
			}
			last := make([]float32, m.Config.Vocab)
			if err := m.Forward(nil, &Batch{Seqs: []*SeqInput{{Tokens: fixtureTokens[5:], Pos: 5, Cache: cache, Hidden: rest, Logits: last}}}); err != nil {
				t.Fatal(err)
			}
			got := append(first, rest...)
			var worst float64
			for i := range n {
				for d := range E {
					worst = math.Max(worst, math.Abs(float64(got[i*E+d])-ref.hiddenStates[i][d]))
				}
			}
			if worst > 1e-4 {
				t.Errorf("largest difference from the reference hidden states: %g", worst)
			}
			if err := m.Forward(nil, &Batch{Seqs: []*SeqInput{{Tokens: fixtureTokens[:2], Cache: newContiguous(m.Config, 0), Hidden: make([]float32, E)}}}); err == nil {
				t.Error("a Hidden buffer of the wrong length was accepted")
			}
		})
	}
}
