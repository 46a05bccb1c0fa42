// Package model holds the transformer architectures (llama, qwen2, qwen3)
// and their batched forward pass over GGUF weights.
package model

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kvcache"
)

// Config holds the hyper-parameters of a model, read from GGUF metadata.
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

	TiedOutput bool // no output.weight: logits use token_embd.weight
}

// QDim is the width of the query projection (all heads).
func (c *Config) QDim() int { return c.Heads * c.HeadDim }

// KDim is the width of one cached key row (all KV heads).
func (c *Config) KDim() int { return c.KVHeads * c.HeadDim }

// VDim is the width of one cached value row (all KV heads).
func (c *Config) VDim() int { return c.KVHeads * c.ValueDim }

// KVShape is the shape of the rows the KV cache stores for this model.
func (c *Config) KVShape() kvcache.Shape {
	return kvcache.Shape{Layers: c.Layers, KDim: c.KDim(), VDim: c.VDim()}
}

// ODim is the width of the attention output before attn_output.
func (c *Config) ODim() int { return c.Heads * c.ValueDim }

// arch describes what differs between the supported architectures.
type arch struct {
	neox     bool     // NEOX rope pairing
	required []string // per-layer tensors (suffixes) that are optional in general but required here
}

var archs = map[string]arch{
	// GGUF llama q/k weights are permuted by the converter so that the
	// consecutive-pair ("normal") rotation applies.
	"llama": {neox: false},
	"qwen2": {neox: true, required: []string{"attn_q.bias", "attn_k.bias", "attn_v.bias"}},
	"qwen3": {neox: true, required: []string{"attn_q_norm.weight", "attn_k_norm.weight"}},
}

// SupportedArchitectures lists the values of general.architecture that Load accepts.
func SupportedArchitectures() []string {
	names := make([]string, 0, len(archs))
	for n := range archs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// readConfig reads the hyper-parameters of architecture a (vocab size and
// tied output are filled in by the tensor loader).
func readConfig(f *gguf.File) (Config, error) {
	name, ok := f.String("general.architecture")
	if !ok {
		return Config{}, fmt.Errorf("%s: missing metadata key general.architecture", f.Path)
	}
	a, ok := archs[name]
	if !ok {
		return Config{}, fmt.Errorf("%s: unsupported architecture %q (supported: %s)",
			f.Path, name, strings.Join(SupportedArchitectures(), ", "))
	}
	r := keyReader{f: f, prefix: name + "."}
	c := Config{Arch: name, RopeNeox: a.neox}
	c.Layers = r.int("block_count", -1)
	c.Embd = r.int("embedding_length", -1)
	c.FF = r.int("feed_forward_length", -1)
	c.Heads = r.int("attention.head_count", -1)
	c.ContextLen = r.int("context_length", -1)
	c.RMSEps = float32(r.float("attention.layer_norm_rms_epsilon", math.NaN()))
	if r.err != nil {
		return Config{}, r.err
	}
	if n := r.int("expert_count", 0); n > 0 {
		return Config{}, fmt.Errorf("%s: %s: mixture-of-experts models (%sexpert_count = %d) are not supported", f.Path, name, r.prefix, n)
	}
	c.KVHeads = r.int("attention.head_count_kv", c.Heads)
	if c.Heads > 0 && c.Embd%c.Heads == 0 {
		c.HeadDim = c.Embd / c.Heads
	}
	if _, ok := f.Get(r.prefix + "attention.key_length"); !ok && c.Heads > 0 && c.Embd%c.Heads != 0 {
		return Config{}, fmt.Errorf("%s: %s: %sembedding_length %d is not a multiple of %sattention.head_count %d, and no %sattention.key_length gives the head size",
			f.Path, name, r.prefix, c.Embd, r.prefix, c.Heads, r.prefix)
	}
	c.HeadDim = r.int("attention.key_length", c.HeadDim)
	c.ValueDim = r.int("attention.value_length", c.HeadDim)
	c.RopeDim = r.int("rope.dimension_count", c.HeadDim)
	c.RopeBase = r.float("rope.freq_base", 10000)
	c.RopeScale = r.float("rope.scaling.factor", r.float("rope.scale_linear", 1))
	c.RopeOrigCtx = r.int("rope.scaling.original_context_length", c.ContextLen)
	switch pt := r.int("pooling_type", 0); pt {
	case 0, 1:
		c.Pooling = "mean"
	case 2:
		c.Pooling = "cls"
	case 3:
		c.Pooling = "last"
	case 4:
		c.Pooling = "rank"
	default:
		return Config{}, fmt.Errorf("%s: %spooling_type %d is unknown (0 none, 1 mean, 2 cls, 3 last, 4 rank)", f.Path, r.prefix, pt)
	}
	c.RopeScaling = "linear" // llama.cpp's default when a factor is given without a type
	if s, ok := f.String(r.prefix + "rope.scaling.type"); ok {
		c.RopeScaling = s
	}
	if r.err != nil {
		return Config{}, r.err
	}
	if c.RopeScale == 0 {
		c.RopeScale = 1
	}
	if c.RopeScaling == "linear" && c.RopeScale == 1 {
		c.RopeScaling = "none"
	}
	return c, c.validate(f.Path)
}

func (c *Config) validate(path string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s", path, c.Arch, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Layers <= 0 || c.Embd <= 0 || c.FF <= 0 || c.Heads <= 0 || c.KVHeads <= 0:
		return bad("block_count %d, embedding_length %d, feed_forward_length %d, head_count %d, head_count_kv %d must all be positive",
			c.Layers, c.Embd, c.FF, c.Heads, c.KVHeads)
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

// keyReader reads typed metadata under an architecture prefix, keeping the
// first error so that the caller checks once.
type keyReader struct {
	f      *gguf.File
	prefix string
	err    error
}

// int reads key; def < 0 means the key is required.
func (r *keyReader) int(key string, def int) int {
	full := r.prefix + key
	v, present := r.f.Get(full)
	if !present {
		if def < 0 && r.err == nil {
			r.err = fmt.Errorf("%s: missing metadata key %s", r.f.Path, full)
		}
		return def
	}
	n, ok := r.f.Uint(full)
	if !ok || n > math.MaxInt32 {
		if r.err == nil {
			r.err = fmt.Errorf("%s: metadata key %s = %v is not a non-negative integer", r.f.Path, full, v)
		}
		return 0
	}
	return int(n)
}

// float reads key; a NaN default means the key is required.
func (r *keyReader) float(key string, def float64) float64 {
	full := r.prefix + key
	v, present := r.f.Get(full)
	if !present {
		if math.IsNaN(def) && r.err == nil {
			r.err = fmt.Errorf("%s: missing metadata key %s", r.f.Path, full)
		}
		return def
	}
	x, ok := r.f.Float(full)
	if !ok {
		if r.err == nil {
			r.err = fmt.Errorf("%s: metadata key %s = %v is not a number", r.f.Path, full, v)
		}
		return 0
	}
	return x
}
