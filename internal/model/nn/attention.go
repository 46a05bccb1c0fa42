package nn

import (
	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
)

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

// AttnGroupMax is the most queries attended together, four at a time with
// Dots4 and Axpys4 (at most 16); tests set 1 to compare with attention
// query by query.
var AttnGroupMax = 16

// attnTile is the most positions a group's queries go over together: their
// keys (or values) stay in L1 while every query of the group uses them.
const attnTile = 64

// attnGroup is up to AttnGroupMax queries (token t[i], query head h[i])
// that read the same cached keys and values: one sequence, one KV head.
type attnGroup struct {
	n    int
	t, h [16]int
}

// LargestGroup is the size of the largest attention group of the last
// step (tests check that the shared path ran).
func (s *Step) LargestGroup() int {
	most := 0
	for _, g := range s.groups {
		most = max(most, g.n)
	}
	return most
}

// groupQueries lays out the attention work of the step: per sequence and
// KV head, its queries in token order (and the query heads sharing the KV
// head under GQA), up to AttnGroupMax at a time. A worker's consecutive
// groups share their keys and values in cache; within a group each row is
// read from memory once. Groups shrink (to 8, 4, then single queries) while
// there are fewer than two per thread: a decode step of one sequence has
// one group per KV head, too few to keep every thread busy.
func (s *Step) groupQueries(threads int) {
	c := s.Cfg
	for size := AttnGroupMax; ; size /= 2 {
		if size < 4 {
			size = 1 // fewer than four share nothing (Dots4)
		}
		s.makeGroups(size)
		if size == 1 || len(s.groups) >= 2*threads {
			break
		}
	}
	s.nChunks = min(len(s.groups), 4*threads)
	n := s.nChunks * AttnGroupMax * s.ctx
	if cap(s.scores) < n {
		s.scores = make([]float32, n)
	}
	s.scores = s.scores[:n]
	n = s.nChunks * attnTile * max(c.HeadDim, c.ValueDim)
	if cap(s.tiles) < n {
		s.tiles = make([]float32, n)
	}
	s.tiles = s.tiles[:n]
}

// makeGroups splits every sequence's queries of each KV head into groups
// of size (the last of each may be smaller).
func (s *Step) makeGroups(size int) {
	c := s.Cfg
	perKV := c.Heads / c.KVHeads
	s.groups = s.groups[:0]
	for t0 := 0; t0 < s.T; {
		t1 := t0
		for t1 < s.T && s.tokSeq[t1] == s.tokSeq[t0] {
			t1++
		}
		for kvh := range c.KVHeads {
			var g attnGroup
			for t := t0; t < t1; t++ {
				for h := kvh * perKV; h < (kvh+1)*perKV; h++ {
					g.t[g.n], g.h[g.n] = t, h
					if g.n++; g.n == size {
						s.groups = append(s.groups, g)
						g.n = 0
					}
				}
			}
			if g.n > 0 {
				s.groups = append(s.groups, g)
			}
		}
		t0 = t1
	}
}

// Attention sets Att from Q and the caches of layer l, in parallel over
// (token, head) groups.
func (s *Step) Attention(l int, opt AttnOpts) {
	s.layer, s.attn = l, opt
	if s.attn.Scale == 0 {
		s.attn.Scale = 1 / sqrt32(float32(s.Cfg.HeadDim))
	}
	parFor(s.Pool, s.nChunks, s.attnFn)
}

func (s *Step) attendChunks(lo, hi int) {
	span := AttnGroupMax * s.ctx
	tile := len(s.tiles) / max(s.nChunks, 1)
	for ch := lo; ch < hi; ch++ {
		scores := s.scores[ch*span : (ch+1)*span]
		// round-robin: causal prefill groups have unequal costs
		for g := ch; g < len(s.groups); g += s.nChunks {
			s.attendGroup(&s.groups[g], scores, s.tiles[ch*tile:(ch+1)*tile])
		}
	}
}

// attendGroup is softmax(scale·q·K) V for each query i of g, over the
// positions [lo[i], n[i]) it sees: up to its token's own (to the end of
// its run inside a non-causal Embeds run, whose keys were all stored by
// PositionQK before any attention), and no further back than the window. Over the positions all of them see, the queries go
// four at a time (the last g.n%4 alone) through tiles of keys and values
// that stay in cache; every query gets the operations it would get alone,
// in the same order of positions, so the results do not depend on the
// grouping (nor on the batch).
func (s *Step) attendGroup(g *attnGroup, scores, tile []float32) {
	c := s.Cfg
	hd, vdh := c.HeadDim, c.ValueDim
	kd, vd := c.KDim(), c.VDim()
	kvh := g.h[0] / (c.Heads / c.KVHeads)
	cache := s.b.Seqs[s.tokSeq[g.t[0]]].Cache
	scale := s.attn.Scale
	var q, sc, out [16][]float32
	var lo, n [16]int
	quads := g.n / 4 // queries [0, 4*quads) share the positions [sLo, sHi)
	sLo, sHi := 0, s.ctx
	for i := range g.n {
		t, h := g.t[i], g.h[i]
		n[i] = s.tokEnd[t] // past its own position inside a non-causal run
		if s.attn.Window > 0 {
			lo[i] = max(0, s.tokPos[t]+1-s.attn.Window)
		}
		if i < 4*quads {
			sLo, sHi = max(sLo, lo[i]), min(sHi, n[i])
		}
		q[i] = s.Q[t*c.QDim()+h*hd : t*c.QDim()+(h+1)*hd]
		sc[i] = scores[i*s.ctx : i*s.ctx+n[i]]
		out[i] = s.Att[t*c.ODim()+h*vdh : t*c.ODim()+(h+1)*vdh]
	}
	if quads == 0 || sLo >= sHi {
		quads, sLo, sHi = 0, 0, 0
	}
	// alone lists the ranges query i goes over by itself: before and
	// after the shared ones.
	alone := func(i int) (a0, a1, b0, b1 int) {
		if i < 4*quads {
			return lo[i], sLo, sHi, n[i]
		}
		return lo[i], n[i], n[i], n[i]
	}
	dots := func(i, from, to int) {
		for pos := from; pos < to; {
			sp := cache.Span(s.layer, pos)
			cnt := min(sp.N, to-pos)
			if sp.K16 != nil {
				kernels.DotsF16(sc[i][pos:pos+cnt], q[i], sp.K16[kvh*hd:], kd, scale)
			} else if sp.KQ != nil {
				dotsDecoded(sc[i][pos:pos+cnt], q[i], &sp, kvh*hd, hd, scale, tile)
			} else {
				kernels.Dots(sc[i][pos:pos+cnt], q[i], sp.K[kvh*hd:], kd, scale)
			}
			pos += cnt
		}
	}
	axpys := func(i, from, to int) {
		for pos := from; pos < to; {
			sp := cache.Span(s.layer, pos)
			cnt := min(sp.N, to-pos)
			if sp.V16 != nil {
				kernels.AxpysF16(out[i], sc[i][pos:pos+cnt], sp.V16[kvh*vdh:], vd)
			} else if sp.VQ != nil {
				axpysDecoded(out[i], sc[i][pos:pos+cnt], &sp, kvh*vdh, vdh, tile)
			} else {
				kernels.Axpys(out[i], sc[i][pos:pos+cnt], sp.V[kvh*vdh:], vd)
			}
			pos += cnt
		}
	}
	var part [4][]float32
	for pos := sLo; pos < sHi; {
		sp := cache.Span(s.layer, pos)
		cnt := min(sp.N, sHi-pos, attnTile)
		var rows []float32
		var stride int
		if sp.KQ != nil {
			rows, stride = decodedRows(sp.KQ, sp.KT, sp.KW, kvh*hd, hd, cnt, tile)
		} else {
			rows, stride = headRows(sp.K, sp.K16, kvh*hd, kd, hd, cnt, quads, tile)
		}
		for qd := range quads {
			for i := range part {
				part[i] = sc[4*qd+i][pos : pos+cnt]
			}
			kernels.Dots4(&part, (*[4][]float32)(q[4*qd:4*qd+4]), rows, stride, scale)
		}
		pos += cnt
	}
	for i := range g.n {
		a0, a1, b0, b1 := alone(i)
		dots(i, a0, a1)
		dots(i, b0, b1)
		softmax(sc[i][lo[i]:n[i]])
		clear(out[i])
		axpys(i, a0, a1) // positions before the shared ones come first
	}
	for pos := sLo; pos < sHi; {
		sp := cache.Span(s.layer, pos)
		cnt := min(sp.N, sHi-pos, attnTile)
		var rows []float32
		var stride int
		if sp.VQ != nil {
			rows, stride = decodedRows(sp.VQ, sp.VT, sp.VW, kvh*vdh, vdh, cnt, tile)
		} else {
			rows, stride = headRows(sp.V, sp.V16, kvh*vdh, vd, vdh, cnt, quads, tile)
		}
		for qd := range quads {
			for i := range part {
				part[i] = sc[4*qd+i][pos : pos+cnt]
			}
			kernels.Axpys4((*[4][]float32)(out[4*qd:4*qd+4]), &part, rows, stride)
		}
		pos += cnt
	}
	for i := range g.n {
		_, _, b0, b1 := alone(i)
		axpys(i, b0, b1)
	}
}

// headRows returns cnt rows of one head (w values at off in each row of
// stride values) of a span of keys or values, as float32 with their stride,
// for uses queries-of-four passes. Rows of a float32 cache read by one pass
// stay in place; otherwise they are copied next to each other into tile
// (rows one KV row apart alias in the L1 cache's sets and would not stay
// there between passes), and halves are converted on the way (exactly).
// (A query alone reads halves with DotsF16 and AxpysF16 instead.)
func headRows(f32 []float32, f16 []uint16, off, stride, w, cnt, uses int, tile []float32) ([]float32, int) {
	if f16 == nil {
		if uses < 2 {
			return f32[off:], stride
		}
		for j := range cnt {
			copy(tile[j*w:(j+1)*w], f32[off+j*stride:off+j*stride+w])
		}
		return tile[:cnt*w], w
	}
	kernels.F16RowsToF32(tile, f16[off:], stride, w, cnt)
	return tile[:cnt*w], w
}

// decodedRows decodes cnt rows of one head (w values at off in rows of
// words words of type t) into tile, for the float32 kernels: the cache
// types other than f32 and f16 are read this way.
func decodedRows(q []uint16, t kvcache.Type, words, off, w, cnt int, tile []float32) ([]float32, int) {
	kvcache.DecodeRows(tile, t, q, words, off, w, cnt)
	return tile[:cnt*w], w
}

// dotsDecoded is Dots over keys of a decoded type, a tile at a time.
func dotsDecoded(sc, q []float32, sp *kvcache.Span, off, hd int, scale float32, tile []float32) {
	step := len(tile) / hd
	for j := 0; j < len(sc); j += step {
		cnt := min(step, len(sc)-j)
		kvcache.DecodeRows(tile, sp.KT, sp.KQ[j*sp.KW:], sp.KW, off, hd, cnt)
		kernels.Dots(sc[j:j+cnt], q, tile, hd, scale)
	}
}

// axpysDecoded is Axpys over values of a decoded type, a tile at a time.
func axpysDecoded(out, sc []float32, sp *kvcache.Span, off, vdh int, tile []float32) {
	step := len(tile) / vdh
	for j := 0; j < len(sc); j += step {
		cnt := min(step, len(sc)-j)
		kvcache.DecodeRows(tile, sp.VT, sp.VQ[j*sp.VW:], sp.VW, off, vdh, cnt)
		kernels.Axpys(out, sc[j:j+cnt], tile, vdh)
	}
}

// softmax normalises x in place (vectorised exp where the kernels have
// assembly).
func softmax(x []float32) { kernels.Softmax(x) }
