package kvcache

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Hash identifies a full block of tokens together with everything before
// it: each block's hash covers its parent's hash, so equal hashes mean equal
// prefixes.
type Hash [32]byte

// RootHash is the parent of a sequence's first block. salt is whatever
// changes the keys and values besides the tokens (the model's identity and
// revision), so that two models never share blocks.
func RootHash(salt []byte) Hash { return sha256.Sum256(salt) }

// BlockHash chains one full block of tokens onto its parent's hash.
func BlockHash(parent Hash, tokens []int32) Hash {
	buf := make([]byte, 0, len(parent)+4*len(tokens))
	buf = append(buf, parent[:]...)
	for _, t := range tokens {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
	}
	return sha256.Sum256(buf)
}

// Seq is one sequence's KV cache in a Pool: a block table and a length. It
// implements Cache; attention reads it one block at a time through
// Span.
type Seq struct {
	p      *Pool
	blocks []int32
	n      int
	wlo    int // blocks before it: their sliding part given back (window.go)
}

var _ Cache = (*Seq)(nil)

// NewSeq returns an empty cache drawing blocks from p.
func (p *Pool) NewSeq() *Seq { return &Seq{p: p} }

// Blocks is the block table (not to be modified).
func (s *Seq) Blocks() []int32 { return s.blocks }

// Len implements Cache.
func (s *Seq) Len() int { return s.n }

// Need is the number of blocks that holding n positions would take from the
// pool beyond those the sequence has.
func (s *Seq) Need(n int) int {
	return max(0, (n+s.p.bs-1)/s.p.bs-len(s.blocks))
}

// Reserve makes room for positions [0, n) without changing Len. It takes
// blocks from the pool only if all of them are available, and reports
// whether it could.
func (s *Seq) Reserve(n int) bool {
	need := s.Need(n)
	if need > s.p.Free() {
		return false
	}
	for range need {
		s.blocks = append(s.blocks, s.p.allocate())
	}
	return true
}

// Extend implements Cache.
func (s *Seq) Extend(n int) error {
	if n <= s.n {
		return nil
	}
	s.slide(s.n) // the new queries start at s.n
	if !s.Reserve(n) {
		return fmt.Errorf("kv cache: out of blocks for %d positions (%d free of %d)", n, s.p.Free(), s.p.Total())
	}
	s.n = n
	return nil
}

// Truncate implements Cache. Whole blocks past n go back to the
// pool. Positions are only ever rewritten in a block the sequence owns
// alone: cutting into a block shared with another sequence or holding a
// cached prefix is a bug of the caller.
func (s *Seq) Truncate(n int) {
	if n >= s.n {
		return
	}
	n = max(n, 0)
	keep := (n + s.p.bs - 1) / s.p.bs
	if n%s.p.bs != 0 {
		b := &s.p.blocks[s.blocks[keep-1]]
		if b.ref > 1 || b.hashed {
			panic(fmt.Sprintf("kvcache: truncating to %d cuts into shared or cached block %d", n, s.blocks[keep-1]))
		}
	}
	if s.p.windowed() && s.p.windowStart(n) < s.wlo {
		panic(fmt.Sprintf("kvcache: truncating to %d goes back past the sliding window (block %d given back)", n, s.wlo-1))
	}
	for i := len(s.blocks) - 1; i >= keep; i-- {
		s.releaseBlock(i)
	}
	s.blocks = s.blocks[:keep]
	s.n = n
}

// Shrink forgets positions [n, Len()) and gives back every block past those
// positions [0, n) use, reserved ones included: a roll-back frees what it
// emptied. The same rules as Truncate apply to a block it cuts into.
func (s *Seq) Shrink(n int) {
	s.Truncate(n)
	keep := (min(max(n, 0), s.n) + s.p.bs - 1) / s.p.bs
	for i := len(s.blocks) - 1; i >= keep; i-- {
		s.releaseBlock(i)
	}
	s.blocks = s.blocks[:keep]
}

// Put implements Cache.
func (s *Seq) Put(layer, pos int, k, v []float32) {
	p := s.p
	f32, f16, base := p.rowsOf(&p.blocks[s.blocks[pos/p.bs]], layer)
	j := pos % p.bs
	koff := base + j*p.kw
	voff := base + p.bs*p.kw + j*p.vw
	switch {
	case p.kcol:
		p.krow = grow16(p.krow, p.kw)
		EncodeRow(p.kt, p.krow, k[:p.kdim])
		col := f16[base+j:]
		for e, h := range p.krow {
			col[e*p.bs] = h
		}
	case p.packed:
		EncodeRow(p.kt, f16[koff:koff+p.kw], k[:p.kdim])
	default:
		copy(f32[koff:koff+p.kdim], k)
	}
	if p.packed {
		EncodeRow(p.vt, f16[voff:voff+p.vw], v[:p.vdim])
	} else {
		copy(f32[voff:voff+p.vdim], v)
	}
}

func grow16(b []uint16, n int) []uint16 {
	if cap(b) < n {
		return make([]uint16, n)
	}
	return b[:n]
}

// Span implements Cache: the rows of pos's block from pos on.
func (s *Seq) Span(layer, pos int) Span {
	p := s.p
	f32, f16, base := p.rowsOf(&p.blocks[s.blocks[pos/p.bs]], layer)
	j := pos % p.bs
	kr := [2]int{base + j*p.kw, base + p.bs*p.kw}
	vr := [2]int{base + p.bs*p.kw + j*p.vw, base + p.stride}
	if !p.packed {
		return Span{K: f32[kr[0]:kr[1]], V: f32[vr[0]:vr[1]], N: p.bs - j}
	}
	sp := Span{N: p.bs - j, KT: p.kt, VT: p.vt, KW: p.kw, VW: p.vw}
	switch {
	case p.kcol && p.kt == F16:
		sp.K16, sp.KCol = f16[base+j:kr[1]], p.bs
	case p.kcol:
		sp.KQ, sp.KCol = f16[base+j:kr[1]], p.bs
	case p.kt == F16:
		sp.K16 = f16[kr[0]:kr[1]]
	default:
		sp.KQ = f16[kr[0]:kr[1]]
	}
	if v := f16[vr[0]:vr[1]]; p.vt == F16 {
		sp.V16 = v
	} else {
		sp.VQ = v
	}
	return sp
}

// Adopt starts an empty sequence with cached blocks (a prefix-cache hit):
// it takes a reference to each and sets Len to the positions they hold.
func (s *Seq) Adopt(ids []int32) {
	if len(s.blocks) != 0 || s.n != 0 {
		panic("kvcache: Adopt on a non-empty sequence")
	}
	for _, id := range ids {
		s.p.acquire(id)
	}
	s.blocks = append(s.blocks, ids...)
	s.n = len(ids) * s.p.bs
	if p := s.p; p.windowed() {
		s.wlo = min(p.windowStart(s.n), len(ids))
		for i, id := range ids {
			b := &p.blocks[id]
			switch {
			case i >= s.wlo && !b.hasSliding():
				panic(fmt.Sprintf("kvcache: adopting block %d, which gave back its sliding part", id))
			case i >= s.wlo:
				b.wref++
				p.unkeep(b)
			}
		}
	}
}

// Commit records that the sequence's block i is full and holds the prefix
// block with hash h, so that other sequences can reuse it.
func (s *Seq) Commit(i int, h Hash) {
	if (i+1)*s.p.bs > s.n {
		panic(fmt.Sprintf("kvcache: committing block %d of a sequence of %d positions", i, s.n))
	}
	s.p.register(s.blocks[i], h)
}

// Release gives every block back to the pool and empties the sequence. The
// last blocks go to the free list first, so that a prefix's first blocks,
// the ones most likely to be shared, are evicted last.
func (s *Seq) Release() {
	for i := len(s.blocks) - 1; i >= 0; i-- {
		s.releaseBlock(i)
	}
	s.blocks = s.blocks[:0]
	s.n, s.wlo = 0, 0
}

// Match returns the longest run of blocks caching hashes[0], hashes[1], ...
func (p *Pool) Match(hashes []Hash) []int32 {
	var ids []int32
	for _, h := range hashes {
		id, ok := p.cached[h]
		if !ok {
			break
		}
		ids = append(ids, id)
	}
	// With sliding layers, only as far as the window before the end kept
	// its rows.
	for len(ids) > 0 && !p.slidingReady(ids) {
		ids = ids[:len(ids)-1]
	}
	return ids
}

// FreeAmong counts the blocks of ids that no sequence uses: taking them
// back removes them from the free blocks.
func (p *Pool) FreeAmong(ids []int32) int {
	n := 0
	for _, id := range ids {
		if p.blocks[id].ref == 0 {
			n++
		}
	}
	return n
}
