package sampler

import (
	"math"
	"math/rand/v2"
	"testing"
)

// pearson is Pearson's statistic of counts against probabilities p over n
// draws (cells of expected count below 5 are pooled).
func pearson(counts []int, p []float64, n int) (stat float64, dof int) {
	var pooledO, pooledE float64
	for i, c := range counts {
		e := p[i] * float64(n)
		if e < 5 {
			pooledO += float64(c)
			pooledE += e
			continue
		}
		stat += (float64(c) - e) * (float64(c) - e) / e
		dof++
	}
	if pooledE > 0 {
		stat += (pooledO - pooledE) * (pooledO - pooledE) / pooledE
		dof++
	}
	return stat, dof - 1
}

// Speculative sampling keeps the target's distribution: the token kept
// after a guess drawn from a draft distribution q (or a deterministic
// guess) is distributed as Sample's draws, by a chi-square test over many
// draws with fixed seeds.
func TestVerifyKeepsTheDistribution(t *testing.T) {
	const V = 8
	logits := []float32{2.0, 1.2, 0.3, -0.5, 1.9, 0.0, -1.0, 0.8}
	draftLogits := []float32{0.5, 2.2, 0.3, 1.5, 0.1, -0.2, 0.9, -1.5}
	seed := uint64(42)
	params := Params{Temperature: 0.9, TopP: 0.95, TopK: 6, RepetitionPenalty: 1, Seed: &seed}
	history := []int32{1, 2, 3}

	target := New(params)
	p := make([]float32, V)
	target.Dist(logits, history, p)
	pf := make([]float64, V)
	for i, v := range p {
		pf[i] = float64(v)
	}
	const n = 60000
	// Sampling without speculation, as a check of the test itself.
	plain := make([]int, V)
	for range n {
		plain[target.Sample(logits, history).Token]++
	}
	dseed := uint64(7)
	dparams := params
	dparams.Seed = &dseed
	draft := New(dparams)
	q := make([]float32, V)
	spec := make([]int, V)
	det := make([]int, V)
	accepted := 0
	rng := rand.New(rand.NewPCG(1, 2))
	for range n {
		g := draft.SampleDist(draftLogits, history, q)
		c, ok := target.Verify(logits, history, g.Token, q)
		if ok {
			accepted++
			if c.Token != g.Token {
				t.Fatal("accepted guess changed")
			}
		}
		spec[c.Token]++
		// A deterministic guess (a point mass), as prompt lookup makes.
		c, _ = target.Verify(logits, history, int32(rng.IntN(V)), nil)
		det[c.Token]++
	}
	// 0.999 quantile of chi-square with up to 7 degrees of freedom: 24.3.
	for name, counts := range map[string][]int{"plain": plain, "draft q": spec, "deterministic": det} {
		stat, dof := pearson(counts, pf, n)
		t.Logf("%s: chi-square %.2f with %d degrees of freedom; counts %v", name, stat, dof, counts)
		if stat > 24.3 {
			t.Errorf("%s: chi-square %.1f (dof %d): the kept tokens do not follow the target distribution %v", name, stat, dof, p)
		}
	}
	if rate := float64(accepted) / n; rate < 0.05 || rate > 0.95 {
		t.Errorf("acceptance %.2f: the test wants guesses that are sometimes rejected", rate)
	}
	// A biased rule would fail: always accepting the draft's guess.
	biased := make([]int, V)
	for range n {
		biased[draft.SampleDist(draftLogits, history, q).Token]++
	}
	if stat, _ := pearson(biased, pf, n); stat < 100 {
		t.Errorf("the draft's own distribution passes the test (%.1f): it cannot tell", stat)
	}
}

// A greedy sampler keeps a guess exactly when it is the argmax.
func TestVerifyGreedy(t *testing.T) {
	s := New(Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1})
	logits := []float32{0.1, 3, 0.2, 2.9}
	if c, ok := s.Verify(logits, nil, 1, nil); !ok || c.Token != 1 {
		t.Errorf("argmax guess: %v %v", c.Token, ok)
	}
	if c, ok := s.Verify(logits, nil, 3, []float32{0, 0, 0, 1}); ok || c.Token != 1 {
		t.Errorf("other guess: %v %v, want rejected for 1", c.Token, ok)
	}
	if c, ok := s.Verify(logits, nil, 9, nil); ok || c.Token != 1 {
		t.Errorf("out-of-vocabulary guess: %v %v", c.Token, ok)
	}
	_ = math.Inf
}
