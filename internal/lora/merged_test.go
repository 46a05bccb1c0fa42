package lora_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/lora"
	"mistralrs/internal/model"
	"mistralrs/internal/model/modeltest"
)

func TestMain(m *testing.M) { modeltest.Main(m) }

// randomPair is a random adapter pair for a weight [in, out].
type randomPair struct {
	target  string
	in, out int
	a, b    []float32 // r × in, out × r
}

// writeAdapter writes a GGUF LoRA adapter of rank r and alpha for arch.
func writeAdapter(t testing.TB, arch string, alpha float32, r int, pairs []randomPair) string {
	t.Helper()
	w := gguf.NewWriter()
	w.AddKV("general.architecture", arch)
	w.AddKV("general.type", "adapter")
	w.AddKV("adapter.type", "lora")
	w.AddKV("adapter.lora.alpha", alpha)
	for _, p := range pairs {
		if err := w.AddTensorF32(p.target+".lora_a", kernels.F32, []uint64{uint64(p.in), uint64(r)}, p.a); err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensorF32(p.target+".lora_b", kernels.F32, []uint64{uint64(r), uint64(p.out)}, p.b); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "adapter.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// merge returns the F32 weights of f with f·B·A added to each target.
func merge(t *testing.T, f *gguf.File, pairs []randomPair, r int, factor float32) map[string]*gguf.TensorInfo {
	t.Helper()
	out := map[string]*gguf.TensorInfo{}
	for _, p := range pairs {
		ti, ok := f.Tensor(p.target)
		if !ok || ti.Type != kernels.F32 {
			t.Fatalf("no F32 tensor %s", p.target)
		}
		w := make([]float32, p.in*p.out)
		copy(w, unsafe.Slice((*float32)(unsafe.Pointer(&ti.Data[0])), len(w)))
		for o := range p.out {
			for i := range p.in {
				var d float64
				for k := range r {
					d += float64(p.b[o*r+k]) * float64(p.a[k*p.in+i])
				}
				w[o*p.in+i] += float32(float64(factor) * d)
			}
		}
		data := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w))
		out[p.target] = &gguf.TensorInfo{Name: p.target, Dims: ti.Dims, Type: kernels.F32, Data: data}
	}
	return out
}

// An adapter on every kind of product (q, k, v and output; phi3's fused
// qkv and gate|up; the MoE router and shared expert; the output matrix)
// gives the logits of the model with B·A merged into its weights, in a
// prefill and decode steps; on a Q4_K base the adapter loads and changes
// the logits (nn's TestLoRAProducts checks the terms on a Q4_K product
// exactly: a merged Q4_K model would quantize the merged weights).
func TestMergedEquivalence(t *testing.T) {
	cases := []struct {
		name    string
		cfg     model.RandomConfig
		targets []string // without the "blk.N." of layer 1, or whole names
	}{
		{"llama", model.RandomConfig{Arch: "llama", Layers: 2, Embd: 256, FF: 512, Heads: 8, KVHeads: 2, Vocab: 96, Seed: 1},
			[]string{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_down", "output.weight"}},
		{"qwen2moe", model.RandomConfig{Arch: "qwen2moe", Layers: 2, Embd: 256, FF: 256, Heads: 4, KVHeads: 2, Vocab: 64,
			Experts: 4, ExpertUsed: 2, ExpertFF: 256, Seed: 29},
			[]string{"ffn_gate_inp", "ffn_up_shexp", "ffn_down_shexp", "attn_v"}},
		{"phi3", model.RandomConfig{Arch: "phi3", Layers: 2, Embd: 256, FF: 256, Heads: 4, KVHeads: 2, Vocab: 96, Seed: 11},
			[]string{"attn_qkv", "ffn_up", "attn_output"}},
		{"gemma3", model.RandomConfig{Arch: "gemma3", Layers: 2, Embd: 256, FF: 512, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 96, Seed: 5},
			[]string{"attn_q", "ffn_gate", "ffn_down"}},
	}
	const r, alpha, scale = 4, 8, 0.75
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Type = kernels.F32
			m, f := modeltest.LoadFixture(t, c.cfg)
			rng := rand.New(rand.NewPCG(uint64(c.cfg.Seed), 9))
			var pairs []randomPair
			for _, tg := range c.targets {
				name := tg
				if !strings.HasSuffix(tg, ".weight") {
					name = "blk.1." + tg + ".weight"
				}
				w, ok := m.Weight(name)
				if !ok {
					t.Fatalf("no weight %s", name)
				}
				p := randomPair{target: name, in: w.Cols, out: w.Rows, a: make([]float32, r*w.Cols), b: make([]float32, w.Rows*r)}
				for i := range p.a {
					p.a[i] = float32(rng.NormFloat64() / math.Sqrt(float64(w.Cols)))
				}
				for i := range p.b {
					p.b[i] = float32(rng.NormFloat64() * 0.05)
				}
				pairs = append(pairs, p)
			}
			ad, err := lora.Load(writeAdapter(t, c.cfg.Arch, alpha, r, pairs), m, lora.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			mf := modeltest.Rewrite(t, f, modeltest.Edit{Tensors: merge(t, f, pairs, r, scale*alpha/r)})
			merged, err := model.Load(mf)
			if err != nil {
				t.Fatal(err)
			}
			got := decode(t, m, []model.Active{{Adapter: ad.Net, Scale: scale}})
			want := decode(t, merged, nil)
			base := decode(t, m, nil)
			for s := range want {
				if d := maxDiff(got[s], want[s]); d > 2e-4 {
					t.Errorf("step %d: adapter and merged weights differ by %.3g", s, d)
				}
			}
			if d := maxDiff(got[0], base[0]); d < 1e-3 {
				t.Errorf("the adapter changes the logits by only %.3g", d)
			}
			mixedLogitRows(t, m, merged, ad, scale)

			// The same adapter on the Q4_K model.
			c.cfg.Type = kernels.Q4_K
			mq, _ := modeltest.LoadFixture(t, c.cfg)
			adq, err := lora.Load(writeAdapter(t, c.cfg.Arch, alpha, r, pairs), mq, lora.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			gq, bq := decode(t, mq, []model.Active{{Adapter: adq.Net, Scale: scale}}), decode(t, mq, nil)
			if d := maxDiff(gq[0], bq[0]); d < 1e-3 {
				t.Errorf("Q4_K: the adapter changes the logits by only %.3g", d)
			}
		})
	}
}

// decode runs a short prompt and three decode steps, the logits of each.
func decode(t *testing.T, m *model.Model, act []model.Active) [][]float32 {
	t.Helper()
	cache := modeltest.NewContiguous(m.Config, 16)
	toks := []int32{1, 5, 9, 13, 2}
	var out [][]float32
	for range 4 {
		logits := make([]float32, m.Config.Vocab)
		in := &model.SeqInput{Tokens: toks, Pos: cache.Len(), Cache: cache, Logits: logits, LoRA: act}
		if err := m.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
			t.Fatal(err)
		}
		out = append(out, logits)
		toks = []int32{int32(len(out)*7) % int32(m.Config.Vocab)}
	}
	return out
}

// Expert tensors (3-D) are not adaptable: refused naming the tensor.
func TestExpertsRefused(t *testing.T) {
	cfg := model.RandomConfig{Arch: "qwen2moe", Layers: 2, Embd: 256, FF: 256, Heads: 4, KVHeads: 2, Vocab: 64,
		Experts: 4, ExpertUsed: 2, ExpertFF: 256, Seed: 29, Type: kernels.F32}
	m, _ := modeltest.LoadFixture(t, cfg)
	p := randomPair{target: "blk.0.ffn_up_exps.weight", in: 256, out: 256, a: make([]float32, 2*256), b: make([]float32, 256*2)}
	path := writeAdapter(t, "qwen2moe", 0, 2, []randomPair{p})
	_, err := lora.Load(path, m, lora.Limits{})
	if err == nil || !strings.Contains(err.Error(), "blk.0.ffn_up_exps.weight.lora_a") || !strings.Contains(err.Error(), path) {
		t.Fatalf("an adapter of expert tensors: %v", err)
	}
}

// mixedLogitRows: in one batch, a base sequence wanting its last logits,
// an adapted one wanting every token's (as speculative verification does)
// and a base one wanting every token's, each gets what it gets alone (the
// adapted one: the merged model's), the output adapter's terms landing on
// the adapted sequence's logit rows only.
func mixedLogitRows(t *testing.T, m, merged *model.Model, ad *lora.Adapter, scale float32) {
	t.Helper()
	V := m.Config.Vocab
	toks := [][]int32{{3, 1, 4}, {1, 5, 9, 2}, {6, 5}}
	all := func(mm *model.Model, i int, act []model.Active, last bool) []float32 {
		in := &model.SeqInput{Tokens: toks[i], Cache: modeltest.NewContiguous(mm.Config, 8), LoRA: act}
		if last {
			in.Logits = make([]float32, V)
		} else {
			in.AllLogits = make([]float32, len(toks[i])*V)
		}
		if err := mm.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
			t.Fatal(err)
		}
		if last {
			return in.Logits
		}
		return in.AllLogits
	}
	want := [][]float32{all(m, 0, nil, true), all(merged, 1, nil, false), all(m, 2, nil, false)}
	b := &model.Batch{Seqs: []*model.SeqInput{
		{Tokens: toks[0], Cache: modeltest.NewContiguous(m.Config, 8), Logits: make([]float32, V)},
		{Tokens: toks[1], Cache: modeltest.NewContiguous(m.Config, 8), AllLogits: make([]float32, len(toks[1])*V), LoRA: []model.Active{{Adapter: ad.Net, Scale: scale}}},
		{Tokens: toks[2], Cache: modeltest.NewContiguous(m.Config, 8), AllLogits: make([]float32, len(toks[2])*V)},
	}}
	if err := m.Forward(nil, b); err != nil {
		t.Fatal(err)
	}
	got := [][]float32{b.Seqs[0].Logits, b.Seqs[1].AllLogits, b.Seqs[2].AllLogits}
	for i := range got {
		if d := maxDiff(got[i], want[i]); d > 2e-4 {
			t.Errorf("mixed batch, sequence %d: logits differ from its own run by %.3g", i, d)
		}
	}
}
