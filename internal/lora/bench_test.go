package lora_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"mistralrs/internal/kernels"
	"mistralrs/internal/lora"
	"mistralrs/internal/model"
	"mistralrs/internal/model/modeltest"
)

// BenchmarkDecode16 is one decode step of 16 sequences of a Q8_0 model:
// all on the base, and spread over 4 rank-16 adapters of the seven
// projections of every layer and the base (3 sequences each, the base 4),
// interleaved so that each adapter's rows are gathered. One thread: the
// ratio of the two does not then depend on how busy a shared machine's
// other cores are.
func BenchmarkDecode16(b *testing.B) {
	cfg := model.RandomConfig{Arch: "llama", Layers: 4, Embd: 1024, FF: 2816, Heads: 16, KVHeads: 4, Vocab: 4096, Seed: 3, Type: kernels.Q8_0}
	m, _ := modeltest.LoadFixture(b, cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	var ads []*lora.Adapter
	for range 4 {
		var pairs []randomPair
		for l := range cfg.Layers {
			for _, tg := range []string{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"} {
				name := fmt.Sprintf("blk.%d.%s.weight", l, tg)
				w, _ := m.Weight(name)
				p := randomPair{target: name, in: w.Cols, out: w.Rows, a: make([]float32, 16*w.Cols), b: make([]float32, w.Rows*16)}
				for i := range p.a {
					p.a[i] = float32(rng.NormFloat64()) * 0.03
				}
				for i := range p.b {
					p.b[i] = float32(rng.NormFloat64()) * 0.01
				}
				pairs = append(pairs, p)
			}
		}
		ad, err := lora.Load(writeAdapter(b, "llama", 32, 16, pairs), m, lora.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		ads = append(ads, ad)
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	for _, mode := range []string{"base", "4-adapters"} {
		b.Run(mode, func(b *testing.B) {
			batch := &model.Batch{}
			for i := range 16 {
				sq := &model.SeqInput{Tokens: []int32{1}, Cache: modeltest.NewContiguous(m.Config, 8), Logits: make([]float32, m.Config.Vocab)}
				if mode != "base" && i%5 != 4 {
					sq.LoRA = []model.Active{{Adapter: ads[i%5].Net, Scale: 1}}
				}
				batch.Seqs = append(batch.Seqs, sq)
			}
			for b.Loop() {
				if err := m.Forward(pool, batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
