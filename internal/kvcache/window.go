package kvcache

import "fmt"

// Sliding-window layers (gemma3: five layers of six attend only the last
// Window positions) need a position's keys and values only while it is in
// the window of the sequence's newest queries. A pool whose Shape names
// such layers stores them apart from the others: each block has a global
// part (the layers that see everything) and a sliding part, and a
// sequence gives back the sliding part of a block once the block has
// fallen behind its window, so that a long context costs the global layers
// plus one window of the sliding ones.
//
// A block's sliding part is referenced (wref) by the sequences whose
// window still covers the block. When no sequence needs it any more, a
// block that caches a prefix (or is free) keeps it for a while, so that a
// later request with the same prefix (the same prompt again, the next turn
// of a chat) can start from it: these kept parts are capped (wcap, a
// quarter of the pool), the oldest given up first. A block in use that
// caches nothing drops it at once, onto a short spare list for the next
// new block. A prefix hit is taken only as far as the blocks of the window
// before its end still have their sliding part (Pool.Match).

// windowed reports whether the pool keeps sliding layers apart.
func (p *Pool) windowed() bool { return p.win > 0 }

// layout splits the layers of sh into global and sliding ones.
func (p *Pool) layout(sh Shape) {
	p.part = make([]int8, sh.Layers)
	p.lidx = make([]int, sh.Layers)
	p.gl = sh.Layers
	if sh.Window <= 0 || len(sh.Sliding) == 0 {
		for l := range p.lidx {
			p.lidx[l] = l
		}
		return
	}
	if len(sh.Sliding) != sh.Layers {
		panic(fmt.Sprintf("kvcache: %d sliding-layer flags for %d layers", len(sh.Sliding), sh.Layers))
	}
	p.win, p.gl = sh.Window, 0
	for l, s := range sh.Sliding {
		if s {
			p.part[l], p.lidx[l] = 1, p.sl
			p.sl++
		} else {
			p.lidx[l] = p.gl
			p.gl++
		}
	}
	if p.sl == 0 {
		p.win = 0 // nothing slides
	}
	p.wcap = max(p.keepWarm, p.Total()/4)
}

// rowsOf returns the storage of layer in block b and where the layer
// starts in it.
func (p *Pool) rowsOf(b *block, layer int) (f32 []float32, f16 []uint16, base int) {
	base = p.lidx[layer] * p.stride
	if p.part[layer] == 1 {
		if b.wdata == nil && b.wdata16 == nil {
			panic(fmt.Sprintf("kvcache: sliding layer %d read or written outside the window", layer))
		}
		return b.wdata, b.wdata16, base
	}
	return b.data, b.data16, base
}

// hasSliding reports whether block b holds its sliding part.
func (b *block) hasSliding() bool { return b.wdata != nil || b.wdata16 != nil }

// attachSliding gives a block being handed out for new rows a sliding
// part, from the spare list when it has one.
func (p *Pool) attachSliding(b *block) {
	if !p.windowed() {
		return
	}
	b.wref = 1
	p.unkeep(b)
	if b.hasSliding() {
		return
	}
	switch n, n16 := len(p.wspare), len(p.wspare16); {
	case p.packed && n16 > 0:
		b.wdata16, p.wspare16 = p.wspare16[n16-1], p.wspare16[:n16-1]
	case p.packed:
		b.wdata16 = make([]uint16, p.sl*p.stride)
	case n > 0:
		b.wdata, p.wspare = p.wspare[n-1], p.wspare[:n-1]
	default:
		b.wdata = make([]float32, p.sl*p.stride)
	}
}

// dropSliding takes a block's sliding part away, keeping up to keepWarm of
// them for new blocks and leaving the rest to the garbage collector.
func (p *Pool) dropSliding(b *block) {
	if !b.hasSliding() {
		return
	}
	p.unkeep(b)
	switch {
	case p.packed && len(p.wspare16) < p.keepWarm:
		p.wspare16 = append(p.wspare16, b.wdata16)
	case !p.packed && len(p.wspare) < p.keepWarm:
		p.wspare = append(p.wspare, b.wdata)
	}
	b.wdata, b.wdata16 = nil, nil
	p.wdropped++
}

// unneedSliding drops one sequence's need for block id's sliding part; a
// block still in use that nobody needs it of drops it.
func (p *Pool) unneedSliding(id int32) {
	b := &p.blocks[id]
	if b.wref <= 0 {
		panic(fmt.Sprintf("kvcache: sliding part of block %d released while unreferenced", id))
	}
	b.wref--
	if b.wref == 0 {
		p.unneeded(id)
	}
}

// unneeded handles a sliding part nobody needs any more: kept if its block
// caches a prefix or is free, dropped otherwise.
func (p *Pool) unneeded(id int32) {
	b := &p.blocks[id]
	if !b.hasSliding() || b.kept {
		return
	}
	if b.ref > 0 && !b.hashed {
		p.dropSliding(b)
		return
	}
	b.kept = true
	b.wgen++
	p.nkept++
	p.wq = append(p.wq, keptPart{id, b.wgen})
	for p.nkept > p.wcap && p.wqHead < len(p.wq) {
		e := p.wq[p.wqHead]
		p.wqHead++
		if o := &p.blocks[e.id]; o.kept && o.wgen == e.gen {
			p.dropSliding(o)
		}
	}
	if p.wqHead > len(p.wq)/2 && p.wqHead > 64 { // compact the queue
		p.wq = append(p.wq[:0], p.wq[p.wqHead:]...)
		p.wqHead = 0
	}
}

// unkeep takes a block's sliding part off the kept ones (it is needed
// again, or dropped).
func (p *Pool) unkeep(b *block) {
	if b.kept {
		b.kept = false
		p.nkept--
	}
}

// keptPart is an entry of the queue of kept sliding parts; gen tells a
// stale entry (the part was taken up again since) from a live one.
type keptPart struct {
	id  int32
	gen uint32
}

// windowStart is the first block that a query at position pos still
// reads the sliding layers of.
func (p *Pool) windowStart(pos int) int { return max(0, pos-p.win+1) / p.bs }

// slidingReady reports whether a sequence holding blocks ids (full) could
// compute position len(ids)*bs: the blocks of its window keep their
// sliding part.
func (p *Pool) slidingReady(ids []int32) bool {
	if !p.windowed() {
		return true
	}
	for _, id := range ids[min(p.windowStart(len(ids)*p.bs), len(ids)):] {
		if !p.blocks[id].hasSliding() {
			return false
		}
	}
	return true
}

// SlidingResident is the number of blocks holding their sliding part
// (equal to Resident for a pool without sliding layers).
func (p *Pool) SlidingResident() int {
	if !p.windowed() {
		return p.Resident()
	}
	n := 0
	for i := range p.Total() {
		if p.blocks[i].hasSliding() {
			n++
		}
	}
	return n
}

// slide gives back the sliding parts of the blocks that a sequence whose
// next queries start at pos no longer reads.
func (s *Seq) slide(pos int) {
	p := s.p
	if !p.windowed() {
		return
	}
	lo := min(p.windowStart(pos), len(s.blocks))
	for ; s.wlo < lo; s.wlo++ {
		p.unneedSliding(s.blocks[s.wlo])
	}
}

// releaseBlock gives back block i of the sequence (both parts). The block
// is released first, so that a part it no longer needs is kept if the
// block went free.
func (s *Seq) releaseBlock(i int) {
	p := s.p
	p.release(s.blocks[i])
	if p.windowed() && i >= s.wlo {
		p.unneedSliding(s.blocks[i])
	}
}

// checkSliding verifies the sliding parts' bookkeeping (Check).
func (p *Pool) checkSliding() error {
	kept := 0
	for id := range p.Total() {
		b := &p.blocks[id]
		switch {
		case !p.windowed() && (b.hasSliding() || b.wref != 0 || b.kept):
			return fmt.Errorf("block %d has sliding-window state in a pool without sliding layers", id)
		case b.wref < 0 || b.wref > max(b.ref, 0):
			return fmt.Errorf("block %d: sliding part needed by %d sequences, block used by %d", id, b.wref, b.ref)
		case b.kept && (b.wref != 0 || !b.hasSliding()):
			return fmt.Errorf("block %d: kept sliding part needed by %d, present %v", id, b.wref, b.hasSliding())
		case b.wref > 0 && !b.hasSliding():
			return fmt.Errorf("block %d: sliding part needed by %d sequences but gone", id, b.wref)
		case p.windowed() && b.ref > 0 && b.wref == 0 && !b.kept && b.hasSliding():
			return fmt.Errorf("block %d in use holds a sliding part nobody needs", id)
		}
		if b.kept {
			kept++
		}
	}
	if kept != p.nkept || kept > p.wcap {
		return fmt.Errorf("%d kept sliding parts, count says %d, at most %d", kept, p.nkept, p.wcap)
	}
	return nil
}
