// Package qwen3moe is the qwen3moe architecture (Qwen3-30B-A3B and its
// kin): qwen3's attention (per-head q/k RMSNorms before NEOX rotary
// embeddings, no biases) and a mixture of experts (nn.MoE) in place of the
// MLP.
package qwen3moe

import (
	"fmt"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model/nn"
)

// Model is the weights of a qwen3moe decoder. Fields are tagged with their
// GGUF tensor names and shapes (see nn.Load).
type Model struct {
	TokEmbd    *kernels.Matrix `gguf:"token_embd.weight" dims:"embd,vocab"`
	OutputNorm []float32       `gguf:"output_norm.weight" dims:"embd"`
	Output     *kernels.Matrix `gguf:"output.weight,optional" dims:"embd,vocab"` // TokEmbd when tied
	Layers     []Layer         `gguf:"blk"`

	rope *nn.Rope
}

// Layer is one block: attention, then the mixture of experts, each on an
// RMS-normed input and added to the residual stream.
type Layer struct {
	Attention
	nn.MoEFFN
}

// Attention is grouped-query attention with per-head q/k RMSNorms.
type Attention struct {
	Norm  []float32       `gguf:"attn_norm.weight" dims:"embd"`
	Q     *kernels.Matrix `gguf:"attn_q.weight" dims:"embd,q"`
	K     *kernels.Matrix `gguf:"attn_k.weight" dims:"embd,k"`
	V     *kernels.Matrix `gguf:"attn_v.weight" dims:"embd,v"`
	O     *kernels.Matrix `gguf:"attn_output.weight" dims:"o,embd"`
	QNorm []float32       `gguf:"attn_q_norm.weight" dims:"hd"`
	KNorm []float32       `gguf:"attn_k_norm.weight" dims:"hd"`
}

// Config reads the expert hyper-parameters: expert_count,
// expert_used_count and expert_feed_forward_length (required) and
// expert_weights_norm (default true: qwen3moe renormalises the chosen
// experts' weights).
func Config(r *nn.KeyReader, c *nn.Config) error { return nn.ReadExperts(r, c, -1, true) }

// New loads the weights from f.
func New(f *gguf.File, c *nn.Config) (nn.Network, error) {
	m := &Model{}
	if err := nn.Load(f, c, m); err != nil {
		return nil, err
	}
	for i := range m.Layers {
		if has, ok := m.Layers[i].HasShared(); has || !ok {
			return nil, fmt.Errorf("%s: blk.%d has shared-expert tensors (ffn_*_shexp), which %s does not have", f.Path, i, c.Arch)
		}
	}
	for i := range m.Layers {
		m.Layers[i].MoE.Init()
	}
	if m.Output == nil {
		m.Output = m.TokEmbd
		c.TiedOutput = true
	}
	m.rope = nn.NewRope(c.Rope(nil))
	return m, nil
}

// Forward runs the decoder over the step's tokens.
func (m *Model) Forward(s *nn.Step) {
	s.Embed(m.TokEmbd, 1)
	for l := range m.Layers {
		m.Layers[l].Attention.Forward(s, l, m.rope)
		m.Layers[l].MoEFFN.Forward(s)
	}
	s.Logits(m.OutputNorm, m.Output)
}

// Forward adds attention over layer l's cache to the residual stream.
func (a *Attention) Forward(s *nn.Step, l int, rope *nn.Rope) {
	s.Norm(s.XB, s.X, a.Norm)
	s.MatMul(s.Q, a.Q, s.XB)
	s.MatMul(s.K, a.K, s.XB)
	s.MatMul(s.V, a.V, s.XB)
	s.PositionQK(l, a.QNorm, a.KNorm, rope)
	s.Attention(l, nn.AttnOpts{})
	s.MatMul(s.XB, a.O, s.Att)
	nn.Add(s.X, s.XB)
}
