package engine_test

import (
	"context"
	"math"
	"testing"

	"mistralrs/internal/demo"
	"mistralrs/internal/engine"
	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
)

func f32Model(t *testing.T, pooling int) *loader.Model {
	t.Helper()
	w, err := demo.RandomModel(model.RandomConfig{Arch: "qwen3", Layers: 2, Embd: 128, FF: 256, Heads: 4, KVHeads: 2,
		Vocab: 300, ContextLen: 512, Type: kernels.F32, Seed: 5, PoolingType: pooling})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytesBuffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("embed", buf.b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := loader.FromFile(f, loader.Options{ID: "embed"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// refEmbedding pools the hidden states of one forward pass over the whole
// prompt in float64 and normalises.
func refEmbedding(t *testing.T, m *loader.Model, prompt []int32, pooling string) []float64 {
	t.Helper()
	c := m.Net.Config
	E := c.Embd
	h := make([]float32, len(prompt)*E)
	cache := kvcache.NewContiguousCache(c.KVShape(), len(prompt), false)
	if err := m.Net.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{{Tokens: prompt, Cache: cache, Hidden: h}}}); err != nil {
		t.Fatal(err)
	}
	v := make([]float64, E)
	switch pooling {
	case "mean":
		for i := range prompt {
			for d := range E {
				v[d] += float64(h[i*E+d]) / float64(len(prompt))
			}
		}
	case "cls":
		for d := range E {
			v[d] = float64(h[d])
		}
	case "last":
		for d := range E {
			v[d] = float64(h[(len(prompt)-1)*E+d])
		}
	}
	var n float64
	for _, x := range v {
		n += x * x
	}
	for d := range v {
		v[d] /= math.Sqrt(n)
	}
	return v
}

// Embeddings pool the final hidden states as the model's pooling type says
// and are L2-normalised; several inputs batched, in chunks, give what each
// gives alone.
func TestEmbed(t *testing.T) {
	prompts := [][]int32{promptOf(40), promptOf(7), promptOf(90)[3:], {5}}
	for pt, pooling := range map[int]string{0: "mean", 2: "cls", 3: "last"} {
		t.Run(pooling, func(t *testing.T) {
			m := f32Model(t, pt)
			if m.Net.Config.Pooling != pooling {
				t.Fatalf("pooling %q, want %q", m.Net.Config.Pooling, pooling)
			}
			for _, budget := range []int{4096, 16} { // 16: chunked prompts
				e, rec := newEngine(t, m, opts(func(o *engine.Options) { o.MaxNumBatchedTokens = budget }))
				got, err := e.Embed(context.Background(), prompts)
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range prompts {
					want := refEmbedding(t, m, p, pooling)
					var worst, norm float64
					for d, w := range want {
						worst = math.Max(worst, math.Abs(float64(got[i][d])-w))
						norm += float64(got[i][d]) * float64(got[i][d])
					}
					if worst > 1e-5 || math.Abs(norm-1) > 1e-5 {
						t.Errorf("budget %d, input %d: largest difference %g, squared norm %g", budget, i, worst, norm)
					}
				}
				rec.mu.Lock()
				if rec.blocksUsed != 0 || rec.completed["length"] != len(prompts) || rec.lookups != 0 {
					t.Errorf("blocks used %d, completed %v, lookups %d; want 0, all length (as mistral.rs), 0", rec.blocksUsed, rec.completed, rec.lookups)
				}
				rec.mu.Unlock()
			}
		})
	}
	m := f32Model(t, 0)
	e, _ := newEngine(t, m, opts(nil))
	for name, in := range map[string][][]int32{"none": nil, "empty input": {{}}, "token range": {{1, 300}}} {
		if _, err := e.Embed(context.Background(), in); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	rank := f32Model(t, 4)
	er, _ := newEngine(t, rank, opts(nil))
	if _, err := er.Embed(context.Background(), prompts[:1]); err == nil {
		t.Error("rank pooling made an embedding")
	}
}
