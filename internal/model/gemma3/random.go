package gemma3

import (
	"fmt"

	"mistralrs/internal/gguf"
	"mistralrs/internal/model/nn"
)

// Random writes a random gemma3 model. The output is always tied to the
// embeddings, as in Google's models. Norm gains are stored as llama.cpp's
// converter stores them (to be multiplied as they are): the post-attention
// ones around 0.3 and the post-MLP ones around 3 (the fields' rand tags),
// as in shared/testdata/reference-archs, so that greedy decoding does not
// just repeat the current token; the others around 1.
func Random(cfg nn.RandomConfig, w *gguf.Writer) error {
	if cfg.SlidingWindow == 0 {
		cfg.SlidingWindow = 8
	}
	if cfg.SlidingWindow < 0 || cfg.SlidingPattern < 0 || cfg.RopeBaseSWA < 0 {
		return fmt.Errorf("random model: invalid gemma3 sliding window %d, pattern %d or rope base %v",
			cfg.SlidingWindow, cfg.SlidingPattern, cfg.RopeBaseSWA)
	}
	const a = "gemma3."
	w.AddKV("general.architecture", "gemma3")
	w.AddKV("general.name", "random gemma3")
	w.AddKV(a+"block_count", uint32(cfg.Layers))
	w.AddKV(a+"context_length", uint32(cfg.ContextLen))
	w.AddKV(a+"embedding_length", uint32(cfg.Embd))
	w.AddKV(a+"feed_forward_length", uint32(cfg.FF))
	w.AddKV(a+"attention.head_count", uint32(cfg.Heads))
	w.AddKV(a+"attention.head_count_kv", uint32(cfg.KVHeads))
	w.AddKV(a+"attention.key_length", uint32(cfg.HeadDim))
	w.AddKV(a+"attention.value_length", uint32(cfg.HeadDim))
	w.AddKV(a+"attention.layer_norm_rms_epsilon", cfg.RMSEps)
	w.AddKV(a+"attention.sliding_window", uint32(cfg.SlidingWindow))
	if cfg.SlidingPattern > 0 {
		w.AddKV(a+"attention.sliding_window_pattern", uint32(cfg.SlidingPattern))
	}
	w.AddKV(a+"rope.freq_base", float32(cfg.RopeBase))
	if cfg.RopeBaseSWA > 0 {
		w.AddKV(a+"rope.freq_base_swa", float32(cfg.RopeBaseSWA))
	}
	cfg.AddRopeScaling(w, a)

	cfg.Tied = true
	return nn.WriteRandom(w, &cfg, nn.RandomWeights{Weights: &Model{}, Sizes: cfg.Sizes(), Rand: map[string]string{
		// Embedding rows of rms 0.3/sqrt(E) (norm 0.3): times sqrt(E), the
		// layers' outputs (normed, gains 0.3 and 3) outweigh them.
		// Otherwise, the output being tied, the current token's own logit
		// stands out (by E·|row|²/|x|) and greedy decoding repeats it.
		"token_embd.weight": "unit=0.3",
		// Final gains around 10 make logits of order 3.
		"output_norm.weight": "gain=10",
	}})
}
