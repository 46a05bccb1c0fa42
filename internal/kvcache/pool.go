// Package kvcache holds the engine's KV caches: a paged pool of fixed-size
// blocks with per-sequence block tables and a block-level prefix cache (as
// vLLM's and mistral.rs's paged attention do), and, for the non-paged mode, a
// store of finished sequences' contiguous caches reused by longest prefix.
//
// Nothing here is safe for concurrent use: the engine's scheduler goroutine
// owns the pool and every sequence's cache.
package kvcache

import (
	"errors"
	"fmt"
	"unsafe"

	"mistralrs/internal/kernels"
)

// Pool is a fixed number of KV blocks, each holding BlockSize positions of
// every layer. A block is in use (referenced by one or more sequences'
// block tables), or free. Free blocks that hold a full block of a known
// prefix keep its hash, so that a later sequence with the same prefix can
// take them back; they lose it only when no other block is free (an
// eviction, least recently freed first).
//
// Block memory is allocated when a block is first handed out, and the pool
// keeps the memory it has touched small (RSS follows what is used): a new
// block is, in this order, the most recently freed block without a prefix
// (its pages are hot), a block that never had memory, and only then the
// least recently freed cached prefix. Blocks without a prefix that stay
// free past a high-water mark (keepWarm, the coldest first) drop their
// memory, which the garbage collector gives back to the OS.
type Pool struct {
	layers, kdim, vdim, bs int
	stride                 int  // values (words) of one layer in a block: bs*(kw+vw)
	packed                 bool // stored in 16-bit words (every type but f32 for both)
	kt, vt                 Type // how keys and values are stored
	kw, vw                 int  // values (words) of a key row and a value row
	rotK, rotV             bool // keys, values stored rotated (SetRotation)
	// kcol: keys are stored by column within a block: word c of the key
	// of row j at c*bs+j of the block's key words (Span.KCol), so that
	// attention reads a head's keys as the rows of its transposed tile
	// (kernels.KVRows.Col). Decode at depth spent a quarter of its
	// attention transposing them (BenchmarkFlashDecodeDRAM, f16). f16
	// keys always, q8_0 keys where the path reads them so
	// (kernels.KeysByColumn). krow is Put's buffer.
	kcol bool
	krow []uint16

	// blocks holds the Total() blocks and then one sentinel per free list:
	// doubly linked lists through prev/next (see the list constants).
	blocks []block
	nfree  int
	nlist  [nLists]int
	cached map[Hash]int32 // hash → block holding it

	// sliding-window layers (window.go): per layer its part (0 global, 1
	// sliding) and index in it, the layer count of each part, the window,
	// spare sliding parts and how many were dropped
	part     []int8
	lidx     []int
	gl, sl   int
	win      int
	wspare   [][]float32
	wspare16 [][]uint16
	wdropped int64
	// sliding parts nobody needs that are kept for prefix hits: how many,
	// the most, and the queue of them, oldest first from wqHead
	nkept, wcap int
	wq          []keptPart
	wqHead      int

	slab      []byte // what is left of the slab blocks are cut from (blockBytes)
	keepWarm  int    // free blocks without a prefix that keep their memory
	evictions int64  // hash entries evicted, cumulative
	returned  int64  // blocks whose memory was dropped, cumulative
}

// The free lists.
const (
	// listCached: blocks holding a hashed prefix block; pushed at the tail,
	// evicted from the head (least recently freed first).
	listCached = iota
	// listWarm: blocks with memory and no prefix; pushed at and taken from
	// the head (most recently freed first); the tail is the coldest.
	listWarm
	// listFresh: blocks without memory (never used, or dropped).
	listFresh
	nLists
)

type block struct {
	ref        int32
	prev, next int32 // free-list links; -1 when not on a list
	list       int8  // the free list it is on; -1 when in use
	hashed     bool
	hash       Hash
	data       []float32 // allocated on first use (F32 pools); the global layers
	data16     []uint16  // allocated on first use (F16 pools)
	// the sliding layers' rows, while a sequence's window covers the
	// block or it is free (window.go), and the sequences that need them
	wdata   []float32
	wdata16 []uint16
	wref    int32
	kept    bool   // the sliding part is kept though nobody needs it
	wgen    uint32 // bumped each time it is kept
}

func (b *block) resident() bool { return b.data != nil || b.data16 != nil }

// NewPool makes a pool of n blocks of blockSize positions of rows of shape
// sh, storing float32 values or, with f16, halves. Block memory is allocated when a block is first handed
// out, so an oversized pool costs only its bookkeeping until it fills.
func NewPool(sh Shape, blockSize, n int, f16 bool) *Pool {
	t := F32
	if f16 {
		t = F16
	}
	return NewTypedPool(sh, blockSize, n, t, t)
}

// NewTypedPool is NewPool storing keys as kt and values as vt (the rows'
// widths must suit them: Type.CheckRow).
func NewTypedPool(sh Shape, blockSize, n int, kt, vt Type) *Pool {
	layers, kdim, vdim := sh.Layers, sh.KDim, sh.VDim
	if layers <= 0 || kdim <= 0 || vdim <= 0 || blockSize <= 0 || n <= 0 {
		panic(fmt.Sprintf("kvcache: invalid pool %d layers, rows %d/%d, block size %d, %d blocks", layers, kdim, vdim, blockSize, n))
	}
	if err := errors.Join(kt.CheckRow(kdim), vt.CheckRow(vdim)); err != nil {
		panic("kvcache: " + err.Error())
	}
	kw, vw := kdim, vdim
	packed := kt != F32 || vt != F32
	if packed {
		kw, vw = kt.Words(kdim), vt.Words(vdim)
	}
	p := &Pool{
		layers: layers, kdim: kdim, vdim: vdim, bs: blockSize,
		stride: blockSize * (kw + vw), packed: packed,
		kt: kt, vt: vt, kw: kw, vw: vw,
		rotK: kt.rotated(), rotV: vt.rotated(),
		kcol:     kernels.KeysByColumn(kt.KV()),
		blocks:   make([]block, n+nLists),
		cached:   make(map[Hash]int32),
		keepWarm: max(4, n/32),
	}
	p.layout(sh)
	for l := range nLists {
		s := p.sentinel(l)
		p.blocks[s].prev, p.blocks[s].next = s, s
	}
	for i := range n {
		p.pushTail(listFresh, int32(i))
	}
	return p
}

// SetRotation turns the rotation of quantized keys and values (Rotated)
// on or off; it is on for the types that have it unless turned off, and
// must be set before any row is stored.
func (p *Pool) SetRotation(on bool) {
	p.rotK, p.rotV = on && p.kt.rotated(), on && p.vt.rotated()
}

// Rotated says whether the rows of a sequence of this pool are stored
// rotated: keys (and the queries) and values (and the attention output)
// multiplied by an orthonormal Walsh-Hadamard matrix per head, as
// llama.cpp does before a quantized cache. The model applies it
// (nn.Step.PositionQK); the pool only records that it does.
func (s *Seq) Rotated() (k, v bool) { return s.p.rotK, s.p.rotV }

// BlockBytes is the memory of one block of blockSize positions of rows of
// shape sh, of float32 values or (f16) halves.
func BlockBytes(sh Shape, blockSize int, f16 bool) int64 {
	t := F32
	if f16 {
		t = F16
	}
	return TypedBlockBytes(sh, blockSize, t, t)
}

// TypedBlockBytes is BlockBytes of keys stored as kt and values as vt.
func TypedBlockBytes(sh Shape, blockSize int, kt, vt Type) int64 {
	row := int64(4) * int64(sh.KDim+sh.VDim)
	if kt != F32 || vt != F32 {
		row = kt.Bytes(sh.KDim) + vt.Bytes(sh.VDim)
	}
	return int64(sh.Layers) * int64(blockSize) * row
}

// Types returns how keys and values are stored.
func (p *Pool) Types() (k, v Type) { return p.kt, p.vt }

// BlockSize is the number of positions per block.
func (p *Pool) BlockSize() int { return p.bs }

// Total is the number of blocks.
func (p *Pool) Total() int { return len(p.blocks) - nLists }

// Free is the number of blocks no sequence uses, cached ones included.
func (p *Pool) Free() int { return p.nfree }

// Used is Total - Free: the blocks sequences hold.
func (p *Pool) Used() int { return p.Total() - p.nfree }

// Cached is the number of blocks that hold a hashed prefix block (in use or free).
func (p *Pool) Cached() int { return len(p.cached) }

// Evictions is the number of cached hashes dropped to reuse their blocks so far.
func (p *Pool) Evictions() int64 { return p.evictions }

// Resident is the number of blocks that hold memory: those in use, the
// cached prefixes, and up to the high-water mark of other free blocks.
func (p *Pool) Resident() int { return p.Total() - p.nlist[listFresh] }

// Returned is the number of times a free block dropped its memory so far.
func (p *Pool) Returned() int64 { return p.returned }

// SetKeepWarm sets how many free blocks without a prefix keep their memory
// (default: a 32nd of the pool, at least 4); the coldest of the others drop
// it at once.
func (p *Pool) SetKeepWarm(n int) {
	p.keepWarm = max(n, 0)
	p.trim()
}

// Tokens is the number of positions the whole pool holds.
func (p *Pool) Tokens() int { return p.Total() * p.bs }

func (p *Pool) sentinel(list int) int32 { return int32(p.Total() + list) }

func (p *Pool) pushTail(list int, id int32) {
	s := p.sentinel(list)
	p.link(list, id, p.blocks[s].prev, s)
}

func (p *Pool) pushHead(list int, id int32) {
	s := p.sentinel(list)
	p.link(list, id, s, p.blocks[s].next)
}

// link puts id between prev and next on list.
func (p *Pool) link(list int, id, prev, next int32) {
	b := &p.blocks[id]
	b.prev, b.next, b.list = prev, next, int8(list)
	p.blocks[prev].next = id
	p.blocks[next].prev = id
	p.nfree++
	p.nlist[list]++
}

func (p *Pool) unlink(id int32) {
	b := &p.blocks[id]
	p.blocks[b.prev].next = b.next
	p.blocks[b.next].prev = b.prev
	p.nlist[b.list]--
	b.prev, b.next, b.list = -1, -1, -1
	p.nfree--
}

// head is the first block of list, or -1 when it is empty.
func (p *Pool) head(list int) int32 {
	s := p.sentinel(list)
	if id := p.blocks[s].next; id != s {
		return id
	}
	return -1
}

// putFree puts a block nobody uses on its free list: a cached prefix at
// the tail of the LRU, a block with memory at the head of the warm list
// (then the coldest past the high-water mark drop their memory), a block
// without memory on the fresh list.
func (p *Pool) putFree(id int32) {
	b := &p.blocks[id]
	switch {
	case b.hashed:
		p.pushTail(listCached, id)
	case b.resident():
		p.pushHead(listWarm, id)
		p.trim()
	default:
		p.pushHead(listFresh, id)
	}
}

// trim drops the memory of the coldest warm blocks past keepWarm.
func (p *Pool) trim() {
	for p.nlist[listWarm] > p.keepWarm {
		id := p.blocks[p.sentinel(listWarm)].prev
		p.unlink(id)
		b := &p.blocks[id]
		b.data, b.data16 = nil, nil
		p.dropSliding(b)
		p.returned++
		p.pushHead(listFresh, id)
	}
}

// allocate takes a free block: the most recently freed one without a
// prefix, else one without memory, else the least recently freed cached
// prefix, whose hash it drops (an eviction). It returns -1 when every block
// is in use.
func (p *Pool) allocate() int32 {
	id := p.head(listWarm)
	if id < 0 {
		id = p.head(listFresh)
	}
	if id < 0 {
		id = p.head(listCached)
	}
	if id < 0 {
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
	// n is 0 when every layer is a sliding one: the rows are then empty,
	// not nil (resident)
	n := p.gl * p.stride
	switch {
	case p.packed && b.data16 == nil:
		b.data16 = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(p.blockBytes(2*n)))), n)
	case !p.packed && b.data == nil:
		b.data = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(p.blockBytes(4*n)))), n)
	}
	p.attachSliding(b)
	return id
}

// slabBytes is the memory the pool takes at a time for large blocks.
const slabBytes = 16 << 20

// blockBytes returns n zero bytes for a block's rows. Blocks of 256 KiB and
// more (a 1B model's hold 1-4 MiB) are cut from slabs of slabBytes on
// huge pages (kernels.HugeBytes): decode at long context streams every
// row of the sequence once per token, and with 4 KiB pages the cores'
// prefetchers stopped at each page's end and every page took a TLB walk
// (Zen 4, 2 threads, attention of 16 layers at depth 8000, three runs each:
// f16 32.5-34.7 ms a token against 32.9-42.5 on small pages). A slab's
// memory goes back to the runtime when none of its blocks holds it any
// more, so a slab costs at most slabBytes beyond the blocks in use.
func (p *Pool) blockBytes(n int) []byte {
	if n < 256<<10 {
		return make([]byte, n)
	}
	if len(p.slab) < n {
		left := 0 // blocks without memory: the most a slab could serve
		for i := range len(p.blocks) - nLists {
			if !p.blocks[i].resident() {
				left++
			}
		}
		p.slab = kernels.HugeBytes(max(n, min(slabBytes/n, left)*n))
	}
	b := p.slab[:n:n]
	p.slab = p.slab[n:]
	return b
}

// release drops one reference; a block nobody uses goes back to a free
// list, keeping its cached prefix.
func (p *Pool) release(id int32) {
	b := &p.blocks[id]
	if b.ref <= 0 {
		panic(fmt.Sprintf("kvcache: block %d released while free", id))
	}
	b.ref--
	if b.ref == 0 {
		p.putFree(id)
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
		df, dh, base := p.rowsOf(d, l)
		sf, sh, _ := p.rowsOf(s, l)
		k := [2]int{base, base + rows*p.kw}
		v := [2]int{base + p.bs*p.kw, base + p.bs*p.kw + rows*p.vw}
		if p.kcol {
			for e := range p.kw {
				copy(dh[base+e*p.bs:base+e*p.bs+rows], sh[base+e*p.bs:])
			}
			copy(dh[v[0]:v[1]], sh[v[0]:v[1]])
			continue
		}
		if p.packed {
			copy(dh[k[0]:k[1]], sh[k[0]:k[1]])
			copy(dh[v[0]:v[1]], sh[v[0]:v[1]])
			continue
		}
		copy(df[k[0]:k[1]], sf[k[0]:k[1]])
		copy(df[v[0]:v[1]], sf[v[0]:v[1]])
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
	// The blocks that cached prefixes are plain free blocks now: the
	// coldest of them past the high-water mark drop their memory.
	// Most recently freed first, so that the least recently freed end up
	// coldest.
	for s := p.sentinel(listCached); p.blocks[s].prev != s; {
		id := p.blocks[s].prev
		p.unlink(id)
		p.pushTail(listWarm, id)
	}
	p.trim()
	return n, true
}

// Check verifies the pool's invariants: every block is either on one free
// list with no reference or on none with references, each list holds the
// blocks it should (cached: hashed; warm: memory, no hash; fresh: neither),
// the counts match the lists, and the hash index agrees with the blocks.
// Tests call it.
func (p *Pool) Check() error {
	seen := make([]bool, p.Total())
	total := 0
	for l := range nLists {
		s := p.sentinel(l)
		n := 0
		for id, prev := p.blocks[s].next, s; id != s; prev, id = id, p.blocks[id].next {
			if id < 0 || int(id) >= p.Total() {
				return fmt.Errorf("free list %d holds bad block %d", l, id)
			}
			if seen[id] {
				return fmt.Errorf("free block %d is on a list twice (list %d)", id, l)
			}
			seen[id] = true
			b := &p.blocks[id]
			if b.prev != prev {
				return fmt.Errorf("block %d: prev link %d, want %d", id, b.prev, prev)
			}
			if b.ref != 0 {
				return fmt.Errorf("free block %d has %d references", id, b.ref)
			}
			if int(b.list) != l {
				return fmt.Errorf("block %d on list %d says list %d", id, l, b.list)
			}
			if want := (l == listCached); b.hashed != want {
				return fmt.Errorf("block %d on list %d: hashed %v", id, l, b.hashed)
			}
			if want := (l != listFresh); b.resident() != want {
				return fmt.Errorf("block %d on list %d: has memory %v", id, l, b.resident())
			}
			n++
		}
		if n != p.nlist[l] {
			return fmt.Errorf("free list %d has %d blocks, count says %d", l, n, p.nlist[l])
		}
		total += n
	}
	if total != p.nfree {
		return fmt.Errorf("free lists have %d blocks, count says %d", total, p.nfree)
	}
	if p.nlist[listWarm] > p.keepWarm {
		return fmt.Errorf("%d warm blocks, more than the %d kept", p.nlist[listWarm], p.keepWarm)
	}
	hashed := 0
	for id := range p.Total() {
		b := &p.blocks[id]
		if !seen[id] && b.ref <= 0 {
			return fmt.Errorf("block %d is neither free nor used (ref %d)", id, b.ref)
		}
		if !seen[id] && (b.list != -1 || !b.resident()) {
			return fmt.Errorf("used block %d: list %d, has memory %v", id, b.list, b.resident())
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
	return p.checkSliding()
}

// Refs returns the reference count of block id (tests).
func (p *Pool) Refs(id int32) int { return int(p.blocks[id].ref) }
