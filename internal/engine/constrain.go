package engine

import (
	"math"
	"sync"

	"mistralrs/internal/constrain"
)

// Structured output. A request with a Grammar samples only tokens whose
// bytes keep the output inside it: before each sampling, the logits of the
// other tokens are set to -Inf (the end-of-generation tokens stay allowed
// only where the output is a whole sentence of the grammar), and once the
// grammar can take nothing more the sequence stops (reason stop). A
// constraint that cannot be met (the token limit arrives inside it, or no
// token fits) ends with reason length and the partial output. With
// speculative decoding, each guessed position's logits are masked by the
// state the accepted guesses before it lead to, so a guess outside the
// grammar is never kept.

// constraints holds what structured output shares across requests: the
// vocabulary as bytes, built on the first constrained request. The
// matchers live with their grammars (constrain.Grammar.Matcher): the
// engine keeps none, so a grammar the server's cache drops is freed once
// its requests end.
type constraints struct {
	once  sync.Once
	vocab *constrain.Vocab
}

// matcher returns the matcher of g over the engine's vocabulary.
func (e *Engine) matcher(g *constrain.Grammar) (*constrain.Matcher, error) {
	c := &e.cons
	c.once.Do(func() {
		toks := make([][]byte, e.tok.VocabSize())
		for id := range toks {
			if !e.tok.IsControl(int32(id)) && !e.tok.IsEOG(int32(id)) {
				toks[id] = e.tok.TokenBytes(int32(id))
			}
		}
		c.vocab = constrain.NewVocab(toks)
	})
	return g.Matcher(c.vocab)
}

// constrainLogits masks sq's logits by grammar state st. It reports false
// when no token may follow and the output is not complete: the constraint
// cannot be met.
func (e *Engine) constrainLogits(sq *seq, st *constrain.State, logits []float32) bool {
	if cap(sq.mask) < len(logits) {
		sq.mask = make([]bool, len(logits))
	}
	mask := sq.mask[:len(logits)]
	sq.cons.Allowed(st, mask)
	complete := st.Complete()
	any := false
	neg := float32(math.Inf(-1))
	for id, ok := range mask {
		switch {
		case ok:
			any = true
		case complete && e.tok.IsEOG(int32(id)) && !sq.req.IgnoreEOS:
			// The output is whole: the model may end it.
			any = true
		default:
			logits[id] = neg
		}
	}
	return any
}
