package kvcache

import (
	"fmt"

	"mistralrs/internal/kernels"
)

// ContiguousCache is a Cache holding each layer's rows in one growing
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

var _ Cache = (*ContiguousCache)(nil)

// Shape is the size of a model's cached rows: layers, and the widths of a
// key row and a value row (all KV heads).
type Shape struct {
	Layers, KDim, VDim int
	// Window > 0 and Sliding (one flag per layer): the flagged layers
	// attend only the last Window positions, and a paged pool frees their
	// rows behind the window (window.go). A contiguous cache keeps all.
	Window  int
	Sliding []bool
}

// NewContiguousCache returns an empty cache of rows of shape sh that holds
// at most maxTokens positions, storing float32 values or, with f16, halves.
// Memory is allocated as positions are added.
func NewContiguousCache(sh Shape, maxTokens int, f16 bool) *ContiguousCache {
	if sh.Layers <= 0 || sh.KDim <= 0 || sh.VDim <= 0 || maxTokens <= 0 {
		panic(fmt.Sprintf("kvcache: invalid contiguous cache %+v of %d positions", sh, maxTokens))
	}
	c := &ContiguousCache{layers: sh.Layers, kdim: sh.KDim, vdim: sh.VDim, max: maxTokens, f16: f16}
	if f16 {
		c.k16, c.v16 = make([][]uint16, sh.Layers), make([][]uint16, sh.Layers)
	} else {
		c.k, c.v = make([][]float32, sh.Layers), make([][]float32, sh.Layers)
	}
	return c
}

// Len implements Cache.
func (c *ContiguousCache) Len() int { return c.n }

// Cap is the most positions the cache may hold.
func (c *ContiguousCache) Cap() int { return c.max }

// Extend implements Cache; it grows the arrays by doubling.
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

// Truncate implements Cache.
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

// Put implements Cache.
func (c *ContiguousCache) Put(layer, pos int, k, v []float32) {
	if c.f16 {
		kernels.F32ToF16s(c.k16[layer][pos*c.kdim:(pos+1)*c.kdim], k[:c.kdim])
		kernels.F32ToF16s(c.v16[layer][pos*c.vdim:(pos+1)*c.vdim], v[:c.vdim])
		return
	}
	copy(c.k[layer][pos*c.kdim:(pos+1)*c.kdim], k)
	copy(c.v[layer][pos*c.vdim:(pos+1)*c.vdim], v)
}

// Span implements Cache: all stored rows are contiguous.
func (c *ContiguousCache) Span(layer, pos int) Span {
	if c.f16 {
		return Span{K16: c.k16[layer][pos*c.kdim : c.n*c.kdim], V16: c.v16[layer][pos*c.vdim : c.n*c.vdim], N: c.n - pos}
	}
	return Span{K: c.k[layer][pos*c.kdim : c.n*c.kdim], V: c.v[layer][pos*c.vdim : c.n*c.vdim], N: c.n - pos}
}
