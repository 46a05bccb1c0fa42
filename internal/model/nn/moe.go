package nn

import (
	"fmt"
	"math"
	"sync"

	"mistralrs/internal/kernels"
)

// MoE is a mixture-of-experts feed-forward block: a router picks
// Config.ExpertUsed of Config.Experts gated MLPs per token,
//
//	p = softmax(Router·h) over the experts, top-k of p,
//	w = p / Σ top-k p when Config.ExpertNorm (qwen3moe, mixtral), p otherwise (qwen2moe),
//	out = Σ_k w_k · Down_k(silu(Gate_k·h) ⊙ Up_k·h)
//
// plus, when the optional shared-expert tensors are present (qwen2moe),
// sigmoid(SharedGateInp·h) · SharedDown(silu(SharedGate·h) ⊙ SharedUp·h),
// whose width is Config.FF. Expert matrices are stored as 3-D tensors, one
// matrix per index of the last dimension.
type MoE struct {
	Router *kernels.Matrix   `gguf:"ffn_gate_inp.weight" dims:"embd,experts" rand:"f32"`
	Gate   []*kernels.Matrix `gguf:"ffn_gate_exps.weight" dims:"embd,expff,experts"`
	Up     []*kernels.Matrix `gguf:"ffn_up_exps.weight" dims:"embd,expff,experts"`
	Down   []*kernels.Matrix `gguf:"ffn_down_exps.weight" dims:"expff,embd,experts"`
	SharedExpert

	// Row views of Gate, Up and Down by number of chunks (Init).
	gateRows, upRows, downRows [maxSplit + 1][][]*kernels.Matrix
}

// maxExperts bounds expert_count before any tensor is looked at (the
// largest released models have a few hundred).
const maxExperts = 1 << 12

// ReadExperts reads expert_count and expert_used_count (required) and the
// experts' width (expert_feed_forward_length, ffDefault when absent; < 0:
// required), and checks them; norm is expert_weights_norm's default.
func ReadExperts(r *KeyReader, c *Config, ffDefault int, norm bool) error {
	c.Experts = r.Int("expert_count", -1)
	c.ExpertUsed = r.Int("expert_used_count", -1)
	c.ExpertFF = r.Int("expert_feed_forward_length", ffDefault)
	c.ExpertNorm = r.Bool("expert_weights_norm", norm)
	if r.Err != nil {
		return r.Err
	}
	switch {
	case c.Experts <= 0 || c.Experts > maxExperts:
		return fmt.Errorf("%s: %sexpert_count %d must be between 1 and %d", r.F.Path, r.Prefix, c.Experts, maxExperts)
	case c.ExpertUsed <= 0 || c.ExpertUsed > c.Experts:
		return fmt.Errorf("%s: %sexpert_used_count %d must be between 1 and expert_count %d", r.F.Path, r.Prefix, c.ExpertUsed, c.Experts)
	case c.ExpertFF <= 0:
		return fmt.Errorf("%s: %sexpert_feed_forward_length %d must be positive", r.F.Path, r.Prefix, c.ExpertFF)
	}
	return nil
}

// MoEFFN is the feed-forward sub-layer of a mixture-of-experts block: the
// experts on the normed residual stream, added to it.
type MoEFFN struct {
	Norm []float32 `gguf:"ffn_norm.weight" dims:"embd"`
	MoE
}

// Forward adds the experts' output for the residual stream to it.
func (p *MoEFFN) Forward(s *Step) {
	s.Norm(s.XB, s.X, p.Norm)
	p.MoE.Forward(s, s.XB, s.XB)
	Add(s.X, s.XB)
}

// SharedExpert is qwen2moe's always-on expert, scaled per token by a
// sigmoid gate; all its tensors are absent in the other architectures.
type SharedExpert struct {
	SharedGateInp []float32       `gguf:"ffn_gate_inp_shexp.weight,optional" dims:"embd" rand:"unit"`
	SharedGate    *kernels.Matrix `gguf:"ffn_gate_shexp.weight,optional" dims:"embd,ff"`
	SharedUp      *kernels.Matrix `gguf:"ffn_up_shexp.weight,optional" dims:"embd,ff"`
	SharedDown    *kernels.Matrix `gguf:"ffn_down_shexp.weight,optional" dims:"ff,embd"`
}

// HasShared reports whether the shared expert is complete (true), absent
// (false); ok is false when only some of its tensors are present.
func (se *SharedExpert) HasShared() (has, ok bool) {
	n := 0
	for _, p := range []bool{se.SharedGateInp != nil, se.SharedGate != nil, se.SharedUp != nil, se.SharedDown != nil} {
		if p {
			n++
		}
	}
	return n == 4, n == 0 || n == 4
}

// MoEBuf is the first of the Step.Buf slots MoE.Forward uses (MoEBuf to
// MoEBuf+5); an architecture's own buffers take lower slots.
const MoEBuf = 8

const (
	moeProbs  = MoEBuf + iota // T×Experts router probabilities
	moeChoice                 // T×ExpertUsed chosen experts, then their weights
	moeIndex                  // small integers, held exactly as float32: see moePlan
	moeRows                   // the T×ExpertUsed routed rows grouped by expert, then the experts' outputs
	moeHidden                 // gate and up products of the routed rows (2 × T×ExpertUsed×ExpertFF)
	moeOut                    // T×ExpertUsed×Embd: each chosen expert's weighted output
)

// maxSplit bounds how finely an expert's matrix is cut for the threads:
// into 1, 2, 4, ... 1<<maxSplit chunks of rows.
const maxSplit = 4

// Init prepares the row views that Forward hands to the threads; an
// architecture calls it once its weights are loaded.
func (m *MoE) Init() {
	cut := func(mats []*kernels.Matrix) [maxSplit + 1][][]*kernels.Matrix {
		var out [maxSplit + 1][][]*kernels.Matrix
		for s := range out {
			out[s] = make([][]*kernels.Matrix, len(mats))
			for e, w := range mats {
				n := min(1<<s, w.Rows)
				for c := range n {
					lo, hi := chunkRows(c, n, w.Rows)
					out[s][e] = append(out[s][e], w.SubRows(lo, hi))
				}
			}
		}
		return out
	}
	m.gateRows, m.upRows, m.downRows = cut(m.Gate), cut(m.Up), cut(m.Down)
}

// Forward sets out to the block's output for the step's T rows of in
// (rows of Embd); out may be in.
//
// The tokens are grouped by expert: the rows routed to each expert are
// gathered into one contiguous matrix that goes through each of the
// expert's matrices in one product, so that each expert's weights are read
// once per step whatever the number of tokens (prefill, batched decode).
// The products of all experts run as one parallel loop for gate and up and
// one for down, over (expert, chunk of weight rows) pieces. A row's result
// does not depend on the other rows (MatMul computes each row alike) nor on
// the cut, and each token sums its experts' outputs in the order of their
// choice, so a token gets the same bits alone as in any batch.
func (m *MoE) Forward(s *Step, out, in []float32) {
	c := s.Cfg
	T, K, D := s.T, c.ExpertUsed, c.Embd
	j := moeJobs.Get().(*moeJob)
	defer j.release()
	j.m, j.cfg = m, c
	p := j.plan(s, in)
	j.experts(s)
	// Weigh each expert's output rows into their (token, choice) slots.
	expOut := s.Buf(moeOut, T*K*D)
	y := s.Buf(moeRows, T*K*D)
	for i, w := range p.weight {
		e, r := int(p.choice[i]), int(p.rowOf[i])
		n, off := int(p.count[e]), int(p.offset[e])
		dst := expOut[i*D : (i+1)*D]
		for ch, nc := 0, min(1<<p.splitD, D); ch < nc; ch++ {
			lo, hi := ch*D/nc, (ch+1)*D/nc
			src := y[off*D+n*lo+(r-off)*(hi-lo):][:hi-lo]
			for j, v := range src {
				dst[lo+j] = w * v
			}
		}
	}
	var shared []float32
	if m.SharedGate != nil {
		shared = m.sharedForward(s, in)
	}
	// Sum each token's experts in the order they were chosen.
	for t := range T {
		o := out[t*D : (t+1)*D]
		copy(o, expOut[t*K*D:(t*K+1)*D])
		for k := 1; k < K; k++ {
			Add(o, expOut[(t*K+k)*D:(t*K+k+1)*D])
		}
		if shared != nil {
			Add(o, shared[t*D:(t+1)*D])
		}
	}
}

// moePlan is the routing of one step. Its integer slices are small
// integers held exactly as float32 in the step's scratch.
type moePlan struct {
	choice, weight []float32 // per (token, choice) slot i = t*K+k: the expert and its weight
	rowOf          []float32 // per slot: its row among the routed rows
	count, offset  []float32 // per expert: its rows, and the first of them
	active         []float32 // the experts with rows, in order
	splitFF        int       // gate and up are cut into 1<<splitFF chunks of rows
	splitD         int       // down is cut into 1<<splitD chunks
}

// plan routes the step's rows of in, gathers them by expert into the
// moeRows scratch and returns (and keeps in j) the plan.
func (j *moeJob) plan(s *Step, in []float32) moePlan {
	c := s.Cfg
	T, E, K, D := s.T, c.Experts, c.ExpertUsed, c.Embd
	cw := s.Buf(moeChoice, 2*T*K)
	idx := s.Buf(moeIndex, T*K+4*E)
	p := moePlan{choice: cw[:T*K], weight: cw[T*K:], rowOf: idx[:T*K],
		count: idx[T*K : T*K+E], offset: idx[T*K+E : T*K+2*E], active: idx[T*K+2*E : T*K+2*E : T*K+3*E]}
	fill := idx[T*K+3*E:] // per expert: its rows gathered so far
	j.p, j.in, j.probs = p, in, s.Buf(moeProbs, T*E)
	j.adapted = s.HasLoRA(j.m.Router)
	s.ParFor(T, j.routeFn)
	if j.adapted { // the router's logits take the adapters' terms before the choice
		s.addLoRA(j.probs, j.m.Router, in, false)
		for t := range T {
			route(j.probs[t*E:(t+1)*E], p.choice[t*K:(t+1)*K], p.weight[t*K:(t+1)*K], c.ExpertNorm)
		}
	}
	clear(p.count)
	for _, e := range p.choice {
		p.count[int(e)]++
	}
	next := 0
	for e, n := range p.count {
		p.offset[e] = float32(next)
		next += int(n)
		if n > 0 {
			p.active = append(p.active, float32(e))
		}
	}
	rows := s.Buf(moeRows, T*K*D)
	clear(fill)
	for i, e := range p.choice {
		r := int(p.offset[int(e)] + fill[int(e)])
		fill[int(e)]++
		p.rowOf[i] = float32(r)
		t := i / K
		copy(rows[r*D:(r+1)*D], in[t*D:(t+1)*D])
	}
	// Enough pieces per loop to keep every thread busy.
	threads := 1
	if s.Pool != nil {
		threads = s.Pool.Threads()
	}
	for p.splitFF < maxSplit && len(p.active)<<p.splitFF < 4*threads && 2<<p.splitFF <= c.ExpertFF {
		p.splitFF++
	}
	for p.splitD < maxSplit && len(p.active)<<p.splitD < 4*threads && 2<<p.splitD <= D {
		p.splitD++
	}
	j.p = p
	return p
}

// route computes the router's probabilities and choices for tokens
// [lo, hi), one token at a time: a product of one row gives a token the
// same bits whatever the kernels do for several (the router is F32, whose
// pure-Go kernels sum four rows in another order than one). When a
// sequence adapts the router, the choices wait for the adapters' terms
// (plan adds them, then routes).
func (j *moeJob) route(lo, hi int) {
	c := j.cfg
	E, K, D := c.Experts, c.ExpertUsed, c.Embd
	for t := lo; t < hi; t++ {
		p := j.probs[t*E : (t+1)*E]
		kernels.MatMul(nil, p, j.m.Router, j.in[t*D:(t+1)*D], 1)
		if !j.adapted {
			route(p, j.p.choice[t*K:(t+1)*K], j.p.weight[t*K:(t+1)*K], c.ExpertNorm)
		}
	}
}

// experts runs every active expert's MLP over its rows of the moeRows
// scratch and leaves the results there, each expert's rows in chunks of
// columns as down was cut (see Forward).
func (j *moeJob) experts(s *Step) {
	c, p := s.Cfg, j.p
	TK, D, F := s.T*c.ExpertUsed, c.Embd, c.ExpertFF
	hid := s.Buf(moeHidden, 2*TK*F)
	j.rows, j.g, j.u, j.act = s.Buf(moeRows, TK*D), hid[:TK*F], hid[TK*F:], hid[:TK*F]
	j.D, j.F, j.ncFF, j.ncD = D, F, min(1<<p.splitFF, F), min(1<<p.splitD, D)
	s.ParFor(len(p.active)*j.ncFF, j.gateUpFn)
	// Down takes whole rows: put the chunks of g back together in u.
	if j.ncFF > 1 {
		j.act = j.u
		for _, ae := range p.active {
			e := int(ae)
			cnt, off := int(p.count[e]), int(p.offset[e])
			for ch := range j.ncFF {
				r0, r1 := ch*F/j.ncFF, (ch+1)*F/j.ncFF
				for r := range cnt {
					copy(j.u[(off+r)*F+r0:(off+r)*F+r1], j.g[off*F+cnt*r0+r*(r1-r0):][:r1-r0])
				}
			}
		}
	}
	s.ParFor(len(p.active)*j.ncD, j.downFn)
}

// moeJob is the state of MoE.experts' parallel loops; jobs are pooled so
// that a step does not allocate (their loop functions are bound once).
type moeJob struct {
	cfg                       *Config
	in, probs                 []float32
	m                         *MoE
	adapted                   bool // some sequence adapts the router: route after the adapters' terms
	p                         moePlan
	rows, g, u, act           []float32
	D, F, ncFF, ncD           int
	routeFn, gateUpFn, downFn func(lo, hi int)
}

var moeJobs = sync.Pool{New: func() any {
	j := new(moeJob)
	j.routeFn, j.gateUpFn, j.downFn = j.route, j.gateUp, j.down
	return j
}}

// release clears j (it must not keep the step's buffers alive) and pools it.
func (j *moeJob) release() {
	*j = moeJob{routeFn: j.routeFn, gateUpFn: j.gateUpFn, downFn: j.downFn}
	moeJobs.Put(j)
}

// piece returns the expert of piece i of a loop over the active experts
// cut in nc chunks of n rows, its number of routed rows and the first of
// them, and the rows [lo, hi) of the chunk.
func (j *moeJob) piece(i, nc, n int) (e, cnt, off, lo, hi int) {
	e = int(j.p.active[i/nc])
	cnt, off = int(j.p.count[e]), int(j.p.offset[e])
	lo, hi = chunkRows(i%nc, nc, n)
	return e, cnt, off, lo, hi
}

// chunkRows returns the rows [lo,hi) of chunk c when rows rows are cut
// into n chunks: even shares, with their bounds on multiples of
// kernels.PackRows when every chunk can have some, so that each chunk
// keeps the packed copy of the weights (kernels.Matrix.SubRows).
func chunkRows(c, n, rows int) (lo, hi int) {
	bound := func(c int) int {
		b := c * rows / n
		if c < n && rows >= n*kernels.PackRows {
			b -= b % kernels.PackRows
		}
		return b
	}
	return bound(c), bound(c + 1)
}

// gateUp computes silu(gate)·up for pieces [lo, hi): chunk [r0, r1) of
// expert e's rows goes to g[off*F+cnt*r0:] as cnt rows of r1-r0 values.
func (j *moeJob) gateUp(lo, hi int) {
	D, F := j.D, j.F
	for i := lo; i < hi; i++ {
		e, cnt, off, r0, r1 := j.piece(i, j.ncFF, F)
		x := j.rows[off*D : (off+cnt)*D]
		gs, us := j.g[off*F+cnt*r0:][:cnt*(r1-r0)], j.u[off*F+cnt*r0:][:cnt*(r1-r0)]
		kernels.MatMul(nil, gs, j.m.gateRows[j.p.splitFF][e][i%j.ncFF], x, cnt)
		kernels.MatMul(nil, us, j.m.upRows[j.p.splitFF][e][i%j.ncFF], x, cnt)
		kernels.SiLUMul(gs, us)
	}
}

// down computes the down products of pieces [lo, hi) into the routed rows
// (free by then), chunk [r0, r1) of expert e at rows[off*D+cnt*r0:].
func (j *moeJob) down(lo, hi int) {
	D, F := j.D, j.F
	for i := lo; i < hi; i++ {
		e, cnt, off, r0, r1 := j.piece(i, j.ncD, D)
		kernels.MatMul(nil, j.rows[off*D+cnt*r0:][:cnt*(r1-r0)], j.m.downRows[j.p.splitD][e][i%j.ncD], j.act[off*F:(off+cnt)*F], cnt)
	}
}

// sharedForward returns the shared expert's gated output for every row of
// in, in the step's HB, HB2 and moeHidden scratch.
func (m *MoE) sharedForward(s *Step, in []float32) []float32 {
	c := s.Cfg
	D, F := c.Embd, c.FF
	s.MatMuls(in, Prod(s.HB, m.SharedGate), Prod(s.HB2, m.SharedUp))
	s.SwiGLU()
	res := s.Buf(moeHidden, s.T*D)
	s.MatMul(res, m.SharedDown, s.HB[:s.T*F])
	for t := range s.T {
		var z float32
		for j, v := range in[t*D : (t+1)*D] {
			z += m.SharedGateInp[j] * v
		}
		g := float32(1 / (1 + math.Exp(-float64(z))))
		row := res[t*D : (t+1)*D]
		for j := range row {
			row[j] *= g
		}
	}
	return res
}

// route turns one token's router logits (p, len Experts; overwritten) into
// its len(choice) experts, largest probability first (the lower index on a
// tie), and their weights.
func route(p, choice, weight []float32, norm bool) {
	kernels.Softmax(p)
	var sum float32
	for k := range choice {
		best := 0
		for e, v := range p {
			if v > p[best] {
				best = e
			}
		}
		choice[k], weight[k] = float32(best), p[best]
		sum += p[best]
		p[best] = -1 // probabilities are >= 0: not chosen again
	}
	if norm {
		for k := range weight {
			weight[k] /= sum
		}
	}
}
