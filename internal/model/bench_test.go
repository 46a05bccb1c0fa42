package model_test

import (
	"testing"

	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
	"mistralrs/internal/model/modeltest"
)

// benchConfig is a small llama (about 10M weights).
var benchConfig = model.RandomConfig{Arch: "llama", Layers: 4, Embd: 512, FF: 1536, Heads: 8, KVHeads: 4,
	Vocab: 2048, Type: kernels.Q8_0, Seed: 7}

func benchModel(b *testing.B, typ kernels.Type) *model.Model {
	cfg := benchConfig
	cfg.Type = typ
	m, _ := modeltest.LoadFixture(b, cfg)
	return m
}

func BenchmarkDecode(b *testing.B) {
	for _, typ := range []kernels.Type{kernels.Q8_0, kernels.Q4_K, kernels.F16} {
		b.Run(typ.String(), func(b *testing.B) {
			m := benchModel(b, typ)
			pool := kernels.NewPool(0)
			defer pool.Close()
			const ctx = 128
			cache := modeltest.NewContiguous(m.Config, ctx)
			logits := make([]float32, m.Config.Vocab)
			prompt := make([]int32, ctx/2)
			if err := m.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{{Tokens: prompt, Cache: cache}}}); err != nil {
				b.Fatal(err)
			}
			seq := &model.SeqInput{Tokens: []int32{1}, Cache: cache, Logits: logits}
			batch := &model.Batch{Seqs: []*model.SeqInput{seq}}
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
			cache := modeltest.NewContiguous(m.Config, n)
			prompt := make([]int32, n)
			for i := range prompt {
				prompt[i] = int32(i * 7 % m.Config.Vocab)
			}
			logits := make([]float32, m.Config.Vocab)
			batch := &model.Batch{Seqs: []*model.SeqInput{{Tokens: prompt, Cache: cache, Logits: logits}}}
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
// in the model code (the architecture packages check theirs).
func TestDecodeAllocs(t *testing.T) {
	modeltest.DecodeAllocs(t, modeltest.FixtureConfigs()["qwen3"])
}

// BenchmarkFamilies measures each architecture on a model of the shape
// `gen-model` writes (12 layers, 768 wide, Q8_0): pp64 (a 64-token
// prompt) and tg32 (32 decode steps after it), in tokens/s on a pool of
// all threads (run with -cpu or GOMAXPROCS to pick). The qwen3moe model
// has 8 experts of width 1024 with 2 used per token: the same active MLP
// width as the dense models' 2048.
func BenchmarkFamilies(b *testing.B) {
	base := model.RandomConfig{Layers: 12, Embd: 768, FF: 2048, Heads: 12, KVHeads: 4, HeadDim: 64, Vocab: 32000,
		ContextLen: 4096, Type: kernels.Q8_0, Seed: 5}
	families := []model.RandomConfig{
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
			m, _ := modeltest.LoadFixture(b, cfg)
			pool := kernels.NewPool(0)
			defer pool.Close()
			cache := modeltest.NewContiguous(m.Config, 128)
			logits := make([]float32, m.Config.Vocab)
			prompt := make([]int32, 64)
			for i := range prompt {
				prompt[i] = int32(i * 97 % m.Config.Vocab)
			}
			prefill := &model.Batch{Seqs: []*model.SeqInput{{Tokens: prompt, Cache: cache, Logits: logits}}}
			b.Run("pp64", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := m.Forward(pool, prefill); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*len(prompt))/b.Elapsed().Seconds(), "tok/s")
			})
			b.Run("tg32", func(b *testing.B) {
				seq := &model.SeqInput{Tokens: []int32{1}, Cache: cache, Logits: logits}
				step := &model.Batch{Seqs: []*model.SeqInput{seq}}
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
