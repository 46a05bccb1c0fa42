package nn

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
)

// attnCase is one sequence of an attention test: past positions already
// in its cache, then this step's tokens, with its runs of embedding rows.
type attnCase struct {
	past, n int
	runs    []Embeds
}

// refAttend is softmax(scale·q·K) V in float64 for a query at position p
// of head h, over the positions [lo, end).
func refAttend(c *Config, q []float32, keys, vals [][]float32, h, lo, end int, scale float64) []float64 {
	kvh := h / (c.Heads / c.KVHeads)
	hd, vd := c.HeadDim, c.ValueDim
	sc := make([]float64, end-lo)
	mx := math.Inf(-1)
	for p := lo; p < end; p++ {
		var d float64
		for i := range hd {
			d += float64(q[i]) * float64(keys[p][kvh*hd+i])
		}
		sc[p-lo] = d * scale
		mx = math.Max(mx, sc[p-lo])
	}
	var sum float64
	for i := range sc {
		sc[i] = math.Exp(sc[i] - mx)
		sum += sc[i]
	}
	out := make([]float64, vd)
	for p := lo; p < end; p++ {
		for i := range vd {
			out[i] += sc[p-lo] / sum * float64(vals[p][kvh*vd+i])
		}
	}
	return out
}

// Positions of a non-causal run see the run's later keys, earlier ones
// only within the window; text around the run stays causal; results do
// not depend on how queries are grouped.
func TestNonCausalAttention(t *testing.T) {
	c := &Config{Layers: 1, Embd: 8, Heads: 4, KVHeads: 2, HeadDim: 16, ValueDim: 16, Vocab: 32, RMSEps: 1e-6}
	rng := rand.New(rand.NewPCG(1, 2))
	rows := func(n int) []float32 {
		r := make([]float32, n*c.Embd)
		for i := range r {
			r[i] = float32(rng.NormFloat64())
		}
		return r
	}
	cases := []attnCase{
		{past: 5, n: 30, runs: []Embeds{{Off: 3, Rows: rows(16), NonCausal: true}}},
		{past: 0, n: 12},
		{past: 7, n: 9, runs: []Embeds{{Off: 0, Rows: rows(6), NonCausal: true}, {Off: 7, Rows: rows(2)}}},
		{past: 40, n: 20, runs: []Embeds{{Off: 2, Rows: rows(4), NonCausal: true}, {Off: 6, Rows: rows(10), NonCausal: true}}},
	}
	for _, window := range []int{0, 4, 11} {
		for _, group := range []int{16, 1} {
			checkNonCausal(t, c, cases, window, group, rng)
		}
	}
}

func checkNonCausal(t *testing.T, c *Config, cases []attnCase, window, group int, rng *rand.Rand) {
	t.Helper()
	defer func(g int) { AttnGroupMax = g }(AttnGroupMax)
	AttnGroupMax = group
	kd, vd, qd := c.KDim(), c.VDim(), c.QDim()
	b := &Batch{}
	keys, vals := make([][][]float32, len(cases)), make([][][]float32, len(cases))
	randRow := func(n int) []float32 {
		r := make([]float32, n)
		for i := range r {
			r[i] = float32(rng.NormFloat64())
		}
		return r
	}
	for i, cs := range cases {
		cache := kvcache.NewContiguousCache(c.KVShape(), cs.past+cs.n, false)
		if err := cache.Extend(cs.past); err != nil {
			t.Fatal(err)
		}
		for p := range cs.past + cs.n {
			keys[i] = append(keys[i], randRow(kd))
			vals[i] = append(vals[i], randRow(vd))
			if p < cs.past {
				cache.Put(0, p, keys[i][p], vals[i][p])
			}
		}
		toks := make([]int32, cs.n)
		for _, r := range cs.runs {
			for j := range r.Len(c.Embd) {
				toks[r.Off+j] = -7
			}
		}
		b.Seqs = append(b.Seqs, &SeqInput{Tokens: toks, Pos: cs.past, Cache: cache, Embeds: cs.runs})
	}
	p := kernels.NewPool(3)
	defer p.Close()
	var s Step
	if err := s.Prepare(c, p, b); err != nil {
		t.Fatal(err)
	}
	for i := range s.Q {
		s.Q[i] = float32(rng.NormFloat64())
	}
	for t := range s.T {
		sq := b.Seqs[s.tokSeq[t]]
		sq.Cache.Put(0, s.tokPos[t], keys[s.tokSeq[t]][s.tokPos[t]], vals[s.tokSeq[t]][s.tokPos[t]])
	}
	s.Attention(0, AttnOpts{Window: window})
	scale := 1 / math.Sqrt(float64(c.HeadDim))
	worst := 0.0
	tok := 0
	for i, cs := range cases {
		for j := range cs.n {
			pos := cs.past + j
			end := pos + 1
			for _, r := range cs.runs {
				if r.NonCausal && j >= r.Off && j < r.Off+r.Len(c.Embd) {
					end = cs.past + r.Off + r.Len(c.Embd)
				}
			}
			lo := 0
			if window > 0 {
				lo = max(0, pos+1-window)
			}
			for h := range c.Heads {
				q := s.Q[tok*qd+h*c.HeadDim : tok*qd+(h+1)*c.HeadDim]
				want := refAttend(c, q, keys[i], vals[i], h, lo, end, scale)
				got := s.Att[tok*c.ODim()+h*c.ValueDim : tok*c.ODim()+(h+1)*c.ValueDim]
				for k := range want {
					worst = max(worst, math.Abs(want[k]-float64(got[k])))
				}
			}
			tok++
		}
	}
	if worst > 1e-5 {
		t.Errorf("window %d, groups of %d: max |Δ| %.3g against the float64 reference", window, group, worst)
	}
}

// Step.Embed copies the rows of a run as they are and scales token
// embeddings; Prepare refuses negative ids outside a run and bad runs.
func TestEmbedsRows(t *testing.T) {
	c := &Config{Layers: 1, Embd: 4, Heads: 1, KVHeads: 1, HeadDim: 4, ValueDim: 4, Vocab: 3, RMSEps: 1e-6}
	vals := make([]float32, 3*4)
	for i := range vals {
		vals[i] = float32(i + 1)
	}
	data := make([]byte, 4*len(vals))
	kernels.Quantize(kernels.F32, vals, data)
	emb, err := kernels.NewMatrix(kernels.F32, 3, 4, data)
	if err != nil {
		t.Fatal(err)
	}
	run := []float32{100, 101, 102, 103, 104, 105, 106, 107}
	newSeq := func(toks []int32, runs ...Embeds) *SeqInput {
		return &SeqInput{Tokens: toks, Cache: kvcache.NewContiguousCache(c.KVShape(), 16, false), Embeds: runs}
	}
	var s Step
	b := &Batch{Seqs: []*SeqInput{newSeq([]int32{2}), newSeq([]int32{1, -5, -9, 0}, Embeds{Off: 1, Rows: run, NonCausal: true})}}
	if err := s.Prepare(c, nil, b); err != nil {
		t.Fatal(err)
	}
	s.Embed(emb, 2)
	want := []float32{18, 20, 22, 24, 10, 12, 14, 16, 100, 101, 102, 103, 104, 105, 106, 107, 2, 4, 6, 8}
	for i, v := range want {
		if s.X[i] != v {
			t.Fatalf("X = %v\nwant %v", s.X[:len(want)], want)
		}
	}
	for _, bad := range []struct {
		sq   *SeqInput
		want string
	}{
		{newSeq([]int32{1, -5}), "token -5 outside"},
		{newSeq([]int32{-5, 1, -5}, Embeds{Off: 0, Rows: run[:4]}), "token -5 outside"},
		{newSeq([]int32{1, 1}, Embeds{Off: 1, Rows: run}), "covers tokens [1, 3) of 2"},
		{newSeq([]int32{1, 1, 1}, Embeds{Off: 0, Rows: run[:3]}), "not a positive multiple"},
		{newSeq([]int32{1, 1, 1}, Embeds{Off: 1, Rows: run[:4]}, Embeds{Off: 0, Rows: run[:4]}), "overlaps"},
		{newSeq([]int32{1, 1, 1}, Embeds{Off: 0, Rows: run}, Embeds{Off: 1, Rows: run[:4]}), "overlaps"},
	} {
		err := s.Prepare(c, nil, &Batch{Seqs: []*SeqInput{bad.sq}})
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Prepare: %v, want an error with %q", err, bad.want)
		}
	}
}
