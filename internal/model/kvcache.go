package model

import "fmt"

// KVCache stores the keys and values of one sequence, per layer and
// position. Rows are float32: a key row has Config.KDim() elements (all KV
// heads), a value row Config.VDim().
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
	// as far as they lie contiguously in memory: rows pos..pos+n-1, row j at
	// k[j*KDim:] and v[j*VDim:]. n may reach past Len; callers stop at Len.
	Span(layer, pos int) (k, v []float32, n int)
}

// ContiguousCache is a KVCache holding each layer's rows in one growing
// array.
type ContiguousCache struct {
	layers     int
	kdim, vdim int
	max        int // most positions it may hold
	n          int // positions stored
	k, v       [][]float32
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
	if have := len(c.k[0]) / max(c.kdim, 1); n > have {
		size := min(max(n, 2*have, 16), c.max)
		for l := range c.layers {
			k := make([]float32, size*c.kdim)
			v := make([]float32, size*c.vdim)
			copy(k, c.k[l][:c.n*c.kdim])
			copy(v, c.v[l][:c.n*c.vdim])
			c.k[l], c.v[l] = k, v
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

// Put implements KVCache.
func (c *ContiguousCache) Put(layer, pos int, k, v []float32) {
	copy(c.k[layer][pos*c.kdim:(pos+1)*c.kdim], k)
	copy(c.v[layer][pos*c.vdim:(pos+1)*c.vdim], v)
}

// Span implements KVCache: all stored rows are contiguous.
func (c *ContiguousCache) Span(layer, pos int) (k, v []float32, n int) {
	return c.k[layer][pos*c.kdim : c.n*c.kdim], c.v[layer][pos*c.vdim : c.n*c.vdim], c.n - pos
}
