package nn

import "mistralrs/internal/kernels"

// LoRA adapters. An adapter is not merged into the weights: a product with
// an adapted weight W computes W·x + s·B·(A·x) for the rows of the
// sequences that use the adapter, s being the effective scale: the
// request's scale × alpha / rank, as llama.cpp and PEFT define it (the
// rank of the weight's own pair: Active.Scale × LowRank.Scale). The base
// product runs once for the whole batch; the low-rank terms run per group
// of rows that share an adapter, so sequences with different adapters, and
// none, share a step.

// LowRank is one weight's low-rank pair: A has Rank rows of the weight's
// input width, B has one row of Rank values per output.
type LowRank struct {
	A, B  *kernels.Matrix
	Rank  int
	Scale float32 // alpha / Rank (1 when the adapter gives no alpha)
	// BT, optional, is B transposed in float32 (Rank rows of the weight's
	// outputs; F16 values widen exactly): a decode step's few rows go
	// through it as Rank vector updates of each output row, where B would
	// take one dot product of Rank values per output.
	BT []float32
}

// Adapter is a loaded adapter's pairs, keyed by the base weight they
// adapt (the *kernels.Matrix the architecture multiplies by), so that a
// product finds its pair without a name lookup.
type Adapter struct {
	Deltas map[*kernels.Matrix]LowRank
}

// Active is an adapter applied to a sequence at an effective scale.
type Active struct {
	Adapter *Adapter
	Scale   float32 // the runtime scale (1 unless a request or setting says otherwise; negative applies as is, 0 skips)
}

// loraSeg is one sequence's use of an adapter in a step: its rows of the
// step and of the logits, at the request's scale.
type loraSeg struct {
	lo, hi   int // the sequence's rows of the step
	rlo, rhi int // its rows among the step's logit rows
	scale    float32
}

// loraGroup is an adapter used by some of the step's sequences: its
// segments are Step.loraSegs[s0:s1], in the order of the sequences, so
// that each of its matrices is read once per product for all their rows.
type loraGroup struct {
	a      *Adapter
	s0, s1 int
}

// loraScratch is the step's buffers for the low-rank products: gathered
// input rows, their A·x and B·(A·x).
type loraScratch struct {
	x, ax, bx []float32
}

// planLoRA groups the batch's sequences by adapter. A batch without any
// adapter (the common case) leaves no group and costs one pass over the
// sequences; adapters at scale 0 or without pairs are skipped.
func (s *Step) planLoRA(b *Batch) {
	s.loraGroups, s.loraSegs = s.loraGroups[:0], s.loraSegs[:0]
	used := false
	for _, sq := range b.Seqs {
		if len(sq.LoRA) > 0 {
			used = true
			break
		}
	}
	if !used {
		return
	}
	for _, sq := range b.Seqs {
		for _, a := range sq.LoRA {
			if applies(a) && !s.hasGroup(a.Adapter) {
				s.loraGroups = append(s.loraGroups, loraGroup{a: a.Adapter})
			}
		}
	}
	for gi := range s.loraGroups {
		g := &s.loraGroups[gi]
		g.s0 = len(s.loraSegs)
		t, r := 0, 0
		for _, sq := range b.Seqs {
			n, nr := len(sq.Tokens), logitRows(sq)
			for _, a := range sq.LoRA {
				if applies(a) && a.Adapter == g.a {
					s.loraSegs = append(s.loraSegs, loraSeg{lo: t, hi: t + n, rlo: r, rhi: r + nr, scale: a.Scale})
				}
			}
			t, r = t+n, r+nr
		}
		g.s1 = len(s.loraSegs)
	}
}

func applies(a Active) bool { return a.Adapter != nil && a.Scale != 0 && len(a.Adapter.Deltas) > 0 }

func (s *Step) hasGroup(a *Adapter) bool {
	for _, g := range s.loraGroups {
		if g.a == a {
			return true
		}
	}
	return false
}

// logitRows is the number of rows of Step.Logits' output a sequence takes.
func logitRows(sq *SeqInput) int {
	switch {
	case sq.AllLogits != nil:
		return len(sq.Tokens)
	case sq.Logits != nil:
		return 1
	}
	return 0
}

// HasLoRA reports whether some sequence of the step has an adapter with a
// pair for w.
func (s *Step) HasLoRA(w *kernels.Matrix) bool {
	for _, g := range s.loraGroups {
		if _, ok := g.a.Deltas[w]; ok {
			return true
		}
	}
	return false
}

// addLoRA adds to out (rows of w.Rows) each adapted row's low-rank terms
// for the product out = w·in (rows of w.Cols): per adapter with a pair for
// w, A and B run once over the rows of all the sequences that use it
// (gathered when they are not one run), and each sequence's rows get
// scale × pair scale × B·(A·x), scaled after B as llama.cpp does. logits
// selects the step's logit rows instead of its token rows.
func (s *Step) addLoRA(out []float32, w *kernels.Matrix, in []float32, logits bool) {
	for _, g := range s.loraGroups {
		lr, ok := g.a.Deltas[w]
		if !ok {
			continue
		}
		segs := s.loraSegs[g.s0:g.s1]
		x, n := s.loraInput(segs, in, w.Cols, logits, lr.A.Type)
		if n == 0 {
			continue
		}
		sc := &s.loraBuf
		p := s.Pool
		if n*lr.Rank*(w.Cols+w.Rows) < loraSerial {
			p = nil
		}
		sc.ax = grow(sc.ax, n*lr.A.Rows)
		kernels.MatMul(p, sc.ax, lr.A, x, n)
		roundInput(lr.B.Type, sc.ax)
		sc.bx = grow(sc.bx, n*w.Rows)
		if p == nil && len(lr.BT) == lr.Rank*w.Rows {
			clear(sc.bx)
			for i := range n {
				kernels.Axpys(sc.bx[i*w.Rows:(i+1)*w.Rows], sc.ax[i*lr.Rank:(i+1)*lr.Rank], lr.BT, w.Rows)
			}
		} else {
			kernels.MatMul(p, sc.bx, lr.B, sc.ax, n)
		}
		k := 0
		for _, sg := range segs {
			lo, hi := sg.rows(logits)
			f := sg.scale * lr.Scale
			for r := lo; r < hi; r++ {
				axpy(out[r*w.Rows:(r+1)*w.Rows], f, sc.bx[k*w.Rows:(k+1)*w.Rows])
				k++
			}
		}
	}
}

// loraSerial is the number of multiply-adds of a group's two low-rank
// products below which they run on the calling goroutine: a decode step's
// few rows per adapter cost less than waking the pool twice.
const loraSerial = 1 << 20

func (sg loraSeg) rows(logits bool) (lo, hi int) {
	if logits {
		return sg.rlo, sg.rhi
	}
	return sg.lo, sg.hi
}

// loraInput returns the input rows of segs, n of them: in itself when
// they are one run and need no rounding, else gathered (and rounded as
// llama.cpp rounds the input of a product with weights of type t).
func (s *Step) loraInput(segs []loraSeg, in []float32, cols int, logits bool, t kernels.Type) (x []float32, n int) {
	run, next := true, -1
	for i, sg := range segs {
		lo, hi := sg.rows(logits)
		if i > 0 && lo != next {
			run = false
		}
		next = hi
		n += hi - lo
	}
	if n == 0 {
		return nil, 0
	}
	if first, _ := segs[0].rows(logits); run && !rounds(t) {
		return in[first*cols : (first+n)*cols], n
	}
	sc := &s.loraBuf
	sc.x = grow(sc.x, n*cols)
	k := 0
	for _, sg := range segs {
		lo, hi := sg.rows(logits)
		k += copy(sc.x[k:], in[lo*cols:hi*cols])
	}
	roundInput(t, sc.x)
	return sc.x, n
}

// rounds reports whether llama.cpp's CPU backend rounds the float32 input
// of a product with weights of type t (it converts it to the weights' own
// type; quantized types are quantized by kernels.MatMul itself).
func rounds(t kernels.Type) bool { return t == kernels.F16 || t == kernels.BF16 }

// roundInput rounds x as llama.cpp rounds the input of a product with
// weights of type t: to half precision for F16 (and bfloat16 for BF16)
// and back; nothing for the other types.
func roundInput(t kernels.Type, x []float32) {
	switch t {
	case kernels.F16:
		var buf [256]uint16
		for len(x) > 0 {
			n := min(len(x), len(buf))
			kernels.F32ToF16s(buf[:n], x[:n])
			kernels.F16ToF32s(x[:n], buf[:n])
			x = x[n:]
		}
	case kernels.BF16:
		for i, v := range x {
			x[i] = kernels.BF16ToFP32(kernels.FP32ToBF16(v))
		}
	}
}

// axpy sets y += f·x (the scaled term is rounded to float32 before the
// sum, as ggml_scale then ggml_add do).
func axpy(y []float32, f float32, x []float32) {
	for i, v := range x {
		y[i] += float32(f * v) // the conversion keeps the compiler from fusing a multiply-add
	}
}
