package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// RandomConfig describes a random-weight model (model.BuildRandom, each
// Arch's Random). Zero values of the optional fields take the defaults
// noted.
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
	Tied        bool    // no output.weight (see Embeddings)
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

	// mistral3: attention.temperature_scale (0: not written) and, with yarn
	// scaling, rope.scaling.yarn_beta_fast, yarn_beta_slow and
	// yarn_log_multiplier (0: not written); OrigCtx is then the
	// original_context_length (0: ContextLen), which also floors the
	// temperature's positions.
	AttnTempScale                          float64
	YarnBetaFast, YarnBetaSlow, YarnLogMul float64

	// qwen3moe: expert_count, expert_used_count (0: 2) and
	// expert_feed_forward_length (0: FF).
	Experts    int
	ExpertUsed int
	ExpertFF   int

	Seed uint64
}

// Prepare fills in the optional fields and checks the sizes and the
// weight types, as every architecture's builder needs.
func (cfg RandomConfig) Prepare() (RandomConfig, error) {
	cfg = cfg.WithDefaults()
	if cfg.Layers <= 0 || cfg.Embd <= 0 || cfg.FF <= 0 || cfg.Heads <= 0 || cfg.Vocab <= 0 || cfg.HeadDim <= 0 || cfg.Heads%cfg.KVHeads != 0 {
		return cfg, fmt.Errorf("random model: invalid sizes %+v", cfg)
	}
	if cfg.Mix != "" && cfg.Mix != "Q4_K_M" {
		return cfg, fmt.Errorf("random model: unknown mix %q (Q4_K_M is the one known)", cfg.Mix)
	}
	if cfg.Mix == "Q4_K_M" {
		cfg.Type = kernels.Q4_K
	}
	if !cfg.Type.Supported() {
		return cfg, fmt.Errorf("random model: weight type %s is not supported", cfg.Type)
	}
	return cfg, nil
}

// WithDefaults fills in the optional fields that every architecture has.
func (cfg RandomConfig) WithDefaults() RandomConfig {
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

// Sizes is the Config that the dims tags of a random model's weights
// stand for: one value head per key head, every head dim rotated, the
// experts' width ExpertFF. An architecture adjusts what differs.
func (cfg *RandomConfig) Sizes() Config {
	return Config{Arch: cfg.Arch, Layers: cfg.Layers, Embd: cfg.Embd, FF: cfg.FF, Heads: cfg.Heads, KVHeads: cfg.KVHeads,
		HeadDim: cfg.HeadDim, ValueDim: cfg.HeadDim, Vocab: cfg.Vocab, RopeDim: cfg.HeadDim,
		Experts: cfg.Experts, ExpertFF: cfg.ExpertFF}
}

// AddRopeScaling writes rope.scaling.type (RopeScaling, default linear),
// factor and original_context_length (OrigCtx, default ContextLen) under
// prefix when RopeScale > 1.
func (cfg *RandomConfig) AddRopeScaling(w *gguf.Writer, prefix string) {
	if cfg.RopeScale <= 1 {
		return
	}
	typ := cfg.RopeScaling
	if typ == "" {
		typ = "linear"
	}
	w.AddKV(prefix+"rope.scaling.type", typ)
	w.AddKV(prefix+"rope.scaling.factor", float32(cfg.RopeScale))
	orig := cfg.OrigCtx
	if orig == 0 {
		orig = cfg.ContextLen
	}
	w.AddKV(prefix+"rope.scaling.original_context_length", uint32(orig))
}

// RandomWeights is what WriteRandom needs besides the RandomConfig.
type RandomWeights struct {
	// Weights points to the architecture's weights struct, the one Load
	// fills: its tags give each tensor's name, shape and distribution.
	Weights any
	// Sizes gives the dims tags their values (RandomConfig.Sizes).
	Sizes Config
	// Required are optional tensors written all the same (Load's
	// required); the other optional ones are left out, but for the tied
	// output when the model is not Tied and those given in Values.
	Required []string
	// Values holds computed tensors (rope factors) by name, F32 vectors
	// written as they are, no random values drawn.
	Values map[string][]float32
	// Rand replaces the rand tags of some tensors, by name: an
	// architecture's own scales of the fields of a shared struct
	// (Embeddings).
	Rand map[string]string
}

// WriteRandom adds the tensors of a random model to w in the order of the
// fields of rw.Weights, as Load reads them, drawing their values from one
// stream seeded by cfg.Seed. A field's `rand` tag says how its values are
// drawn (comma-separated):
//
//	gain=G   uniform in [0.9G, 1.1G): the default of vectors (G 1), norms' gains
//	unit=S   uniform in ±S·sqrt(3/in), in the first dim: variance S²/in,
//	         which keeps the scale of the input; the default of matrices (S 1)
//	bound=B  uniform in ±B
//	f32      a matrix kept in F32 (the experts' router), whatever cfg.Type
//
// Matrices have cfg's type for their name (with Mix, llama.cpp's), or the
// one llama.cpp falls back to when their rows do not fit its blocks.
func WriteRandom(w *gguf.Writer, cfg *RandomConfig, rw RandomWeights) error {
	rt := &randomTensors{w: w, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), cfg: cfg, rw: &rw,
		required: map[string]bool{}}
	for _, name := range rw.Required {
		rt.required[name] = true
	}
	rt.walk(reflect.TypeOf(rw.Weights).Elem(), "")
	return rt.err
}

// randomTensors draws a random model's values, in the order of the fields,
// and adds its tensors to w. The first error sticks: later tensors are not
// drawn nor added.
type randomTensors struct {
	w        *gguf.Writer
	rng      *rand.Rand
	cfg      *RandomConfig
	rw       *RandomWeights
	required map[string]bool
	err      error
}

// walk adds the tensors of the fields of struct type t, as loader.load
// reads them.
func (r *randomTensors) walk(t reflect.Type, prefix string) {
	for i := 0; i < t.NumField() && r.err == nil; i++ {
		field := t.Field(i)
		tag, ok := field.Tag.Lookup("gguf")
		switch {
		case !ok:
			if field.Type.Kind() == reflect.Struct && field.IsExported() {
				r.walk(field.Type, prefix)
			}
		case tag == "blk":
			for n := range r.rw.Sizes.Layers {
				r.walk(field.Type.Elem(), "blk."+strconv.Itoa(n)+".")
			}
		default:
			r.tensor(field, tag, prefix)
		}
	}
}

// tensor adds the tensor of one tagged field, if the model has it.
func (r *randomTensors) tensor(field reflect.StructField, tag, prefix string) {
	base, opts, _ := strings.Cut(tag, ",")
	name := prefix + base
	values, computed := r.rw.Values[base]
	switch {
	case computed:
		r.add(name, kernels.F32, []uint64{uint64(len(values))}, f32Bytes(values))
		return
	case opts == "tied" && r.cfg.Tied, opts == "optional" && !r.required[base]:
		return
	}
	dims, err := tagDims(&r.rw.Sizes, field.Tag.Get("dims"))
	if err != nil {
		r.err = fmt.Errorf("random model: tensor %s: %v", name, err)
		return
	}
	spec, ok := r.rw.Rand[base]
	if !ok {
		spec = field.Tag.Get("rand")
	}
	d, err := parseDraw(spec, field.Type == vectorType)
	if err != nil {
		panic(fmt.Sprintf("nn: tensor %s: %v", base, err)) // programming error in the tags
	}
	in := int(dims[0])
	switch {
	case field.Type == vectorType:
		r.add(name, kernels.F32, dims, f32Bytes(r.uniform(in, d.lo(in), d.hi(in))))
	case len(dims) == 2 || len(dims) == 3:
		typ := r.cfg.matrixType(name)
		if d.f32 {
			typ = kernels.F32
		}
		n := 1
		if len(dims) == 3 {
			n = int(dims[2])
		}
		r.weights(name, typ, in, int(dims[1]), n, d.hi(in))
	default:
		panic("nn: tensor " + base + " has neither one, two nor three dims") // programming error in the tags
	}
}

// draw is a parsed rand tag: values uniform in [lo, hi).
type draw struct {
	gain, unit, bound float64 // the one set says which
	f32               bool
}

func parseDraw(spec string, vector bool) (draw, error) {
	d := draw{unit: 1}
	if vector {
		d = draw{gain: 1}
	}
	for _, part := range strings.Split(spec, ",") {
		key, val, hasVal := strings.Cut(part, "=")
		x := 1.0
		if hasVal {
			var err error
			if x, err = strconv.ParseFloat(val, 64); err != nil {
				return d, fmt.Errorf("rand tag %q: %v", spec, err)
			}
		}
		switch key {
		case "":
		case "gain":
			d.gain, d.unit, d.bound = x, 0, 0
		case "unit":
			d.gain, d.unit, d.bound = 0, x, 0
		case "bound":
			d.gain, d.unit, d.bound = 0, 0, x
		case "f32":
			d.f32 = true
		default:
			return d, fmt.Errorf("rand tag %q: unknown %q", spec, key)
		}
	}
	return d, nil
}

func (d draw) lo(in int) float64 {
	if d.gain != 0 {
		return 0.9 * d.gain
	}
	return -d.hi(in)
}

func (d draw) hi(in int) float64 {
	switch {
	case d.gain != 0:
		return 1.1 * d.gain
	case d.unit != 0:
		return d.unit * unitBound(in)
	}
	return d.bound
}

// uniform draws n values uniform in [lo, hi).
func (r *randomTensors) uniform(n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*r.rng.Float64())
	}
	return v
}

// weights adds n matrices of out rows of in values uniform in ±bound (a
// 3-D tensor [in, out, n] when n > 1) of type typ, or the type llama.cpp
// falls back to when the rows do not fit its blocks.
func (r *randomTensors) weights(name string, typ kernels.Type, in, out, n int, bound float64) {
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
	r.add(name, t, dims, data)
}

func (r *randomTensors) add(name string, t kernels.Type, dims []uint64, data []byte) {
	r.err = r.w.AddTensor(name, t, dims, data)
}

// unitBound is the bound of weights of variance 1/in, which keep the scale
// of their input.
func unitBound(in int) float64 { return math.Sqrt(3 / float64(in)) }

// matrixType is the type of the weight matrix called name: with Mix
// Q4_K_M, Q6_K for the output (the embedding when tied, as llama.cpp) and
// for some layers' attn_v and ffn_down.
func (cfg *RandomConfig) matrixType(name string) kernels.Type {
	if cfg.Mix != "Q4_K_M" {
		return cfg.Type
	}
	moreBits := func(l int) bool {
		n := cfg.Layers
		return l < n/8 || l >= 7*n/8 || (l-n/8)%3 == 2
	}
	if name == "output.weight" || (name == "token_embd.weight" && cfg.Tied) {
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

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	kernels.Quantize(kernels.F32, v, b)
	return b
}
