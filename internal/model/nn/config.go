// Package nn holds the building blocks that the architectures of
// internal/model are made of: the hyper-parameters read from GGUF metadata,
// the tagged-struct weight loader, the per-step scratch (Step) with its
// batched attention over the KV cache interface, RMSNorm, rotary
// embeddings and the gated MLPs; the registry entry type (Arch) and the
// random-weight writer that reads the same tags as the loader
// (WriteRandom). An architecture package holds its weights, a Forward that
// strings these blocks together, its registry entry and its random
// builder.
package nn

import (
	"fmt"
	"math"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kvcache"
)

// Config holds the hyper-parameters of a model, read from GGUF metadata.
// The common keys are read by ReadConfig; an architecture reads its own
// (sliding windows, experts) into the fields it uses.
type Config struct {
	Arch       string // general.architecture
	Layers     int    // block_count
	Embd       int    // embedding_length
	FF         int    // feed_forward_length
	Heads      int    // attention.head_count
	KVHeads    int    // attention.head_count_kv (GQA when < Heads)
	HeadDim    int    // attention.key_length: size of a query/key head
	ValueDim   int    // attention.value_length: size of a value head
	Vocab      int    // from token_embd.weight
	ContextLen int    // context_length the model was trained with
	RMSEps     float32
	// Pooling is how an embedding pools the final hidden states
	// (pooling_type): "mean" (1, and the default when the key is absent or
	// 0, none), "cls" (2: the first token), "last" (3: the last token, as
	// Qwen3-Embedding), "rank" (4: rerankers, not supported for embeddings).
	Pooling string

	RopeBase    float64 // rope.freq_base
	RopeDim     int     // rope.dimension_count: leading dims of each head that are rotated
	RopeNeox    bool    // pairs (x[i], x[i+d/2]) instead of (x[2i], x[2i+1])
	RopeScaling string  // "none", "linear" or "yarn"
	RopeScale   float64 // rope.scaling.factor (context extension factor), 1 when none
	RopeOrigCtx int     // rope.scaling.original_context_length (yarn)
	// YaRN's correction range and log multiplier (RopeParams), read by the
	// architectures whose llama.cpp graphs read them (mistral3); 0: the
	// defaults.
	YarnBetaFast, YarnBetaSlow, YarnLogMul float64

	// Llama-4-style attention temperature (mistral3): queries at position
	// p are multiplied by 1 + AttnTempScale·ln(1 + floor(p/AttnTempFloor))
	// after RoPE; 0: none.
	AttnTempScale float64
	AttnTempFloor int

	// Sliding-window attention (gemma3): SlidingWindow positions seen by
	// the layers marked in SlidingLayers (nil: none slide), whose rotary
	// embedding uses RopeBaseSWA and no scaling.
	SlidingWindow int
	SlidingLayers []bool
	RopeBaseSWA   float64

	// Mixture of experts (qwen3moe): ExpertUsed of Experts per token, each
	// with a gated MLP of width ExpertFF; the chosen experts' weights are
	// renormalised to sum to one when ExpertNorm.
	Experts    int
	ExpertUsed int
	ExpertFF   int
	ExpertNorm bool

	TiedOutput bool // no output.weight: logits use token_embd.weight
	// PackedBytes is the memory of the weights copied at load into the
	// layout of the instruction path's kernels (kernels.Matrix.PackedSize);
	// the file's pages of those tensors are handed back (gguf.File.Release).
	PackedBytes int64
}

// QDim is the width of the query projection (all heads).
func (c *Config) QDim() int { return c.Heads * c.HeadDim }

// KDim is the width of one cached key row (all KV heads).
func (c *Config) KDim() int { return c.KVHeads * c.HeadDim }

// VDim is the width of one cached value row (all KV heads).
func (c *Config) VDim() int { return c.KVHeads * c.ValueDim }

// ODim is the width of the attention output before attn_output.
func (c *Config) ODim() int { return c.Heads * c.ValueDim }

// KVShape is the shape of the rows the KV cache stores for this model.
func (c *Config) KVShape() kvcache.Shape {
	sh := kvcache.Shape{Layers: c.Layers, KDim: c.KDim(), VDim: c.VDim()}
	if c.SlidingWindow > 0 && len(c.SlidingLayers) == c.Layers {
		sh.Window, sh.Sliding = c.SlidingWindow, c.SlidingLayers
	}
	return sh
}

// Sliding reports whether layer l attends over a sliding window.
func (c *Config) Sliding(l int) bool {
	return c.SlidingWindow > 0 && l < len(c.SlidingLayers) && c.SlidingLayers[l]
}

// ReadConfig reads the keys every architecture has, under the prefix
// "<general.architecture>.". neox is the architecture's rope pairing.
// The caller reads its own keys with the returned reader and then calls
// Validate.
func ReadConfig(f *gguf.File, name string, neox bool) (Config, *KeyReader, error) {
	r := &KeyReader{F: f, Prefix: name + "."}
	c := Config{Arch: name, RopeNeox: neox}
	c.Layers = r.Int("block_count", -1)
	c.Embd = r.Int("embedding_length", -1)
	c.FF = r.Int("feed_forward_length", -1)
	c.Heads = r.Int("attention.head_count", -1)
	c.ContextLen = r.Int("context_length", -1)
	c.RMSEps = float32(r.Float("attention.layer_norm_rms_epsilon", math.NaN()))
	if r.Err != nil {
		return Config{}, nil, r.Err
	}
	if c.Layers > maxLayers { // before an architecture sizes anything by it
		return Config{}, nil, fmt.Errorf("%s: %s: %sblock_count %d is more than %d", f.Path, name, r.Prefix, c.Layers, maxLayers)
	}
	c.KVHeads = r.Int("attention.head_count_kv", c.Heads)
	if c.Heads > 0 && c.Embd%c.Heads == 0 {
		c.HeadDim = c.Embd / c.Heads
	}
	if _, ok := f.Get(r.Prefix + "attention.key_length"); !ok && c.Heads > 0 && c.Embd%c.Heads != 0 {
		return Config{}, nil, fmt.Errorf("%s: %s: %sembedding_length %d is not a multiple of %sattention.head_count %d, and no %sattention.key_length gives the head size",
			f.Path, name, r.Prefix, c.Embd, r.Prefix, c.Heads, r.Prefix)
	}
	c.HeadDim = r.Int("attention.key_length", c.HeadDim)
	c.ValueDim = r.Int("attention.value_length", c.HeadDim)
	c.RopeDim = r.Int("rope.dimension_count", c.HeadDim)
	c.RopeBase = r.Float("rope.freq_base", 10000)
	c.RopeScale = r.Float("rope.scaling.factor", r.Float("rope.scale_linear", 1))
	c.RopeOrigCtx = r.Int("rope.scaling.original_context_length", c.ContextLen)
	switch pt := r.Int("pooling_type", 0); pt {
	case 0, 1:
		c.Pooling = "mean"
	case 2:
		c.Pooling = "cls"
	case 3:
		c.Pooling = "last"
	case 4:
		c.Pooling = "rank"
	default:
		return Config{}, nil, fmt.Errorf("%s: %spooling_type %d is unknown (0 none, 1 mean, 2 cls, 3 last, 4 rank)", f.Path, r.Prefix, pt)
	}
	c.RopeScaling = "linear" // llama.cpp's default when a factor is given without a type
	if s, ok := f.String(r.Prefix + "rope.scaling.type"); ok {
		c.RopeScaling = s
	}
	if r.Err != nil {
		return Config{}, nil, r.Err
	}
	if c.RopeScale == 0 {
		c.RopeScale = 1
	}
	if c.RopeScaling == "linear" && c.RopeScale == 1 {
		c.RopeScaling = "none"
	}
	return c, r, nil
}

// maxLayers bounds block_count: the deepest models published have about
// 130 layers.
const maxLayers = 4096

// Validate checks the hyper-parameters; path names the file in the error.
func (c *Config) Validate(path string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s", path, c.Arch, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Layers <= 0 || c.Embd <= 0 || c.FF <= 0 || c.Heads <= 0 || c.KVHeads <= 0:
		return bad("block_count %d, embedding_length %d, feed_forward_length %d, head_count %d, head_count_kv %d must all be positive",
			c.Layers, c.Embd, c.FF, c.Heads, c.KVHeads)
	case c.Layers > maxLayers:
		return bad("block_count %d is more than %d", c.Layers, maxLayers)
	case c.Heads%c.KVHeads != 0:
		return bad("head_count %d is not a multiple of head_count_kv %d", c.Heads, c.KVHeads)
	case c.ContextLen <= 0 || c.ContextLen > 1<<24:
		return bad("context_length %d must be between 1 and %d", c.ContextLen, 1<<24)
	case c.HeadDim <= 0 || c.ValueDim <= 0:
		return bad("head size %d/%d (attention.key_length/value_length) must be positive", c.HeadDim, c.ValueDim)
	case c.RopeDim <= 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0:
		return bad("rope.dimension_count %d must be even and at most the head size %d", c.RopeDim, c.HeadDim)
	case !(c.RMSEps > 0):
		return bad("attention.layer_norm_rms_epsilon %v must be positive", c.RMSEps)
	case !(c.RopeBase > 0):
		return bad("rope.freq_base %v must be positive", c.RopeBase)
	case !(c.RopeScale > 0):
		return bad("rope.scaling.factor %v must be positive", c.RopeScale)
	case c.SlidingLayers != nil && !(c.RopeBaseSWA > 0):
		return bad("rope.freq_base_swa %v must be positive", c.RopeBaseSWA)
	case c.Experts < 0 || c.ExpertUsed < 0 || c.ExpertUsed > c.Experts || (c.Experts > 0 && (c.ExpertUsed == 0 || c.ExpertFF <= 0)):
		return bad("expert_count %d, expert_used_count %d, expert_feed_forward_length %d: need 1 <= used <= count and a positive width",
			c.Experts, c.ExpertUsed, c.ExpertFF)
	}
	switch c.RopeScaling {
	case "none", "linear":
	case "yarn":
		if c.RopeOrigCtx <= 0 {
			return bad("yarn rope scaling needs rope.scaling.original_context_length")
		}
	default:
		return bad("unsupported rope.scaling.type %q (supported: none, linear, yarn)", c.RopeScaling)
	}
	return nil
}

// KeyReader reads typed metadata under an architecture prefix, keeping the
// first error so that the caller checks once.
type KeyReader struct {
	F      *gguf.File
	Prefix string
	Err    error
}

// Int reads key; def < 0 means the key is required.
func (r *KeyReader) Int(key string, def int) int {
	full := r.Prefix + key
	v, present := r.F.Get(full)
	if !present {
		if def < 0 && r.Err == nil {
			r.Err = fmt.Errorf("%s: missing metadata key %s", r.F.Path, full)
		}
		return def
	}
	n, ok := r.F.Uint(full)
	if !ok || n > math.MaxInt32 {
		if r.Err == nil {
			r.Err = fmt.Errorf("%s: metadata key %s = %v is not a non-negative integer", r.F.Path, full, v)
		}
		return 0
	}
	return int(n)
}

// Float reads key; a NaN default means the key is required.
func (r *KeyReader) Float(key string, def float64) float64 {
	full := r.Prefix + key
	v, present := r.F.Get(full)
	if !present {
		if math.IsNaN(def) && r.Err == nil {
			r.Err = fmt.Errorf("%s: missing metadata key %s", r.F.Path, full)
		}
		return def
	}
	x, ok := r.F.Float(full)
	if !ok {
		if r.Err == nil {
			r.Err = fmt.Errorf("%s: metadata key %s = %v is not a number", r.F.Path, full, v)
		}
		return 0
	}
	return x
}

// Bool reads key, def when absent.
func (r *KeyReader) Bool(key string, def bool) bool {
	full := r.Prefix + key
	v, present := r.F.Get(full)
	if !present {
		return def
	}
	b, ok := v.(bool)
	if !ok && r.Err == nil {
		r.Err = fmt.Errorf("%s: metadata key %s = %v is not a boolean", r.F.Path, full, v)
	}
	return b
}
