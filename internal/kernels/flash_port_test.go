package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The flash kernels of every path the CPU has (avx2, avx512; neon under
// qemu) against the Go oracles, bit for bit: FlashScores and FlashAccum
// on odd query counts, every tile width and head sizes past one register
// block, ExpSum on rows with -Inf (masked keys) and on rows that are all
// -Inf, and the KV tile decoders of every type.

// forEachPath runs f with each path the CPU has installed (the flash
// kernels with it), restoring the path in use after.
func forEachPath(t *testing.T, f func(t *testing.T)) {
	prev := Path()
	t.Cleanup(func() {
		if _, err := setPath(prev); err != nil {
			t.Fatal(err)
		}
	})
	for _, p := range Paths() {
		t.Run(p, func(t *testing.T) {
			if _, err := setPath(p); err != nil {
				t.Fatal(err)
			}
			if p != "generic" && flashNow.scores == nil {
				t.Fatalf("path %s runs the Go flash kernels", p)
			}
			f(t)
		})
	}
}

// sameBits reports whether got and want are the same float32s (any NaN
// matching any NaN), and the first index where they differ.
func sameBits(got, want []float32) (int, bool) {
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			return i, false
		}
	}
	return -1, true
}

// randVals returns n values in [-2, 2), with some exact zeros.
func randVals(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		if r.IntN(13) != 0 {
			x[i] = r.Float32()*4 - 2
		}
	}
	return x
}

func TestFlashScoresPaths(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(29, 1))
		for _, nq := range []int{1, 2, 3, 4, 5, 7, 8, 9} {
			for _, nk := range []int{16, 32, 48, 64} {
				for _, hd := range []int{16, 64, 80, 128} {
					ldq := hd + 16*(nq%2)
					q, kt := randVals(r, nq*ldq), randVals(r, hd*nk)
					scale := float32(1 / math.Sqrt(float64(hd)))
					got, want := make([]float32, nq*nk+3), make([]float32, nq*nk+3)
					got[nq*nk], want[nq*nk] = 7, 7 // past the tile: left alone
					FlashScores(got, q, ldq, kt, nq, nk, hd, scale)
					flashScoresGo(want, q, ldq, kt, nq, nk, hd, scale)
					if i, ok := sameBits(got, want); !ok {
						t.Fatalf("nq %d nk %d hd %d: s[%d] = %g, oracle %g", nq, nk, hd, i, got[i], want[i])
					}
				}
			}
		}
	})
}

func TestFlashAccumPaths(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(29, 2))
		for _, nq := range []int{1, 3, 4, 5, 8, 9} {
			for _, nk := range []int{1, 5, 16, 33, 64} {
				for _, vd := range []int{16, 48, 64, 128} {
					ldo := vd + 16*(nq%3)
					o := randVals(r, nq*ldo)
					p, v := randVals(r, nq*nk), randVals(r, nk*vd)
					got, want := append([]float32(nil), o...), append([]float32(nil), o...)
					FlashAccum(got, ldo, p, v, nq, nk, vd)
					flashAccumGo(want, ldo, p, v, nq, nk, vd)
					if i, ok := sameBits(got, want); !ok {
						t.Fatalf("nq %d nk %d vd %d: o[%d] = %g, oracle %g", nq, nk, vd, i, got[i], want[i])
					}
				}
			}
		}
	})
}

func TestExpSumPaths(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(29, 3))
		inf := float32(math.Inf(-1))
		for _, n := range []int{16, 32, 48, 64, 80, 1024} {
			for c := 0; c < 4; c++ {
				x := make([]float32, n)
				m := inf
				for j := range x {
					x[j] = r.Float32()*40 - 30 // past exp's range below
					if c >= 1 && r.IntN(4) == 0 {
						x[j] = inf // a masked key
					}
					if c == 3 {
						x[j] = inf // a row that is all masked
					}
					m = max(m, x[j])
				}
				if c == 2 {
					m += 100 // every exp underflows to 0
				}
				got, want := append([]float32(nil), x...), append([]float32(nil), x...)
				gs, ws := ExpSum(got, m), expSumGo(want, m)
				if i, ok := sameBits(got, want); !ok {
					t.Fatalf("n %d case %d: x[%d] = %g, oracle %g (from %g - %g)", n, c, i, got[i], want[i], x[i], m)
				}
				if _, ok := sameBits([]float32{gs}, []float32{ws}); !ok {
					t.Fatalf("n %d case %d: sum %g, oracle %g", n, c, gs, ws)
				}
			}
		}
	})
}

// BenchmarkFlashTile is one tile of decode attention with GQA (4 queries,
// 64 keys, head 128): the scores by FlashScores against Dots4 (the kernel
// attention used before), the weighted sum of the values by FlashAccum
// against Axpys4, on the path in use (MISTRALRS_CPU picks it; -count N
// interleaves the pairs).
func BenchmarkFlashTile(b *testing.B) {
	const nq, nk, hd = 4, 64, 128
	r := rand.New(rand.NewPCG(29, 4))
	q, k, v := randVals(r, nq*hd), randVals(r, nk*hd), randVals(r, nk*hd)
	kt := make([]float32, hd*nk)
	for j := 0; j < nk; j++ {
		for d := 0; d < hd; d++ {
			kt[d*nk+j] = k[j*hd+d]
		}
	}
	s, o := make([]float32, nq*nk), make([]float32, nq*hd)
	var outs, qs, ys, ws [4][]float32
	for g := range outs {
		outs[g], qs[g] = s[g*nk:(g+1)*nk], q[g*hd:(g+1)*hd]
		ys[g], ws[g] = o[g*hd:(g+1)*hd], outs[g]
	}
	path := Path()
	b.Run("scores/FlashScores/"+path, func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			FlashScores(s, q, hd, kt, nq, nk, hd, 0.125)
		}
	})
	b.Run("scores/Dots4/"+path, func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			Dots4(&outs, &qs, k, hd, 0.125)
		}
	})
	b.Run("accum/FlashAccum/"+path, func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			FlashAccum(o, hd, s, v, nq, nk, hd)
		}
	})
	b.Run("accum/Axpys4/"+path, func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			Axpys4(&ys, &ws, v, hd)
		}
	})
}
