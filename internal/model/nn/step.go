package nn

import (
	"fmt"
	"reflect"

	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
)

// Batch is one forward step over several sequences. Their tokens are
// stacked into one activation matrix so that each weight matrix is read
// once per step whatever the number of sequences.
type Batch struct {
	Seqs []*SeqInput
}

// SeqInput is the part of a batch that belongs to one sequence.
type SeqInput struct {
	Tokens []int32       // new tokens of this sequence (at least one)
	Pos    int           // position of Tokens[0]; at most Cache.Len(), which is truncated to it
	Cache  kvcache.Cache // the sequence's KV cache; distinct for each sequence of a batch

	Logits    []float32 // if non-nil (len Vocab): receives the logits of the last token
	AllLogits []float32 // if non-nil (len len(Tokens)*Vocab): receives the logits of every token
	// Hidden, if non-nil (len len(Tokens)*Embd), receives the final hidden
	// state of every token: after the last layer and the output norm, what
	// the output matrix would turn into logits (embeddings pool them).
	Hidden []float32
	// Embeds are runs of Tokens whose input rows come from outside the
	// vocabulary (an image's embeddings): sorted, not overlapping, each
	// inside Tokens. Their tokens are placeholders (any id, negative ones
	// included) that the rows replace.
	Embeds []Embeds
	// LoRA lists the adapters applied to this sequence's products (nil:
	// the base model alone); see Adapter.
	LoRA []Active
}

// Embeds is a run of a sequence's new positions whose input rows come from
// outside the vocabulary (an image's embeddings), used as they are: no
// embedding scale.
type Embeds struct {
	Off       int       // index into SeqInput.Tokens of the first row of the run
	Rows      []float32 // n × Embd
	NonCausal bool      // every position of the run also sees the run's later positions
}

// Len is the number of positions the run covers.
func (e *Embeds) Len(embd int) int { return len(e.Rows) / embd }

// Network is an architecture's forward pass over a prepared step: embed
// the step's tokens into X, run the blocks, and end with Step.Logits.
type Network interface {
	Forward(s *Step)
}

// Step is the scratch of one forward pass, kept by the model and grown as
// needed so that steady-state steps do not allocate. Its exported buffers
// hold T rows each: X the residual stream, XB a normed or projected row of
// width Embd, Q, K, V the projections, Att the attention output, HB and HB2
// the MLP's hidden rows (width FF). Weights never live here.
type Step struct {
	Cfg  *Config
	Pool *kernels.Pool // nil: single-threaded
	T    int           // tokens in this step

	X, XB, Q, K, V, Att, HB, HB2 []float32

	b              *Batch
	tokSeq, tokPos []int
	// tokEnd is one past the last position token t attends to: its own
	// position + 1, or the end of its non-causal run.
	tokEnd []int

	// rotary angles of this step's positions, per Rope used
	ropes []ropeAngles
	// per token, the Hadamard block of its values when its cache stores
	// them rotated (0: not), set by PositionQK for Attention (rotate.go)
	vrot []int

	// logits of the rows that want them
	rows         []int
	xr, logitBuf []float32

	// attention work (attention.go)
	at    attnState
	ctx   int
	layer int
	attn  AttnOpts

	extra [][]float32 // Buf's slots

	// the batch's adapters (lora.go); no group: a step without LoRA
	loraGroups                []loraGroup
	loraItems, loraLogitItems []loraItem
	loraScratch               []loraScratch // by item
	loraJob                   loraJob
	loraFn                    func(lo, hi int) // built once: closures would allocate per call

	attnFn, mergeFn, swigluFn, gegluFn func(lo, hi int) // built once: closures would allocate per call
}

type ropeAngles struct {
	r        *Rope
	cos, sin []float32
}

// Prepare validates b, makes room in the caches and sizes the scratch for
// it; the step's tokens still have to be embedded.
func (s *Step) Prepare(c *Config, p *kernels.Pool, b *Batch) error {
	if b == nil || len(b.Seqs) == 0 {
		return fmt.Errorf("forward: empty batch")
	}
	s.vrot = s.vrot[:0]
	T, R, ctx := 0, 0, 0
	for i, sq := range b.Seqs {
		switch {
		case sq == nil || len(sq.Tokens) == 0:
			return fmt.Errorf("forward: sequence %d has no tokens", i)
		case sq.Cache == nil:
			return fmt.Errorf("forward: sequence %d has no cache", i)
		case sq.Pos < 0 || sq.Pos > sq.Cache.Len():
			return fmt.Errorf("forward: sequence %d starts at position %d but its cache holds %d", i, sq.Pos, sq.Cache.Len())
		case sq.Logits != nil && len(sq.Logits) != c.Vocab:
			return fmt.Errorf("forward: sequence %d: Logits has length %d, want vocab size %d", i, len(sq.Logits), c.Vocab)
		case sq.AllLogits != nil && len(sq.AllLogits) != len(sq.Tokens)*c.Vocab:
			return fmt.Errorf("forward: sequence %d: AllLogits has length %d, want %d tokens × %d", i, len(sq.AllLogits), len(sq.Tokens), c.Vocab)
		case sq.Hidden != nil && len(sq.Hidden) != len(sq.Tokens)*c.Embd:
			return fmt.Errorf("forward: sequence %d: Hidden has length %d, want %d tokens × %d", i, len(sq.Hidden), len(sq.Tokens), c.Embd)
		}
		if err := checkTokens(c, sq); err != nil {
			return fmt.Errorf("forward: sequence %d: %v", i, err)
		}
		if reflect.TypeOf(sq.Cache).Comparable() {
			for _, prev := range b.Seqs[:i] {
				if reflect.TypeOf(prev.Cache) == reflect.TypeOf(sq.Cache) && prev.Cache == sq.Cache {
					return fmt.Errorf("forward: sequences of one batch share a cache")
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
			return fmt.Errorf("forward: sequence %d: %v", i, err)
		}
	}

	s.Cfg, s.Pool, s.b = c, p, b
	s.size(T, R, ctx)
	t := 0
	s.rows = s.rows[:0]
	s.ropes = s.ropes[:0]
	for si, sq := range b.Seqs {
		t0 := t
		for j := range sq.Tokens {
			s.tokSeq[t], s.tokPos[t], s.tokEnd[t] = si, sq.Pos+j, sq.Pos+j+1
			if sq.AllLogits != nil || (sq.Logits != nil && j == len(sq.Tokens)-1) {
				s.rows = append(s.rows, t)
			}
			t++
		}
		for _, r := range sq.Embeds {
			if !r.NonCausal {
				continue
			}
			off, end := r.Off, r.Off+r.Len(c.Embd)
			for j := off; j < end; j++ {
				s.tokEnd[t0+j] = sq.Pos + end
			}
		}
	}
	threads := 1
	if p != nil {
		threads = p.Threads()
	}
	s.groupQueries(threads)
	s.planLoRA(b)
	return nil
}

// checkTokens checks a sequence's ids and its runs of embedding rows: ids
// outside the runs must be in the vocabulary; the runs must be sorted, not
// overlapping, inside Tokens and made of whole rows.
func checkTokens(c *Config, sq *SeqInput) error {
	next := 0 // first token not yet checked
	for k, r := range sq.Embeds {
		n := r.Len(c.Embd)
		switch {
		case len(r.Rows) == 0 || len(r.Rows)%c.Embd != 0:
			return fmt.Errorf("embedding run %d has %d values, not a positive multiple of the width %d", k, len(r.Rows), c.Embd)
		case r.Off < next:
			return fmt.Errorf("embedding run %d at token %d overlaps or precedes the previous run", k, r.Off)
		case r.Off+n > len(sq.Tokens):
			return fmt.Errorf("embedding run %d covers tokens [%d, %d) of %d", k, r.Off, r.Off+n, len(sq.Tokens))
		}
		if err := checkIDs(c, sq.Tokens[next:r.Off]); err != nil {
			return err
		}
		next = r.Off + n
	}
	return checkIDs(c, sq.Tokens[next:])
}

func checkIDs(c *Config, ids []int32) error {
	for _, t := range ids {
		if t < 0 || int(t) >= c.Vocab {
			return fmt.Errorf("token %d outside the vocabulary (size %d)", t, c.Vocab)
		}
	}
	return nil
}

// Done lets go of the caller's batch and its adapters (an adapter
// unloaded after the step must not stay alive in the scratch).
func (s *Step) Done() {
	s.b = nil
	clear(s.loraGroups[:cap(s.loraGroups)])
	clear(s.loraItems[:cap(s.loraItems)]) // nor its sequences
	clear(s.loraLogitItems[:cap(s.loraLogitItems)])
	s.loraGroups, s.loraItems, s.loraLogitItems = s.loraGroups[:0], s.loraItems[:0], s.loraLogitItems[:0]
}

// grow returns buf with length n, reallocated when too small.
func grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}

// size sizes the scratch for T tokens, R logit rows and attention over ctx
// positions.
func (s *Step) size(T, R, ctx int) {
	c := s.Cfg
	if s.attnFn == nil {
		s.attnFn, s.mergeFn = s.attendSlots, s.mergeGroups
		s.swigluFn = s.swigluRange
		s.gegluFn = s.gegluRange
	}
	s.T = T
	s.X = grow(s.X, T*c.Embd)
	s.XB = grow(s.XB, T*c.Embd)
	s.Q = grow(s.Q, T*c.QDim())
	s.K = grow(s.K, T*c.KDim())
	s.V = grow(s.V, T*c.VDim())
	s.Att = grow(s.Att, T*c.ODim())
	s.HB = grow(s.HB, T*c.FF)
	s.HB2 = grow(s.HB2, T*c.FF)
	if cap(s.tokSeq) < T {
		s.tokSeq, s.tokPos, s.tokEnd = make([]int, T), make([]int, T), make([]int, T)
		s.rows = make([]int, 0, T)
	}
	s.tokSeq, s.tokPos, s.tokEnd = s.tokSeq[:T], s.tokPos[:T], s.tokEnd[:T]
	s.xr = grow(s.xr, R*c.Embd)
	s.logitBuf = grow(s.logitBuf, R*c.Vocab)
	s.ctx = ctx
}

// Buf returns scratch slot i (an architecture's own buffers: fused
// projections, router scores) with length n; its contents are undefined.
func (s *Step) Buf(i, n int) []float32 {
	for len(s.extra) <= i {
		s.extra = append(s.extra, nil)
	}
	s.extra[i] = grow(s.extra[i], n)
	return s.extra[i]
}

// Embed sets X to the embedding rows of the step's tokens, times scale
// (1 for most models), and to the rows of the sequences' Embeds runs as
// they are (gemma3 scales its token embeddings by sqrt(n_embd), not the
// image rows it is given).
func (s *Step) Embed(emb *kernels.Matrix, scale float32) {
	E := s.Cfg.Embd
	t := 0
	for _, sq := range s.b.Seqs {
		j := 0
		for _, r := range sq.Embeds {
			s.embedTokens(emb, scale, sq.Tokens[j:r.Off], t+j)
			copy(s.X[(t+r.Off)*E:], r.Rows)
			j = r.Off + r.Len(E)
		}
		s.embedTokens(emb, scale, sq.Tokens[j:], t+j)
		t += len(sq.Tokens)
	}
}

// embedTokens sets the rows of X from row t on to the embeddings of ids,
// times scale.
func (s *Step) embedTokens(emb *kernels.Matrix, scale float32, ids []int32, t int) {
	E := s.Cfg.Embd
	for _, tok := range ids {
		row := s.X[t*E : (t+1)*E]
		emb.Row(int(tok), row)
		if scale != 1 {
			for i := range row {
				row[i] *= scale
			}
		}
		t++
	}
}

// MatMul sets out = w·in for the step's T rows, plus the low-rank terms
// of the sequences' adapters that adapt w.
func (s *Step) MatMul(out []float32, w *kernels.Matrix, in []float32) {
	kernels.MatMul(s.Pool, out, w, in, s.T)
	if len(s.loraGroups) > 0 {
		s.addLoRA(out, w, in, false)
	}
}

// MatMuls is MatMul for several matrices of the same input (Q, K and V;
// gate and up): the input is quantized once and, when the matrices share
// a type, all of them run as one parallel loop (kernels.MatMuls; the same
// bits as one MatMul each).
func (s *Step) MatMuls(in []float32, ps ...kernels.Product) {
	kernels.MatMuls(s.Pool, in, s.T, ps...)
	if len(s.loraGroups) > 0 {
		for _, p := range ps {
			s.addLoRA(p.Out, p.M, in, false)
		}
	}
}

// Prod is out = w·in for Step.MatMuls.
func Prod(out []float32, w *kernels.Matrix) kernels.Product {
	return kernels.Product{Out: out, M: w}
}

// Norm sets out = RMSNorm(in)·w row by row (rows of len(w)).
func (s *Step) Norm(out, in, w []float32) { RMSNorm(out, in, w, s.Cfg.RMSEps) }

// angles returns the cos and sin of r for every token of the step,
// computed on first use.
func (s *Step) angles(r *Rope) (cos, sin []float32) {
	for i := range s.ropes {
		if s.ropes[i].r == r {
			return s.ropes[i].cos, s.ropes[i].sin
		}
	}
	half := r.dim / 2
	n := len(s.ropes)
	if n < cap(s.ropes) {
		s.ropes = s.ropes[:n+1]
	} else {
		s.ropes = append(s.ropes, ropeAngles{})
	}
	ra := &s.ropes[n]
	ra.r = r
	ra.cos, ra.sin = grow(ra.cos, s.T*half), grow(ra.sin, s.T*half)
	for t := range s.T {
		r.Angles(s.tokPos[t], ra.cos[t*half:(t+1)*half], ra.sin[t*half:(t+1)*half])
	}
	return ra.cos, ra.sin
}

// PositionQK finishes the projections in Q, K and V of layer l: per-head
// q/k norms (nil: none), rotary embedding r, the rotation of a cache that
// stores rows rotated (rotate.go), then stores the keys and values in the
// caches.
func (s *Step) PositionQK(l int, qNorm, kNorm []float32, r *Rope) {
	c := s.Cfg
	qd, kd, vd := c.QDim(), c.KDim(), c.VDim()
	cos, sin := s.angles(r)
	half := r.dim / 2
	s.vrot = s.vrot[:0]
	var nk, nv int
	for t := range s.T {
		q, k, v := s.Q[t*qd:(t+1)*qd], s.K[t*kd:(t+1)*kd], s.V[t*vd:(t+1)*vd]
		if qNorm != nil {
			RMSNorm(q, q, qNorm, c.RMSEps)
		}
		if kNorm != nil {
			RMSNorm(k, k, kNorm, c.RMSEps)
		}
		tc, ts := cos[t*half:(t+1)*half], sin[t*half:(t+1)*half]
		r.Apply(q, c.HeadDim, tc, ts)
		r.Apply(k, c.HeadDim, tc, ts)
		if t == 0 || s.tokSeq[t] != s.tokSeq[t-1] {
			nk, nv = s.rotation(s.tokSeq[t])
		}
		if nk > 0 {
			kernels.Hadamard(q, nk)
			kernels.Hadamard(k, nk)
		}
		if nv > 0 {
			kernels.Hadamard(v, nv)
		}
		s.vrot = append(s.vrot, nv)
		s.b.Seqs[s.tokSeq[t]].Cache.Put(l, s.tokPos[t], k, v)
	}
}

// SwiGLU sets HB = silu(HB) * HB2.
func (s *Step) SwiGLU() { parFor(s.Pool, len(s.HB), s.swigluFn) }

func (s *Step) swigluRange(lo, hi int) { kernels.SiLUMul(s.HB[lo:hi], s.HB2[lo:hi]) }

// GeGLU sets HB = gelu_tanh(HB) * HB2.
func (s *Step) GeGLU() { parFor(s.Pool, len(s.HB), s.gegluFn) }

func (s *Step) gegluRange(lo, hi int) { GELUMul(s.HB[lo:hi], s.HB2[lo:hi]) }

// Logits applies the final norm and the output matrix to the rows that
// want logits and hands them to their sequences; sequences that want their
// hidden states get every token's normed row.
func (s *Step) Logits(norm []float32, output *kernels.Matrix) {
	c := s.Cfg
	E, V := c.Embd, c.Vocab
	t := 0
	for _, sq := range s.b.Seqs {
		if sq.Hidden != nil {
			for j := range sq.Tokens {
				RMSNorm(sq.Hidden[j*E:(j+1)*E], s.X[(t+j)*E:(t+j+1)*E], norm, c.RMSEps)
			}
		}
		t += len(sq.Tokens)
	}
	R := len(s.rows)
	if R == 0 {
		return
	}
	for r, t := range s.rows {
		RMSNorm(s.xr[r*E:(r+1)*E], s.X[t*E:(t+1)*E], norm, c.RMSEps)
	}
	kernels.MatMul(s.Pool, s.logitBuf, output, s.xr, R)
	if len(s.loraGroups) > 0 {
		s.addLoRA(s.logitBuf, output, s.xr, true)
	}
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

// ParFor runs fn over [0, n) on the step's pool.
func (s *Step) ParFor(n int, fn func(lo, hi int)) { parFor(s.Pool, n, fn) }
