package phi3

import (
	"fmt"
	"math"

	"mistralrs/internal/gguf"
	"mistralrs/internal/model/nn"
)

// Random writes a random phi3 model: fused attn_qkv and gate|up ffn_up,
// rope over cfg.RopeDim dims (NEOX), LongRoPE factors with cfg.RopeFreqs,
// and an attention.sliding_window that the architecture ignores
// (cfg.SlidingWindow, else ContextLen/2-1 as Phi-3-mini-4k's 2047).
func Random(cfg nn.RandomConfig, w *gguf.Writer) error {
	hd := cfg.HeadDim
	rd := cfg.RopeDim
	if rd == 0 {
		rd = hd
	}
	orig := cfg.OrigCtx
	if orig == 0 {
		orig = cfg.ContextLen
	}
	if rd <= 0 || rd > hd || rd%2 != 0 || orig <= 1 {
		return fmt.Errorf("random phi3: rope dims %d (head %d) or original context %d invalid", rd, hd, orig)
	}
	window := cfg.SlidingWindow
	if window == 0 {
		window = cfg.ContextLen/2 - 1
	}
	const a = "phi3."
	w.AddKV("general.architecture", "phi3")
	w.AddKV("general.name", "random phi3")
	w.AddKV(a+"block_count", uint32(cfg.Layers))
	w.AddKV(a+"context_length", uint32(cfg.ContextLen))
	w.AddKV(a+"rope.scaling.original_context_length", uint32(orig))
	w.AddKV(a+"embedding_length", uint32(cfg.Embd))
	w.AddKV(a+"feed_forward_length", uint32(cfg.FF))
	w.AddKV(a+"attention.head_count", uint32(cfg.Heads))
	w.AddKV(a+"attention.head_count_kv", uint32(cfg.KVHeads))
	if cfg.Embd != cfg.Heads*hd {
		w.AddKV(a+"attention.key_length", uint32(hd))
		w.AddKV(a+"attention.value_length", uint32(hd))
	}
	w.AddKV(a+"attention.layer_norm_rms_epsilon", cfg.RMSEps)
	w.AddKV(a+"rope.dimension_count", uint32(rd))
	w.AddKV(a+"rope.freq_base", float32(cfg.RopeBase))
	w.AddKV(a+"attention.sliding_window", uint32(window))
	rw := nn.RandomWeights{Weights: &Model{}, Sizes: cfg.Sizes(), Required: []string{"attn_qkv.weight"}}
	rw.Sizes.RopeDim = rd
	if cfg.RopeFreqs {
		// As the converter computes it for LongRoPE.
		af := 1.0
		if s := float64(cfg.ContextLen) / float64(orig); s > 1 {
			af = math.Sqrt(1 + math.Log(s)/math.Log(float64(orig)))
		}
		w.AddKV(a+"rope.scaling.attn_factor", float32(af))
		long, short := longRoPE(rd / 2)
		rw.Values = map[string][]float32{"rope_factors_long.weight": long, "rope_factors_short.weight": short}
	}
	return nn.WriteRandom(w, &cfg, rw)
}

// longRoPE makes Phi-3.5-like factors for n rotated pairs: long ones grow
// from 1 to ~16 over the pairs, short ones stay near 1.
func longRoPE(n int) (long, short []float32) {
	long, short = make([]float32, n), make([]float32, n)
	for i := range n {
		x := float64(i) / float64(max(n-1, 1))
		long[i] = float32(1 + 15*x*x)
		short[i] = float32(1 + 0.2*x)
	}
	return long, short
}
