package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// RandomConfig describes a random-weight model for BuildRandom. Zero
// values of the optional fields take the defaults noted.
type RandomConfig struct {
	Arch       string // llama, qwen2 (adds q/k/v biases) or qwen3 (adds q/k norms)
	Layers     int
	Embd       int
	FF         int
	Heads      int
	KVHeads    int // 0: Heads
	HeadDim    int // 0: Embd/Heads
	Vocab      int
	ContextLen int     // 0: 2048
	RopeBase   float64 // 0: 10000
	RMSEps     float32 // 0: 1e-5

	// Type of the weight matrices; norms, biases and rope factors are F32.
	// A matrix whose rows do not fit Type's blocks falls back as llama.cpp's
	// quantizer does (K-quants to Q5_0/Q5_1/Q8_0, then F16).
	Type kernels.Type
	// Mix "Q4_K_M" lays the matrices out as llama.cpp's Q4_K_M: Q4_K (Type
	// is ignored), Q6_K for the output matrix and for attn_v / ffn_down in
	// the first and last eighth of the layers and every third layer between.
	Mix         string
	Tied        bool    // no output.weight
	RopeFreqs   bool    // add a llama3-style rope_freqs.weight
	RopeScale   float64 // > 1: write rope.scaling.type/factor with RopeScaling
	RopeScaling string  // "linear" (default) or "yarn"
	PoolingType int     // > 0: write pooling_type (1 mean, 2 cls, 3 last)

	// gemma3: attention.sliding_window (0: 8), attention.sliding_window_pattern
	// (0: not written, llama.cpp's default 6; n > 0: period n, layer l global
	// iff l%n == n-1) and rope.freq_base_swa (0: not written, 1e4).
	SlidingWindow  int
	SlidingPattern int
	RopeBaseSWA    float64

	// phi3: rope.dimension_count (0: HeadDim; less rotates only the leading
	// dims of each head) and rope.scaling.original_context_length (0:
	// ContextLen). With RopeFreqs, phi3 writes LongRoPE factors instead
	// (rope_factors_long/short.weight, rope.scaling.attn_factor).
	RopeDim int
	OrigCtx int

	// qwen3moe: expert_count, expert_used_count (0: 2) and
	// expert_feed_forward_length (0: FF).
	Experts    int
	ExpertUsed int
	ExpertFF   int

	Seed uint64
}

// BuildRandom adds the metadata and tensors of a deterministic random model
// to w (tokenizer metadata is the caller's). Weights are scaled so that
// activations and logits stay of order one, like a trained model's.
func BuildRandom(cfg RandomConfig, w *gguf.Writer) error {
	if _, ok := archs[cfg.Arch]; !ok {
		return fmt.Errorf("random model: unsupported architecture %q", cfg.Arch)
	}
	cfg = cfg.withDefaults()
	if cfg.Layers <= 0 || cfg.Embd <= 0 || cfg.FF <= 0 || cfg.Heads <= 0 || cfg.Vocab <= 0 || cfg.HeadDim <= 0 || cfg.Heads%cfg.KVHeads != 0 {
		return fmt.Errorf("random model: invalid sizes %+v", cfg)
	}
	if cfg.Mix != "" && cfg.Mix != "Q4_K_M" {
		return fmt.Errorf("random model: unknown mix %q (Q4_K_M is the one known)", cfg.Mix)
	}
	if cfg.Mix == "Q4_K_M" {
		cfg.Type = kernels.Q4_K
	}
	if !cfg.Type.Supported() {
		return fmt.Errorf("random model: weight type %s is not supported", cfg.Type)
	}
	if build := archs[cfg.Arch].Random; build != nil {
		return build(cfg, w)
	}

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
	if cfg.RopeScale > 1 {
		typ := cfg.RopeScaling
		if typ == "" {
			typ = "linear"
		}
		w.AddKV(a+"rope.scaling.type", typ)
		w.AddKV(a+"rope.scaling.factor", float32(cfg.RopeScale))
		w.AddKV(a+"rope.scaling.original_context_length", uint32(cfg.ContextLen))
	}

	if cfg.Arch == "qwen2moe" && cfg.Experts == 0 {
		return fmt.Errorf("random model: qwen2moe needs Experts")
	}
	if cfg.Experts > 0 {
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
	}
	rt := newRandomTensors(w, cfg.Seed)
	uniform, vector := rt.uniform, rt.vector
	matrix := func(name string, in, out int) { rt.weights(name, cfg.matrixType(name), in, out, 1, unitBound(in)) }
	gains := func(n int) []float32 { return uniform(n, 0.9, 1.1) }

	E, F, V := cfg.Embd, cfg.FF, cfg.Vocab
	q, kv := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	rt.weights("token_embd.weight", cfg.Type, E, V, 1, 1) // unit-scale rows (variance 1/3)
	vector("output_norm.weight", gains(E))
	if !cfg.Tied {
		matrix("output.weight", E, V)
	}
	if cfg.RopeFreqs {
		// llama3 keeps high frequencies and divides low ones by up to 8.
		f := make([]float32, cfg.HeadDim/2)
		for i := range f {
			f[i] = float32(1 + 7*float64(i)/float64(max(len(f)-1, 1)))
		}
		vector("rope_freqs.weight", f)
	}
	// experts adds a router (F32, logits of order one) and n experts'
	// gate, up and down matrices as 3-D tensors [in, out, n].
	experts := func(p string, E, F, n int) {
		rt.weights(p+"ffn_gate_inp.weight", kernels.F32, E, n, 1, unitBound(E))
		rt.weights(p+"ffn_gate_exps.weight", cfg.Type, E, F, n, unitBound(E))
		rt.weights(p+"ffn_up_exps.weight", cfg.Type, E, F, n, unitBound(E))
		rt.weights(p+"ffn_down_exps.weight", cfg.Type, F, E, n, unitBound(F))
	}
	for l := range cfg.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		vector(p+"attn_norm.weight", gains(E))
		matrix(p+"attn_q.weight", E, q)
		matrix(p+"attn_k.weight", E, kv)
		matrix(p+"attn_v.weight", E, kv)
		matrix(p+"attn_output.weight", q, E)
		if cfg.Arch == "qwen2" || cfg.Arch == "qwen2moe" {
			vector(p+"attn_q.bias", uniform(q, -0.5, 0.5))
			vector(p+"attn_k.bias", uniform(kv, -0.5, 0.5))
			vector(p+"attn_v.bias", uniform(kv, -0.5, 0.5))
		}
		if cfg.Arch == "qwen3" {
			vector(p+"attn_q_norm.weight", gains(cfg.HeadDim))
			vector(p+"attn_k_norm.weight", gains(cfg.HeadDim))
		}
		vector(p+"ffn_norm.weight", gains(E))
		if cfg.Experts > 0 { // experts stored as 3-D tensors: mixtral's of width FF
			experts(p, E, cfg.ExpertFF, cfg.Experts)
			if cfg.Arch == "qwen2moe" { // and qwen2moe's shared expert of width FF
				vector(p+"ffn_gate_inp_shexp.weight", uniform(E, -unitBound(E), unitBound(E)))
				matrix(p+"ffn_gate_shexp.weight", E, F)
				matrix(p+"ffn_up_shexp.weight", E, F)
				matrix(p+"ffn_down_shexp.weight", F, E)
			}
			continue
		}
		matrix(p+"ffn_gate.weight", E, F)
		matrix(p+"ffn_up.weight", E, F)
		matrix(p+"ffn_down.weight", F, E)
	}
	return rt.err
}

// randomTensors draws a random model's values from one seed, in the order
// its builder asks for them, and adds its tensors to w. The first error
// sticks: later tensors are not drawn nor added.
type randomTensors struct {
	w   *gguf.Writer
	rng *rand.Rand
	err error
}

func newRandomTensors(w *gguf.Writer, seed uint64) *randomTensors {
	return &randomTensors{w: w, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// uniform draws n values uniform in [lo, hi).
func (r *randomTensors) uniform(n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*r.rng.Float64())
	}
	return v
}

// vector adds values as an F32 vector.
func (r *randomTensors) vector(name string, values []float32) {
	if r.err == nil {
		r.err = r.w.AddTensor(name, kernels.F32, []uint64{uint64(len(values))}, f32Bytes(values))
	}
}

// weights adds n matrices of out rows of in values uniform in ±bound (a
// 3-D tensor [in, out, n] when n > 1) of type typ, or the type llama.cpp
// falls back to when the rows do not fit its blocks.
func (r *randomTensors) weights(name string, typ kernels.Type, in, out, n int, bound float64) {
	if r.err != nil {
		return
	}
	vals := r.uniform(in*out*n, -bound, bound)
	t := typ.FitRow(in)
	size := t.RowSize(in)
	data := make([]byte, size*out*n)
	for row := range out * n {
		kernels.Quantize(t, vals[row*in:(row+1)*in], data[row*size:(row+1)*size])
	}
	dims := []uint64{uint64(in), uint64(out)}
	if n > 1 {
		dims = append(dims, uint64(n))
	}
	r.err = r.w.AddTensor(name, t, dims, data)
}

// unitBound is the bound of weights of variance 1/in, which keep the scale
// of their input.
func unitBound(in int) float64 { return math.Sqrt(3 / float64(in)) }

// matrixType is the type of the weight matrix called name.
func (cfg *RandomConfig) matrixType(name string) kernels.Type {
	if cfg.Mix != "Q4_K_M" {
		return cfg.Type
	}
	moreBits := func(l int) bool {
		n := cfg.Layers
		return l < n/8 || l >= 7*n/8 || (l-n/8)%3 == 2
	}
	if name == "output.weight" {
		return kernels.Q6_K
	}
	var l int
	var kind string
	if _, err := fmt.Sscanf(name, "blk.%d.%s", &l, &kind); err == nil &&
		(kind == "attn_v.weight" || kind == "ffn_down.weight") && moreBits(l) {
		return kernels.Q6_K
	}
	return kernels.Q4_K
}

// withDefaults fills in the optional fields.
func (cfg RandomConfig) withDefaults() RandomConfig {
	if cfg.KVHeads == 0 {
		cfg.KVHeads = cfg.Heads
	}
	if cfg.HeadDim == 0 && cfg.Heads > 0 {
		cfg.HeadDim = cfg.Embd / cfg.Heads
	}
	if cfg.ContextLen == 0 {
		cfg.ContextLen = 2048
	}
	if cfg.RopeBase == 0 {
		cfg.RopeBase = 10000
	}
	if cfg.RMSEps == 0 {
		cfg.RMSEps = 1e-5
	}
	return cfg
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	kernels.Quantize(kernels.F32, v, b)
	return b
}
