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

	// attention work: items (token, head) dealt round-robin to chunks, each
	// with its own score buffer of ctx floats
	nChunks, ctx int
	layer        int
	scores       []float32

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

	s := m.scratch(T, R, ctx, p)
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
	return s, nil
}

// scratch returns the state sized for T tokens, R logit rows and attention
// over ctx positions.
func (m *Model) scratch(T, R, ctx int, p *kernels.Pool) *state {
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

	threads := 1
	if p != nil {
		threads = p.Threads()
	}
	s.nChunks = min(T*c.Heads, 4*threads)
	s.ctx = ctx
	s.scores = grow(s.scores, s.nChunks*ctx)
	return s
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
	items := s.T * s.m.Config.Heads
	for ch := lo; ch < hi; ch++ {
		scores := s.scores[ch*s.ctx : (ch+1)*s.ctx]
		// round-robin: causal prefill items have unequal costs
		for it := ch; it < items; it += s.nChunks {
			s.attendOne(it, scores)
		}
	}
}

// attendOne is softmax(q·K/sqrt(hd)) V for one head of one token, over the
// positions up to and including the token's own.
func (s *state) attendOne(item int, scores []float32) {
	c := &s.m.Config
	// Head-major: a worker's consecutive items share one head's keys and
	// values (which then stay in cache) instead of walking all heads.
	h, t := item/s.T, item%s.T
	kvh := h / (c.Heads / c.KVHeads)
	hd, vdh := c.HeadDim, c.ValueDim
	kd, vd := c.KDim(), c.VDim()
	cache := s.b.Seqs[s.tokSeq[t]].Cache
	n := s.tokPos[t] + 1
	scores = scores[:n]
	q := s.q[t*c.QDim()+h*hd : t*c.QDim()+(h+1)*hd]
	scale := 1 / sqrt32(float32(hd))
	for pos := 0; pos < n; {
		k, _, cnt := cache.Span(s.layer, pos)
		cnt = min(cnt, n-pos)
		kernels.Dots(scores[pos:pos+cnt], q, k[kvh*hd:], kd, scale)
		pos += cnt
	}
	softmax(scores)
	out := s.att[t*c.ODim()+h*vdh : t*c.ODim()+(h+1)*vdh]
	clear(out)
	for pos := 0; pos < n; {
		_, v, cnt := cache.Span(s.layer, pos)
		cnt = min(cnt, n-pos)
		kernels.Axpys(out, scores[pos:pos+cnt], v[kvh*vdh:], vd)
		pos += cnt
	}
}

// swiglu sets hb = silu(hb) * hb2.
func (s *state) swiglu(p *kernels.Pool) {
	parFor(p, len(s.hb), s.swigluFn)
}

func (s *state) swigluRange(lo, hi int) {
	kernels.SiLUMul(s.hb[lo:hi], s.hb2[lo:hi])
}

// logits applies the final norm and the output matrix to the rows that
// want logits and hands them to their sequences.
func (s *state) logits(p *kernels.Pool) {
	c := &s.m.Config
	E, V := c.Embd, c.Vocab
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
