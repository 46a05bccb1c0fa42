package model

import (
	"fmt"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// randomQwen3MoE writes a random qwen3moe model (BuildRandom's Random for
// qwen3moe; cfg has its defaults and is checked): qwen3 attention with
// per-head q/k norms, and per layer a router (ffn_gate_inp, always F32)
// over cfg.Experts experts of width cfg.ExpertFF stored as 3-D tensors
// ffn_{gate,up,down}_exps, cfg.ExpertUsed of them used per token.
func randomQwen3MoE(cfg RandomConfig, w *gguf.Writer) error {
	if cfg.ExpertUsed == 0 {
		cfg.ExpertUsed = 2
	}
	if cfg.ExpertFF == 0 {
		cfg.ExpertFF = cfg.FF
	}
	if cfg.Experts <= 0 || cfg.ExpertUsed <= 0 || cfg.ExpertUsed > cfg.Experts {
		return fmt.Errorf("random model: qwen3moe needs 1 <= ExpertUsed (%d) <= Experts (%d)", cfg.ExpertUsed, cfg.Experts)
	}
	const a = "qwen3moe."
	w.AddKV("general.architecture", "qwen3moe")
	w.AddKV("general.name", "random qwen3moe")
	w.AddKV(a+"block_count", uint32(cfg.Layers))
	w.AddKV(a+"context_length", uint32(cfg.ContextLen))
	w.AddKV(a+"embedding_length", uint32(cfg.Embd))
	w.AddKV(a+"feed_forward_length", uint32(cfg.FF))
	w.AddKV(a+"attention.head_count", uint32(cfg.Heads))
	w.AddKV(a+"attention.head_count_kv", uint32(cfg.KVHeads))
	w.AddKV(a+"attention.key_length", uint32(cfg.HeadDim))
	w.AddKV(a+"attention.value_length", uint32(cfg.HeadDim))
	w.AddKV(a+"rope.freq_base", float32(cfg.RopeBase))
	w.AddKV(a+"attention.layer_norm_rms_epsilon", cfg.RMSEps)
	w.AddKV(a+"expert_count", uint32(cfg.Experts))
	w.AddKV(a+"expert_used_count", uint32(cfg.ExpertUsed))
	w.AddKV(a+"expert_feed_forward_length", uint32(cfg.ExpertFF))

	rt := newRandomTensors(w, cfg.Seed)
	vector, tensor := rt.vector, rt.weights
	// matrix has variance 1/in, so that it keeps the scale of its input.
	matrix := func(name string, in, out, n int) { tensor(name, cfg.matrixType(name), in, out, n, unitBound(in)) }
	gains := func(n int) []float32 { return rt.uniform(n, 0.9, 1.1) }

	E, V, X, XF := cfg.Embd, cfg.Vocab, cfg.Experts, cfg.ExpertFF
	q, kv := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	tensor("token_embd.weight", cfg.Type, E, V, 1, 1) // unit-scale rows
	vector("output_norm.weight", gains(E))
	if !cfg.Tied {
		matrix("output.weight", E, V, 1)
	}
	for l := range cfg.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		vector(p+"attn_norm.weight", gains(E))
		matrix(p+"attn_q.weight", E, q, 1)
		matrix(p+"attn_k.weight", E, kv, 1)
		matrix(p+"attn_v.weight", E, kv, 1)
		matrix(p+"attn_output.weight", q, E, 1)
		vector(p+"attn_q_norm.weight", gains(cfg.HeadDim))
		vector(p+"attn_k_norm.weight", gains(cfg.HeadDim))
		vector(p+"ffn_norm.weight", gains(E))
		// Router logits of order one: distinct expert probabilities.
		tensor(p+"ffn_gate_inp.weight", kernels.F32, E, X, 1, unitBound(E))
		matrix(p+"ffn_gate_exps.weight", E, XF, X)
		matrix(p+"ffn_up_exps.weight", E, XF, X)
		matrix(p+"ffn_down_exps.weight", XF, E, X)
	}
	return rt.err
}
