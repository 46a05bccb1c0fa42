package sampler

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func seed(v uint64) *uint64 { return &v }

func randomLogits(r *rand.Rand, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64()) * scale
	}
	return x
}

func refArgmax(x []float32) int32 {
	best := -1
	for i, v := range x {
		if !math.IsNaN(float64(v)) && (best < 0 || v > x[best]) {
			best = i
		}
	}
	return int32(best)
}

func TestGreedyPicksArgmax(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := New(Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1})
	for range 100 {
		x := randomLogits(r, 1000, 3)
		if got, want := s.Sample(x, nil).Token, refArgmax(x); got != want {
			t.Fatalf("greedy chose %d, argmax is %d", got, want)
		}
	}
	// Ties go to the lowest id; NaN and -Inf never win.
	nan := float32(math.NaN())
	inf := float32(math.Inf(-1))
	for _, c := range []struct {
		x    []float32
		want int32
	}{
		{[]float32{1, 3, 3, 2}, 1},
		{[]float32{nan, 0.5, nan, 0.7}, 3},
		{[]float32{inf, inf, -5}, 2},
		{[]float32{inf, inf}, 0},
	} {
		if got := s.Sample(c.x, nil).Token; got != c.want {
			t.Errorf("greedy(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

func TestTopK1EqualsGreedy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 50 {
		x := randomLogits(r, 5000, 2)
		history := []int32{int32(i), 7, 7, 42}
		p := Params{Temperature: 1.3, TopK: 1, TopP: 0.9, MinP: 0.01, RepetitionPenalty: 1.3, Seed: seed(uint64(i))}
		q := p
		q.Temperature, q.TopK = 0, 0
		a, b := New(p).Sample(x, history), New(q).Sample(x, history)
		if a.Token != b.Token {
			t.Fatalf("top-k 1 chose %d, greedy %d", a.Token, b.Token)
		}
	}
	// The sampling path with k = 1 (temperature > 0 and a non-trivial distribution) agrees too.
	x := randomLogits(r, 100, 1)
	s := New(Params{Temperature: 1, TopK: 2, TopP: 1, RepetitionPenalty: 1})
	ids, _, _ := s.distribution(x)
	if ids[0] != refArgmax(x) {
		t.Errorf("top-k candidates start with %d, argmax is %d", ids[0], refArgmax(x))
	}
}

func sampleSeq(p Params, logits [][]float32) []int32 {
	s := New(p)
	var out []int32
	for _, l := range logits {
		out = append(out, s.Sample(l, out).Token)
	}
	return out
}

func TestSeedReproducible(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	steps := make([][]float32, 100)
	for i := range steps {
		steps[i] = randomLogits(r, 300, 1)
	}
	for _, p := range []Params{
		{Temperature: 1, TopP: 1, RepetitionPenalty: 1},
		{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepetitionPenalty: 1.1, FrequencyPenalty: 0.5},
		{Temperature: 1.5, TopP: 0.9, RepetitionPenalty: 1, PresencePenalty: 1},
	} {
		p.Seed = seed(1234)
		a, b := sampleSeq(p, steps), sampleSeq(p, steps)
		if !slices.Equal(a, b) {
			t.Fatalf("%+v: same seed gave different tokens", p)
		}
		p.Seed = seed(1235)
		if c := sampleSeq(p, steps); slices.Equal(a, c) {
			t.Fatalf("%+v: seeds 1234 and 1235 gave the same 100 tokens", p)
		}
		p.Seed = nil
		if c, d := sampleSeq(p, steps), sampleSeq(p, steps); slices.Equal(c, d) {
			t.Fatalf("%+v: two random seeds gave the same 100 tokens", p)
		}
	}
}

// TestSeedStream pins the first tokens of a seeded run, so that a change of the random stream or
// of the arithmetic (which would break reproducibility across versions and platforms) is noticed.
func TestSeedStream(t *testing.T) {
	logits := []float32{0, 0.5, 1, 1.5, 2, 0.25, -1, 1.25}
	s := New(Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1, Seed: seed(42)})
	var got []int32
	for range 16 {
		got = append(got, s.Sample(logits, nil).Token)
	}
	want := []int32{4, 4, 4, 4, 4, 3, 1, 4, 5, 1, 3, 4, 2, 3, 2, 4}
	if !slices.Equal(got, want) {
		t.Errorf("seed 42 stream = %v, want %v", got, want)
	}
}

func softmax(x []float32, temp float64) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	p := make([]float64, len(x))
	var z float64
	for i, v := range x {
		p[i] = math.Exp((float64(v) - m) / temp)
		z += p[i]
	}
	for i := range p {
		p[i] /= z
	}
	return p
}

// chiSquare draws n tokens and returns Pearson's statistic against want (probabilities), failing
// if a token outside want's support is drawn.
func chiSquare(t *testing.T, s *Sampler, logits []float32, want []float64, n int) float64 {
	t.Helper()
	counts := make([]int, len(logits))
	for range n {
		counts[s.Sample(logits, nil).Token]++
	}
	var chi float64
	for i, c := range counts {
		if want[i] == 0 {
			if c != 0 {
				t.Fatalf("token %d drawn %d times but is excluded", i, c)
			}
			continue
		}
		e := want[i] * float64(n)
		chi += (float64(c) - e) * (float64(c) - e) / e
	}
	return chi
}

// chi2Limit is (above) the 99.9% quantile of the chi-square distribution with df degrees of
// freedom (Wilson-Hilferty); runs are seeded, so a pass is deterministic.
func chi2Limit(df int) float64 {
	k := float64(df)
	z := 3.09
	return k * math.Pow(1-2/(9*k)+z*math.Sqrt(2/(9*k)), 3)
}

func TestDistribution(t *testing.T) {
	logits := []float32{0, 0.5, 1, 1.5, 2, 0.25, -1, 1.25}
	const n = 40000
	for _, temp := range []float64{1, 0.7, 1.8} {
		s := New(Params{Temperature: float32(temp), TopP: 1, RepetitionPenalty: 1, Seed: seed(7)})
		want := softmax(logits, temp)
		chi := chiSquare(t, s, logits, want, n)
		t.Logf("temperature %v: chi-square %.2f (df %d)", temp, chi, len(logits)-1)
		if chi > chi2Limit(len(logits)-1) {
			t.Errorf("temperature %v: chi-square %.1f over the limit %.1f", temp, chi, chi2Limit(len(logits)-1))
		}
	}
}

// restrict zeroes the probabilities outside keep and renormalises.
func restrict(p []float64, keep ...int) []float64 {
	out := make([]float64, len(p))
	var z float64
	for _, i := range keep {
		out[i] = p[i]
		z += p[i]
	}
	for i := range out {
		out[i] /= z
	}
	return out
}

func candidateSet(s *Sampler, logits []float32) []int32 {
	work := s.adjust(logits, nil)
	ids, w, _ := s.distribution(work)
	var out []int32
	for i, wi := range w {
		if wi > 0 {
			if ids == nil {
				out = append(out, int32(i))
			} else {
				out = append(out, ids[i])
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestTruncationSets(t *testing.T) {
	// Probabilities at temperature 1: 0.5, 0.25, 0.125, 0.0625, 0.03125, ... (halving).
	logits := make([]float32, 10)
	for i := range logits {
		logits[i] = float32(-float64(i) * math.Ln2)
	}
	logits[9] = float32(math.Inf(-1))
	cases := []struct {
		name string
		p    Params
		want []int32
	}{
		{"all", Params{Temperature: 1, TopP: 1}, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"top-k 3", Params{Temperature: 1, TopK: 3, TopP: 1}, []int32{0, 1, 2}},
		{"top-k -1", Params{Temperature: 1, TopK: -1, TopP: 1}, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"top-k larger than vocab", Params{Temperature: 1, TopK: 50, TopP: 1}, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"top-p 0.4", Params{Temperature: 1, TopP: 0.4}, []int32{0}},
		{"top-p 0.74", Params{Temperature: 1, TopP: 0.74}, []int32{0, 1}},
		{"top-p 0.8", Params{Temperature: 1, TopP: 0.8}, []int32{0, 1, 2}},
		{"top-p 0.95", Params{Temperature: 1, TopP: 0.95}, []int32{0, 1, 2, 3, 4}},
		// Temperature 2 flattens: probabilities ∝ 2^(-i/2).
		{"top-p 0.74 temp 2", Params{Temperature: 2, TopP: 0.74}, []int32{0, 1, 2, 3}},
		{"min-p 0.2", Params{Temperature: 1, TopP: 1, MinP: 0.2}, []int32{0, 1, 2}},
		{"min-p 0.25", Params{Temperature: 1, TopP: 1, MinP: 0.25}, []int32{0, 1, 2}},
		{"min-p 0.26", Params{Temperature: 1, TopP: 1, MinP: 0.26}, []int32{0, 1}},
		{"min-p 1", Params{Temperature: 1, TopP: 1, MinP: 1}, []int32{0}},
		{"min-p 0.2 temp 2", Params{Temperature: 2, TopP: 1, MinP: 0.2}, []int32{0, 1, 2, 3, 4}},
		{"top-k 4 then top-p 0.9", Params{Temperature: 1, TopK: 4, TopP: 0.9}, []int32{0, 1, 2}},
		{"top-k 6 then top-p 0.99 then min-p 0.1", Params{Temperature: 1, TopK: 6, TopP: 0.99, MinP: 0.1}, []int32{0, 1, 2, 3}},
		{"top-p 0.99 then min-p 0.05", Params{Temperature: 1, TopP: 0.99, MinP: 0.05}, []int32{0, 1, 2, 3, 4}},
		{"bias lifts a token", Params{Temperature: 1, TopK: 2, TopP: 1, LogitBias: map[int32]float32{8: 10}}, []int32{0, 8}},
		{"bias bans a token", Params{Temperature: 1, TopK: 2, TopP: 1, LogitBias: map[int32]float32{0: -100, 99: 5}}, []int32{1, 2}},
	}
	for _, c := range cases {
		c.p.RepetitionPenalty = 1
		if got := candidateSet(New(c.p), logits); !slices.Equal(got, c.want) {
			t.Errorf("%s: candidates %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTruncatedDistributions(t *testing.T) {
	logits := []float32{2, 1.5, 1.25, 1, 0.5, 0.25, 0, -1}
	const n = 30000
	base := softmax(logits, 1)
	cases := []struct {
		name string
		p    Params
		want []float64
	}{
		{"top-k 3", Params{TopK: 3}, restrict(base, 0, 1, 2)},
		{"top-p 0.5", Params{TopP: 0.5}, restrict(base, 0, 1)},
		{"min-p 0.3", Params{MinP: 0.3}, restrict(base, 0, 1, 2, 3)},
	}
	for _, c := range cases {
		c.p.Temperature = 1
		c.p.RepetitionPenalty = 1
		if c.p.TopP == 0 {
			c.p.TopP = 1
		}
		c.p.Seed = seed(11)
		df := 0
		for _, w := range c.want {
			if w > 0 {
				df++
			}
		}
		if chi := chiSquare(t, New(c.p), logits, c.want, n); chi > chi2Limit(df-1) {
			t.Errorf("%s: chi-square %.1f over the limit %.1f", c.name, chi, chi2Limit(df-1))
		}
	}
}

// TestTopPLargeVocab checks the thresholded nucleus search against a full sort.
func TestTopPLargeVocab(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, scale := range []float32{0.01, 1, 3, 8} {
		for _, topP := range []float32{0.5, 0.9, 0.95, 0.999} {
			x := randomLogits(r, 10000, scale)
			s := New(Params{Temperature: 0.9, TopP: topP, RepetitionPenalty: 1})
			got := candidateSet(s, x)

			p := softmax(x, 0.9)
			order := make([]int32, len(x))
			for i := range order {
				order[i] = int32(i)
			}
			slices.SortFunc(order, func(a, b int32) int {
				if p[a] != p[b] {
					if p[a] > p[b] {
						return -1
					}
					return 1
				}
				return int(a - b)
			})
			var cum float64
			var want []int32
			for _, id := range order {
				want = append(want, id)
				cum += p[id]
				if cum >= float64(topP) {
					break
				}
			}
			slices.Sort(want)
			// float32 weights may move the boundary by a token when it falls within rounding.
			if d := len(got) - len(want); d < -1 || d > 1 || !subsetOrSuperset(got, want) {
				t.Errorf("scale %v top-p %v: %d candidates, reference %d", scale, topP, len(got), len(want))
			}
		}
	}
}

func subsetOrSuperset(a, b []int32) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	for _, v := range a {
		if _, ok := slices.BinarySearch(b, v); !ok {
			return false
		}
	}
	return true
}

func TestPenalties(t *testing.T) {
	logits := []float32{2, -2, 1, 0.5, 3, -1}
	prompt := []int32{0, 1, 1, 5}

	// Repetition penalty over the last RepeatLastN history tokens, each token once.
	s := New(Params{Temperature: 1, TopP: 1, RepetitionPenalty: 2, RepeatLastN: 3})
	got := slices.Clone(s.adjust(logits, prompt))
	want := []float32{2, -4, 1, 0.5, 3, -2} // window {1, 1, 5}
	if !slices.Equal(got, want) {
		t.Errorf("repetition penalty: %v, want %v", got, want)
	}
	s = New(Params{Temperature: 1, TopP: 1, RepetitionPenalty: 2, RepeatLastN: -1})
	if got, want := s.adjust(logits, append(prompt, 4, 99, -3)), []float32{1, -4, 1, 0.5, 1.5, -2}; !slices.Equal(got, want) {
		t.Errorf("repetition penalty, whole history: %v, want %v", got, want)
	}
	s = New(Params{Temperature: 1, TopP: 1, RepetitionPenalty: 0.5}) // default window of 64 > history
	if got, want := s.adjust(logits, []int32{0, 1}), []float32{4, -1, 1, 0.5, 3, -1}; !slices.Equal(got, want) {
		t.Errorf("repetition penalty < 1: %v, want %v", got, want)
	}

	// Frequency and presence count generated tokens only, and apply after the repetition penalty.
	s = New(Params{Temperature: 1, TopP: 1, RepetitionPenalty: 2, RepeatLastN: 2, FrequencyPenalty: 0.5, PresencePenalty: 0.25,
		LogitBias: map[int32]float32{3: 1.5, 100: 7}})
	history := slices.Clone(prompt)
	if got, want := s.adjust(logits, history), []float32{2, -4, 1, 2, 3, -2}; !slices.Equal(got, want) {
		t.Errorf("first step: %v, want %v", got, want)
	}
	history = append(history, 2, 4, 2)
	// Generated: 2 twice, 4 once. Window {4, 2}.
	want = []float32{
		2,
		-2,
		1/2.0 - 2*0.5 - 0.25,
		2,
		3/2.0 - 0.5 - 0.25,
		-1,
	}
	if got := s.adjust(logits, history); !slices.Equal(got, want) {
		t.Errorf("after generating: %v, want %v", got, want)
	}
	// The history cut back to the prompt plus one token: counts start over.
	history = append(slices.Clone(prompt), 4)
	want = []float32{2, -2, 1, 2, 3/2.0 - 0.5 - 0.25, -2}
	if got := s.adjust(logits, history); !slices.Equal(got, want) {
		t.Errorf("after a cut: %v, want %v", got, want)
	}
	if !slices.Equal(logits, []float32{2, -2, 1, 0.5, 3, -1}) {
		t.Error("Sample's input logits were modified")
	}
	// Negative penalties encourage repetition.
	s = New(Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1, FrequencyPenalty: -1, PresencePenalty: -2})
	s.adjust(logits, nil)
	if got, want := s.adjust(logits, []int32{5}), []float32{2, -2, 1, 0.5, 3, 2}; !slices.Equal(got, want) {
		t.Errorf("negative penalties: %v, want %v", got, want)
	}
}

func TestPenaltiesSteerSampling(t *testing.T) {
	// A token repeated in the history loses its lead under greedy decoding.
	logits := []float32{1, 1.2, 0.9}
	s := New(Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1.5})
	if tok := s.Sample(logits, []int32{1}).Token; tok != 0 {
		t.Errorf("repetition penalty: chose %d, want 0", tok)
	}
	s = New(Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1, PresencePenalty: 0.5})
	var history []int32
	var got []int32
	for range 3 {
		tok := s.Sample(logits, history).Token
		got = append(got, tok)
		history = append(history, tok)
	}
	if want := []int32{1, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("presence penalty greedy run %v, want %v", got, want)
	}
}

func TestLogprobs(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	x := randomLogits(r, 20, 2)
	ref := softmax(x, 1)
	for _, p := range []Params{
		{Temperature: 0, TopP: 1, RepetitionPenalty: 1},
		{Temperature: 0.5, TopK: 3, TopP: 0.9, RepetitionPenalty: 1.5, FrequencyPenalty: 1, LogitBias: map[int32]float32{4: 5}},
	} {
		p.Logprobs, p.TopLogprobs, p.Seed = true, 20, seed(1)
		s := New(p)
		c := s.Sample(x, []int32{1, 2, 3})
		if math.Abs(float64(c.Logprob)-math.Log(ref[c.Token])) > 1e-5 {
			t.Errorf("logprob of %d = %v, want raw log-softmax %v", c.Token, c.Logprob, math.Log(ref[c.Token]))
		}
		if len(c.Top) != 20 {
			t.Fatalf("%d top logprobs, want 20", len(c.Top))
		}
		var sum float64
		for i, tl := range c.Top {
			sum += math.Exp(float64(tl.Logprob))
			if math.Abs(float64(tl.Logprob)-math.Log(ref[tl.Token])) > 1e-5 {
				t.Errorf("top %d: token %d logprob %v, want %v", i, tl.Token, tl.Logprob, math.Log(ref[tl.Token]))
			}
			if i > 0 && tl.Logprob > c.Top[i-1].Logprob {
				t.Errorf("top logprobs not sorted at %d", i)
			}
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("sum of exp(top logprobs) over the whole vocabulary = %v", sum)
		}
	}
	// Off by default, and TopLogprobs limits the list.
	if c := New(Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}).Sample(x, nil); c.Logprob != 0 || c.Top != nil {
		t.Errorf("logprobs reported without being asked: %+v", c)
	}
	c := New(Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1, Logprobs: true, TopLogprobs: 3}).Sample(x, nil)
	if len(c.Top) != 3 || c.Top[0].Token != c.Token {
		t.Errorf("top 3 = %+v for greedy token %d", c.Top, c.Token)
	}
}

func TestFastExp(t *testing.T) {
	worst := 0.0
	for x := -87.0; x <= 88.0; x += 0.0137 {
		got := float64(fastExp(float32(x)))
		want := math.Exp(float64(float32(x)))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 3e-7 {
		t.Errorf("fastExp relative error up to %g", worst)
	}
	if fastExp(float32(math.Inf(-1))) != 0 || fastExp(-100) != 0 || !math.IsInf(float64(fastExp(100)), 1) ||
		!math.IsNaN(float64(fastExp(float32(math.NaN())))) || fastExp(0) != 1 {
		t.Error("fastExp special values")
	}
}

func TestTopKSelection(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 13))
	x := randomLogits(r, 3000, 1)
	for i := 0; i < 3000; i += 7 {
		x[i] = x[0] // many ties
	}
	x[5] = float32(math.NaN())
	for _, k := range []int{1, 2, 10, 100, 2999, 3000, 5000} {
		got := topK(x, k, nil)
		order := make([]int32, 0, len(x))
		for i := range x {
			if i != 5 {
				order = append(order, int32(i))
			}
		}
		slices.SortStableFunc(order, func(a, b int32) int {
			switch {
			case x[a] > x[b]:
				return -1
			case x[a] < x[b]:
				return 1
			}
			return 0
		})
		if want := order[:min(k, len(order))]; !slices.Equal(got, want) {
			t.Errorf("top-%d differs from a stable sort", k)
		}
	}
}

func TestSampleNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 15))
	x := randomLogits(r, 32000, 2)
	history := []int32{1, 2, 3, 4, 5}
	for _, p := range []Params{
		{Temperature: 0, TopP: 1, RepetitionPenalty: 1},
		{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepetitionPenalty: 1.1},
		{Temperature: 0.8, TopP: 0.9, RepetitionPenalty: 1, FrequencyPenalty: 0.1},
		{Temperature: 1, TopP: 1, RepetitionPenalty: 1, MinP: 0.1, Logprobs: true},
	} {
		p.Seed = seed(1)
		s := New(p)
		s.Sample(x, history)
		if n := testing.AllocsPerRun(20, func() { s.Sample(x, history) }); n != 0 {
			t.Errorf("%+v: %v allocations per Sample", p, n)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := DefaultParams()
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	good := []Params{
		{Temperature: 0, TopK: -1, TopP: 1, RepetitionPenalty: 1},
		{Temperature: 2, TopK: 100, TopP: 0.01, MinP: 1, RepetitionPenalty: 0.5, RepeatLastN: -1,
			FrequencyPenalty: -2, PresencePenalty: 2, Logprobs: true, TopLogprobs: 20, LogitBias: map[int32]float32{5: -100}},
	}
	for _, p := range good {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	nan := float32(math.NaN())
	bad := []struct {
		edit func(*Params)
		msg  string
	}{
		{func(p *Params) { p.Temperature = -0.1 }, "temperature must be between 0 and 2"},
		{func(p *Params) { p.Temperature = 2.5 }, "temperature"},
		{func(p *Params) { p.Temperature = nan }, "temperature"},
		{func(p *Params) { p.TopK = -2 }, "top_k"},
		{func(p *Params) { p.TopP = 0 }, "top_p must be in (0, 1]"},
		{func(p *Params) { p.TopP = 1.01 }, "top_p"},
		{func(p *Params) { p.MinP = -0.5 }, "min_p"},
		{func(p *Params) { p.MinP = 1.5 }, "min_p"},
		{func(p *Params) { p.RepetitionPenalty = 0 }, "repetition_penalty must be greater than 0"},
		{func(p *Params) { p.RepeatLastN = -2 }, "repeat_last_n"},
		{func(p *Params) { p.FrequencyPenalty = 2.1 }, "frequency_penalty must be between -2 and 2"},
		{func(p *Params) { p.PresencePenalty = -3 }, "presence_penalty"},
		{func(p *Params) { p.Logprobs = true; p.TopLogprobs = 21 }, "top_logprobs must be between 0 and 20"},
		{func(p *Params) { p.TopLogprobs = 2 }, "top_logprobs requires logprobs"},
		{func(p *Params) { p.LogitBias = map[int32]float32{3: 101} }, "logit_bias"},
		{func(p *Params) { p.LogitBias = map[int32]float32{-1: 1} }, "logit_bias: invalid token id -1"},
	}
	for _, b := range bad {
		p := DefaultParams()
		b.edit(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("%+v: error %v, want one containing %q", p, err, b.msg)
		}
	}
}

func TestOutOfRangeParamsAreOff(t *testing.T) {
	// New never fails: invalid settings behave as off, and NaN logits or an empty vocabulary do
	// not panic.
	x := []float32{0.1, 3, float32(math.NaN()), 0.2}
	s := New(Params{Temperature: 1, TopK: -7, TopP: 5, MinP: -1, RepetitionPenalty: -1, RepeatLastN: -9, Seed: seed(2)})
	for range 100 {
		if tok := s.Sample(x, []int32{1, 99, -4}).Token; tok < 0 || tok >= 4 || tok == 2 {
			t.Fatalf("drew %d", tok)
		}
	}
	if c := New(Params{}).Sample(nil, nil); c.Token != -1 {
		t.Errorf("empty logits gave token %d", c.Token)
	}
	inf := float32(math.Inf(1))
	if tok := New(Params{Temperature: 1, Seed: seed(3)}).Sample([]float32{0, inf, 1}, nil).Token; tok != 1 {
		t.Errorf("+Inf logit not chosen: %d", tok)
	}
	negInf := float32(math.Inf(-1))
	if tok := New(Params{Temperature: 1, TopP: 0.5, Seed: seed(3)}).Sample([]float32{negInf, negInf}, nil).Token; tok != 0 {
		t.Errorf("all -Inf: %d", tok)
	}
}

func benchLogits(n int) []float32 {
	r := rand.New(rand.NewPCG(99, 100))
	return randomLogits(r, n, 3)
}

func benchSample(b *testing.B, p Params) {
	x := benchLogits(128000)
	history := make([]int32, 512)
	for i := range history {
		history[i] = int32(i * 97 % 128000)
	}
	p.Seed = seed(1)
	s := New(p)
	for b.Loop() {
		s.Sample(x, history)
	}
}

func BenchmarkSampleGreedy128k(b *testing.B) {
	benchSample(b, Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1})
}

func BenchmarkSampleTopKTopP128k(b *testing.B) {
	benchSample(b, Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepetitionPenalty: 1})
}

func BenchmarkSampleTopP128k(b *testing.B) {
	benchSample(b, Params{Temperature: 0.8, TopP: 0.95, RepetitionPenalty: 1})
}

func BenchmarkSampleFull128k(b *testing.B) {
	benchSample(b, Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1})
}

func BenchmarkSamplePenaltiesLogprobs128k(b *testing.B) {
	benchSample(b, Params{Temperature: 0.8, TopK: 40, TopP: 0.95, RepetitionPenalty: 1.1, FrequencyPenalty: 0.2,
		Logprobs: true, TopLogprobs: 5})
}

func TestNucleus(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 17))
	for trial := range 300 {
		n := 1 + r.IntN(200)
		w := make([]float32, n)
		var total float64
		for i := range w {
			w[i] = float32(1+r.IntN(8)) * 0.125 // exact sums, many ties
			total += float64(w[i])
		}
		target := total * r.Float64()
		if trial%10 == 0 {
			target = total
		}
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(n - 1 - i) // any order
		}
		got := nucleus(ids, w, target)

		order := make([]int32, n)
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortStableFunc(order, func(a, b int32) int {
			switch {
			case w[a] > w[b]:
				return -1
			case w[a] < w[b]:
				return 1
			}
			return 0
		})
		want := 0
		var cum float64
		for want < n {
			cum += float64(w[order[want]])
			want++
			if cum >= target {
				break
			}
		}
		gotSet := slices.Clone(ids[:got])
		slices.Sort(gotSet)
		wantSet := slices.Clone(order[:want])
		slices.Sort(wantSet)
		if !slices.Equal(gotSet, wantSet) {
			t.Fatalf("trial %d: nucleus %v, want %v", trial, gotSet, wantSet)
		}
	}
}
