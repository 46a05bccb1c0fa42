package model

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// refModel is a plain float64 transformer used as the oracle: every weight
// dequantized up front, naive loops, no cache (each call recomputes the
// whole sequence). Its hyper-parameters come from the fixture's
// RandomConfig, not from Load.
type refModel struct {
	cfg  RandomConfig
	f    *gguf.File
	neox bool

	hiddenStates [][]float64 // of the last logits call: each token's normed final state
}

func (r *refModel) tensor(t testing.TB, name string) []float64 {
	ti, ok := r.f.Tensor(name)
	if !ok {
		t.Fatalf("reference: no tensor %s", name)
	}
	f32 := make([]float32, ti.Elements())
	kernels.Dequantize(ti.Type, ti.Data, f32)
	out := make([]float64, len(f32))
	for i, v := range f32 {
		out[i] = float64(v)
	}
	return out
}

func (r *refModel) maybe(name string) []float64 {
	if _, ok := r.f.Tensor(name); !ok {
		return nil
	}
	return r.tensor(nil, name) // present: no failure possible
}

// matvec returns W x for a GGML [in, out] weight.
func refMatVec(w []float64, x []float64, out int) []float64 {
	in := len(x)
	y := make([]float64, out)
	for o := range out {
		var s float64
		for i := range in {
			s += w[o*in+i] * x[i]
		}
		y[o] = s
	}
	return y
}

func refRMSNorm(x, g []float64, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	sc := 1 / math.Sqrt(ss/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i := range x {
		y[i] = x[i] * sc * g[i]
	}
	return y
}

// rope rotates one head in place.
func (r *refModel) rope(h []float64, pos int, factors []float64) {
	d := len(h)
	for i := 0; i < d/2; i++ {
		theta := float64(pos) * math.Pow(r.cfg.RopeBase, -2*float64(i)/float64(d))
		if factors != nil {
			theta /= factors[i]
		}
		if r.cfg.RopeScale > 1 {
			theta /= r.cfg.RopeScale // linear only in these fixtures
		}
		a, b := 2*i, 2*i+1
		if r.neox {
			a, b = i, i+d/2
		}
		x0, x1 := h[a], h[b]
		h[a] = x0*math.Cos(theta) - x1*math.Sin(theta)
		h[b] = x0*math.Sin(theta) + x1*math.Cos(theta)
	}
}

// logits returns the logits of every position of tokens.
func (r *refModel) logits(t testing.TB, tokens []int32) [][]float64 {
	return r.forward(t, tokens, func(p string) func(h []float64) []float64 {
		wg, wu, wd := r.tensor(t, p+"ffn_gate.weight"), r.tensor(t, p+"ffn_up.weight"), r.tensor(t, p+"ffn_down.weight")
		return func(h []float64) []float64 {
			gg, uu := refMatVec(wg, h, r.cfg.FF), refMatVec(wu, h, r.cfg.FF)
			for d := range gg {
				gg[d] = gg[d] / (1 + math.Exp(-gg[d])) * uu[d]
			}
			return refMatVec(wd, gg, r.cfg.Embd)
		}
	})
}

// forward is the decoder with the feed-forward sub-layer of each block
// given by ffn: called with the block's tensor prefix ("blk.N."), it
// returns what the block adds to a token's residual stream from the
// token's normed stream h.
func (r *refModel) forward(t testing.TB, tokens []int32, ffn func(p string) func(h []float64) []float64) [][]float64 {
	c := r.cfg
	E, hd, V := c.Embd, c.HeadDim, c.Vocab
	kvh := c.KVHeads
	eps := float64(c.RMSEps)
	T := len(tokens)
	emb := r.tensor(t, "token_embd.weight")
	x := make([][]float64, T)
	for i, tok := range tokens {
		x[i] = append([]float64(nil), emb[int(tok)*E:(int(tok)+1)*E]...)
	}
	factors := r.maybe("rope_freqs.weight")
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		wq, wk, wv, wo := r.tensor(t, p+"attn_q.weight"), r.tensor(t, p+"attn_k.weight"), r.tensor(t, p+"attn_v.weight"), r.tensor(t, p+"attn_output.weight")
		bq, bk, bv := r.maybe(p+"attn_q.bias"), r.maybe(p+"attn_k.bias"), r.maybe(p+"attn_v.bias")
		qn, kn := r.maybe(p+"attn_q_norm.weight"), r.maybe(p+"attn_k_norm.weight")
		an, fn := r.tensor(t, p+"attn_norm.weight"), r.tensor(t, p+"ffn_norm.weight")
		ff := ffn(p)
		Q, K, Vv := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		for i := range T {
			h := refRMSNorm(x[i], an, eps)
			Q[i], K[i], Vv[i] = refMatVec(wq, h, c.Heads*hd), refMatVec(wk, h, kvh*hd), refMatVec(wv, h, kvh*hd)
			for j := range bq {
				Q[i][j] += bq[j]
			}
			for j := range bk {
				K[i][j] += bk[j]
			}
			for j := range bv {
				Vv[i][j] += bv[j]
			}
			for hh := range c.Heads {
				head := Q[i][hh*hd : (hh+1)*hd]
				if qn != nil {
					copy(head, refRMSNorm(head, qn, eps))
				}
				r.rope(head, i, factors)
			}
			for hh := range kvh {
				head := K[i][hh*hd : (hh+1)*hd]
				if kn != nil {
					copy(head, refRMSNorm(head, kn, eps))
				}
				r.rope(head, i, factors)
			}
		}
		for i := range T {
			att := make([]float64, c.Heads*hd)
			for hh := range c.Heads {
				g := hh / (c.Heads / kvh)
				q := Q[i][hh*hd : (hh+1)*hd]
				sc := make([]float64, i+1)
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					var s float64
					for d := range hd {
						s += q[d] * K[j][g*hd+d]
					}
					sc[j] = s / math.Sqrt(float64(hd))
					mx = math.Max(mx, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for d := range hd {
						att[hh*hd+d] += sc[j] / sum * Vv[j][g*hd+d]
					}
				}
			}
			o := refMatVec(wo, att, E)
			for d := range E {
				x[i][d] += o[d]
			}
			dn := ff(refRMSNorm(x[i], fn, eps))
			for d := range E {
				x[i][d] += dn[d]
			}
		}
	}
	on := r.tensor(t, "output_norm.weight")
	out := r.maybe("output.weight")
	if out == nil {
		out = emb
	}
	logits := make([][]float64, T)
	r.hiddenStates = make([][]float64, T)
	for i := range T {
		r.hiddenStates[i] = refRMSNorm(x[i], on, eps)
		logits[i] = refMatVec(out, r.hiddenStates[i], V)
	}
	return logits
}

// fixtureFiles caches fixture files across tests: building K-quant fixtures
// is the slowest part of the tests.
var fixtureFiles struct {
	sync.Mutex
	dir   string
	paths map[string]string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureFiles.dir != "" {
		os.RemoveAll(fixtureFiles.dir)
	}
	os.Exit(code)
}

// buildFixture writes a random model (once per configuration) and opens it.
func buildFixture(t testing.TB, cfg RandomConfig) *gguf.File {
	t.Helper()
	key := fmt.Sprintf("%+v", cfg)
	fixtureFiles.Lock()
	path, ok := fixtureFiles.paths[key]
	if !ok {
		if fixtureFiles.dir == "" {
			dir, err := os.MkdirTemp("", "model-fixtures")
			if err != nil {
				fixtureFiles.Unlock()
				t.Fatal(err)
			}
			fixtureFiles.dir, fixtureFiles.paths = dir, map[string]string{}
		}
		path = filepath.Join(fixtureFiles.dir, fmt.Sprintf("model%d.gguf", len(fixtureFiles.paths)))
		w := gguf.NewWriter()
		err := BuildRandom(cfg, w)
		if err == nil {
			err = w.WriteFile(path)
		}
		if err != nil {
			fixtureFiles.Unlock()
			t.Fatal(err)
		}
		fixtureFiles.paths[key] = path
	}
	fixtureFiles.Unlock()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func loadFixture(t testing.TB, cfg RandomConfig) (*Model, *gguf.File) {
	t.Helper()
	f := buildFixture(t, cfg)
	m, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return m, f
}

// fixtureConfigs are the architectures under test. Row lengths (Embd, FF,
// Heads*HeadDim) are multiples of 256 so that K-quants apply everywhere.
func fixtureConfigs() map[string]RandomConfig {
	return map[string]RandomConfig{
		// GQA, llama3 rope factors, linear rope scaling
		"llama": {Arch: "llama", Layers: 2, Embd: 256, FF: 512, Heads: 8, KVHeads: 2, Vocab: 96,
			RopeFreqs: true, RopeScale: 2, Seed: 1},
		"llama-tied": {Arch: "llama", Layers: 2, Embd: 256, FF: 256, Heads: 4, KVHeads: 4, Vocab: 80,
			Tied: true, RopeBase: 500000, Seed: 2},
		"qwen2": {Arch: "qwen2", Layers: 2, Embd: 256, FF: 512, Heads: 4, KVHeads: 2, Vocab: 70,
			RopeBase: 1e6, RMSEps: 1e-6, Seed: 3},
		// head_dim 64 while Embd/Heads is 32
		"qwen3": {Arch: "qwen3", Layers: 2, Embd: 256, FF: 256, Heads: 8, KVHeads: 4, HeadDim: 64, Vocab: 64,
			RopeBase: 1e6, RMSEps: 1e-6, Tied: true, Seed: 4},
	}
}

var allTypes = []kernels.Type{kernels.F32, kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_0, kernels.Q4_1,
	kernels.Q5_0, kernels.Q5_1, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K}

// tolerance is the allowed max |logit difference| to the float64 oracle,
// relative to the largest reference logit. Quantized weight types quantize
// the activations to 8 bits in MatMul, which the oracle does not.
func tolerance(t kernels.Type) float64 {
	switch {
	case kernels.FloatActivations(t):
		return 1e-5 // the kernels keep float activations for float weights
	case t == kernels.BF16:
		return 1e-2 // activations rounded to bfloat16 (AVX512-BF16's VDPBF16PS)
	}
	return 5e-2
}
