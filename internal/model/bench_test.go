package model

import (
	"testing"

	"mistralrs/internal/kernels"
)

// benchConfig is a small llama (about 10M weights).
var benchConfig = RandomConfig{Arch: "llama", Layers: 4, Embd: 512, FF: 1536, Heads: 8, KVHeads: 4,
	Vocab: 2048, Type: kernels.Q8_0, Seed: 7}

func benchModel(b *testing.B, typ kernels.Type) *Model {
	cfg := benchConfig
	cfg.Type = typ
	m, _ := loadFixture(b, cfg)
	return m
}

func BenchmarkDecode(b *testing.B) {
	for _, typ := range []kernels.Type{kernels.Q8_0, kernels.Q4_K, kernels.F16} {
		b.Run(typ.String(), func(b *testing.B) {
			m := benchModel(b, typ)
			pool := kernels.NewPool(0)
			defer pool.Close()
			const ctx = 128
			cache := newContiguous(m.Config, ctx)
			logits := make([]float32, m.Config.Vocab)
			prompt := make([]int32, ctx/2)
			if err := m.Forward(pool, &Batch{Seqs: []*SeqInput{{Tokens: prompt, Cache: cache}}}); err != nil {
				b.Fatal(err)
			}
			seq := &SeqInput{Tokens: []int32{1}, Cache: cache, Logits: logits}
			batch := &Batch{Seqs: []*SeqInput{seq}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				seq.Pos = ctx/2 + i%(ctx/2) // rewind rather than fill the cache
				if err := m.Forward(pool, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

func BenchmarkPrefill(b *testing.B) {
	for _, typ := range []kernels.Type{kernels.Q8_0, kernels.Q4_K} {
		b.Run(typ.String(), func(b *testing.B) {
			m := benchModel(b, typ)
			pool := kernels.NewPool(0)
			defer pool.Close()
			const n = 128
			cache := newContiguous(m.Config, n)
			prompt := make([]int32, n)
			for i := range prompt {
				prompt[i] = int32(i * 7 % m.Config.Vocab)
			}
			logits := make([]float32, m.Config.Vocab)
			batch := &Batch{Seqs: []*SeqInput{{Tokens: prompt, Cache: cache, Logits: logits}}}
			if err := m.Forward(pool, batch); err != nil { // sizes the scratch and the cache
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := m.Forward(pool, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// TestDecodeAllocs checks that a steady-state decode step does not allocate
// in the model code (kernels.MatMul and the pool are measured with it).
func TestDecodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	families := map[string]RandomConfig{
		"qwen3":    fixtureConfigs()["qwen3"],
		"phi3":     phi3Configs()["phi3-partial-long"],
		"qwen3moe": moeFixture,
		"gemma3":   gemma3Fixtures()["gemma3"],
	}
	for name, cfg := range families {
		t.Run(name, func(t *testing.T) {
			cfg.Type = kernels.Q8_0
			m, _ := loadFixture(t, cfg)
			pool := kernels.NewPool(2)
			defer pool.Close()
			seq := &SeqInput{Tokens: []int32{3}, Cache: newContiguous(m.Config, 32), Logits: make([]float32, m.Config.Vocab)}
			batch := &Batch{Seqs: []*SeqInput{seq}}
			for i := range 8 {
				seq.Pos = i
				if err := m.Forward(pool, batch); err != nil {
					t.Fatal(err)
				}
			}
			allocs := testing.AllocsPerRun(20, func() {
				seq.Pos = 7
				if err := m.Forward(pool, batch); err != nil {
					t.Fatal(err)
				}
			})
			if allocs > 0 {
				t.Errorf("decode step allocates %v times", allocs)
			}
		})
	}
}

// BenchmarkFamilies measures each architecture on a model of the shape
// `gen-model` writes (12 layers, 768 wide, Q8_0): pp64 (a 64-token
// prompt) and tg32 (32 decode steps after it), in tokens/s on a pool of
// all threads (run with -cpu or GOMAXPROCS to pick). The qwen3moe model
// has 8 experts of width 1024 with 2 used per token: the same active MLP
// width as the dense models' 2048.
func BenchmarkFamilies(b *testing.B) {
	base := RandomConfig{Layers: 12, Embd: 768, FF: 2048, Heads: 12, KVHeads: 4, HeadDim: 64, Vocab: 32000,
		ContextLen: 4096, Type: kernels.Q8_0, Seed: 5}
	families := []RandomConfig{
		{Arch: "llama"},
		{Arch: "qwen3"},
		{Arch: "gemma3", SlidingWindow: 512},
		{Arch: "phi3"},
		{Arch: "qwen3moe", Experts: 8, ExpertUsed: 2, ExpertFF: 1024},
	}
	for _, f := range families {
		cfg := base
		cfg.Arch, cfg.SlidingWindow = f.Arch, f.SlidingWindow
		cfg.Experts, cfg.ExpertUsed, cfg.ExpertFF = f.Experts, f.ExpertUsed, f.ExpertFF
		b.Run(f.Arch, func(b *testing.B) {
			m, _ := loadFixture(b, cfg)
			pool := kernels.NewPool(0)
			defer pool.Close()
			cache := newContiguous(m.Config, 128)
			logits := make([]float32, m.Config.Vocab)
			prompt := make([]int32, 64)
			for i := range prompt {
				prompt[i] = int32(i * 97 % m.Config.Vocab)
			}
			prefill := &Batch{Seqs: []*SeqInput{{Tokens: prompt, Cache: cache, Logits: logits}}}
			b.Run("pp64", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := m.Forward(pool, prefill); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*len(prompt))/b.Elapsed().Seconds(), "tok/s")
			})
			b.Run("tg32", func(b *testing.B) {
				seq := &SeqInput{Tokens: []int32{1}, Cache: cache, Logits: logits}
				step := &Batch{Seqs: []*SeqInput{seq}}
				for i := 0; i < b.N; i++ {
					seq.Pos = 64 + i%32
					if err := m.Forward(pool, step); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			})
		})
	}
}
