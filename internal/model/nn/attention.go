package nn

import (
	"math"

	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
)

// Attention is flash attention over the cache in place: per group of
// queries that read the same keys (one sequence, one KV head), tiles of
// attnTile keys decoded a tile at a time (kernels.KTile/VTile: never a
// copy of the whole sequence), scores as a small matrix product
// (kernels.FlashScores), an online softmax (a running max m, sum l and
// output o per query, rescaled when m grows), and the values' weighted sum
// (kernels.FlashAccum).
//
// Batch invariance: a query's bits depend only on its own positions, never
// on the group it is in, the batch, or the thread count.
//   - Tiles are always attnTile positions aligned on absolute positions;
//     a tile's entries outside a query's range are set to -Inf (their
//     weight exp(-Inf) is 0, and adding 0 is exact), and a tile with no
//     entry in the query's range leaves its m, l and o as they were.
//   - The kernels' sums run in an order that depends only on the tile.
//   - Keys are split into chunks of attnChunk absolute positions, always:
//     each chunk gets its own online softmax and the chunks' (m, l, o) are
//     merged in chunk order. Whether the chunks of a group run one after
//     another on one thread, or on several (split-K: decoding a few
//     sequences at long context, when there are fewer groups than
//     threads), the arithmetic is the same.

// AttnOpts are the per-layer settings of attention.
type AttnOpts struct {
	// Scale multiplies q·k before the softmax; 0 means 1/sqrt(HeadDim).
	Scale float32
	// Window > 0 limits each query to the Window most recent positions,
	// its own included (gemma3's sliding layers): position p sees p' when
	// p - p' < Window. It hides only earlier keys: the later keys a
	// position of a non-causal run sees (Embeds) are never hidden.
	Window int
}

// AttnGroupMax is the most queries (token × query head rows) attended
// together; tests set 1 to compare with attention query by query.
var AttnGroupMax = 64

// attnTile is the keys of a tile (kernels.FlashTile), aligned on absolute
// positions.
const attnTile = kernels.FlashTile

// attnChunk is the positions of a chunk of keys (a multiple of attnTile),
// aligned on absolute positions: the unit of split-K. It is fixed: the bits
// must not depend on how many threads there are.
const attnChunk = 1024

// attnGroup is the query rows [r0, r1) of one sequence's KV head kvh: row
// r is token t0 + r/perKV (t0 the sequence's first token in the step) and
// query head kvh*perKV + r%perKV.
type attnGroup struct {
	seq, t0, kvh int
	r0, r1       int
	lo, hi       int // the positions the rows see, together
}

// attnItem is a group's chunks [c0, c1) run by one worker; a split item
// (one chunk of a group split among threads) leaves its (m, l, o) in
// part for the merge.
type attnItem struct {
	g, c0, c1 int
	part      int // index of its partial result; -1: the item finishes its group
}

// attnScratch is one worker's buffers (sized for the step's largest group).
type attnScratch struct {
	q      []float32 // rows × hdp: the group's queries, zero-padded
	kt     []float32 // hdp × attnTile: a key tile, transposed
	vt     []float32 // attnTile × vdp: a value tile
	s      []float32 // rows × attnTile: scores, then weights
	m, l   []float32 // rows: the chunk's running max and sum
	o      []float32 // rows × vdp: the chunk's output
	am, al []float32 // rows: the merged chunks'
	ao     []float32
	lo, n  []int // rows: the positions each sees
}

// attnState is where the attention work of a step lives (part of Step).
type attnState struct {
	groups   []attnGroup
	items    []attnItem
	split    bool
	threads  int
	hdp, vdp int // head sizes rounded up to 16 (the kernels' unit)
	rows     int // the largest group's rows
	slots    []attnScratch
	// partial results of split items: rows × (vdp + 2) each (o, then m, l;
	// rows apart)
	parts   []float32
	partLen int
}

// LargestGroup is the size (query rows) of the largest attention group of
// the last step (tests check that the shared path ran).
func (s *Step) LargestGroup() int {
	most := 0
	for _, g := range s.at.groups {
		most = max(most, g.r1-g.r0)
	}
	return most
}

// groupQueries lays out the attention work of the step: per sequence and
// KV head, its query rows in token order (the query heads sharing the KV
// head under GQA next to each other), up to AttnGroupMax at a time. Groups
// shrink while there are fewer than two per thread; decoding few sequences
// at long context splits each group's chunks among the threads instead.
func (s *Step) groupQueries(threads int) {
	a := &s.at
	c := s.Cfg
	for size := max(AttnGroupMax, 1); ; size /= 2 {
		s.makeGroups(size)
		if size <= 4 || len(a.groups) >= 2*threads {
			break
		}
	}
	a.hdp, a.vdp = (c.HeadDim+15)&^15, (c.ValueDim+15)&^15
	a.rows = s.LargestGroup()
	a.threads = threads
	a.split = threads > 1 && len(a.groups) < 4*threads && s.ctx > attnChunk
	a.partLen = a.rows * (a.vdp + 2)
}

func (sc *attnScratch) size(rows, hdp, vdp int) {
	if len(sc.kt) != hdp*attnTile || len(sc.vt) != attnTile*vdp {
		// the pad rows and columns must read as zeros
		sc.kt = make([]float32, hdp*attnTile)
		sc.vt = make([]float32, attnTile*vdp)
		sc.q = nil
	}
	if len(sc.q) < rows*hdp {
		sc.q = make([]float32, rows*hdp)
	}
	sc.s = grow(sc.s, rows*attnTile)
	sc.m, sc.l = grow(sc.m, rows), grow(sc.l, rows)
	sc.am, sc.al = grow(sc.am, rows), grow(sc.al, rows)
	sc.o, sc.ao = grow(sc.o, rows*vdp), grow(sc.ao, rows*vdp)
	if cap(sc.lo) < rows {
		sc.lo, sc.n = make([]int, rows), make([]int, rows)
	}
	sc.lo, sc.n = sc.lo[:rows], sc.n[:rows]
}

// makeGroups splits every sequence's query rows of each KV head into
// groups of size rows (the last of each may be smaller).
func (s *Step) makeGroups(size int) {
	c := s.Cfg
	perKV := c.Heads / c.KVHeads
	a := &s.at
	a.groups = a.groups[:0]
	for t0 := 0; t0 < s.T; {
		t1 := t0
		for t1 < s.T && s.tokSeq[t1] == s.tokSeq[t0] {
			t1++
		}
		rows := (t1 - t0) * perKV
		for kvh := range c.KVHeads {
			for r0 := 0; r0 < rows; r0 += size {
				a.groups = append(a.groups, attnGroup{seq: s.tokSeq[t0], t0: t0, kvh: kvh, r0: r0, r1: min(r0+size, rows)})
			}
		}
		t0 = t1
	}
}

// rowRange is the positions [lo, n) query row r of g sees: up to its
// token's own (to the end of its run inside a non-causal Embeds run, whose
// keys were all stored by PositionQK before any attention), and no further
// back than the window.
func (s *Step) rowRange(g *attnGroup, r, perKV, window int) (t, h, lo, n int) {
	t = g.t0 + r/perKV
	h = g.kvh*perKV + r%perKV
	n = s.tokEnd[t]
	if window > 0 {
		lo = max(0, s.tokPos[t]+1-window)
	}
	return t, h, lo, n
}

// Attention sets Att from Q and the caches of layer l, in parallel over
// groups of queries (and chunks of keys when split).
func (s *Step) Attention(l int, opt AttnOpts) {
	s.layer, s.attn = l, opt
	if s.attn.Scale == 0 {
		s.attn.Scale = 1 / sqrt32(float32(s.Cfg.HeadDim))
	}
	a := &s.at
	perKV := s.Cfg.Heads / s.Cfg.KVHeads
	for i := range a.groups {
		g := &a.groups[i]
		g.lo, g.hi = math.MaxInt, 0
		for r := g.r0; r < g.r1; r++ {
			_, _, lo, n := s.rowRange(g, r, perKV, opt.Window)
			g.lo, g.hi = min(g.lo, lo), max(g.hi, n)
		}
	}
	s.makeItems()
	parFor(s.Pool, min(len(a.items), 4*a.threads), s.attnFn)
	if a.split {
		parFor(s.Pool, len(a.groups), s.mergeFn)
	}
	s.unrotate()
}

// makeItems lists the work of the layer (the chunks a group touches
// depend on the layer's window): a group per item, or, split, a chunk of a
// group per item (a group's items consecutive, in chunk order).
func (s *Step) makeItems() {
	a := &s.at
	a.items = a.items[:0]
	nparts := 0
	for gi, g := range a.groups {
		c0, c1 := g.lo/attnChunk, (g.hi-1)/attnChunk+1
		if !a.split || c1-c0 == 1 {
			a.items = append(a.items, attnItem{g: gi, c0: c0, c1: c1, part: -1})
			continue
		}
		for ch := c0; ch < c1; ch++ {
			a.items = append(a.items, attnItem{g: gi, c0: ch, c1: ch + 1, part: nparts})
			nparts++
		}
	}
	a.parts = grow(a.parts, nparts*a.partLen)
	nslots := min(len(a.items), 4*a.threads)
	for len(a.slots) < nslots {
		a.slots = append(a.slots, attnScratch{})
	}
	for i := range nslots {
		a.slots[i].size(a.rows, a.hdp, a.vdp)
	}
}

// attendSlots runs the items of slots [lo, hi): slot k takes items k,
// k+slots, ... (causal prefill groups have unequal costs).
func (s *Step) attendSlots(lo, hi int) {
	a := &s.at
	nslots := min(len(a.items), 4*a.threads)
	for k := lo; k < hi; k++ {
		for i := k; i < len(a.items); i += nslots {
			s.attendItem(&a.items[i], &a.slots[k])
		}
	}
}

// attendItem runs the chunks of one item, merging each into the item's
// result, then writes the group's output (or the partial result).
func (s *Step) attendItem(it *attnItem, sc *attnScratch) {
	a := &s.at
	c := s.Cfg
	g := &a.groups[it.g]
	perKV := c.Heads / c.KVHeads
	nq := g.r1 - g.r0
	hd, hdp, vdp := c.HeadDim, a.hdp, a.vdp
	for i := range nq {
		t, h, lo, n := s.rowRange(g, g.r0+i, perKV, s.attn.Window)
		sc.lo[i], sc.n[i] = lo, n
		q := sc.q[i*hdp : (i+1)*hdp]
		copy(q, s.Q[t*c.QDim()+h*hd:t*c.QDim()+(h+1)*hd])
		clear(q[hd:])
		sc.am[i], sc.al[i] = float32(math.Inf(-1)), 0
	}
	clear(sc.ao[:nq*vdp])
	first := true
	for ch := it.c0; ch < it.c1; ch++ {
		lo, hi := max(g.lo, ch*attnChunk), min(g.hi, (ch+1)*attnChunk)
		if lo >= hi {
			continue
		}
		if first {
			// the first chunk's result is the merge of it alone: run it
			// in the merged buffers
			s.attendChunk(g, sc, nq, lo, hi, sc.am, sc.al, sc.ao)
			first = false
			continue
		}
		for i := range nq {
			sc.m[i], sc.l[i] = float32(math.Inf(-1)), 0
		}
		clear(sc.o[:nq*vdp])
		s.attendChunk(g, sc, nq, lo, hi, sc.m, sc.l, sc.o)
		for i := range nq {
			mergeRow(&sc.am[i], &sc.al[i], sc.ao[i*vdp:(i+1)*vdp], sc.m[i], sc.l[i], sc.o[i*vdp:(i+1)*vdp])
		}
	}
	if it.part < 0 {
		s.finishGroup(g, nq, sc.al, sc.ao)
		return
	}
	p := a.parts[it.part*a.partLen : (it.part+1)*a.partLen]
	copy(p, sc.ao[:nq*vdp])
	copy(p[a.rows*vdp:], sc.am[:nq])
	copy(p[a.rows*vdp+a.rows:], sc.al[:nq])
}

// mergeGroups merges the partial results of split groups [lo, hi) in
// chunk order and writes their outputs.
func (s *Step) mergeGroups(lo, hi int) {
	a := &s.at
	vdp := a.vdp
	// the items of a group are consecutive, in chunk order
	it := 0
	for gi := lo; gi < hi; gi++ {
		for it < len(a.items) && a.items[it].g < gi {
			it++
		}
		if it < len(a.items) && a.items[it].part < 0 {
			continue // one chunk: its item finished it
		}
		g := &a.groups[gi]
		nq := g.r1 - g.r0
		var am, al, ao []float32
		for ; it < len(a.items) && a.items[it].g == gi; it++ {
			p := a.parts[a.items[it].part*a.partLen : (a.items[it].part+1)*a.partLen]
			o, m, l := p[:a.rows*vdp], p[a.rows*vdp:a.rows*vdp+a.rows], p[a.rows*vdp+a.rows:]
			if am == nil {
				am, al, ao = m, l, o // the first chunk's partial is the merge so far
				continue
			}
			for i := range nq {
				mergeRow(&am[i], &al[i], ao[i*vdp:(i+1)*vdp], m[i], l[i], o[i*vdp:(i+1)*vdp])
			}
		}
		s.finishGroup(g, nq, al, ao)
	}
}

// mergeRow merges a chunk's (m, l, o) of one query into the merged ones.
// A side without positions (m = -Inf) is the identity, exactly.
func mergeRow(am, al *float32, ao []float32, m, l float32, o []float32) {
	switch {
	case math.IsInf(float64(m), -1):
		return
	case math.IsInf(float64(*am), -1):
		*am, *al = m, l
		copy(ao, o)
		return
	}
	mx := max(*am, m)
	fa, fb := kernels.Exp(*am-mx), kernels.Exp(m-mx)
	*al = float32(*al*fa) + float32(l*fb)
	*am = mx
	for d := range ao {
		ao[d] = float32(ao[d]*fa) + float32(o[d]*fb)
	}
}

// finishGroup writes o / l of each row of g to Att.
func (s *Step) finishGroup(g *attnGroup, nq int, l, o []float32) {
	c := s.Cfg
	perKV := c.Heads / c.KVHeads
	vdh, vdp := c.ValueDim, s.at.vdp
	for i := range nq {
		t, h, _, _ := s.rowRange(g, g.r0+i, perKV, 0)
		out := s.Att[t*c.ODim()+h*vdh : t*c.ODim()+(h+1)*vdh]
		inv := 1 / l[i]
		for d, v := range o[i*vdp : i*vdp+vdh] {
			out[d] = v * inv
		}
	}
}

// attendChunk runs the online softmax of g's rows over the key tiles of
// positions [lo, hi) (inside one chunk) from the state (m, l, o).
func (s *Step) attendChunk(g *attnGroup, sc *attnScratch, nq, lo, hi int, m, l, o []float32) {
	c := s.Cfg
	cache := s.b.Seqs[g.seq].Cache
	hd, vdh, hdp, vdp := c.HeadDim, c.ValueDim, s.at.hdp, s.at.vdp
	for t0 := lo &^ (attnTile - 1); t0 < hi; t0 += attnTile {
		a, b := max(lo, t0), min(hi, t0+attnTile)
		if !s.anyRowSees(sc, nq, a, b) {
			continue
		}
		s.keyTile(cache, g.kvh, t0, a, b, sc.kt, hd)
		kernels.FlashScores(sc.s, sc.q, hdp, sc.kt, nq, attnTile, hdp, s.attn.Scale)
		for i := range nq {
			onlineRow(sc.s[i*attnTile:(i+1)*attnTile], sc.lo[i]-t0, sc.n[i]-t0, &m[i], &l[i], o[i*vdp:(i+1)*vdp])
		}
		s.valueTile(cache, g.kvh, t0, a, b, sc.vt, vdh, vdp)
		kernels.FlashAccum(o, vdp, sc.s, sc.vt, nq, attnTile, vdp)
	}
}

// anyRowSees reports whether a row of the group sees a position of [a, b).
func (s *Step) anyRowSees(sc *attnScratch, nq, a, b int) bool {
	for i := range nq {
		if sc.lo[i] < b && sc.n[i] > a {
			return true
		}
	}
	return false
}

// onlineRow turns a row of scores of one tile into weights: the entries
// outside [lo, n) (tile coordinates) are masked, the running max m moves
// up to the tile's (rescaling l and o when it grows), and the weights
// exp(s - m) are summed into l. A row with no entry in the tile gets zero
// weights and keeps its state.
func onlineRow(row []float32, lo, n int, m, l *float32, o []float32) {
	lo, n = max(lo, 0), min(n, len(row))
	if lo >= n {
		clear(row)
		return
	}
	ninf := float32(math.Inf(-1))
	for j := range lo {
		row[j] = ninf
	}
	for j := n; j < len(row); j++ {
		row[j] = ninf
	}
	mt := kernels.RowMax(row) // the masked entries are -Inf
	if mt > *m {
		if !math.IsInf(float64(*m), -1) {
			f := kernels.Exp(*m - mt)
			*l *= f
			for d := range o {
				o[d] *= f
			}
		}
		*m = mt
	}
	*l += kernels.ExpSum(row, *m)
}

// keyTile decodes the keys of positions [a, b) of KV head kvh into the
// columns a-t0.. of the transposed tile kt (hd rows of attnTile), and zeros
// the other columns: they are masked, and must not hold what is not a
// number.
func (s *Step) keyTile(cache kvcache.Cache, kvh, t0, a, b int, kt []float32, hd int) {
	if a > t0 || b < t0+attnTile {
		for d := range hd {
			clear(kt[d*attnTile : d*attnTile+a-t0])
			clear(kt[d*attnTile+b-t0 : (d+1)*attnTile])
		}
	}
	kd := s.Cfg.KDim()
	for pos := a; pos < b; {
		sp := cache.Span(s.layer, pos)
		cnt := min(sp.N, b-pos)
		r := kernels.KVRows{T: kernels.KVF32, F32: sp.K, Stride: kd, Off: kvh * hd}
		switch {
		case sp.K16 != nil:
			r = kernels.KVRows{T: kernels.KVF16, W: sp.K16, Stride: kd, Off: kvh * hd}
		case sp.KQ != nil:
			r = kernels.KVRows{T: sp.KT.KV(), W: sp.KQ, Stride: sp.KW, Off: kvh * hd}
		}
		kernels.KTile(kt[pos-t0:], attnTile, &r, hd, cnt)
		pos += cnt
	}
}

// valueTile decodes the values of positions [a, b) into rows a-t0.. of vt
// (attnTile rows of vdp) and zeros the other rows.
func (s *Step) valueTile(cache kvcache.Cache, kvh, t0, a, b int, vt []float32, vdh, vdp int) {
	clear(vt[:(a-t0)*vdp])
	clear(vt[(b-t0)*vdp:])
	vd := s.Cfg.VDim()
	for pos := a; pos < b; {
		sp := cache.Span(s.layer, pos)
		cnt := min(sp.N, b-pos)
		r := kernels.KVRows{T: kernels.KVF32, F32: sp.V, Stride: vd, Off: kvh * vdh}
		switch {
		case sp.V16 != nil:
			r = kernels.KVRows{T: kernels.KVF16, W: sp.V16, Stride: vd, Off: kvh * vdh}
		case sp.VQ != nil:
			r = kernels.KVRows{T: sp.VT.KV(), W: sp.VQ, Stride: sp.VW, Off: kvh * vdh}
		}
		kernels.VTile(vt[(pos-t0)*vdp:], vdp, &r, vdh, cnt)
		pos += cnt
	}
}
