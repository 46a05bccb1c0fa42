package model

import (
	"fmt"
	"math"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// randomGemma3 writes a random gemma3 model (BuildRandom's Random for
// gemma3; cfg has its defaults and is checked). The output is always tied
// to the embeddings, as in Google's models. Norm gains are stored as
// llama.cpp's converter stores them (to be multiplied as they are): the
// post-attention ones around 0.3 and the post-MLP ones around 3, as in
// shared/testdata/reference-archs, so that greedy decoding does not just
// repeat the current token; the others around 1.
func randomGemma3(cfg RandomConfig, w *gguf.Writer) error {
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
	if cfg.RopeScale > 1 {
		typ := cfg.RopeScaling
		if typ == "" {
			typ = "linear"
		}
		w.AddKV(a+"rope.scaling.type", typ)
		w.AddKV(a+"rope.scaling.factor", float32(cfg.RopeScale))
		w.AddKV(a+"rope.scaling.original_context_length", uint32(cfg.ContextLen))
	}

	rt := newRandomTensors(w, cfg.Seed)
	vector := rt.vector
	weights := func(name string, typ kernels.Type, in, out int, r float64) { rt.weights(name, typ, in, out, 1, r) }
	// matrix has variance 1/in: it keeps the scale of its input.
	matrix := func(name string, in, out int) { weights(name, cfg.matrixType(name), in, out, unitBound(in)) }
	gains := func(n int, g float64) []float32 { return rt.uniform(n, 0.9*g, 1.1*g) }

	E, F := cfg.Embd, cfg.FF
	q, kv := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	// Embedding rows of rms 0.3/sqrt(E) (norm 0.3): times sqrt(E), the
	// layers' outputs (normed, gains 0.3 and 3) outweigh them. Otherwise,
	// the output being tied, the current token's own logit stands out
	// (by E·|row|²/|x|) and greedy decoding repeats it. The final gains,
	// around 10, make logits of order 3.
	weights("token_embd.weight", cfg.matrixType("output.weight"), E, cfg.Vocab, 0.3*math.Sqrt(3/float64(E)))
	vector("output_norm.weight", gains(E, 10))
	for l := range cfg.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		vector(p+"attn_norm.weight", gains(E, 1))
		matrix(p+"attn_q.weight", E, q)
		matrix(p+"attn_k.weight", E, kv)
		matrix(p+"attn_v.weight", E, kv)
		matrix(p+"attn_output.weight", q, E)
		vector(p+"attn_q_norm.weight", gains(cfg.HeadDim, 1))
		vector(p+"attn_k_norm.weight", gains(cfg.HeadDim, 1))
		vector(p+"post_attention_norm.weight", gains(E, 0.3))
		vector(p+"ffn_norm.weight", gains(E, 1))
		matrix(p+"ffn_gate.weight", E, F)
		matrix(p+"ffn_up.weight", E, F)
		matrix(p+"ffn_down.weight", F, E)
		vector(p+"post_ffw_norm.weight", gains(E, 3))
	}
	return rt.err
}
