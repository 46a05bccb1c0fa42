package modeltest

import (
	"fmt"
	"math"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
)

// Ref is a plain float64 transformer used as the oracle: every weight
// dequantized up front, naive loops, no cache (each call recomputes the
// whole sequence). Its hyper-parameters come from the fixture's
// RandomConfig, not from Load.
type Ref struct {
	Cfg  model.RandomConfig // with defaults
	F    *gguf.File
	Neox bool

	HiddenStates [][]float64 // of the last Logits call: each token's normed final state
}

// Tensor is tensor name dequantized.
func (r *Ref) Tensor(t testing.TB, name string) []float64 {
	ti, ok := r.F.Tensor(name)
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

// Maybe is tensor name dequantized, nil when the file has none.
func (r *Ref) Maybe(name string) []float64 {
	if _, ok := r.F.Tensor(name); !ok {
		return nil
	}
	return r.Tensor(nil, name) // present: no failure possible
}

// MatVec returns W x for a GGML [in, out] weight.
func MatVec(w []float64, x []float64, out int) []float64 {
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

// RMSNorm is x normed and multiplied by the gains g.
func RMSNorm(x, g []float64, eps float64) []float64 {
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

// Rope rotates one head in place.
func (r *Ref) Rope(h []float64, pos int, factors []float64) {
	d := len(h)
	for i := 0; i < d/2; i++ {
		theta := float64(pos) * math.Pow(r.Cfg.RopeBase, -2*float64(i)/float64(d))
		if factors != nil {
			theta /= factors[i]
		}
		if r.Cfg.RopeScale > 1 {
			theta /= r.Cfg.RopeScale // linear only in these fixtures
		}
		a, b := 2*i, 2*i+1
		if r.Neox {
			a, b = i, i+d/2
		}
		x0, x1 := h[a], h[b]
		h[a] = x0*math.Cos(theta) - x1*math.Sin(theta)
		h[b] = x0*math.Sin(theta) + x1*math.Cos(theta)
	}
}

// Logits returns the logits of every position of tokens.
func (r *Ref) Logits(t testing.TB, tokens []int32) [][]float64 {
	return r.Forward(t, tokens, func(p string) func(h []float64) []float64 {
		wg, wu, wd := r.Tensor(t, p+"ffn_gate.weight"), r.Tensor(t, p+"ffn_up.weight"), r.Tensor(t, p+"ffn_down.weight")
		return func(h []float64) []float64 {
			gg, uu := MatVec(wg, h, r.Cfg.FF), MatVec(wu, h, r.Cfg.FF)
			for d := range gg {
				gg[d] = gg[d] / (1 + math.Exp(-gg[d])) * uu[d]
			}
			return MatVec(wd, gg, r.Cfg.Embd)
		}
	})
}

// Forward is the decoder with the feed-forward sub-layer of each block
// given by ffn: called with the block's tensor prefix ("blk.N."), it
// returns what the block adds to a token's residual stream from the
// token's normed stream h.
func (r *Ref) Forward(t testing.TB, tokens []int32, ffn func(p string) func(h []float64) []float64) [][]float64 {
	c := r.Cfg
	E, hd, V := c.Embd, c.HeadDim, c.Vocab
	kvh := c.KVHeads
	eps := float64(c.RMSEps)
	T := len(tokens)
	emb := r.Tensor(t, "token_embd.weight")
	x := make([][]float64, T)
	for i, tok := range tokens {
		x[i] = append([]float64(nil), emb[int(tok)*E:(int(tok)+1)*E]...)
	}
	factors := r.Maybe("rope_freqs.weight")
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		wq, wk, wv, wo := r.Tensor(t, p+"attn_q.weight"), r.Tensor(t, p+"attn_k.weight"), r.Tensor(t, p+"attn_v.weight"), r.Tensor(t, p+"attn_output.weight")
		bq, bk, bv := r.Maybe(p+"attn_q.bias"), r.Maybe(p+"attn_k.bias"), r.Maybe(p+"attn_v.bias")
		qn, kn := r.Maybe(p+"attn_q_norm.weight"), r.Maybe(p+"attn_k_norm.weight")
		an, fn := r.Tensor(t, p+"attn_norm.weight"), r.Tensor(t, p+"ffn_norm.weight")
		ff := ffn(p)
		Q, K, Vv := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		for i := range T {
			h := RMSNorm(x[i], an, eps)
			Q[i], K[i], Vv[i] = MatVec(wq, h, c.Heads*hd), MatVec(wk, h, kvh*hd), MatVec(wv, h, kvh*hd)
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
					copy(head, RMSNorm(head, qn, eps))
				}
				r.Rope(head, i, factors)
			}
			for hh := range kvh {
				head := K[i][hh*hd : (hh+1)*hd]
				if kn != nil {
					copy(head, RMSNorm(head, kn, eps))
				}
				r.Rope(head, i, factors)
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
			o := MatVec(wo, att, E)
			for d := range E {
				x[i][d] += o[d]
			}
			dn := ff(RMSNorm(x[i], fn, eps))
			for d := range E {
				x[i][d] += dn[d]
			}
		}
	}
	on := r.Tensor(t, "output_norm.weight")
	out := r.Maybe("output.weight")
	if out == nil {
		out = emb
	}
	logits := make([][]float64, T)
	r.HiddenStates = make([][]float64, T)
	for i := range T {
		r.HiddenStates[i] = RMSNorm(x[i], on, eps)
		logits[i] = MatVec(out, r.HiddenStates[i], V)
	}
	return logits
}
