package sampler

import (
	"math"
	"math/rand/v2"
	"slices"
)

// TokenLogprob is a token with its log probability.
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// Choice is the outcome of one sampling step.
type Choice struct {
	Token int32
	// Logprob is the chosen token's log probability (see the package doc); set with
	// Params.Logprobs.
	Logprob float32
	// Top are the Params.TopLogprobs most likely tokens, most likely first (ties: lower id first).
	Top []TokenLogprob
}

// Sampler samples the tokens of one sequence. It keeps scratch buffers between calls and is not
// safe for concurrent use; use one per sequence.
type Sampler struct {
	p      Params
	greedy bool
	topK   int // 0: off
	topP   float64
	minP   float64
	repPen float32
	repN   int // -1: whole history
	freq   float32
	pres   float32
	rng    rand.PCG

	buf  []float32 // vocab-sized: adjusted logits, then weights
	cand []int32   // candidate token ids
	cw   []float32 // weights of cand (top-k path)
	win  []int32   // repetition window scratch
	pbuf []float32 // vocab-sized: Verify's target distribution

	// Generated-token counts for frequency/presence penalties, updated incrementally from the
	// history's tail: the first call's history is the prompt.
	started   bool
	promptLen int
	counted   int
	counts    map[int32]int32
}

// pcgIncrement is the PCG stream constant; any fixed value keeps seeds reproducible.
const pcgIncrement = 0xda3e39cb94b95bdb

// New returns a sampler for p. Settings out of range (see Validate) count as off.
func New(p Params) *Sampler {
	s := &Sampler{p: p, repN: p.RepeatLastN}
	s.greedy = !(p.Temperature > 0) || p.TopK == 1
	if p.TopK > 0 {
		s.topK = p.TopK
	}
	if p.TopP > 0 && p.TopP < 1 {
		s.topP = float64(p.TopP)
	}
	if p.MinP > 0 && p.MinP <= 1 {
		s.minP = float64(p.MinP)
	}
	if p.RepetitionPenalty > 0 && p.RepetitionPenalty != 1 && !math.IsInf(float64(p.RepetitionPenalty), 0) {
		s.repPen = p.RepetitionPenalty
	}
	if s.repN == 0 {
		s.repN = DefaultRepeatLastN
	}
	if !math.IsNaN(float64(p.FrequencyPenalty)) {
		s.freq = p.FrequencyPenalty
	}
	if !math.IsNaN(float64(p.PresencePenalty)) {
		s.pres = p.PresencePenalty
	}
	seed := rand.Uint64()
	if p.Seed != nil {
		seed = *p.Seed
	}
	s.rng.Seed(seed, pcgIncrement)
	return s
}

// Params returns the parameters the sampler was made with.
func (s *Sampler) Params() Params { return s.p }

// Sample picks the next token. logits has one value per vocabulary entry and is not modified.
// history is the prompt followed by the tokens generated so far (the repetition penalty looks at
// its last RepeatLastN tokens); the sampler takes the history of its first call as the prompt and
// counts the tokens appended after it for the frequency and presence penalties.
func (s *Sampler) Sample(logits []float32, history []int32) Choice {
	if len(logits) == 0 {
		return Choice{Token: -1}
	}
	work := s.adjust(logits, history)
	var tok int32
	if s.greedy {
		tok = argmax(work)
	} else {
		tok = s.draw(work)
	}
	c := Choice{Token: tok}
	if s.p.Logprobs {
		s.logprobs(logits, &c)
	}
	return c
}

// adjust applies logit bias and penalties. It returns logits itself when nothing changes them,
// and otherwise a copy in s.buf.
func (s *Sampler) adjust(logits []float32, history []int32) []float32 {
	s.track(history)
	if len(s.p.LogitBias) == 0 && s.repPen == 0 && (len(s.counts) == 0 || (s.freq == 0 && s.pres == 0)) {
		return logits
	}
	work := s.scratch(len(logits))
	copy(work, logits)
	n := int32(len(work))
	for id, b := range s.p.LogitBias {
		if id >= 0 && id < n && !math.IsNaN(float64(b)) {
			work[id] += b
		}
	}
	if s.repPen != 0 {
		window := history
		if s.repN >= 0 && len(window) > s.repN {
			window = window[len(window)-s.repN:]
		}
		s.win = append(s.win[:0], window...)
		slices.Sort(s.win)
		for i, id := range s.win {
			if (i > 0 && s.win[i-1] == id) || id < 0 || id >= n {
				continue
			}
			if work[id] <= 0 {
				work[id] *= s.repPen
			} else {
				work[id] /= s.repPen
			}
		}
	}
	if s.freq != 0 || s.pres != 0 {
		for id, cnt := range s.counts {
			if id >= 0 && id < n {
				work[id] -= float32(cnt)*s.freq + s.pres
			}
		}
	}
	return work
}

// track updates the counts of generated tokens from the history's new tail.
func (s *Sampler) track(history []int32) {
	if !s.started {
		s.started = true
		s.promptLen = len(history)
		s.counted = len(history)
		return
	}
	if s.freq == 0 && s.pres == 0 {
		return
	}
	if len(history) < s.counted { // the history was cut back: recount
		clear(s.counts)
		s.counted = min(s.promptLen, len(history))
	}
	if s.counts == nil {
		s.counts = make(map[int32]int32)
	}
	for _, id := range history[s.counted:] {
		s.counts[id]++
	}
	s.counted = len(history)
}

func (s *Sampler) scratch(n int) []float32 {
	if cap(s.buf) < n {
		s.buf = make([]float32, n)
	}
	return s.buf[:n]
}

// argmax returns the index of the largest value, the lowest one on ties; NaNs are skipped (0
// when nothing beats -Inf).
func argmax(x []float32) int32 {
	best := 0
	bv := float32(math.Inf(-1))
	for i, v := range x {
		if v > bv {
			best, bv = i, v
		}
	}
	return int32(best)
}

// uniform returns a float64 in [0, 1) from the PCG stream alone, so that draws do not depend on
// math/rand's conversion routines.
func (s *Sampler) uniform() float64 {
	return float64(s.rng.Uint64()>>11) * 0x1p-53
}

// draw samples from the tempered, truncated distribution of work.
func (s *Sampler) draw(work []float32) int32 {
	ids, w, total := s.distribution(work)
	if !(total > 0) || math.IsInf(total, 0) {
		return argmax(work)
	}
	u := s.uniform() * total
	var cum float64
	last := int32(-1)
	for i, wi := range w {
		if wi <= 0 {
			continue
		}
		id := int32(i)
		if ids != nil {
			id = ids[i]
		}
		last = id
		cum += float64(wi)
		if u < cum {
			return id
		}
	}
	if last < 0 { // rounding left nothing: fall back to the most likely token
		return argmax(work)
	}
	return last
}

// distribution returns the tokens that may be drawn and their unnormalised weights: when ids is
// nil, token i has weight w[i]; otherwise ids[i] has weight w[i]. total is the sum of w.
// Weights are exp((logit-max)/T), so the most likely token weighs 1.
func (s *Sampler) distribution(work []float32) (ids []int32, w []float32, total float64) {
	invT := 1 / float64(s.p.Temperature)
	if s.topK > 0 && s.topK < len(work) {
		s.cand = topK(work, s.topK, s.cand)
		if len(s.cand) == 0 {
			return nil, nil, 0
		}
		if cap(s.cw) < len(s.cand) {
			s.cw = make([]float32, len(s.cand))
		}
		cw := s.cw[:len(s.cand)]
		m := work[s.cand[0]]
		for i, id := range s.cand {
			cw[i] = weight(work[id], m, invT)
			total += float64(cw[i])
		}
		n := s.cut(cw, total)
		return s.cand[:n], cw[:n], sumTo(cw, n)
	}

	m := maxOf(work)
	if math.IsInf(float64(m), 1) || math.IsNaN(float64(m)) {
		return nil, nil, 0
	}
	wbuf := s.scratch(len(work)) // may alias work: each weight only reads its own logit
	for i, v := range work {
		wi := weight(v, m, invT)
		wbuf[i] = wi
		total += float64(wi)
	}
	if !(total > 0) {
		return nil, nil, 0
	}
	if s.topP == 0 {
		if s.minP > 0 {
			total = 0
			th := float32(s.minP)
			for i, wi := range wbuf {
				if wi < th {
					wbuf[i] = 0
				} else {
					total += float64(wi)
				}
			}
		}
		return nil, wbuf, total
	}

	// Top-p without top-k: the nucleus lies among the tokens of probability >= (1-P)/V, since
	// all the others together weigh less than 1-P; a tighter threshold is tried first to keep
	// the selection short, and kept when the tokens above it carry at least P.
	loose := float32((1 - s.topP) * total / float64(len(wbuf)))
	tight := float32((1 - s.topP) * total / 64)
	s.cand = s.cand[:0]
	var tightMass float64
	for i, wi := range wbuf {
		if wi >= loose && wi > 0 {
			s.cand = append(s.cand, int32(i))
			if wi >= tight {
				tightMass += float64(wi)
			}
		}
	}
	if tightMass >= s.topP*total {
		kept := s.cand[:0]
		for _, id := range s.cand {
			if wbuf[id] >= tight {
				kept = append(kept, id)
			}
		}
		s.cand = kept
	}
	// The nucleus is a set: find it by weighted selection instead of sorting the candidates, and
	// draw from it in candidate order.
	n := nucleus(s.cand, wbuf, s.topP*total)
	if cap(s.cw) < n {
		s.cw = make([]float32, n)
	}
	cw := s.cw[:0]
	ids = s.cand[:0]
	th := float32(s.minP) // the most likely token weighs 1, and min-p is relative to it
	for _, id := range s.cand[:n] {
		if wi := wbuf[id]; wi >= th {
			ids = append(ids, id)
			cw = append(cw, wi)
		}
	}
	return ids, cw, sumTo(cw, len(cw))
}

// cut returns how many of the weights (sorted, largest first, of total mass total) survive top-p
// and then min-p; at least one.
func (s *Sampler) cut(w []float32, total float64) int {
	n := len(w)
	if s.topP > 0 {
		var cum float64
		for i, wi := range w {
			cum += float64(wi)
			if cum >= s.topP*total {
				n = i + 1
				break
			}
		}
	}
	if s.minP > 0 && n > 0 {
		// The most likely token weighs w[0]; min-p is relative to it, so renormalising after
		// top-p changes nothing.
		th := float32(s.minP) * w[0]
		for n > 1 && w[n-1] < th {
			n--
		}
	}
	return min(max(n, 1), len(w))
}

func sumTo(w []float32, n int) float64 {
	var t float64
	for _, v := range w[:n] {
		t += float64(v)
	}
	return t
}

// weight is exp((v-m)*invT), 0 for -Inf and NaN.
func weight(v, m float32, invT float64) float32 {
	w := fastExp(float32(float64(v-m) * invT))
	if !(w > 0) {
		return 0
	}
	return w
}

func maxOf(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	return m
}

// logprobs fills c with log-softmax values of the raw logits.
func (s *Sampler) logprobs(logits []float32, c *Choice) {
	m := maxOf(logits)
	var sum float64
	for _, v := range logits {
		sum += float64(fastExp(v - m))
	}
	lse := float64(m) + math.Log(sum)
	lp := func(id int32) float32 { return float32(float64(logits[id]) - lse) }
	c.Logprob = lp(c.Token)
	if n := min(s.p.TopLogprobs, MaxTopLogprobs, len(logits)); n > 0 {
		s.cand = topK(logits, n, s.cand)
		c.Top = make([]TokenLogprob, n)
		for i, id := range s.cand {
			c.Top[i] = TokenLogprob{Token: id, Logprob: lp(id)}
		}
	}
}
