package nn

import "mistralrs/internal/kernels"

// LoRA adapters. An adapter is not merged into the weights: a product with
// an adapted weight W computes W·x + s·B·(A·x) for the rows of the
// sequences that use the adapter, s being the effective scale: the
// request's scale × alpha / rank, as llama.cpp and PEFT define it (the
// rank of the weight's own pair: Active.Scale × LowRank.Scale). The base
// product runs once for the whole batch; the low-rank terms then run row
// by row for the sequences that have adapters (addLoRA), so sequences with
// different adapters, and none, share a step.

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

// loraGroup is an adapter used by some of the step's sequences (HasLoRA
// asks them).
type loraGroup struct {
	a *Adapter
}

// loraItem is a run of one sequence's rows that take low-rank terms: at
// most loraChunk rows, so that a long prompt spreads over the workers.
type loraItem struct {
	sq     *SeqInput
	lo, hi int // its rows of the step, or of the step's logit rows
}

// loraChunk is the most rows of one item.
const loraChunk = 16

// loraScratch is one item's buffers: an input row when it must be
// rounded, its A·x, and its B·(A·x).
type loraScratch struct {
	x, ax, bx []float32
}

// loraJob is the product addLoRA works on, for the workers.
type loraJob struct {
	out, in []float32
	w       *kernels.Matrix
	items   []loraItem
}

// planLoRA lists the batch's adapters and the runs of rows of the
// sequences that use them. A batch without any adapter (the common case)
// leaves no item and costs one pass over the sequences; adapters at scale
// 0 or without pairs are skipped.
func (s *Step) planLoRA(b *Batch) {
	s.loraGroups, s.loraItems, s.loraLogitItems = s.loraGroups[:0], s.loraItems[:0], s.loraLogitItems[:0]
	t, r := 0, 0
	for _, sq := range b.Seqs {
		n, nr := len(sq.Tokens), logitRows(sq)
		used := false
		for _, a := range sq.LoRA {
			if applies(a) {
				used = true
				if !s.hasGroup(a.Adapter) {
					s.loraGroups = append(s.loraGroups, loraGroup{a: a.Adapter})
				}
			}
		}
		if used {
			for lo := 0; lo < n; lo += loraChunk {
				s.loraItems = append(s.loraItems, loraItem{sq: sq, lo: t + lo, hi: t + min(lo+loraChunk, n)})
			}
			for lo := 0; lo < nr; lo += loraChunk {
				s.loraLogitItems = append(s.loraLogitItems, loraItem{sq: sq, lo: r + lo, hi: r + min(lo+loraChunk, nr)})
			}
		}
		t, r = t+n, r+nr
	}
	if n := max(len(s.loraItems), len(s.loraLogitItems)); len(s.loraScratch) < n {
		s.loraScratch = append(s.loraScratch, make([]loraScratch, n-len(s.loraScratch))...)
	}
	if s.loraFn == nil {
		s.loraFn = s.loraRange
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
// for the product out = w·in (rows of w.Cols): scale × pair scale ×
// B·(A·x) for each of its sequence's adapters with a pair for w, in the
// order the sequence lists them, scaled after B as llama.cpp does. logits
// selects the step's logit rows instead of its token rows.
//
// A row's terms are computed alone, the same operations whatever else the
// step holds: one-row products (A·x; B·(A·x) as Rank vector updates over
// LowRank.BT, else a one-row product with B), so that a sequence gets the
// same bits batched or alone, in any prompt chunk, and whichever other
// adapters the step has. The work goes by runs of one sequence's rows,
// which write disjoint rows: on the calling goroutine for a decode step's
// few rows (waking the workers costs more), over the workers for prompts.
func (s *Step) addLoRA(out []float32, w *kernels.Matrix, in []float32, logits bool) {
	items := s.loraItems
	if logits {
		items = s.loraLogitItems
	}
	if len(items) == 0 || !s.HasLoRA(w) {
		return
	}
	s.loraJob = loraJob{out: out, in: in, w: w, items: items}
	work := 0
	for _, it := range items {
		for _, a := range it.sq.LoRA {
			if lr, ok := a.Adapter.Deltas[w]; ok && applies(a) {
				work += (it.hi - it.lo) * lr.Rank * (w.Cols + w.Rows)
			}
		}
	}
	if work < loraSerial || len(items) == 1 {
		s.loraRange(0, len(items))
	} else {
		s.ParFor(len(items), s.loraFn)
	}
	s.loraJob = loraJob{}
}

// loraSerial is the number of multiply-adds of a product's low-rank terms
// below which they run on the calling goroutine: a decode step's few rows
// per adapter cost less than waking the pool.
const loraSerial = 1 << 20

// loraRange computes the terms of the items [lo, hi) of the current job.
func (s *Step) loraRange(lo, hi int) {
	j := &s.loraJob
	w := j.w
	for i := lo; i < hi; i++ {
		it := j.items[i]
		sc := &s.loraScratch[i]
		for _, a := range it.sq.LoRA {
			lr, ok := a.Adapter.Deltas[w]
			if !ok || !applies(a) {
				continue
			}
			sc.ax = grow(sc.ax, lr.Rank)
			sc.bx = grow(sc.bx, w.Rows)
			f := a.Scale * lr.Scale
			for r := it.lo; r < it.hi; r++ {
				x := j.in[r*w.Cols : (r+1)*w.Cols]
				if rounds(lr.A.Type) {
					sc.x = append(sc.x[:0], x...)
					roundInput(lr.A.Type, sc.x)
					x = sc.x
				}
				kernels.MatMul(nil, sc.ax, lr.A, x, 1)
				roundInput(lr.B.Type, sc.ax)
				if len(lr.BT) == lr.Rank*w.Rows {
					clear(sc.bx)
					kernels.Axpys(sc.bx, sc.ax, lr.BT, w.Rows)
				} else {
					kernels.MatMul(nil, sc.bx, lr.B, sc.ax, 1)
				}
				axpy(j.out[r*w.Rows:(r+1)*w.Rows], f, sc.bx)
			}
		}
	}
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
