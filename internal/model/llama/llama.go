// Package llama is the llama architecture and its close relatives that
// differ only in optional tensors: mistral (stored as llama), qwen2 (q/k/v
// biases) and qwen3 (per-head q/k norms), and the mixtures of experts
// built the same way: mixtral (stored as llama with llama.expert_count),
// qwen2moe (qwen2's attention, experts plus a shared expert) and qwen3moe
// (qwen3's attention, experts); mistral3 (llama with YaRN keys and
// Llama-4-style attention temperature, see Mistral3Config).
package llama

import (
	"fmt"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model/nn"
)

// Model is the weights of a llama-style decoder. Fields are tagged with
// their GGUF tensor names and shapes (see nn.Load).
type Model struct {
	Head
	Layers []Layer `gguf:"blk"`
}

// Head is what a dense and a mixture-of-experts model share besides their
// blocks: the embedding, the final norm and output, the rope.
type Head struct {
	nn.Embeddings
	RopeFreqs []float32 `gguf:"rope_freqs.weight,optional" dims:"rope/2"` // llama3-style frequency divisors

	rope *nn.Rope
}

// finish prepares the rope.
func (h *Head) finish(c *nn.Config) {
	h.rope = nn.NewRope(c.Rope(h.RopeFreqs))
}

// Layer is one transformer block: attention, then a SwiGLU MLP, each on
// an RMS-normed input and added to the residual stream.
type Layer struct {
	Attention
	MLP
}

// Attention is grouped-query attention with optional biases (qwen2) and
// per-head q/k RMSNorms (qwen3).
type Attention struct {
	Norm  []float32       `gguf:"attn_norm.weight" dims:"embd"`
	Q     *kernels.Matrix `gguf:"attn_q.weight" dims:"embd,q"`
	K     *kernels.Matrix `gguf:"attn_k.weight" dims:"embd,k"`
	V     *kernels.Matrix `gguf:"attn_v.weight" dims:"embd,v"`
	O     *kernels.Matrix `gguf:"attn_output.weight" dims:"o,embd"`
	QBias []float32       `gguf:"attn_q.bias,optional" dims:"q" rand:"bound=0.5"`
	KBias []float32       `gguf:"attn_k.bias,optional" dims:"k" rand:"bound=0.5"`
	VBias []float32       `gguf:"attn_v.bias,optional" dims:"v" rand:"bound=0.5"`
	OBias []float32       `gguf:"attn_output.bias,optional" dims:"embd" rand:"bound=0.5"`
	QNorm []float32       `gguf:"attn_q_norm.weight,optional" dims:"hd"`
	KNorm []float32       `gguf:"attn_k_norm.weight,optional" dims:"hd"`
}

// MLP is down(silu(gate·x) ⊙ up·x).
type MLP struct {
	Norm []float32       `gguf:"ffn_norm.weight" dims:"embd"`
	Gate *kernels.Matrix `gguf:"ffn_gate.weight" dims:"embd,ff"`
	Up   *kernels.Matrix `gguf:"ffn_up.weight" dims:"embd,ff"`
	Down *kernels.Matrix `gguf:"ffn_down.weight" dims:"ff,embd"`
}

// MoEModel is a llama whose MLPs are mixtures of experts.
type MoEModel struct {
	Head
	Layers []MoELayer `gguf:"blk"`
}

// MoELayer is attention, then the routed experts.
type MoELayer struct {
	Attention
	nn.MoEFFN
}

// Config reads the experts of a mixtral file (llama.expert_count > 0):
// expert_used_count (required with experts), the experts' width
// (expert_feed_forward_length, else feed_forward_length, as mixtral files
// have it) and renormalised weights (mixtral's softmax over the chosen
// experts' logits is the softmax over all, renormalised). Without
// expert_count the model is dense.
func Config(r *nn.KeyReader, c *nn.Config) error {
	if r.Int("expert_count", 0) == 0 {
		return r.Err
	}
	return nn.ReadExperts(r, c, c.FF, true)
}

// Qwen2MoEConfig reads qwen2moe's experts: expert_count,
// expert_used_count, expert_feed_forward_length and
// expert_shared_feed_forward_length (the shared expert's width, which the
// model takes as its FF), all required; the chosen experts' weights are the
// router's probabilities as they are (expert_weights_norm, default false).
func Qwen2MoEConfig(r *nn.KeyReader, c *nn.Config) error {
	c.FF = r.Int("expert_shared_feed_forward_length", -1)
	if r.Err == nil && c.FF <= 0 {
		return fmt.Errorf("%s: %sexpert_shared_feed_forward_length %d must be positive", r.F.Path, r.Prefix, c.FF)
	}
	if r.Err != nil {
		return r.Err
	}
	return nn.ReadExperts(r, c, -1, false)
}

// Qwen3MoEConfig reads qwen3moe's experts: expert_count,
// expert_used_count and expert_feed_forward_length (required) and
// expert_weights_norm (default true: the chosen experts' weights are
// renormalised).
func Qwen3MoEConfig(r *nn.KeyReader, c *nn.Config) error { return nn.ReadExperts(r, c, -1, true) }

// Archs are the registry entries of the architectures this package
// covers. Mixtral is stored as llama (with expert_count).
var Archs = []nn.Arch{
	{Name: "llama", Neox: Neox("llama"), MoE: true, Config: Config, New: New, Random: Random},
	{Name: "qwen2", Neox: Neox("qwen2"), New: New, Random: Random},
	{Name: "qwen3", Neox: Neox("qwen3"), New: New, Random: Random},
	{Name: "qwen2moe", Neox: Neox("qwen2moe"), MoE: true, Config: Qwen2MoEConfig, New: New, Random: Random},
	{Name: "qwen3moe", Neox: Neox("qwen3moe"), MoE: true, Config: Qwen3MoEConfig, New: New, Random: RandomQwen3MoE},
	{Name: "mistral3", Neox: Neox("mistral3"), Config: Mistral3Config, New: New, Random: Random},
}

// Neox reports the rope pairing of arch. GGUF llama and mistral3 q/k
// weights are permuted by the converter so that the consecutive-pair
// ("normal") rotation applies; qwen's are not.
func Neox(arch string) bool { return arch != "llama" && arch != "mistral3" }

// required lists the optional tensors that architecture arch has (all
// but the llama ones).
func required(arch string) []string {
	biases := []string{"attn_q.bias", "attn_k.bias", "attn_v.bias"}
	switch arch {
	case "qwen2":
		return biases
	case "qwen2moe": // and the shared expert
		return append(biases, "ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight")
	case "qwen3", "qwen3moe":
		return []string{"attn_q_norm.weight", "attn_k_norm.weight"}
	}
	return nil
}

// New loads the weights of c.Arch from f.
func New(f *gguf.File, c *nn.Config) (nn.Network, error) {
	if c.Experts > 0 {
		return newMoE(f, c)
	}
	if c.Arch == "mistral3" {
		if err := checkMistral3(f, c); err != nil {
			return nil, err
		}
	}
	m := &Model{}
	if err := nn.Load(f, c, m, required(c.Arch)...); err != nil {
		return nil, err
	}
	for i := range m.Layers {
		if err := m.Layers[i].Attention.check(f, i); err != nil {
			return nil, err
		}
	}
	m.finish(c)
	return m, nil
}

// check reports a block with only one of the q/k norms.
func (a *Attention) check(f *gguf.File, blk int) error {
	if (a.QNorm == nil) != (a.KNorm == nil) {
		return fmt.Errorf("%s: blk.%d has only one of attn_q_norm.weight and attn_k_norm.weight", f.Path, blk)
	}
	return nil
}

// Forward runs the decoder over the step's tokens.
func (m *Model) Forward(s *nn.Step) {
	s.Embed(m.TokEmbd, 1)
	for l := range m.Layers {
		m.Layers[l].Attention.Forward(s, l, m.rope)
		m.Layers[l].MLP.Forward(s)
	}
	s.Logits(m.OutputNorm, m.Output)
}

// Forward adds attention over layer l's cache to the residual stream.
func (a *Attention) Forward(s *nn.Step, l int, rope *nn.Rope) {
	s.Norm(s.XB, s.X, a.Norm)
	s.MatMuls(s.XB, nn.Prod(s.Q, a.Q), nn.Prod(s.K, a.K), nn.Prod(s.V, a.V))
	nn.AddRows(s.Q, a.QBias)
	nn.AddRows(s.K, a.KBias)
	nn.AddRows(s.V, a.VBias)
	s.PositionQK(l, a.QNorm, a.KNorm, rope)
	s.AttnTemperature()
	s.Attention(l, nn.AttnOpts{})
	s.MatMul(s.XB, a.O, s.Att)
	nn.AddRows(s.XB, a.OBias)
	nn.Add(s.X, s.XB)
}

// Forward adds the MLP of the residual stream to it.
func (p *MLP) Forward(s *nn.Step) {
	s.Norm(s.XB, s.X, p.Norm)
	s.MatMuls(s.XB, nn.Prod(s.HB, p.Gate), nn.Prod(s.HB2, p.Up))
	s.SwiGLU()
	s.MatMul(s.XB, p.Down, s.HB)
	nn.Add(s.X, s.XB)
}

// newMoE loads a mixtral, qwen2moe or qwen3moe file.
func newMoE(f *gguf.File, c *nn.Config) (nn.Network, error) {
	m := &MoEModel{}
	shared := c.Arch == "qwen2moe"
	if err := nn.Load(f, c, m, required(c.Arch)...); err != nil {
		return nil, err
	}
	for i := range m.Layers {
		if err := m.Layers[i].Attention.check(f, i); err != nil {
			return nil, err
		}
		if has, ok := m.Layers[i].HasShared(); has != shared || !ok {
			return nil, fmt.Errorf("%s: blk.%d has shared-expert tensors (ffn_*_shexp), which %s does not have", f.Path, i, c.Arch)
		}
		m.Layers[i].MoE.Init()
	}
	m.finish(c)
	return m, nil
}

// Forward runs the decoder over the step's tokens.
func (m *MoEModel) Forward(s *nn.Step) {
	s.Embed(m.TokEmbd, 1)
	for l := range m.Layers {
		m.Layers[l].Attention.Forward(s, l, m.rope)
		m.Layers[l].MoEFFN.Forward(s)
	}
	s.Logits(m.OutputNorm, m.Output)
}
