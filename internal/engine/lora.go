package engine

import (
	"errors"
	"fmt"
	"math"

	"mistralrs/internal/kernels"
	"mistralrs/internal/model/nn"
)

// LoRA adapters. A request's LoRA reaches every forward pass of its
// sequences (SeqInput.LoRA): prompt chunks, decodes, every choice of
// Request.N, the recomputation of a preempted sequence and the
// verification of speculative guesses. The model's products apply each
// row group's low-rank terms, so sequences with different adapters, and
// none, share a step. Speculation: a draft model proposes without the
// adapter (it is another model, which the adapter's weights do not fit)
// and the target verifies with it, so the greedy tokens are those of the
// adapted model alone; n-gram lookup needs no model and is unchanged.
// The prefix cache is salted by LoRA.Key (kvcache.State.Salt): a prompt's
// keys and values are shared only under the same adapters, generations and
// scales. Embeddings take an adapter through EmbedLoRA.

// checkLoRA refuses adapters the forward pass cannot apply: a missing
// adapter or pair, a scale that is not a finite number, a pair whose
// shapes do not fit the weight it adapts, or adapters without the key
// that keeps their keys and values apart in the prefix cache.
func checkLoRA(l *LoRA) error {
	if l == nil {
		return nil
	}
	if len(l.Active) > 0 && l.Key == "" {
		return fmt.Errorf("LoRA %q: adapters without a prefix-cache key", l.Name)
	}
	for i, a := range l.Active {
		if a.Adapter == nil {
			return fmt.Errorf("LoRA %q: adapter %d is missing", l.Name, i)
		}
		if !finite(a.Scale) {
			return fmt.Errorf("LoRA %q: adapter %d has scale %v, want a finite number", l.Name, i, a.Scale)
		}
		for w, p := range a.Adapter.Deltas {
			if err := checkPair(w, p); err != nil {
				return fmt.Errorf("LoRA %q: adapter %d: %v", l.Name, i, err)
			}
		}
	}
	return nil
}

// checkPair checks that p adapts w: A is Rank × w's inputs, B w's outputs ×
// Rank.
func checkPair(w *kernels.Matrix, p nn.LowRank) error {
	switch {
	case w == nil:
		return errors.New("a pair for no weight")
	case p.A == nil || p.B == nil:
		return fmt.Errorf("a pair without its A or B matrix for a %dx%d weight", w.Rows, w.Cols)
	case p.Rank <= 0 || p.A.Rows != p.Rank || p.B.Cols != p.Rank || p.A.Cols != w.Cols || p.B.Rows != w.Rows:
		return fmt.Errorf("a rank-%d pair of A %dx%d and B %dx%d does not fit a %dx%d weight",
			p.Rank, p.A.Rows, p.A.Cols, p.B.Rows, p.B.Cols, w.Rows, w.Cols)
	case !finite(p.Scale):
		return fmt.Errorf("a pair with scale %v, want a finite number", p.Scale)
	}
	return nil
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }
