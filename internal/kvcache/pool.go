// Package kvcache holds the engine's KV caches: a paged pool of fixed-size
// blocks with per-sequence block tables and a block-level prefix cache (as
// vLLM's and mistral.rs's paged attention do), and, for the non-paged mode, a
// store of finished sequences' contiguous caches reused by longest prefix.
//
// Nothing here is safe for concurrent use: the engine's scheduler goroutine
// owns the pool and every sequence's cache.
package kvcache

import (
	"fmt"
)

// Pool is a fixed number of KV blocks, each holding BlockSize positions of
// every layer. A block is in use (referenced by one or more sequences'
// block tables), or free. Free blocks that hold a full block of a known
// prefix keep its hash, so that a later sequence with the same prefix can
// take them back; they sit on an LRU free list and lose their hash only when
// the list hands them out for new data (an eviction).
type Pool struct {
	layers, kdim, vdim, bs int
	stride                 int  // values of one layer in a block: bs*(kdim+vdim)
	f16                    bool // values stored as halves

	blocks []block
	// Free list: a doubly linked list through blocks[].prev/next with a
	// sentinel at index len(blocks); head (sentinel.next) is evicted first.
	nfree  int
	cached map[Hash]int32 // hash → block holding it

	evictions int64 // hash entries evicted, cumulative
}

type block struct {
	ref        int32
	prev, next int32 // free-list links; -1 when not on the list
	hashed     bool
	hash       Hash
	data       []float32 // allocated on first use (F32 pools)
	data16     []uint16  // allocated on first use (F16 pools)
}

// NewPool makes a pool of n blocks of blockSize positions of rows of shape
// sh, storing float32 values or, with f16, halves. Block memory is allocated when a block is first handed
// out, so an oversized pool costs only its bookkeeping until it fills.
func NewPool(sh Shape, blockSize, n int, f16 bool) *Pool {
	layers, kdim, vdim := sh.Layers, sh.KDim, sh.VDim
	if layers <= 0 || kdim <= 0 || vdim <= 0 || blockSize <= 0 || n <= 0 {
		panic(fmt.Sprintf("kvcache: invalid pool %d layers, rows %d/%d, block size %d, %d blocks", layers, kdim, vdim, blockSize, n))
	}
	p := &Pool{
		layers: layers, kdim: kdim, vdim: vdim, bs: blockSize,
		stride: blockSize * (kdim + vdim), f16: f16,
		blocks: make([]block, n+1),
		cached: make(map[Hash]int32),
	}
	s := int32(n) // sentinel
	p.blocks[s].prev, p.blocks[s].next = s, s
	for i := range n {
		p.blocks[i].prev, p.blocks[i].next = -1, -1
		p.pushTail(int32(i))
	}
	return p
}

// BlockBytes is the memory of one block of blockSize positions of rows of
// shape sh, of float32 values or (f16) halves.
func BlockBytes(sh Shape, blockSize int, f16 bool) int64 {
	size := int64(4)
	if f16 {
		size = 2
	}
	return int64(sh.Layers) * int64(blockSize) * int64(sh.KDim+sh.VDim) * size
}

// BlockSize is the number of positions per block.
func (p *Pool) BlockSize() int { return p.bs }

// Total is the number of blocks.
func (p *Pool) Total() int { return len(p.blocks) - 1 }

// Free is the number of blocks no sequence uses, cached ones included.
func (p *Pool) Free() int { return p.nfree }

// Used is Total - Free: the blocks sequences hold.
func (p *Pool) Used() int { return p.Total() - p.nfree }

// Cached is the number of blocks that hold a hashed prefix block (in use or free).
func (p *Pool) Cached() int { return len(p.cached) }

// Evictions is the number of cached hashes dropped to reuse their blocks so far.
func (p *Pool) Evictions() int64 { return p.evictions }

// Tokens is the number of positions the whole pool holds.
func (p *Pool) Tokens() int { return p.Total() * p.bs }

func (p *Pool) sentinel() int32 { return int32(len(p.blocks) - 1) }

func (p *Pool) pushTail(id int32) {
	s := p.sentinel()
	last := p.blocks[s].prev
	p.blocks[id].prev, p.blocks[id].next = last, s
	p.blocks[last].next = id
	p.blocks[s].prev = id
	p.nfree++
}

func (p *Pool) unlink(id int32) {
	b := &p.blocks[id]
	p.blocks[b.prev].next = b.next
	p.blocks[b.next].prev = b.prev
	b.prev, b.next = -1, -1
	p.nfree--
}

// allocate takes the least recently freed block, dropping the prefix it
// cached (an eviction). It returns -1 when every block is in use.
func (p *Pool) allocate() int32 {
	id := p.blocks[p.sentinel()].next
	if id == p.sentinel() {
		return -1
	}
	p.unlink(id)
	b := &p.blocks[id]
	if b.hashed {
		delete(p.cached, b.hash)
		b.hashed = false
		p.evictions++
	}
	b.ref = 1
	switch {
	case p.f16 && b.data16 == nil:
		b.data16 = make([]uint16, p.layers*p.stride)
	case !p.f16 && b.data == nil:
		b.data = make([]float32, p.layers*p.stride)
	}
	return id
}

// release drops one reference; a block nobody uses goes to the tail of the
// free list, keeping its cached prefix.
func (p *Pool) release(id int32) {
	b := &p.blocks[id]
	if b.ref <= 0 {
		panic(fmt.Sprintf("kvcache: block %d released while free", id))
	}
	b.ref--
	if b.ref == 0 {
		p.pushTail(id)
	}
}

// acquire adds a reference to a cached block, taking it off the free list
// if nobody used it.
func (p *Pool) acquire(id int32) {
	b := &p.blocks[id]
	if b.ref == 0 {
		p.unlink(id)
	}
	b.ref++
}

// copyRows copies the key and value rows of positions [0, rows) of every
// layer from block src to block dst.
func (p *Pool) copyRows(dst, src int32, rows int) {
	d, s := &p.blocks[dst], &p.blocks[src]
	for l := range p.layers {
		base := l * p.stride
		k := [2]int{base, base + rows*p.kdim}
		v := [2]int{base + p.bs*p.kdim, base + p.bs*p.kdim + rows*p.vdim}
		if p.f16 {
			copy(d.data16[k[0]:k[1]], s.data16[k[0]:k[1]])
			copy(d.data16[v[0]:v[1]], s.data16[v[0]:v[1]])
			continue
		}
		copy(d.data[k[0]:k[1]], s.data[k[0]:k[1]])
		copy(d.data[v[0]:v[1]], s.data[v[0]:v[1]])
	}
}

// Lookup returns the block caching h.
func (p *Pool) Lookup(h Hash) (int32, bool) {
	id, ok := p.cached[h]
	return id, ok
}

// register records that block id holds the full block with hash h. A hash
// already cached in another block is left there (the first copy wins) and
// id stays unhashed.
func (p *Pool) register(id int32, h Hash) {
	b := &p.blocks[id]
	if b.hashed {
		return
	}
	if _, dup := p.cached[h]; dup {
		return
	}
	b.hashed, b.hash = true, h
	p.cached[h] = id
}

// ResetPrefixCache forgets every cached prefix; it is allowed only when no
// block is in use (ok false otherwise). It returns the number of hashes
// dropped, which count as evictions.
func (p *Pool) ResetPrefixCache() (n int, ok bool) {
	if p.Used() != 0 {
		return 0, false
	}
	n = len(p.cached)
	for _, id := range p.cached {
		p.blocks[id].hashed = false
	}
	clear(p.cached)
	p.evictions += int64(n)
	return n, true
}

// Check verifies the pool's invariants: every block is either on the free
// list with no reference or off it with references, the free count matches
// the list, and the hash index agrees with the blocks. Tests call it.
func (p *Pool) Check() error {
	s := p.sentinel()
	n := 0
	seen := make([]bool, p.Total())
	for id, prev := p.blocks[s].next, s; id != s; prev, id = id, p.blocks[id].next {
		if id < 0 || int(id) >= p.Total() {
			return fmt.Errorf("free list holds bad block %d", id)
		}
		if seen[id] {
			return fmt.Errorf("free list loops at block %d", id)
		}
		seen[id] = true
		if p.blocks[id].prev != prev {
			return fmt.Errorf("block %d: prev link %d, want %d", id, p.blocks[id].prev, prev)
		}
		if p.blocks[id].ref != 0 {
			return fmt.Errorf("free block %d has %d references", id, p.blocks[id].ref)
		}
		n++
	}
	if n != p.nfree {
		return fmt.Errorf("free list has %d blocks, count says %d", n, p.nfree)
	}
	hashed := 0
	for id := range p.Total() {
		b := &p.blocks[id]
		if !seen[id] && b.ref <= 0 {
			return fmt.Errorf("block %d is neither free nor used (ref %d)", id, b.ref)
		}
		if b.hashed {
			hashed++
			if got, ok := p.cached[b.hash]; !ok || got != int32(id) {
				return fmt.Errorf("block %d's hash maps to block %d (present %v)", id, got, ok)
			}
		}
	}
	if hashed != len(p.cached) {
		return fmt.Errorf("%d hashed blocks, %d index entries", hashed, len(p.cached))
	}
	return nil
}

// Refs returns the reference count of block id (tests).
func (p *Pool) Refs(id int32) int { return int(p.blocks[id].ref) }
