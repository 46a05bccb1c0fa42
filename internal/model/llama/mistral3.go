package llama

import (
	"fmt"
	"math"

	"mistralrs/internal/gguf"
	"mistralrs/internal/model/nn"
)

// mistral3 is the architecture name llama.cpp's converter gives the text
// model of Mistral Small 3.1/3.2 and Ministral 3: llama's network (NORM
// rope over the whole head, optional attn_output bias) with optional YaRN
// rope scaling keys and Llama-4-style attention temperature.

// Mistral3Config reads mistral3's own keys: attention.temperature_scale
// (the queries' temperature, over floors of
// rope.scaling.original_context_length positions, context_length without
// it) and YaRN's rope.scaling.yarn_beta_fast, yarn_beta_slow and
// yarn_log_multiplier. It refuses what llama.cpp's mistral3 graph would
// compute differently from ours: experts (refused by the registry),
// rope.scaling.attn_factor other than 1, a rotation or value head that is
// not the whole head.
func Mistral3Config(r *nn.KeyReader, c *nn.Config) error {
	c.AttnTempScale = r.Float("attention.temperature_scale", 0)
	c.YarnBetaFast = r.Float("rope.scaling.yarn_beta_fast", 32) // llama.cpp's defaults
	c.YarnBetaSlow = r.Float("rope.scaling.yarn_beta_slow", 1)
	c.YarnLogMul = r.Float("rope.scaling.yarn_log_multiplier", 0)
	attnFactor := r.Float("rope.scaling.attn_factor", 1)
	if r.Err != nil {
		return r.Err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: mistral3: %s", r.F.Path, fmt.Sprintf(format, args...))
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !finite(c.AttnTempScale):
		return bad("%sattention.temperature_scale %v is not a finite number", r.Prefix, c.AttnTempScale)
	case c.AttnTempScale != 0 && c.RopeOrigCtx <= 0:
		return bad("attention temperature scaling needs a positive %srope.scaling.original_context_length (or context_length), got %d", r.Prefix, c.RopeOrigCtx)
	case !(c.YarnBetaFast > 0) || !(c.YarnBetaSlow > 0) || !finite(c.YarnBetaFast) || !finite(c.YarnBetaSlow):
		return bad("%srope.scaling.yarn_beta_fast %v and yarn_beta_slow %v must be positive", r.Prefix, c.YarnBetaFast, c.YarnBetaSlow)
	case c.YarnLogMul < 0 || !finite(c.YarnLogMul):
		return bad("%srope.scaling.yarn_log_multiplier %v must be a non-negative number", r.Prefix, c.YarnLogMul)
	case attnFactor != 1:
		return bad("%srope.scaling.attn_factor %v is not supported (only 1)", r.Prefix, attnFactor)
	case c.RopeDim != c.HeadDim || c.ValueDim != c.HeadDim:
		return bad("rope.dimension_count %d, key_length %d and value_length %d must be equal (llama.cpp's mistral3 rotates whole heads)", c.RopeDim, c.HeadDim, c.ValueDim)
	}
	if c.AttnTempScale != 0 {
		c.AttnTempFloor = c.RopeOrigCtx
	}
	return nil
}

// mistral3Extra are per-block tensors that llama.cpp's mistral3 reads or
// refuses differently from our llama blocks: MLP biases (which it adds and
// we do not have) and q/k norms (which it does not read).
var mistral3Extra = []string{"ffn_gate.bias", "ffn_up.bias", "ffn_down.bias", "attn_q_norm.weight", "attn_k_norm.weight"}

// checkMistral3 refuses a mistral3 file with tensors of mistral3Extra.
func checkMistral3(f *gguf.File, c *nn.Config) error {
	for l := range c.Layers {
		for _, name := range mistral3Extra {
			full := fmt.Sprintf("blk.%d.%s", l, name)
			if _, ok := f.Tensor(full); ok {
				return fmt.Errorf("%s: mistral3: tensor %s is not supported", f.Path, full)
			}
		}
	}
	return nil
}
