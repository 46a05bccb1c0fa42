package model

import (
	"fmt"

	"mistralrs/internal/kernels"
)

// KVCache stores the keys and values of one sequence, per layer and
// position. Rows are written as float32 and stored as float32 or halves (an
// F16 cache: half the memory, rounded to nearest even): a key row has
// Config.KDim() elements (all KV heads), a value row Config.VDim().
//
// The interface is shaped so that a paged (block-table) cache can implement
// it: rows are written one at a time with Put and read back as runs of
// consecutive positions (Span), one run per block.
//
// Forward uses a cache as follows, for a step writing positions [pos, n):
// Truncate(pos), Extend(n), then per layer Put for each new position and
// Span reads of positions [0, n). A cache is used by one Forward at a time.
type KVCache interface {
	// Len is the number of positions stored.
	Len() int
	// Extend makes room for positions [Len(), n) and sets Len to n; the
	// caller then fills those rows of every layer with Put. It fails when
	// the cache cannot hold n positions. A paged cache allocates blocks here
	// (and copies a block it shares with another sequence before rows of it
	// are overwritten).
	Extend(n int) error
	// Truncate forgets positions [n, Len()); n > Len() is a no-op.
	Truncate(n int)
	// Put stores the key and value rows of position pos (< Len) of layer.
	Put(layer, pos int, k, v []float32)
	// Span returns the key and value rows of layer from position pos on,
	// as far as they lie contiguously in memory. Its N may reach past Len;
	// callers stop at Len.
	Span(layer, pos int) KVSpan
}

// KVSpan is a run of N cached rows of one layer, positions pos..pos+N-1:
// row j at K[j*KDim:] and V[j*VDim:] in a float32 cache, at K16 and V16 in
// an F16 cache (K and V are then nil).
type KVSpan struct {
	K, V     []float32
	K16, V16 []uint16
	N        int
}

// ContiguousCache is a KVCache holding each layer's rows in one growing
// array.
type ContiguousCache struct {
	layers     int
	kdim, vdim int
	max        int // most positions it may hold
	n          int // positions stored
	k, v       [][]float32
	k16, v16   [][]uint16 // instead of k, v in an F16 cache
	f16        bool
}

var _ KVCache = (*ContiguousCache)(nil)

// NewContiguousCache returns an empty cache for a model with configuration
// cfg that holds at most maxTokens positions (cfg.ContextLen when <= 0).
// Memory is allocated as positions are added.
func NewContiguousCache(cfg Config, maxTokens int) *ContiguousCache {
	if maxTokens <= 0 {
		maxTokens = cfg.ContextLen
	}
	return &ContiguousCache{
		layers: cfg.Layers, kdim: cfg.KDim(), vdim: cfg.VDim(), max: maxTokens,
		k: make([][]float32, cfg.Layers), v: make([][]float32, cfg.Layers),
	}
}

// NewContiguousCacheF16 is NewContiguousCache storing halves.
func NewContiguousCacheF16(cfg Config, maxTokens int) *ContiguousCache {
	c := NewContiguousCache(cfg, maxTokens)
	c.f16, c.k, c.v = true, nil, nil
	c.k16, c.v16 = make([][]uint16, cfg.Layers), make([][]uint16, cfg.Layers)
	return c
}

// Len implements KVCache.
func (c *ContiguousCache) Len() int { return c.n }

// Cap is the most positions the cache may hold.
func (c *ContiguousCache) Cap() int { return c.max }

// Extend implements KVCache; it grows the arrays by doubling.
func (c *ContiguousCache) Extend(n int) error {
	if n > c.max {
		return fmt.Errorf("kv cache full: %d positions needed, room for %d", n, c.max)
	}
	if n <= c.n {
		return nil
	}
	var have int // positions the arrays hold
	if c.f16 {
		have = len(c.k16[0]) / max(c.kdim, 1)
	} else {
		have = len(c.k[0]) / max(c.kdim, 1)
	}
	if n > have {
		size := min(max(n, 2*have, 16), c.max)
		for l := range c.layers {
			if c.f16 {
				c.k16[l] = regrow(c.k16[l], c.n*c.kdim, size*c.kdim)
				c.v16[l] = regrow(c.v16[l], c.n*c.vdim, size*c.vdim)
			} else {
				c.k[l] = regrow(c.k[l], c.n*c.kdim, size*c.kdim)
				c.v[l] = regrow(c.v[l], c.n*c.vdim, size*c.vdim)
			}
		}
	}
	c.n = n
	return nil
}

// Truncate implements KVCache.
func (c *ContiguousCache) Truncate(n int) {
	if n < c.n {
		c.n = max(n, 0)
	}
}

// regrow returns a slice of length size holding b's first keep values.
func regrow[T float32 | uint16](b []T, keep, size int) []T {
	out := make([]T, size)
	copy(out, b[:keep])
	return out
}

// Put implements KVCache.
func (c *ContiguousCache) Put(layer, pos int, k, v []float32) {
	if c.f16 {
		kernels.F32ToF16s(c.k16[layer][pos*c.kdim:(pos+1)*c.kdim], k[:c.kdim])
		kernels.F32ToF16s(c.v16[layer][pos*c.vdim:(pos+1)*c.vdim], v[:c.vdim])
		return
	}
	copy(c.k[layer][pos*c.kdim:(pos+1)*c.kdim], k)
	copy(c.v[layer][pos*c.vdim:(pos+1)*c.vdim], v)
}

// Span implements KVCache: all stored rows are contiguous.
func (c *ContiguousCache) Span(layer, pos int) KVSpan {
	if c.f16 {
		return KVSpan{K16: c.k16[layer][pos*c.kdim : c.n*c.kdim], V16: c.v16[layer][pos*c.vdim : c.n*c.vdim], N: c.n - pos}
	}
	return KVSpan{K: c.k[layer][pos*c.kdim : c.n*c.kdim], V: c.v[layer][pos*c.vdim : c.n*c.vdim], N: c.n - pos}
}
