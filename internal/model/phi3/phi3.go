// Package phi3 is the phi3 architecture (Phi-3 and Phi-3.5 mini, Phi-4
// mini): a llama-style decoder whose q, k and v projections are one fused
// matrix (attn_qkv) and whose gate and up projections are one matrix of
// twice the MLP width (ffn_up: gate rows, then up rows), with NEOX rotary
// embeddings over the leading rope.dimension_count dims of each head
// (Phi-4-mini rotates three quarters) and, for the long-context models,
// LongRoPE frequency factors.
//
// Rotary scaling follows llama.cpp. A file with rope_factors_long.weight
// and rope_factors_short.weight divides each rotated pair's frequency by
// the long factors when the context a sequence may reach exceeds
// rope.scaling.original_context_length, by the short ones otherwise. Here
// a sequence may reach the model's context_length (llama.cpp's default
// context), so the choice is made once at load: Phi-3.5-mini (131072 over
// 4096) uses the long factors at every position, unlike Hugging Face's
// implementation, which switches per sequence length. The rotated dims of
// queries and keys are multiplied by rope.scaling.attn_factor (the
// converter's sqrt(1 + ln(ctx/orig)/ln(orig)) for LongRoPE), as ggml's
// rope multiplies cos and sin by it; the unrotated dims are not. Without
// the key the factor is 1, as in llama.cpp.
//
// attention.sliding_window, which Phi-3 GGUFs carry (2047 for the 4k
// models), is ignored as llama.cpp ignores it for phi3 ("Phi SWA is
// currently disabled"): every layer attends over the whole context, which
// changes nothing for sequences shorter than the window.
package phi3

import (
	"fmt"
	"math"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model/nn"
)

// Arch is phi3's registry entry.
var Arch = nn.Arch{Name: "phi3", Neox: true, New: New, Random: Random}

// Model is the weights of a phi3 decoder, tagged with their GGUF tensor
// names and shapes (see nn.Load).
type Model struct {
	nn.Embeddings
	// LongRoPE frequency divisors, one per rotated pair (both or neither).
	RopeLong  []float32 `gguf:"rope_factors_long.weight,optional" dims:"rope/2"`
	RopeShort []float32 `gguf:"rope_factors_short.weight,optional" dims:"rope/2"`
	Layers    []Layer   `gguf:"blk"`

	rope *nn.Rope
	// attnFactor multiplies the rotated dims of queries and keys.
	attnFactor float32
}

// Layer is one transformer block: attention, then the gated MLP, each on an
// RMS-normed input and added to the residual stream.
type Layer struct {
	Attention
	MLP
}

// Attention is grouped-query attention with q, k and v projected by one
// fused matrix: its output rows are q, then k, then v. Files with separate
// attn_q/attn_k/attn_v (which llama.cpp also reads for phi3) load too.
type Attention struct {
	Norm []float32       `gguf:"attn_norm.weight" dims:"embd"`
	QKV  *kernels.Matrix `gguf:"attn_qkv.weight,optional" dims:"embd,qkv"`
	Q    *kernels.Matrix `gguf:"attn_q.weight,optional" dims:"embd,q"`
	K    *kernels.Matrix `gguf:"attn_k.weight,optional" dims:"embd,k"`
	V    *kernels.Matrix `gguf:"attn_v.weight,optional" dims:"embd,v"`
	O    *kernels.Matrix `gguf:"attn_output.weight" dims:"o,embd"`
}

// MLP is down(silu(g) ⊙ u) where [g; u] = up·x: the fused matrix's first
// FF output rows are the gate, the next FF the up projection.
type MLP struct {
	Norm []float32       `gguf:"ffn_norm.weight" dims:"embd"`
	Up   *kernels.Matrix `gguf:"ffn_up.weight" dims:"embd,2ff"`
	Down *kernels.Matrix `gguf:"ffn_down.weight" dims:"ff,embd"`
}

// Scratch slots of Step.Buf.
const (
	bufQKV = iota // fused q|k|v rows
	bufGU         // fused gate|up rows
)

// New loads the weights of a phi3 model from f.
func New(f *gguf.File, c *nn.Config) (nn.Network, error) {
	m := &Model{}
	if err := nn.Load(f, c, m); err != nil {
		return nil, err
	}
	for i := range m.Layers {
		a := &m.Layers[i].Attention
		fused := a.QKV != nil && a.Q == nil && a.K == nil && a.V == nil
		separate := a.QKV == nil && a.Q != nil && a.K != nil && a.V != nil
		if !fused && !separate {
			return nil, fmt.Errorf("%s: blk.%d: need either attn_qkv.weight or all of attn_q.weight, attn_k.weight, attn_v.weight (architecture phi3)", f.Path, i)
		}
	}
	if (m.RopeLong == nil) != (m.RopeShort == nil) {
		return nil, fmt.Errorf("%s: has only one of rope_factors_long.weight and rope_factors_short.weight (architecture phi3)", f.Path)
	}
	for _, fs := range [][]float32{m.RopeLong, m.RopeShort} {
		for _, v := range fs {
			if !(v > 0) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("%s: rope factor %v is not a positive number (architecture phi3)", f.Path, v)
			}
		}
	}
	key := c.Arch + ".rope.scaling.attn_factor"
	af := 1.0
	if v, ok := f.Get(key); ok {
		x, isNum := f.Float(key)
		if !isNum || !(x > 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%s: metadata key %s = %v is not a positive number", f.Path, key, v)
		}
		af = x
	}
	m.attnFactor = float32(af)
	factors := m.RopeShort
	if c.ContextLen > c.RopeOrigCtx {
		factors = m.RopeLong
	}
	m.rope = nn.NewRope(c.Rope(factors))
	return m, nil
}

// Forward runs the decoder over the step's tokens.
func (m *Model) Forward(s *nn.Step) {
	s.Embed(m.TokEmbd, 1)
	for l := range m.Layers {
		m.Layers[l].Attention.Forward(s, l, m.rope, m.attnFactor)
		m.Layers[l].MLP.Forward(s)
	}
	s.Logits(m.OutputNorm, m.Output)
}

// Forward adds attention over layer l's cache to the residual stream;
// attnFactor scales the rotated dims of queries and keys.
func (a *Attention) Forward(s *nn.Step, l int, rope *nn.Rope, attnFactor float32) {
	c := s.Cfg
	s.Norm(s.XB, s.X, a.Norm)
	if a.QKV != nil {
		qd, kd, vd := c.QDim(), c.KDim(), c.VDim()
		w := qd + kd + vd
		qkv := s.Buf(bufQKV, s.T*w)
		s.MatMul(qkv, a.QKV, s.XB)
		for t := range s.T {
			row := qkv[t*w : (t+1)*w]
			copy(s.Q[t*qd:(t+1)*qd], row[:qd])
			copy(s.K[t*kd:(t+1)*kd], row[qd:qd+kd])
			copy(s.V[t*vd:(t+1)*vd], row[qd+kd:])
		}
	} else {
		s.MatMuls(s.XB, nn.Prod(s.Q, a.Q), nn.Prod(s.K, a.K), nn.Prod(s.V, a.V))
	}
	if attnFactor != 1 {
		scaleRotated(s.Q, c.HeadDim, c.RopeDim, attnFactor)
		scaleRotated(s.K, c.HeadDim, c.RopeDim, attnFactor)
	}
	s.PositionQK(l, nil, nil, rope)
	s.Attention(l, nn.AttnOpts{})
	s.MatMul(s.XB, a.O, s.Att)
	nn.Add(s.X, s.XB)
}

// scaleRotated multiplies the first dim values of each head (of size hd)
// of x by f: the rotation is linear, so this is ggml's scaling of cos and
// sin by the attention factor.
func scaleRotated(x []float32, hd, dim int, f float32) {
	for h := 0; h+hd <= len(x); h += hd {
		head := x[h : h+dim]
		for i := range head {
			head[i] *= f
		}
	}
}

// Forward adds the MLP of the residual stream to it.
func (p *MLP) Forward(s *nn.Step) {
	ff := s.Cfg.FF
	s.Norm(s.XB, s.X, p.Norm)
	gu := s.Buf(bufGU, s.T*2*ff)
	s.MatMul(gu, p.Up, s.XB)
	for t := range s.T {
		copy(s.HB[t*ff:(t+1)*ff], gu[2*t*ff:(2*t+1)*ff])
		copy(s.HB2[t*ff:(t+1)*ff], gu[(2*t+1)*ff:(2*t+2)*ff])
	}
	s.SwiGLU()
	s.MatMul(s.XB, p.Down, s.HB)
	nn.Add(s.X, s.XB)
}
