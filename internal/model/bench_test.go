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
	cfg := fixtureConfigs()["qwen3"]
	cfg.Type = kernels.Q8_0
	m, _ := loadFixture(t, cfg)
	pool := kernels.NewPool(2)
	defer pool.Close()
	cache := newContiguous(m.Config, 32)
	logits := make([]float32, m.Config.Vocab)
	seq := &SeqInput{Tokens: []int32{3}, Cache: cache, Logits: logits}
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
}
