package model

import (
	"fmt"
	"reflect"

	"mistralrs/internal/kernels"
)

// Batch is one forward step over several sequences. Their tokens are
// stacked into one activation matrix so that each weight matrix is read
// once per step whatever the number of sequences.
type Batch struct {
	Seqs []*SeqInput
}

// SeqInput is the part of a batch that belongs to one sequence.
type SeqInput struct {
	Tokens []int32 // new tokens of this sequence (at least one)
	Pos    int     // position of Tokens[0]; at most Cache.Len(), which is truncated to it
	Cache  KVCache // the sequence's KV cache; distinct for each sequence of a batch

	Logits    []float32 // if non-nil (len Vocab): receives the logits of the last token
	AllLogits []float32 // if non-nil (len len(Tokens)*Vocab): receives the logits of every token
	// Hidden, if non-nil (len len(Tokens)*Embd), receives the final hidden
	// state of every token: after the last layer and the output norm, what
	// the output matrix would turn into logits (embeddings pool them).
	Hidden []float32
}

// Forward runs the model over the batch: it appends the new tokens' keys and
// values to each sequence's cache and writes the requested logits. Calls on
// one Model are serialised; p may be nil (single-threaded).
//
// An invalid batch is reported before any cache is touched; when a cache
// cannot grow (Extend fails), the batch's caches are left truncated to
// their Pos.
func (m *Model) Forward(p *kernels.Pool, b *Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.prepare(p, b)
	if err != nil {
		return err
	}
	c, T := &m.Config, s.T
	for l := range m.Layers {
		ly := &m.Layers[l]
		// attention
		rmsnorm(s.xb, s.x, ly.AttnNorm, c.RMSEps)
		kernels.MatMul(p, s.q, ly.Q, s.xb, T)
		kernels.MatMul(p, s.k, ly.K, s.xb, T)
		kernels.MatMul(p, s.v, ly.V, s.xb, T)
		s.positionQKV(ly, l) // biases, q/k norms, rope; keys and values into the caches
		s.attention(p, l)
		kernels.MatMul(p, s.xb, ly.O, s.att, T)
		addRows(s.xb, ly.OBias)
		add(s.x, s.xb)
		// feed-forward: down(silu(gate(x)) * up(x))
		rmsnorm(s.xb, s.x, ly.FFNNorm, c.RMSEps)
		kernels.MatMul(p, s.hb, ly.Gate, s.xb, T)
		kernels.MatMul(p, s.hb2, ly.Up, s.xb, T)
		s.swiglu(p)
		kernels.MatMul(p, s.xb, ly.Down, s.hb, T)
		add(s.x, s.xb)
	}
	s.logits(p)
	s.b = nil // do not keep the caller's batch alive
	return nil
}

// state is the scratch of Forward, kept by the Model and grown as needed so
// that steady-state steps do not allocate.
type state struct {
	m *Model
	b *Batch
	T int // tokens in this step

	// per token: activations and the token's sequence and position
	x, xb, q, k, v, att, hb, hb2 []float32
	cos, sin                     []float32
	tokSeq, tokPos               []int

	// logits of the rows that want them
	rows         []int
	xr, logitBuf []float32

	// attention work: groups of queries dealt round-robin to chunks, each
	// chunk with its own score buffers (attnGroupMax of ctx floats)
	groups       []attnGroup
	nChunks, ctx int
	layer        int
	scores       []float32
	tiles        []float32 // per chunk: attnTile rows of one head, gathered

	attnFn, swigluFn func(lo, hi int) // built once: closures would allocate per call
}

// prepare validates b, sizes the scratch, embeds the tokens, computes the
// rope angles and makes room in the caches.
func (m *Model) prepare(p *kernels.Pool, b *Batch) (*state, error) {
	c := &m.Config
	if b == nil || len(b.Seqs) == 0 {
		return nil, fmt.Errorf("forward: empty batch")
	}
	T, R, ctx := 0, 0, 0
	for i, sq := range b.Seqs {
		switch {
		case sq == nil || len(sq.Tokens) == 0:
			return nil, fmt.Errorf("forward: sequence %d has no tokens", i)
		case sq.Cache == nil:
			return nil, fmt.Errorf("forward: sequence %d has no cache", i)
		case sq.Pos < 0 || sq.Pos > sq.Cache.Len():
			return nil, fmt.Errorf("forward: sequence %d starts at position %d but its cache holds %d", i, sq.Pos, sq.Cache.Len())
		case sq.Logits != nil && len(sq.Logits) != c.Vocab:
			return nil, fmt.Errorf("forward: sequence %d: Logits has length %d, want vocab size %d", i, len(sq.Logits), c.Vocab)
		case sq.AllLogits != nil && len(sq.AllLogits) != len(sq.Tokens)*c.Vocab:
			return nil, fmt.Errorf("forward: sequence %d: AllLogits has length %d, want %d tokens × %d", i, len(sq.AllLogits), len(sq.Tokens), c.Vocab)
		case sq.Hidden != nil && len(sq.Hidden) != len(sq.Tokens)*c.Embd:
			return nil, fmt.Errorf("forward: sequence %d: Hidden has length %d, want %d tokens × %d", i, len(sq.Hidden), len(sq.Tokens), c.Embd)
		}
		for _, t := range sq.Tokens {
			if t < 0 || int(t) >= c.Vocab {
				return nil, fmt.Errorf("forward: sequence %d: token %d outside the vocabulary (size %d)", i, t, c.Vocab)
			}
		}
		if reflect.TypeOf(sq.Cache).Comparable() {
			for _, prev := range b.Seqs[:i] {
				if reflect.TypeOf(prev.Cache) == reflect.TypeOf(sq.Cache) && prev.Cache == sq.Cache {
					return nil, fmt.Errorf("forward: sequences of one batch share a cache")
				}
			}
		}
		T += len(sq.Tokens)
		if sq.AllLogits != nil {
			R += len(sq.Tokens)
		} else if sq.Logits != nil {
			R++
		}
		ctx = max(ctx, sq.Pos+len(sq.Tokens))
	}
	for i, sq := range b.Seqs {
		sq.Cache.Truncate(sq.Pos)
		if err := sq.Cache.Extend(sq.Pos + len(sq.Tokens)); err != nil {
			for _, done := range b.Seqs[:i+1] {
				done.Cache.Truncate(done.Pos)
			}
			return nil, fmt.Errorf("forward: sequence %d: %v", i, err)
		}
	}

	s := m.scratch(T, R, ctx)
	s.b = b
	half := c.RopeDim / 2
	t := 0
	s.rows = s.rows[:0]
	for si, sq := range b.Seqs {
		for j, tok := range sq.Tokens {
			s.tokSeq[t], s.tokPos[t] = si, sq.Pos+j
			m.TokEmbd.Row(int(tok), s.x[t*c.Embd:(t+1)*c.Embd])
			m.rope.angles(sq.Pos+j, s.cos[t*half:(t+1)*half], s.sin[t*half:(t+1)*half])
			if sq.AllLogits != nil || (sq.Logits != nil && j == len(sq.Tokens)-1) {
				s.rows = append(s.rows, t)
			}
			t++
		}
	}
	threads := 1
	if p != nil {
		threads = p.Threads()
	}
	s.groupQueries(threads)
	return s, nil
}

// scratch returns the state sized for T tokens, R logit rows and attention
// over ctx positions.
func (m *Model) scratch(T, R, ctx int) *state {
	c := &m.Config
	s := m.st
	if s == nil {
		s = &state{m: m}
		s.attnFn = s.attendChunks
		s.swigluFn = s.swigluRange
		m.st = s
	}
	grow := func(buf []float32, n int) []float32 {
		if cap(buf) < n {
			return make([]float32, n)
		}
		return buf[:n]
	}
	s.T = T
	s.x = grow(s.x, T*c.Embd)
	s.xb = grow(s.xb, T*c.Embd)
	s.q = grow(s.q, T*c.QDim())
	s.k = grow(s.k, T*c.KDim())
	s.v = grow(s.v, T*c.VDim())
	s.att = grow(s.att, T*c.ODim())
	s.hb = grow(s.hb, T*c.FF)
	s.hb2 = grow(s.hb2, T*c.FF)
	s.cos = grow(s.cos, T*c.RopeDim/2)
	s.sin = grow(s.sin, T*c.RopeDim/2)
	if cap(s.tokSeq) < T {
		s.tokSeq, s.tokPos = make([]int, T), make([]int, T)
		s.rows = make([]int, 0, T)
	}
	s.tokSeq, s.tokPos = s.tokSeq[:T], s.tokPos[:T]
	s.xr = grow(s.xr, R*c.Embd)
	s.logitBuf = grow(s.logitBuf, R*c.Vocab)

	s.ctx = ctx
	return s
}

// attnGroupMax is the most queries attended together, four at a time with
// Dots4 and Axpys4 (at most 16); tests set 1 to compare with attention
// query by query.
var attnGroupMax = 16

// attnTile is the most positions a group's queries go over together: their
// keys (or values) stay in L1 while every query of the group uses them.
const attnTile = 64

// attnGroup is up to attnGroupMax queries (token t[i], query head h[i])
// that read the same cached keys and values: one sequence, one KV head.
type attnGroup struct {
	n    int
	t, h [16]int
}

// groupQueries lays out the attention work of the step: per sequence and
// KV head, its queries in token order (and the query heads sharing the KV
// head under GQA), up to attnGroupMax at a time. A worker's consecutive
// groups share their keys and values in cache; within a group each row is
// read from memory once. Groups shrink (to 8, 4, then single queries) while
// there are fewer than two per thread: a decode step of one sequence has
// one group per KV head, too few to keep every thread busy.
func (s *state) groupQueries(threads int) {
	c := &s.m.Config
	for size := attnGroupMax; ; size /= 2 {
		if size < 4 {
			size = 1 // fewer than four share nothing (Dots4)
		}
		s.makeGroups(size)
		if size == 1 || len(s.groups) >= 2*threads {
			break
		}
	}
	s.nChunks = min(len(s.groups), 4*threads)
	n := s.nChunks * attnGroupMax * s.ctx
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
func (s *state) makeGroups(size int) {
	c := &s.m.Config
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

// positionQKV finishes the projections of layer l: biases, per-head q/k
// norms (qwen3) and rope, then stores the keys and values in the caches.
func (s *state) positionQKV(ly *Layer, l int) {
	c := &s.m.Config
	qd, kd, vd, half := c.QDim(), c.KDim(), c.VDim(), c.RopeDim/2
	addRows(s.q, ly.QBias)
	addRows(s.k, ly.KBias)
	addRows(s.v, ly.VBias)
	for t := range s.T {
		q, k, v := s.q[t*qd:(t+1)*qd], s.k[t*kd:(t+1)*kd], s.v[t*vd:(t+1)*vd]
		if ly.QNorm != nil {
			rmsnorm(q, q, ly.QNorm, c.RMSEps)
			rmsnorm(k, k, ly.KNorm, c.RMSEps)
		}
		cos, sin := s.cos[t*half:(t+1)*half], s.sin[t*half:(t+1)*half]
		s.m.rope.apply(q, c.HeadDim, cos, sin)
		s.m.rope.apply(k, c.HeadDim, cos, sin)
		s.b.Seqs[s.tokSeq[t]].Cache.Put(l, s.tokPos[t], k, v)
	}
}

// attention computes s.att from s.q and the caches of layer l, in parallel
// over (token, head) items.
func (s *state) attention(p *kernels.Pool, l int) {
	s.layer = l
	parFor(p, s.nChunks, s.attnFn)
}

func (s *state) attendChunks(lo, hi int) {
	span := attnGroupMax * s.ctx
	tile := len(s.tiles) / max(s.nChunks, 1)
	for ch := lo; ch < hi; ch++ {
		scores := s.scores[ch*span : (ch+1)*span]
		// round-robin: causal prefill groups have unequal costs
		for g := ch; g < len(s.groups); g += s.nChunks {
			s.attendGroup(&s.groups[g], scores, s.tiles[ch*tile:(ch+1)*tile])
		}
	}
}

// attendGroup is softmax(q·K/sqrt(hd)) V for each query of g, over the
// positions up to and including its token's own. Over the positions all of
// them see, the queries go four at a time (the last g.n%4 alone) through
// tiles of keys and values that stay in cache; every query gets the
// operations it would get alone, so the results do not depend on the
// grouping (nor on the batch).
func (s *state) attendGroup(g *attnGroup, scores, tile []float32) {
	c := &s.m.Config
	hd, vdh := c.HeadDim, c.ValueDim
	kd, vd := c.KDim(), c.VDim()
	kvh := g.h[0] / (c.Heads / c.KVHeads)
	cache := s.b.Seqs[s.tokSeq[g.t[0]]].Cache
	scale := 1 / sqrt32(float32(hd))
	var q, sc, out [16][]float32
	var n [16]int
	shared := s.ctx // positions every query of the group sees
	for i := range g.n {
		t, h := g.t[i], g.h[i]
		n[i] = s.tokPos[t] + 1
		shared = min(shared, n[i])
		q[i] = s.q[t*c.QDim()+h*hd : t*c.QDim()+(h+1)*hd]
		sc[i] = scores[i*s.ctx : i*s.ctx+n[i]]
		out[i] = s.att[t*c.ODim()+h*vdh : t*c.ODim()+(h+1)*vdh]
	}
	quads := g.n / 4 // queries [0, 4*quads) share the positions [0, shared)
	if quads == 0 {
		shared = 0
	}
	from := func(i int) int { // where query i goes on alone
		if i < 4*quads {
			return shared
		}
		return 0
	}
	var part [4][]float32
	for pos := 0; pos < shared; {
		sp := cache.Span(s.layer, pos)
		cnt := min(sp.N, shared-pos, attnTile)
		rows, stride := headRows(sp.K, sp.K16, kvh*hd, kd, hd, cnt, quads, tile)
		for qd := range quads {
			for i := range part {
				part[i] = sc[4*qd+i][pos : pos+cnt]
			}
			kernels.Dots4(&part, (*[4][]float32)(q[4*qd:4*qd+4]), rows, stride, scale)
		}
		pos += cnt
	}
	for i := range g.n {
		for pos := from(i); pos < n[i]; {
			sp := cache.Span(s.layer, pos)
			cnt := min(sp.N, n[i]-pos)
			if sp.K16 != nil {
				kernels.DotsF16(sc[i][pos:pos+cnt], q[i], sp.K16[kvh*hd:], kd, scale)
			} else {
				kernels.Dots(sc[i][pos:pos+cnt], q[i], sp.K[kvh*hd:], kd, scale)
			}
			pos += cnt
		}
		softmax(sc[i])
		clear(out[i])
	}
	for pos := 0; pos < shared; {
		sp := cache.Span(s.layer, pos)
		cnt := min(sp.N, shared-pos, attnTile)
		rows, stride := headRows(sp.V, sp.V16, kvh*vdh, vd, vdh, cnt, quads, tile)
		for qd := range quads {
			for i := range part {
				part[i] = sc[4*qd+i][pos : pos+cnt]
			}
			kernels.Axpys4((*[4][]float32)(out[4*qd:4*qd+4]), &part, rows, stride)
		}
		pos += cnt
	}
	for i := range g.n {
		for pos := from(i); pos < n[i]; {
			sp := cache.Span(s.layer, pos)
			cnt := min(sp.N, n[i]-pos)
			if sp.V16 != nil {
				kernels.AxpysF16(out[i], sc[i][pos:pos+cnt], sp.V16[kvh*vdh:], vd)
			} else {
				kernels.Axpys(out[i], sc[i][pos:pos+cnt], sp.V[kvh*vdh:], vd)
			}
			pos += cnt
		}
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

// swiglu sets hb = silu(hb) * hb2.
func (s *state) swiglu(p *kernels.Pool) {
	parFor(p, len(s.hb), s.swigluFn)
}

func (s *state) swigluRange(lo, hi int) {
	kernels.SiLUMul(s.hb[lo:hi], s.hb2[lo:hi])
}

// logits applies the final norm and the output matrix to the rows that
// want logits and hands them to their sequences; sequences that want their
// hidden states get every token's normed row.
func (s *state) logits(p *kernels.Pool) {
	c := &s.m.Config
	E, V := c.Embd, c.Vocab
	t := 0
	for _, sq := range s.b.Seqs {
		if sq.Hidden != nil {
			for j := range sq.Tokens {
				rmsnorm(sq.Hidden[j*E:(j+1)*E], s.x[(t+j)*E:(t+j+1)*E], s.m.OutputNorm, c.RMSEps)
			}
		}
		t += len(sq.Tokens)
	}
	R := len(s.rows)
	if R == 0 {
		return
	}
	for r, t := range s.rows {
		rmsnorm(s.xr[r*E:(r+1)*E], s.x[t*E:(t+1)*E], s.m.OutputNorm, c.RMSEps)
	}
	kernels.MatMul(p, s.logitBuf, s.m.Output, s.xr, R)
	r := 0
	for _, sq := range s.b.Seqs {
		switch {
		case sq.AllLogits != nil:
			n := len(sq.Tokens)
			copy(sq.AllLogits, s.logitBuf[r*V:(r+n)*V])
			r += n
			if sq.Logits != nil {
				copy(sq.Logits, s.logitBuf[(r-1)*V:r*V])
			}
		case sq.Logits != nil:
			copy(sq.Logits, s.logitBuf[r*V:(r+1)*V])
			r++
		}
	}
}

// parFor runs fn over [0, n) on p, or inline without a pool.
func parFor(p *kernels.Pool, n int, fn func(lo, hi int)) {
	if p == nil || n <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	p.For(n, fn)
}
