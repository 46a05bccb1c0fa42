// Package gemma3 is Google's Gemma 3 decoder (text part): embeddings scaled
// by sqrt(n_embd), per-head q/k norms, norms after attention and after the
// MLP as well as before them, a GELU(tanh)-gated MLP, tied embeddings, and
// sliding-window layers interleaved with global ones, each kind with its
// own rotary embedding.
package gemma3

import (
	"fmt"
	"math"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model/nn"
)

// Neox: gemma3 rotates the pairs (x[i], x[i+d/2]).
const Neox = true

// Arch is gemma3's registry entry.
var Arch = nn.Arch{Name: "gemma3", Neox: Neox, Config: ReadConfig, New: New, Random: Random}

// DefaultPattern is llama.cpp's sliding-window pattern when a file has no
// attention.sliding_window_pattern key: every sixth layer (il % 6 == 5) is
// global, the others slide.
const DefaultPattern = 6

// DefaultRopeBaseSWA is the rotary base of the sliding layers when a file
// has no rope.freq_base_swa key.
const DefaultRopeBaseSWA = 1e4

// Model is the weights of a gemma3 decoder. Fields are tagged with their
// GGUF tensor names and shapes (see nn.Load). Norm gains are used as
// stored: llama.cpp's converter already wrote 1 + w of the checkpoint.
// The output is tied to the embedding in Google's models.
type Model struct {
	nn.Embeddings
	Layers []Layer `gguf:"blk"`

	embScale  float32 // sqrt(n_embd)
	attnScale float32 // of q·k
	global    *nn.Rope
	local     *nn.Rope // sliding layers: rope.freq_base_swa, no scaling
}

// Layer is one block: attention, then the gated MLP, each normed before
// and after and added to the residual stream.
type Layer struct {
	Attention
	MLP
}

// Attention is grouped-query attention with per-head q/k RMSNorms and a
// norm of its output.
type Attention struct {
	Norm     []float32       `gguf:"attn_norm.weight" dims:"embd"`
	Q        *kernels.Matrix `gguf:"attn_q.weight" dims:"embd,q"`
	K        *kernels.Matrix `gguf:"attn_k.weight" dims:"embd,k"`
	V        *kernels.Matrix `gguf:"attn_v.weight" dims:"embd,v"`
	O        *kernels.Matrix `gguf:"attn_output.weight" dims:"o,embd"`
	QNorm    []float32       `gguf:"attn_q_norm.weight" dims:"hd"`
	KNorm    []float32       `gguf:"attn_k_norm.weight" dims:"hd"`
	PostNorm []float32       `gguf:"post_attention_norm.weight" dims:"embd" rand:"gain=0.3"`
}

// MLP is norm(down(gelu_tanh(gate·x) ⊙ up·x)).
type MLP struct {
	Norm     []float32       `gguf:"ffn_norm.weight" dims:"embd"`
	Gate     *kernels.Matrix `gguf:"ffn_gate.weight" dims:"embd,ff"`
	Up       *kernels.Matrix `gguf:"ffn_up.weight" dims:"embd,ff"`
	Down     *kernels.Matrix `gguf:"ffn_down.weight" dims:"ff,embd"`
	PostNorm []float32       `gguf:"post_ffw_norm.weight" dims:"embd" rand:"gain=3"`
}

// ReadConfig reads gemma3's own metadata keys: the sliding window, which
// layers slide (attention.sliding_window_pattern: a period P, where layer
// il slides iff il % P < P-1 as in llama.cpp, or one bool per layer, true
// for sliding; default period 6) and the sliding layers' rotary base.
func ReadConfig(r *nn.KeyReader, c *nn.Config) error {
	path := r.F.Path
	c.SlidingWindow = r.Int("attention.sliding_window", -1)
	c.RopeBaseSWA = r.Float("rope.freq_base_swa", DefaultRopeBaseSWA)
	if r.Err != nil {
		return r.Err
	}
	for _, key := range []string{"final_logit_softcapping", "attn_logit_softcapping"} {
		if v := r.Float(key, 0); v != 0 {
			return fmt.Errorf("%s: %s%s = %v: logit soft-capping is not supported for gemma3", path, r.Prefix, key, v)
		}
	}
	if r.Err != nil {
		return r.Err
	}
	if c.Layers <= 0 {
		return nil // Validate reports it
	}
	if c.SlidingWindow <= 0 || c.SlidingWindow > c.ContextLen {
		return fmt.Errorf("%s: %sattention.sliding_window %d must be between 1 and the context length %d",
			path, r.Prefix, c.SlidingWindow, c.ContextLen)
	}
	key := r.Prefix + "attention.sliding_window_pattern"
	c.SlidingLayers = make([]bool, c.Layers)
	v, ok := r.F.Get(key)
	if bools, isBools := v.([]bool); ok && isBools {
		if len(bools) != c.Layers {
			return fmt.Errorf("%s: %s has %d values, expected one per layer (%d)", path, key, len(bools), c.Layers)
		}
		copy(c.SlidingLayers, bools)
		return nil
	}
	period := DefaultPattern
	if ok {
		n, isInt := r.F.Uint(key)
		if !isInt || n > math.MaxInt32 {
			return fmt.Errorf("%s: %s = %v is neither a layer period nor one bool per layer", path, key, v)
		}
		period = int(n)
	}
	for il := range c.SlidingLayers {
		// As llama.cpp's set_swa_pattern: period 0 makes every layer slide.
		c.SlidingLayers[il] = period == 0 || il%period < period-1
	}
	return nil
}

// New loads the weights of a gemma3 model from f.
func New(f *gguf.File, c *nn.Config) (nn.Network, error) {
	m := &Model{}
	if err := nn.Load(f, c, m); err != nil {
		return nil, err
	}
	m.embScale = float32(math.Sqrt(float64(c.Embd)))
	m.attnScale = AttnScale(c)
	m.global = nn.NewRope(c.Rope(nil))
	m.local = nn.NewRope(nn.RopeParams{Dim: c.RopeDim, Neox: c.RopeNeox, Base: c.RopeBaseSWA, Scaling: "none", Scale: 1})
	return m, nil
}

// AttnScale is the factor of q·k: 1/sqrt(key_length), except for the 27B
// model (62 layers), which Google trained with 1/sqrt(n_embd/n_head)
// (query_pre_attn_scalar 168 = 5376/32 while its heads have 128 values);
// llama.cpp recognises it by its layer count, and so do we.
func AttnScale(c *nn.Config) float32 {
	d := c.HeadDim
	if c.Layers == 62 {
		d = c.Embd / c.Heads
	}
	return 1 / float32(math.Sqrt(float64(d)))
}

// Forward runs the decoder over the step's tokens.
func (m *Model) Forward(s *nn.Step) {
	c := s.Cfg
	s.Embed(m.TokEmbd, m.embScale)
	for l := range m.Layers {
		rope, opt := m.global, nn.AttnOpts{Scale: m.attnScale}
		if c.Sliding(l) {
			rope, opt.Window = m.local, c.SlidingWindow
		}
		m.Layers[l].Attention.Forward(s, l, rope, opt)
		m.Layers[l].MLP.Forward(s)
	}
	s.Logits(m.OutputNorm, m.Output)
}

// Forward adds the normed attention over layer l's cache to the residual
// stream.
func (a *Attention) Forward(s *nn.Step, l int, rope *nn.Rope, opt nn.AttnOpts) {
	s.Norm(s.XB, s.X, a.Norm)
	s.MatMuls(s.XB, nn.Prod(s.Q, a.Q), nn.Prod(s.K, a.K), nn.Prod(s.V, a.V))
	s.PositionQK(l, a.QNorm, a.KNorm, rope)
	s.Attention(l, opt)
	s.MatMul(s.XB, a.O, s.Att)
	s.Norm(s.XB, s.XB, a.PostNorm)
	nn.Add(s.X, s.XB)
}

// Forward adds the normed MLP of the residual stream to it.
func (p *MLP) Forward(s *nn.Step) {
	s.Norm(s.XB, s.X, p.Norm)
	s.MatMuls(s.XB, nn.Prod(s.HB, p.Gate), nn.Prod(s.HB2, p.Up))
	s.GeGLU()
	s.MatMul(s.XB, p.Down, s.HB)
	s.Norm(s.XB, s.XB, p.PostNorm)
	nn.Add(s.X, s.XB)
}
