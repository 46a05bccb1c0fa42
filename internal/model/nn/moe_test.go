package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
)

// f32Matrix is a rows×cols F32 matrix of the values vals.
func f32Matrix(t *testing.T, rows, cols int, vals []float32) *kernels.Matrix {
	t.Helper()
	data := make([]byte, 4*len(vals))
	kernels.Quantize(kernels.F32, vals, data)
	m, err := kernels.NewMatrix(kernels.F32, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// refMoE is the block in float64 for one row h.
func refMoE(c *Config, w *moeWeights, h []float64, shared bool) []float64 {
	D, X, XF, F := c.Embd, c.Experts, c.ExpertFF, c.FF
	matvec := func(m []float32, x []float64, out int) []float64 {
		y := make([]float64, out)
		for o := range y {
			for i, v := range x {
				y[o] += float64(m[o*len(x)+i]) * v
			}
		}
		return y
	}
	mlp := func(g, u, d []float32, ff int) []float64 {
		gg, uu := matvec(g, h, ff), matvec(u, h, ff)
		for i := range gg {
			gg[i] = gg[i] / (1 + math.Exp(-gg[i])) * uu[i]
		}
		return matvec(d, gg, D)
	}
	p := matvec(w.router, h, X)
	mx := math.Inf(-1)
	for _, v := range p {
		mx = math.Max(mx, v)
	}
	var sum float64
	for e := range p {
		p[e] = math.Exp(p[e] - mx)
		sum += p[e]
	}
	order := make([]int, X)
	for e := range p {
		p[e] /= sum
		order[e] = e
	}
	sort.SliceStable(order, func(a, b int) bool { return p[order[a]] > p[order[b]] })
	var wsum float64
	for _, e := range order[:c.ExpertUsed] {
		wsum += p[e]
	}
	out := make([]float64, D)
	for _, e := range order[:c.ExpertUsed] {
		wt := p[e]
		if c.ExpertNorm {
			wt /= wsum
		}
		y := mlp(w.gate[e*XF*D:(e+1)*XF*D], w.up[e*XF*D:(e+1)*XF*D], w.down[e*D*XF:(e+1)*D*XF], XF)
		for i := range out {
			out[i] += wt * y[i]
		}
	}
	if shared {
		var z float64
		for i, v := range h {
			z += float64(w.shInp[i]) * v
		}
		g := 1 / (1 + math.Exp(-z))
		y := mlp(w.shGate, w.shUp, w.shDown, F)
		for i := range out {
			out[i] += g * y[i]
		}
	}
	return out
}

// sameBits compares a row's result alone and with others: the same bits
// where MatMul computes every row alike whatever their number (the
// assembly kernels); the pure-Go F32 kernels sum in another order for four
// rows at a time, so there only within 1e-6.
func sameBits(alone, batched float32) bool {
	if kernels.SIMD() {
		return math.Float32bits(alone) == math.Float32bits(batched)
	}
	return math.Abs(float64(alone-batched)) <= 1e-6
}

type moeWeights struct {
	router, gate, up, down      []float32
	shInp, shGate, shUp, shDown []float32
}

// TestMoEForward checks the block against float64 arithmetic with and
// without renormalised weights (qwen3moe, mixtral / qwen2moe) and with the
// shared expert (qwen2moe), for one row and for several, on a pool and
// without, writing over its input; and that every row gets the bits it gets
// alone.
func TestMoEForward(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	uni := func(n int, r float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r * (2*rng.Float64() - 1))
		}
		return v
	}
	c := Config{Arch: "test", Layers: 1, Embd: 64, FF: 48, Heads: 1, KVHeads: 1, HeadDim: 64, ValueDim: 64,
		Vocab: 16, ContextLen: 64, RMSEps: 1e-6, Experts: 6, ExpertUsed: 2, ExpertFF: 32}
	D, X, XF, F := c.Embd, c.Experts, c.ExpertFF, c.FF
	w := &moeWeights{router: uni(X*D, 1), gate: uni(X*XF*D, 0.2), up: uni(X*XF*D, 0.2), down: uni(X*D*XF, 0.2),
		shInp: uni(D, 0.2), shGate: uni(F*D, 0.2), shUp: uni(F*D, 0.2), shDown: uni(D*F, 0.2)}
	split := func(vals []float32, rows, cols int) []*kernels.Matrix {
		var ms []*kernels.Matrix
		for e := range X {
			ms = append(ms, f32Matrix(t, rows, cols, vals[e*rows*cols:(e+1)*rows*cols]))
		}
		return ms
	}
	base := MoE{Router: f32Matrix(t, X, D, w.router), Gate: split(w.gate, XF, D), Up: split(w.up, XF, D), Down: split(w.down, D, XF)}
	base.Init()
	withShared := base
	withShared.SharedExpert = SharedExpert{SharedGateInp: w.shInp, SharedGate: f32Matrix(t, F, D, w.shGate),
		SharedUp: f32Matrix(t, F, D, w.shUp), SharedDown: f32Matrix(t, D, F, w.shDown)}
	if has, ok := withShared.HasShared(); !has || !ok {
		t.Fatal("shared expert not seen")
	}
	if has, ok := base.HasShared(); has || !ok {
		t.Fatal("absent shared expert seen")
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	const T = 7
	h := uni(T*D, 1)
	// run feeds rows [lo, hi) of h through m in one step.
	run := func(m *MoE, p *kernels.Pool, lo, hi int) []float32 {
		var s Step
		cache := kvcache.NewContiguousCache(c.KVShape(), 64, false)
		if err := s.Prepare(&c, p, &Batch{Seqs: []*SeqInput{{Tokens: make([]int32, hi-lo), Cache: cache}}}); err != nil {
			t.Fatal(err)
		}
		buf := append([]float32(nil), h[lo*D:hi*D]...)
		m.Forward(&s, buf, buf)
		return buf
	}
	for _, norm := range []bool{true, false} {
		for _, shared := range []bool{false, true} {
			t.Run(fmt.Sprintf("norm=%v/shared=%v", norm, shared), func(t *testing.T) {
				c.ExpertNorm = norm
				m := &base
				if shared {
					m = &withShared
				}
				all := run(m, pool, 0, T)
				// Without a pool the experts' matrices are cut less (or not).
				for i, v := range run(m, nil, 0, T) {
					if !sameBits(v, all[i]) {
						t.Fatalf("value %d: %v without a pool, %v with", i, v, all[i])
					}
				}
				var worst float64
				for r := range T {
					hr := make([]float64, D)
					for i := range hr {
						hr[i] = float64(h[r*D+i])
					}
					want := refMoE(&c, w, hr, shared)
					for i, v := range want {
						worst = math.Max(worst, math.Abs(float64(all[r*D+i])-v))
					}
					one := run(m, nil, r, r+1)
					for i, v := range one {
						if !sameBits(v, all[r*D+i]) {
							t.Fatalf("row %d value %d: alone %v, with %d rows %v", r, i, v, T, all[r*D+i])
						}
					}
				}
				t.Logf("max |diff| from float64: %.3g", worst)
				if worst > 1e-5 {
					t.Errorf("max |diff| from float64 %.3g", worst)
				}
			})
		}
	}
}

// TestChunkRows: the chunks cover the rows in order without overlap, are
// even shares, and start on multiples of kernels.PackRows when every chunk
// can have at least that many rows.
func TestChunkRows(t *testing.T) {
	for _, rows := range []int{1, 7, 16, 33, 64, 100, 768, 1000} {
		for _, n := range []int{1, 2, 4, 8, 16} {
			if n > rows {
				continue
			}
			prev := 0
			for c := range n {
				lo, hi := chunkRows(c, n, rows)
				if lo != prev || hi < lo {
					t.Fatalf("rows %d in %d: chunk %d is [%d,%d) after %d", rows, n, c, lo, hi, prev)
				}
				if rows >= n*kernels.PackRows && lo%kernels.PackRows != 0 {
					t.Errorf("rows %d in %d: chunk %d starts at %d", rows, n, c, lo)
				}
				if d := hi - lo - rows/n; d < -kernels.PackRows || d > kernels.PackRows {
					t.Errorf("rows %d in %d: chunk %d has %d rows", rows, n, c, hi-lo)
				}
				prev = hi
			}
			if prev != rows {
				t.Errorf("rows %d in %d: chunks end at %d", rows, n, prev)
			}
		}
	}
}
