package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
)

// flashCase is one sequence: past positions in its cache, then n new
// tokens (a non-causal run of embeds at [ncOff, ncOff+ncLen) if ncLen > 0).
type flashCase struct {
	past, n      int
	ncOff, ncLen int
}

// flashRun builds the caches (paged, block size bs, keys kt and values
// vt) and runs one step's attention of layer 0, returning Att, the rows
// stored (decoded back from the caches) and the queries.
func flashRun(t *testing.T, c *Config, cases []flashCase, kt, vt kvcache.Type, bs, threads, group int, opt AttnOpts, seed uint64) (att []float32, keys, vals [][][]float32, q []float32, s *Step) {
	t.Helper()
	defer func(g int) { AttnGroupMax = g }(AttnGroupMax)
	AttnGroupMax = group
	rng := rand.New(rand.NewPCG(seed, 1))
	kd, vd := c.KDim(), c.VDim()
	randRow := func(n int) []float32 {
		r := make([]float32, n)
		for i := range r {
			r[i] = float32(rng.NormFloat64())
		}
		return r
	}
	b := &Batch{}
	keys, vals = make([][][]float32, len(cases)), make([][][]float32, len(cases))
	for i, cs := range cases {
		total := cs.past + cs.n
		pool := kvcache.NewTypedPool(c.KVShape(), bs, (total+bs-1)/bs, kt, vt)
		cache := pool.NewSeq()
		if err := cache.Extend(cs.past); err != nil {
			t.Fatal(err)
		}
		for p := range total {
			keys[i], vals[i] = append(keys[i], randRow(kd)), append(vals[i], randRow(vd))
			if p < cs.past {
				cache.Put(0, p, keys[i][p], vals[i][p])
			}
		}
		toks := make([]int32, cs.n)
		var runs []Embeds
		if cs.ncLen > 0 {
			runs = []Embeds{{Off: cs.ncOff, Rows: make([]float32, cs.ncLen*c.Embd), NonCausal: true}}
		}
		b.Seqs = append(b.Seqs, &SeqInput{Tokens: toks, Pos: cs.past, Cache: cache, Embeds: runs})
	}
	var p *kernels.Pool
	if threads > 1 {
		p = kernels.NewPool(threads)
		defer p.Close()
	}
	s = &Step{}
	if err := s.Prepare(c, p, b); err != nil {
		t.Fatal(err)
	}
	for t := range s.T {
		i, p := s.tokSeq[t], s.tokPos[t]
		b.Seqs[i].Cache.Put(0, p, keys[i][p], vals[i][p])
	}
	// the reference reads the rows as the cache stores them
	for i, sq := range b.Seqs {
		for p := range keys[i] {
			sp := sq.Cache.Span(0, p)
			sp.KeyRows(keys[i][p], kd, 0, 1, 0, kd)
			sp.ValueRows(vals[i][p], vd, 0, 1, 0, vd)
		}
	}
	qrng := rand.New(rand.NewPCG(seed, 2))
	for i := range s.Q {
		s.Q[i] = float32(qrng.NormFloat64())
	}
	s.Attention(0, opt)
	return append([]float32(nil), s.Att...), keys, vals, append([]float32(nil), s.Q...), s
}

// checkFlashRef compares Att with refAttend (float64) for every query.
func checkFlashRef(t *testing.T, c *Config, cases []flashCase, att, q []float32, keys, vals [][][]float32, window int, tol float64, what string) {
	t.Helper()
	scale := 1 / math.Sqrt(float64(c.HeadDim))
	worst, tok := 0.0, 0
	for i, cs := range cases {
		for j := range cs.n {
			pos := cs.past + j
			end := pos + 1
			if cs.ncLen > 0 && j >= cs.ncOff && j < cs.ncOff+cs.ncLen {
				end = cs.past + cs.ncOff + cs.ncLen
			}
			lo := 0
			if window > 0 {
				lo = max(0, pos+1-window)
			}
			for h := range c.Heads {
				qh := q[tok*c.QDim()+h*c.HeadDim : tok*c.QDim()+(h+1)*c.HeadDim]
				want := refAttend(c, qh, keys[i], vals[i], h, lo, end, scale)
				got := att[tok*c.ODim()+h*c.ValueDim : tok*c.ODim()+(h+1)*c.ValueDim]
				for k := range want {
					worst = max(worst, math.Abs(want[k]-float64(got[k])))
				}
			}
			tok++
		}
	}
	if worst > tol {
		t.Errorf("%s: max |Δ| %.3g against the float64 reference (tolerance %.3g)", what, worst, tol)
	}
}

func sameAtt(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: Att[%d] = %v, want %v (identical bits)", what, i, got[i], want[i])
		}
	}
}

// Flash attention over paged caches of every type matches float64
// attention over the rows the cache stores, with GQA, windows, non-causal
// runs, heads of 64 and of 80 (padded to 96 in the kernels), blocks of 16
// and of 5 positions, and contexts past a chunk.
func TestFlashAttentionTypes(t *testing.T) {
	cases := []flashCase{
		{past: 1100, n: 3},
		{past: 0, n: 70},
		{past: 37, n: 20, ncOff: 4, ncLen: 9},
	}
	for _, hd := range []int{64, 80} {
		c := &Config{Layers: 1, Embd: 8, Heads: 8, KVHeads: 2, HeadDim: hd, ValueDim: hd, Vocab: 32, RMSEps: 1e-6}
		for _, kt := range []kvcache.Type{kvcache.F32, kvcache.F16, kvcache.BF16, kvcache.Q8_0, kvcache.Q4_0, kvcache.F8E4M3} {
			if kt.CheckRow(c.KDim()) != nil {
				continue
			}
			vt := kt
			if kt == kvcache.Q4_0 {
				vt = kvcache.Q8_0 // K and V may differ
			}
			for _, window := range []int{0, 50} {
				bs := 16
				if kt == kvcache.F16 {
					bs = 5
				}
				what := fmt.Sprintf("hd %d %s/%s window %d", hd, kt, vt, window)
				att, keys, vals, q, _ := flashRun(t, c, cases, kt, vt, bs, 2, 64, AttnOpts{Window: window}, 11)
				checkFlashRef(t, c, cases, att, q, keys, vals, window, 2e-5, what)
			}
		}
	}
}

// A query's bits do not depend on its group (alone or with others), the
// thread count, or whether decode's chunks were split among threads; with
// blocks of 32 the tiles every row sees go through one kernel
// (FlashTileKV, avx512) for groups of 4 and through the calls it stands
// for in groups of 64, and they agree.
func TestFlashInvariance(t *testing.T) {
	c := &Config{Layers: 1, Embd: 8, Heads: 8, KVHeads: 2, HeadDim: 64, ValueDim: 64, Vocab: 32, RMSEps: 1e-6}
	for _, cases := range [][]flashCase{
		{{past: 2500, n: 1}},                                       // decode at depth: split over threads
		{{past: 2100, n: 1}, {past: 300, n: 1}},                    // two sequences
		{{past: 1000, n: 40}, {past: 5, n: 9, ncOff: 2, ncLen: 4}}, // prefill across a chunk boundary
	} {
		for _, tb := range []struct {
			typ kvcache.Type
			bs  int
		}{{kvcache.F32, 16}, {kvcache.Q8_0, 16}, {kvcache.Q8_0, 32}, {kvcache.F16, 32}} {
			typ, bs := tb.typ, tb.bs
			for _, window := range []int{0, 700} {
				opt := AttnOpts{Window: window}
				want, keys, vals, q, _ := flashRun(t, c, cases, typ, typ, bs, 1, 1, opt, 5)
				checkFlashRef(t, c, cases, want, q, keys, vals, window, 2e-5, fmt.Sprintf("%s window %d", typ, window))
				for _, threads := range []int{2, 3, 4} {
					for _, group := range []int{4, 64} {
						got, _, _, _, s := flashRun(t, c, cases, typ, typ, bs, threads, group, opt, 5)
						what := fmt.Sprintf("%v %s blocks of %d window %d: %d threads, groups of %d (split %v)", cases, typ, bs, window, threads, group, s.at.split)
						sameAtt(t, what, got, want)
					}
				}
			}
		}
	}
}

// Decode of one sequence at depth splits its chunks among the threads,
// its KV heads together while that leaves two items a thread.
func TestFlashSplits(t *testing.T) {
	c := &Config{Layers: 1, Embd: 8, Heads: 8, KVHeads: 2, HeadDim: 64, ValueDim: 64, Vocab: 32, RMSEps: 1e-6}
	cases := []flashCase{{past: 5000, n: 1}}
	together, keys, vals, q, s := flashRun(t, c, cases, kvcache.F16, kvcache.F16, 32, 2, 64, AttnOpts{}, 3)
	checkFlashRef(t, c, cases, together, q, keys, vals, 0, 2e-5, "KV heads together")
	if !s.at.split || len(s.at.items) != 5 || s.at.items[0].ng != 2 {
		t.Fatalf("split %v, %d items: want the 5 chunks of the 2 groups (KV heads) together as items", s.at.split, len(s.at.items))
	}
	// with 4 threads, each KV head's chunks are items of their own
	apart, _, _, _, s := flashRun(t, c, cases, kvcache.F16, kvcache.F16, 32, 4, 64, AttnOpts{}, 3)
	if !s.at.split || len(s.at.items) != 10 || s.at.items[0].ng != 1 {
		t.Fatalf("4 threads: split %v, %d items: want the 5 chunks of each group as items", s.at.split, len(s.at.items))
	}
	sameAtt(t, "KV heads together and apart", together, apart)
}

// benchAttention times layer 0's attention of n new tokens after depth
// positions of one sequence, Llama 3.2 1B's attention shape (32 heads, 8
// KV heads, head 64), 2 threads: go test -bench Flash -run - ./internal/model/nn
func benchAttention(b *testing.B, typ kvcache.Type, depth, n int) {
	benchAttentionLayers(b, typ, depth, n, 1)
}

// benchAttentionLayers runs every layer of layers in turn: 16 layers of
// keys and values at depth 8000 (262 MB at f16) do not fit in the caches,
// as a model's do not.
func benchAttentionLayers(b *testing.B, typ kvcache.Type, depth, n, layers int) {
	c := &Config{Layers: layers, Embd: 8, Heads: 32, KVHeads: 8, HeadDim: 64, ValueDim: 64, Vocab: 32, RMSEps: 1e-6}
	rng := rand.New(rand.NewPCG(1, 1))
	row := func(k int) []float32 {
		r := make([]float32, k)
		for i := range r {
			r[i] = float32(rng.NormFloat64())
		}
		return r
	}
	pool := kvcache.NewTypedPool(c.KVShape(), 32, (depth+n)/32+1, typ, typ)
	cache := pool.NewSeq()
	if err := cache.Extend(depth + n); err != nil {
		b.Fatal(err)
	}
	k, v := row(c.KDim()), row(c.VDim())
	for p := range depth + n {
		for l := range layers {
			cache.Put(l, p, k, v)
		}
	}
	cache.Truncate(depth)
	p := kernels.NewPool(2)
	defer p.Close()
	batch := &Batch{Seqs: []*SeqInput{{Tokens: make([]int32, n), Pos: depth, Cache: cache}}}
	var s Step
	if err := s.Prepare(c, p, batch); err != nil {
		b.Fatal(err)
	}
	copy(s.Q, row(len(s.Q)))
	b.ResetTimer()
	for range b.N {
		for l := range layers {
			s.Attention(l, AttnOpts{})
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tok/s")
}

func BenchmarkFlashDecode(b *testing.B) {
	for _, typ := range []kvcache.Type{kvcache.F32, kvcache.F16, kvcache.Q8_0} {
		for _, depth := range []int{64, 2048, 8000} {
			b.Run(fmt.Sprintf("%s/d%d", typ, depth), func(b *testing.B) { benchAttention(b, typ, depth, 1) })
		}
	}
}

// BenchmarkFlashDecodeDRAM: 16 layers at depth 8000 (keys and values from
// memory, not the caches).
func BenchmarkFlashDecodeDRAM(b *testing.B) {
	for _, typ := range []kvcache.Type{kvcache.F32, kvcache.F16, kvcache.Q8_0} {
		b.Run(typ.String(), func(b *testing.B) { benchAttentionLayers(b, typ, 8000, 1, 16) })
	}
}

func BenchmarkFlashPrefill(b *testing.B) {
	for _, typ := range []kvcache.Type{kvcache.F32, kvcache.F16, kvcache.Q8_0} {
		for _, depth := range []int{0, 2048, 7600} {
			b.Run(fmt.Sprintf("%s/pp512/d%d", typ, depth), func(b *testing.B) { benchAttention(b, typ, depth, 512) })
		}
	}
}

// A decode step's attention over a paged cache allocates nothing, through
// the one-kernel tile (FlashTileKV, avx512) and the calls alike: keys by
// column (f16, and q8_0 where the path reads them so) and by row.
func TestAttentionAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	c := &Config{Layers: 1, Embd: 8, Heads: 8, KVHeads: 2, HeadDim: 64, ValueDim: 64, Vocab: 32, RMSEps: 1e-6}
	for _, typ := range []kvcache.Type{kvcache.F32, kvcache.F16, kvcache.Q8_0, kvcache.Q4_0} {
		for _, window := range []int{0, 100} {
			_, _, _, _, s := flashRun(t, c, []flashCase{{past: 300, n: 1}}, typ, typ, 32, 1, 64, AttnOpts{Window: window}, 7)
			if n := testing.AllocsPerRun(10, func() { s.Attention(0, AttnOpts{Window: window}) }); n != 0 {
				t.Errorf("%s window %d: a decode step's attention allocates %v times", typ, window, n)
			}
		}
	}
}
