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
// vocabulary as bytes (built on the first constrained request) and the
// matchers of recent grammars.
type constraints struct {
	once  sync.Once
	vocab *constrain.Vocab

	mu       sync.Mutex
	matchers map[*constrain.Grammar]*constrain.Matcher
	order    []*constrain.Grammar // oldest first
}

// maxMatchers bounds the matchers kept for reuse (a server caches its
// compiled grammars, so the same grammar comes back as the same pointer).
const maxMatchers = 64

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
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.matchers[g]; ok {
		return m, nil
	}
	m, err := constrain.NewMatcher(g, c.vocab)
	if err != nil {
		return nil, err
	}
	if c.matchers == nil {
		c.matchers = map[*constrain.Grammar]*constrain.Matcher{}
	}
	if len(c.order) >= maxMatchers {
		delete(c.matchers, c.order[0])
		c.order = c.order[1:]
	}
	c.matchers[g] = m
	c.order = append(c.order, g)
	return m, nil
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
