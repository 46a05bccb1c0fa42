package sampler

import "math"

// Speculative sampling: a proposer guesses tokens, the model computes its
// logits at each guessed position in one pass, and Verify decides each
// guess so that the tokens kept follow the distribution Sample draws from
// (standard speculative sampling: accept the guess with probability
// min(1, p/q), else draw from the normalised residual max(0, p - q)).

// Dist writes into dist (one entry per token of logits) the distribution
// Sample would draw from after this history: a point mass on the argmax for
// a greedy sampler. Like Sample it takes the history into account for
// penalties; it draws nothing.
func (s *Sampler) Dist(logits []float32, history []int32, dist []float32) {
	clear(dist)
	if len(logits) == 0 {
		return
	}
	work := s.adjust(logits, history)
	if s.greedy {
		dist[argmax(work)] = 1
		return
	}
	ids, w, total := s.distribution(work)
	if !(total > 0) || math.IsInf(total, 0) {
		dist[argmax(work)] = 1 // as draw falls back
		return
	}
	inv := float32(1 / total)
	if ids == nil {
		for i, wi := range w {
			dist[i] = wi * inv
		}
		return
	}
	for i, id := range ids {
		dist[id] = w[i] * inv
	}
}

// SampleDist draws the next token like Sample and leaves in dist the
// distribution it was drawn from (a proposer's q).
func (s *Sampler) SampleDist(logits []float32, history []int32, dist []float32) Choice {
	s.Dist(logits, history, dist)
	c := Choice{Token: s.drawDense(dist, 1)}
	if s.p.Logprobs {
		s.logprobs(logits, &c)
	}
	return c
}

// Verify decides a guessed token at a position whose logits and history are
// given. q is the distribution the proposer drew the guess from, or nil for
// a proposer that guesses deterministically (a point mass on draft). It
// returns the token to keep and whether that is the guess; when it is not,
// the token comes from the residual distribution and the guesses after
// this one are void. A greedy sampler keeps the guess exactly when it is
// the argmax, and otherwise returns the argmax: the tokens are those of
// decoding without guesses.
func (s *Sampler) Verify(logits []float32, history []int32, draft int32, q []float32) (Choice, bool) {
	if len(logits) == 0 || draft < 0 || int(draft) >= len(logits) {
		return s.Sample(logits, history), false
	}
	if cap(s.pbuf) < len(logits) {
		s.pbuf = make([]float32, len(logits))
	}
	p := s.pbuf[:len(logits)]
	s.Dist(logits, history, p)
	var c Choice
	ok := false
	switch {
	case s.greedy:
		c.Token = argmax(p)
		ok = c.Token == draft
	default:
		qd := float32(1)
		if q != nil {
			qd = q[draft]
		}
		if pd := p[draft]; qd > 0 && s.uniform() < float64(min(1, pd/qd)) {
			c.Token, ok = draft, true
			break
		}
		// Residual: max(0, p - q), in place.
		var total float64
		for i := range p {
			qi := float32(0)
			switch {
			case q != nil:
				qi = q[i]
			case int32(i) == draft:
				qi = 1
			}
			p[i] = max(0, p[i]-qi)
			total += float64(p[i])
		}
		if !(total > 0) {
			// Rounding left nothing (p and q agree): p itself.
			s.Dist(logits, history, p)
			total = 1
		}
		c.Token = s.drawDense(p, total)
	}
	if s.p.Logprobs {
		s.logprobs(logits, &c)
	}
	return c, ok
}

// drawDense draws a token from weights w of sum total.
func (s *Sampler) drawDense(w []float32, total float64) int32 {
	u := s.uniform() * total
	var cum float64
	last := int32(-1)
	for i, wi := range w {
		if wi <= 0 {
			continue
		}
		last = int32(i)
		cum += float64(wi)
		if u < cum {
			return last
		}
	}
	if last < 0 {
		return argmax(w)
	}
	return last
}

// Logprobs is the choice of token tok at a position with these logits,
// with its log-probabilities when the sampler reports them.
func (s *Sampler) Logprobs(logits []float32, tok int32) Choice {
	c := Choice{Token: tok}
	if s.p.Logprobs {
		s.logprobs(logits, &c)
	}
	return c
}
