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
