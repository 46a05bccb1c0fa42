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
//
// Decode reads keys and values from memory, not the caches: a token at
// depth 8000 reads 262 MB of f16 rows for a 1B model, for a few products
// each. There a work item runs the groups of a sequence's KV heads
// together, tile by tile (a tile's rows of every head are next to each
// other in the pool's blocks: the memory is read in order, every byte of a
// line and of a DRAM page used while it is there), and asks for the next
// head's rows while it computes the current one's (PrefetchKV).
// Which groups share an item changes nothing in their arithmetic.

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
// together; tests set 1 to compare with attention query by query. A group
// decodes each key and value tile once for all its rows: 128 rows rather
// than 64 made f16 prefill attention at depth 7600 4 % faster (the scores
// and weights, 32 KB, still stay in L2).
var AttnGroupMax = 128

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
	c0, c1       int // the chunks of [lo, hi)
	part         int // split: the partial result of chunk c0 (then c0+1, ...)
}

// attnItem is the chunks [c0, c1) of groups [g, g+ng) (ng > 1: groups of
// one sequence and the same rows, for consecutive KV heads) run by one
// worker; a split item (one chunk of its groups, split among threads)
// leaves each group's (m, l, o) in its part for the merge.
type attnItem struct {
	g, ng, c0, c1 int
}

// attnHeadsRows is the most rows a group may have for its sequence's KV
// heads to run together (decode, verification of a few drafted tokens):
// larger groups do enough arithmetic per key to hide the memory.
const attnHeadsRows = 16

// attnScratch is one worker's buffers (sized for the step's largest item:
// its groups' rows one after another, a group's at k*rows).
type attnScratch struct {
	q      []float32 // rows × hdp: the groups' queries, zero-padded
	kt     []float32 // hdp × attnTile: a key tile, transposed
	vt     []float32 // attnTile × vdp: a value tile
	s      []float32 // rows × attnTile: scores, then weights
	m, l   []float32 // rows: the chunk's running max and sum
	o      []float32 // rows × vdp: the chunk's output
	am, al []float32 // rows: the merged chunks'
	ao     []float32
	e      []float32 // 2·rows + 15: the merges' exponentials
	lo, n  []int     // rows: the positions each sees
	// per group of the item: [wlo, wn), the positions every row sees
	wlo, wn []int
	// the runs of the tile and of the next one (tileSpans)
	spans, next []tileSpan
	// the halves of a tile's keys and values, and of the next one's
	// (tileKV)
	kh, vh, pk, pv [2]kernels.KVRows
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
	sc.e = grow(sc.e, 2*rows+15)
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
// depend on the layer's window). Small groups of a sequence's KV heads go
// together, as many as keep every thread busy; decoding a few sequences at
// long context splits their chunks among the threads (an item per chunk,
// a group's parts consecutive, in chunk order).
func (s *Step) makeItems() {
	a := &s.at
	multi := false
	for i := range a.groups {
		g := &a.groups[i]
		g.c0, g.c1 = g.lo/attnChunk, (g.hi-1)/attnChunk+1
		multi = multi || g.c1-g.c0 > 1
	}
	heads := 1
	if a.rows <= attnHeadsRows {
		heads = s.Cfg.KVHeads
	}
	for {
		sets := s.headSets(heads, false)
		a.split = a.threads > 1 && sets < 4*a.threads && multi
		if heads == 1 || s.headSets(heads, a.split) >= 2*a.threads {
			break
		}
		heads = (heads + 1) / 2
	}
	a.items = a.items[:0]
	nparts := 0
	for gi := 0; gi < len(a.groups); {
		ng := s.headSet(gi, heads)
		c0, c1 := a.groups[gi].c0, a.groups[gi].c1 // the set's (headSet)
		for k := range ng {
			g := &a.groups[gi+k]
			g.part = -1
			if a.split && g.c1-g.c0 > 1 {
				g.part = nparts
				nparts += g.c1 - g.c0
			}
		}
		if !a.split || c1-c0 == 1 {
			a.items = append(a.items, attnItem{g: gi, ng: ng, c0: c0, c1: c1})
		} else {
			for ch := c0; ch < c1; ch++ {
				a.items = append(a.items, attnItem{g: gi, ng: ng, c0: ch, c1: ch + 1})
			}
		}
		gi += ng
	}
	a.parts = grow(a.parts, nparts*a.partLen)
	nslots := min(len(a.items), 4*a.threads)
	for len(a.slots) < nslots {
		a.slots = append(a.slots, attnScratch{})
	}
	for i := range nslots {
		a.slots[i].size(a.rows*heads, a.hdp, a.vdp)
	}
}

// headSet is how many groups from gi on run together, at most heads:
// groups of one sequence with the same rows and the same chunks.
func (s *Step) headSet(gi, heads int) int {
	gs := s.at.groups
	g := &gs[gi]
	n := 1
	for n < heads && gi+n < len(gs) {
		h := &gs[gi+n]
		if h.seq != g.seq || h.t0 != g.t0 || h.r0 != g.r0 || h.r1 != g.r1 || h.c0 != g.c0 || h.c1 != g.c1 {
			break
		}
		n++
	}
	return n
}

// headSets counts the items of the layer with at most heads groups an
// item, split or not.
func (s *Step) headSets(heads int, split bool) int {
	n := 0
	for gi := 0; gi < len(s.at.groups); {
		ng := s.headSet(gi, heads)
		g := &s.at.groups[gi]
		if split {
			n += g.c1 - g.c0
		} else {
			n++
		}
		gi += ng
	}
	return n
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

// attendItem runs the chunks of one item, merging each into its groups'
// results, then writes the groups' outputs (or their partial results).
func (s *Step) attendItem(it *attnItem, sc *attnScratch) {
	a := &s.at
	c := s.Cfg
	perKV := c.Heads / c.KVHeads
	hd, hdp, vdp, rows := c.HeadDim, a.hdp, a.vdp, a.rows
	sc.wlo, sc.wn = sc.wlo[:0], sc.wn[:0]
	for k := range it.ng {
		g := &a.groups[it.g+k]
		wlo, wn := math.MinInt, math.MaxInt
		for i := range g.r1 - g.r0 {
			t, h, lo, n := s.rowRange(g, g.r0+i, perKV, s.attn.Window)
			r := k*rows + i
			sc.lo[r], sc.n[r] = lo, n
			wlo, wn = max(wlo, lo), min(wn, n)
			q := sc.q[r*hdp : (r+1)*hdp]
			copy(q, s.Q[t*c.QDim()+h*hd:t*c.QDim()+(h+1)*hd])
			clear(q[hd:])
			sc.am[r], sc.al[r] = float32(math.Inf(-1)), 0
		}
		sc.wlo, sc.wn = append(sc.wlo, wlo), append(sc.wn, wn)
	}
	clear(sc.ao[:it.ng*rows*vdp])
	first := true
	for ch := it.c0; ch < it.c1; ch++ {
		if first {
			// the first chunk's result is the merge of it alone: run it
			// in the merged buffers
			s.attendChunk(it, sc, ch, sc.am, sc.al, sc.ao)
			first = false
			continue
		}
		for r := range it.ng * rows {
			sc.m[r], sc.l[r] = float32(math.Inf(-1)), 0
		}
		clear(sc.o[:it.ng*rows*vdp])
		s.attendChunk(it, sc, ch, sc.m, sc.l, sc.o)
		mergeRows(sc.am, sc.al, sc.ao, sc.m, sc.l, sc.o, sc.e, it.ng*rows, vdp)
	}
	for k := range it.ng {
		g := &a.groups[it.g+k]
		nq := g.r1 - g.r0
		am, al, ao := sc.am[k*rows:(k+1)*rows], sc.al[k*rows:(k+1)*rows], sc.ao[k*rows*vdp:(k+1)*rows*vdp]
		if g.part < 0 {
			s.finishGroup(g, nq, al, ao)
			continue
		}
		p := a.parts[(g.part+it.c0-g.c0)*a.partLen : (g.part+it.c0-g.c0+1)*a.partLen]
		copy(p, ao[:nq*vdp])
		copy(p[rows*vdp:], am[:nq])
		copy(p[rows*vdp+rows:], al[:nq])
	}
}

// mergeGroups merges the partial results of split groups [lo, hi) in
// chunk order and writes their outputs.
func (s *Step) mergeGroups(lo, hi int) {
	a := &s.at
	vdp, rows := a.vdp, a.rows
	for gi := lo; gi < hi; gi++ {
		g := &a.groups[gi]
		if g.part < 0 {
			continue // one chunk, or not split: its item finished it
		}
		nq := g.r1 - g.r0
		var am, al, ao []float32
		for pi := g.part; pi < g.part+g.c1-g.c0; pi++ {
			p := a.parts[pi*a.partLen : (pi+1)*a.partLen]
			o, m, l := p[:rows*vdp], p[rows*vdp:rows*vdp+rows], p[rows*vdp+rows:]
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
	if mergeTrivial(am, al, ao, m, l, o) {
		return
	}
	mx := max(*am, m)
	mergeScaled(am, al, ao, mx, l, o, kernels.Exp(*am-mx), kernels.Exp(m-mx))
}

// mergeRows is mergeRow for rows [0, n) (o's rows vdp apart), the two
// exponentials of every row taken in one ExpSum over e (scratch of at
// least 2n+15): a call a row was 2 % of prefill attention at depth.
func mergeRows(am, al, ao, m, l, o, e []float32, n, vdp int) {
	e = e[:(2*n+15)&^15]
	clear(e) // the pad and the trivial rows: exp(0), unread
	for r := range n {
		if !math.IsInf(float64(m[r]), -1) && !math.IsInf(float64(am[r]), -1) {
			mx := max(am[r], m[r])
			e[2*r], e[2*r+1] = am[r]-mx, m[r]-mx
		}
	}
	kernels.ExpSum(e, 0)
	for r := range n {
		aor, or := ao[r*vdp:(r+1)*vdp], o[r*vdp:(r+1)*vdp]
		if mergeTrivial(&am[r], &al[r], aor, m[r], l[r], or) {
			continue
		}
		mergeScaled(&am[r], &al[r], aor, max(am[r], m[r]), l[r], or, e[2*r], e[2*r+1])
	}
}

// mergeTrivial does the merge of a row where a side has no positions
// (m = -Inf) and reports whether it did.
func mergeTrivial(am, al *float32, ao []float32, m, l float32, o []float32) bool {
	switch {
	case math.IsInf(float64(m), -1):
		return true
	case math.IsInf(float64(*am), -1):
		*am, *al = m, l
		copy(ao, o)
		return true
	}
	return false
}

// mergeScaled merges a row whose sides are scaled by fa and fb to the max mx.
func mergeScaled(am, al *float32, ao []float32, mx, l float32, o []float32, fa, fb float32) {
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

// attendChunk runs the online softmax of the rows of the item's groups
// over the key tiles of chunk ch from their states (m, l, o; group k's at
// row k*rows), tile by tile, the groups' KV heads in turn.
func (s *Step) attendChunk(it *attnItem, sc *attnScratch, ch int, m, l, o []float32) {
	at := &s.at
	c := s.Cfg
	hd, vdh, hdp, vdp, rows := c.HeadDim, c.ValueDim, at.hdp, at.vdp, at.rows
	g0 := &at.groups[it.g] // its groups' rows, and so positions, are the same (headSet)
	cache := s.b.Seqs[g0.seq].Cache
	lo, hi := max(g0.lo, ch*attnChunk), min(g0.hi, (ch+1)*attnChunk)
	spans, next := sc.spans[:0], sc.next[:0]
	for t0 := lo &^ (attnTile - 1); t0 < hi; t0 += attnTile {
		a, b := max(lo, t0), min(hi, t0+attnTile)
		if t0 == lo&^(attnTile-1) {
			spans = s.tileSpans(cache, a, b, spans)
		} else {
			spans, next = next, spans
		}
		next = next[:0]
		if b < hi {
			next = s.tileSpans(cache, b, min(hi, b+attnTile), next)
		}
		for k := range it.ng {
			g := &at.groups[it.g+k]
			nq, r := g.r1-g.r0, k*rows
			lo, n := sc.lo[r:r+nq], sc.n[r:r+nq]
			if !anyRowSees(lo, n, a, b) {
				continue
			}
			// the next head's rows of this tile come into L2 while this
			// one's are computed (the last head asks for the first's of
			// the next tile), its keys then its values: asked for at
			// once, the lines of both waited on each other in the miss
			// queues (f16 at depth 8000: 25 against 18.5 ms a token)
			pspans, pkvh, pt0 := next, at.groups[it.g].kvh, t0+attnTile
			if k+1 < it.ng {
				pspans, pkvh, pt0 = spans, at.groups[it.g+k+1].kvh, t0
			}
			if sc.wlo[k] <= t0 && t0+attnTile <= sc.wn[k] && s.tileKV(spans, g.kvh, t0, pspans, pkvh, pt0, sc, nq, r, m, l, o) {
				continue
			}
			s.prefetchRows(pspans, pkvh, true)
			keyTile(spans, g.kvh, t0, a, b, sc.kt, hd)
			kernels.FlashScores(sc.s, sc.q[r*hdp:], hdp, sc.kt, nq, attnTile, hdp, s.attn.Scale)
			s.prefetchRows(pspans, pkvh, false)
			if sc.wlo[k] <= t0 && t0+attnTile <= sc.wn[k] { // every row sees the whole tile
				kernels.FlashSoftmax(sc.s, nq, m[r:r+nq], l[r:r+nq], o[r*vdp:], vdp, vdp)
			} else {
				for i := range nq {
					onlineRow(sc.s[i*attnTile:(i+1)*attnTile], lo[i]-t0, n[i]-t0, m[r+i:r+i+1], l[r+i:r+i+1], o[(r+i)*vdp:(r+i+1)*vdp])
				}
			}
			// a few rows (decode) read the values in place; many rows
			// (prefill) decode them once for all
			if nq > attnHeadsRows || !accumValues(spans, g.kvh, t0, sc.s, nq, o[r*vdp:], vdh, vdp) {
				valueTile(spans, g.kvh, t0, a, b, sc.vt, vdh, vdp)
				kernels.FlashAccum(o[r*vdp:], vdp, sc.s, sc.vt, nq, attnTile, vdp)
			}
		}
	}
	sc.spans, sc.next = spans, next
}

// tileKV runs the step of a tile every row of the group sees in one
// kernel per four rows (kernels.FlashTileKV, the bits of the calls it
// stands for) and reports whether it did: where the kernel takes the
// group's rows and the tile's keys and values (f16 or q8_0 keys by
// column, f16 or q8_0 values, the tile's halves in whole runs). The
// kernel asks for the rows of KV head pkvh of the tile at pt0 in pspans
// (the next it runs) along the way. Groups of many rows (prefill) decode a tile once for all of
// them instead: the kernel decodes it again for every four rows (q8_0
// prefill at depth 7600 took 1.4 times as long through it).
func (s *Step) tileKV(spans []tileSpan, kvh, t0 int, pspans []tileSpan, pkvh, pt0 int, sc *attnScratch, nq, r int, m, l, o []float32) bool {
	c := s.Cfg
	hdp, vdp := s.at.hdp, s.at.vdp
	if nq%4 != 0 || nq > attnHeadsRows || c.HeadDim != c.ValueDim || !s.tileHalves(spans, kvh, t0, &sc.kh, &sc.vh) {
		return false
	}
	if !s.tileHalves(pspans, pkvh, pt0, &sc.pk, &sc.pv) {
		sc.pk, sc.pv = sc.kh, sc.vh
	}
	for i := 0; i < nq; i += 4 {
		if !kernels.FlashTileKV(sc.s, sc.q[(r+i)*hdp:], hdp, &sc.kh, &sc.vh, &sc.pk, &sc.pv, c.HeadDim, m[r+i:], l[r+i:], o[(r+i)*vdp:], vdp, s.attn.Scale) {
			if i > 0 {
				panic("nn: FlashTileKV took a group's first rows and not the next")
			}
			return false
		}
	}
	return true
}

// tileHalves sets k and v to KV head kvh's keys and values of the halves
// of the tile at t0 and reports whether the runs hold each half whole
// (and its keys by column, its values as words).
func (s *Step) tileHalves(spans []tileSpan, kvh, t0 int, k, v *[2]kernels.KVRows) bool {
	const half = attnTile / 2
	for h := range 2 {
		p, i := t0+h*half, 0
		for i < len(spans) && spans[i].pos+spans[i].cnt <= p {
			i++
		}
		if i == len(spans) || spans[i].pos > p || spans[i].pos+spans[i].cnt < p+half || !spans[i].k.Col || spans[i].v.W == nil {
			return false
		}
		sp, j := &spans[i], p-spans[i].pos
		k[h], v[h] = sp.k, sp.v
		k[h].W, k[h].Off = sp.k.W[j:], kvh*s.Cfg.HeadDim
		v[h].W, v[h].Off = sp.v.W[j*sp.v.Stride:], kvh*s.Cfg.ValueDim
	}
	return true
}

// anyRowSees reports whether a row that sees [lo[i], n[i]) sees a
// position of [a, b).
func anyRowSees(lo, n []int, a, b int) bool {
	for i := range lo {
		if lo[i] < b && n[i] > a {
			return true
		}
	}
	return false
}

// onlineRow turns a row of scores of one tile into weights: the entries
// outside [lo, n) (tile coordinates) are masked, then the online softmax
// steps over the row (kernels.FlashSoftmax: the running max m[0] moves up
// to the tile's, rescaling l[0] and o when it grows, and the weights
// exp(s - m) are summed into l[0]). A row with no entry in the tile gets
// zero weights and keeps its state.
func onlineRow(row []float32, lo, n int, m, l, o []float32) {
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
	kernels.FlashSoftmax(row, 1, m, l, o, len(o), len(o))
}

// tileSpan is a run of a tile's positions in one block of the cache: its
// keys and values as the kernels read them, for the head at offset 0 (a
// head's rows: Off moved to it).
type tileSpan struct {
	pos, cnt int
	k, v     kernels.KVRows
}

// tileSpans lists the runs of positions [a, b) of the layer in the cache
// (once a tile, for all the heads that read it).
func (s *Step) tileSpans(cache kvcache.Cache, a, b int, dst []tileSpan) []tileSpan {
	c := s.Cfg
	kd, vd := c.KDim(), c.VDim()
	dst = dst[:0]
	for pos := a; pos < b; {
		sp := cache.Span(s.layer, pos)
		ts := tileSpan{pos: pos, cnt: min(sp.N, b-pos),
			k: kernels.KVRows{T: kernels.KVF32, F32: sp.K, Stride: kd},
			v: kernels.KVRows{T: kernels.KVF32, F32: sp.V, Stride: vd}}
		switch {
		case sp.KCol > 0:
			ts.k = sp.KeyCols()
		case sp.K16 != nil:
			ts.k = kernels.KVRows{T: kernels.KVF16, W: sp.K16, Stride: kd}
		case sp.KQ != nil:
			ts.k = kernels.KVRows{T: sp.KT.KV(), W: sp.KQ, Stride: sp.KW}
		}
		switch {
		case sp.V16 != nil:
			ts.v = kernels.KVRows{T: kernels.KVF16, W: sp.V16, Stride: vd}
		case sp.VQ != nil:
			ts.v = kernels.KVRows{T: sp.VT.KV(), W: sp.VQ, Stride: sp.VW}
		}
		dst = append(dst, ts)
		pos += ts.cnt
	}
	return dst
}

// prefetchRows asks for KV head kvh's keys (or values) of the runs ahead
// of their use.
func (s *Step) prefetchRows(spans []tileSpan, kvh int, keys bool) {
	w := s.Cfg.ValueDim
	if keys {
		w = s.Cfg.HeadDim
	}
	for i := range spans {
		sp := &spans[i]
		r := sp.v
		if keys {
			r = sp.k
		}
		r.Off = kvh * w
		kernels.PrefetchKV(&r, w, sp.cnt)
	}
}

// keyTile decodes the keys of KV head kvh of the runs (positions [a, b))
// into the columns a-t0.. of the transposed tile kt (hd rows of attnTile),
// and zeros the other columns: they are masked, and must not hold what is
// not a number.
func keyTile(spans []tileSpan, kvh, t0, a, b int, kt []float32, hd int) {
	if a > t0 || b < t0+attnTile {
		for d := range hd {
			clear(kt[d*attnTile : d*attnTile+a-t0])
			clear(kt[d*attnTile+b-t0 : (d+1)*attnTile])
		}
	}
	for i := range spans {
		sp := &spans[i]
		r := sp.k
		r.Off = kvh * hd
		kernels.KTile(kt[sp.pos-t0:], attnTile, &r, hd, sp.cnt)
	}
}

// valueTile decodes the values of KV head kvh of the runs (positions
// [a, b)) into rows a-t0.. of vt (attnTile rows of vdp) and zeros the
// other rows.
func valueTile(spans []tileSpan, kvh, t0, a, b int, vt []float32, vdh, vdp int) {
	clear(vt[:(a-t0)*vdp])
	clear(vt[(b-t0)*vdp:])
	for i := range spans {
		sp := &spans[i]
		r := sp.v
		r.Off = kvh * vdh
		kernels.VTile(vt[(sp.pos-t0)*vdp:], vdp, &r, vdh, sp.cnt)
	}
}

// accumValues adds the weights' sum of KV head kvh's values of the runs
// to o with the values read in place (kernels.FlashAccumKV: the bits of
// valueTile then FlashAccum), and reports false, having done nothing,
// where the kernels do not take the rows (the type, the group's rows or
// the head's width): whether they do depends only on those, the same for
// every run.
func accumValues(spans []tileSpan, kvh, t0 int, w []float32, nq int, o []float32, vdh, vdp int) bool {
	for i := range spans {
		sp := &spans[i]
		r := sp.v
		r.Off = kvh * vdh
		if !kernels.FlashAccumKV(o, vdp, w[sp.pos-t0:], attnTile, &r, nq, sp.cnt, vdh) {
			if i > 0 {
				panic("nn: FlashAccumKV took a tile's first run and not the next")
			}
			return false
		}
	}
	return true
}
