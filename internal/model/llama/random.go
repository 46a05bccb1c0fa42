package llama

import (
	"fmt"

	"mistralrs/internal/gguf"
	"mistralrs/internal/model/nn"
)

// Random writes a random llama, qwen2 (q/k/v biases), qwen3 (q/k norms),
// mixtral (llama with Experts of width FF), qwen2moe (Experts of width
// ExpertFF, default FF, and a shared expert of width FF) or mistral3
// (llama with its temperature and YaRN keys, addMistral3) model.
func Random(cfg nn.RandomConfig, w *gguf.Writer) error {
	a := cfg.Arch + "."
	w.AddKV("general.architecture", cfg.Arch)
	w.AddKV("general.name", "random "+cfg.Arch)
	w.AddKV(a+"block_count", uint32(cfg.Layers))
	w.AddKV(a+"context_length", uint32(cfg.ContextLen))
	w.AddKV(a+"embedding_length", uint32(cfg.Embd))
	if cfg.PoolingType > 0 {
		w.AddKV(a+"pooling_type", uint32(cfg.PoolingType))
	}
	w.AddKV(a+"feed_forward_length", uint32(cfg.FF))
	w.AddKV(a+"attention.head_count", uint32(cfg.Heads))
	w.AddKV(a+"attention.head_count_kv", uint32(cfg.KVHeads))
	w.AddKV(a+"attention.key_length", uint32(cfg.HeadDim))
	w.AddKV(a+"attention.value_length", uint32(cfg.HeadDim))
	w.AddKV(a+"rope.dimension_count", uint32(cfg.HeadDim))
	w.AddKV(a+"rope.freq_base", float32(cfg.RopeBase))
	w.AddKV(a+"attention.layer_norm_rms_epsilon", cfg.RMSEps)
	cfg.AddRopeScaling(w, a)
	if cfg.Arch == "mistral3" {
		if err := addMistral3(&cfg, w); err != nil {
			return err
		}
	}
	if err := addExperts(&cfg, w); err != nil {
		return err
	}
	rw := nn.RandomWeights{Weights: &Model{}, Sizes: cfg.Sizes(), Required: required(cfg.Arch)}
	if cfg.Experts > 0 {
		rw.Weights = &MoEModel{}
	}
	if cfg.RopeFreqs {
		rw.Values = map[string][]float32{"rope_freqs.weight": llama3Factors(cfg.HeadDim / 2)}
	}
	return nn.WriteRandom(w, &cfg, rw)
}

// addExperts writes the experts' metadata of a mixtral or qwen2moe model
// and sets cfg.ExpertFF.
func addExperts(cfg *nn.RandomConfig, w *gguf.Writer) error {
	a := cfg.Arch + "."
	if cfg.Arch == "qwen2moe" && cfg.Experts == 0 {
		return fmt.Errorf("random model: qwen2moe needs Experts")
	}
	if cfg.Experts == 0 {
		return nil
	}
	switch {
	case cfg.Arch == "qwen2moe":
		if cfg.ExpertFF == 0 {
			cfg.ExpertFF = cfg.FF
		}
		// Routed experts of ExpertFF, a shared expert of FF.
		w.AddKV(a+"expert_feed_forward_length", uint32(cfg.ExpertFF))
		w.AddKV(a+"expert_shared_feed_forward_length", uint32(cfg.FF))
	case cfg.Arch != "llama" || (cfg.ExpertFF != 0 && cfg.ExpertFF != cfg.FF):
		return fmt.Errorf("random model: experts in the llama layout (mixtral) have the width FF (%s, ExpertFF %d, FF %d)", cfg.Arch, cfg.ExpertFF, cfg.FF)
	default:
		cfg.ExpertFF = cfg.FF
	}
	used := cfg.ExpertUsed
	if used == 0 {
		used = 2
	}
	w.AddKV(a+"expert_count", uint32(cfg.Experts))
	w.AddKV(a+"expert_used_count", uint32(used))
	return nil
}

// llama3Factors are n llama3-style frequency divisors: high frequencies
// kept, low ones divided by up to 8.
func llama3Factors(n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(1 + 7*float64(i)/float64(max(len(f)-1, 1)))
	}
	return f
}

// RandomQwen3MoE writes a random qwen3moe model: qwen3 attention with
// per-head q/k norms, and per layer a router (ffn_gate_inp, always F32)
// over cfg.Experts experts of width cfg.ExpertFF (default FF) stored as
// 3-D tensors ffn_{gate,up,down}_exps, cfg.ExpertUsed (default 2) of them
// used per token.
func RandomQwen3MoE(cfg nn.RandomConfig, w *gguf.Writer) error {
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
	return nn.WriteRandom(w, &cfg, nn.RandomWeights{Weights: &MoEModel{}, Sizes: cfg.Sizes(), Required: required("qwen3moe")})
}

// addMistral3 writes mistral3's attention temperature and YaRN keys, those
// of cfg that are set (the original context length as well when only the
// temperature needs it).
func addMistral3(cfg *nn.RandomConfig, w *gguf.Writer) error {
	const a = "mistral3."
	yarn := cfg.RopeScale > 1 && cfg.RopeScaling == "yarn"
	switch {
	case cfg.Experts > 0:
		return fmt.Errorf("random model: mistral3 has no experts")
	case !yarn && (cfg.YarnBetaFast != 0 || cfg.YarnBetaSlow != 0 || cfg.YarnLogMul != 0):
		return fmt.Errorf("random model: mistral3's YaRN keys need RopeScaling yarn and RopeScale > 1")
	}
	if cfg.AttnTempScale != 0 {
		w.AddKV(a+"attention.temperature_scale", float32(cfg.AttnTempScale))
		if cfg.RopeScale <= 1 && cfg.OrigCtx > 0 {
			w.AddKV(a+"rope.scaling.original_context_length", uint32(cfg.OrigCtx))
		}
	}
	keys := []struct {
		name string
		v    float64
	}{{"yarn_beta_fast", cfg.YarnBetaFast}, {"yarn_beta_slow", cfg.YarnBetaSlow}, {"yarn_log_multiplier", cfg.YarnLogMul}}
	for _, k := range keys {
		if k.v != 0 {
			w.AddKV(a+"rope.scaling."+k.name, float32(k.v))
		}
	}
	return nil
}
