package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// What flash_test.go's oracle tests leave out: that every assembly path
// installs flash kernels, and ExpSum on rows whose exps all underflow and
// on rows that are all masked (-Inf, with m = -Inf: NaN, as the oracle),
// and RowMax on those rows.

func TestFlashKernelsInstalled(t *testing.T) {
	eachPath(t, func(t *testing.T, path string) {
		if path != "generic" && (flashNow.scores == nil || flashNow.accum == nil || flashNow.expSum == nil || flashNow.rowMax == nil) {
			t.Fatalf("path %s runs Go flash kernels: %+v", path, flashNow)
		}
		if path == "generic" {
			return
		}
		// Every KV type's tiles decode in assembly, the chosen path's or
		// a path's below it (halves: where the CPU converts them, F16C).
		for typ := range NumKVTypes {
			if typ == KVF16 && flashNow.kTile[typ] == nil {
				continue
			}
			if flashNow.kTile[typ] == nil || flashNow.vTile[typ] == nil {
				t.Errorf("path %s decodes KV type %d's tiles in Go", path, typ)
			}
		}
		if (path == "avx512" || path == "avx512bw") && (flashNow.kTile[KVF16] == nil || flashNow.vTile[KVF16] == nil) {
			t.Errorf("path %s decodes f16 tiles in Go", path)
		}
	})
}

func TestExpSumMaskedRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 3))
	inf := float32(math.Inf(-1))
	eachPath(t, func(t *testing.T, path string) {
		for _, n := range []int{16, 48, 1024} {
			for _, all := range []bool{false, true} {
				x := randF32(rng, n)
				m := inf
				for j := range x {
					if all || j%3 == 0 {
						x[j] = inf
					}
					m = max(m, x[j])
				}
				if g := RowMax(x); math.Float32bits(g) != math.Float32bits(m) {
					t.Fatalf("n %d, all masked %v: RowMax %v, want %v", n, all, g, m)
				}
				if !all {
					m += 200 // every exp underflows to 0
				}
				got, want := append([]float32(nil), x...), append([]float32(nil), x...)
				gs, ws := ExpSum(got, m), expSumGo(want, m)
				got, want = append(got, gs), append(want, ws)
				for i := range want {
					g, w := got[i], want[i]
					if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
						t.Fatalf("n %d, all masked %v: element %d (%d is the sum): %v, want %v", n, all, i, n, g, w)
					}
				}
			}
		}
	})
}

// TestExpSumRange sweeps exp's whole domain, the ends of its range (LO,
// HI and the floats next to them, where 2^k is at its extremes), the
// halfway points of k's rounding, ±Inf and NaN: every path gives the Go
// oracle's bits, and the oracle is within 2 ulp of exp.
func TestExpSumRange(t *testing.T) {
	var x []float32
	for v := float32(-110); v < 95; v += 0.0371 {
		x = append(x, v)
	}
	for _, e := range []float32{expLo, expHi} {
		for i, v := 0, e; i < 8; i++ {
			x = append(x, v, math.Nextafter32(e, float32(math.Inf(1))))
			v = math.Nextafter32(v, float32(math.Inf(-1)))
		}
	}
	for k := -126; k <= 127; k++ { // x·log2 e near k + 1/2
		h := float32((float64(k) + 0.5) / math.Log2E)
		x = append(x, h, math.Nextafter32(h, 0), math.Nextafter32(h, 200))
	}
	x = append(x, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()))
	for len(x)%16 != 0 {
		x = append(x, 1)
	}
	for _, v := range x {
		got, want := float64(flashExp(v)), math.Exp(float64(v))
		switch {
		case v != v:
			if got == got {
				t.Fatalf("exp(NaN) = %v", got)
			}
		case v < expLo || v > expHi:
			if want := map[bool]float64{true: 0, false: math.Inf(1)}[v < expLo]; got != want {
				t.Fatalf("exp(%v) = %v, want %v out of range", v, got, want)
			}
		case math.Abs(got-want) > 2*ulp32(float32(want)):
			t.Fatalf("exp(%v) = %v, want %v: %.1f ulp", v, got, want, math.Abs(got-want)/ulp32(float32(want)))
		}
	}
	eachPath(t, func(t *testing.T, path string) {
		got, want := append([]float32(nil), x...), append([]float32(nil), x...)
		if g, w := ExpSum(got, 0), expSumGo(want, 0); math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			t.Fatalf("sum %v, want %v", g, w)
		}
		for i := range want {
			if g, w := got[i], want[i]; math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
				t.Fatalf("exp(%v) = %v, want %v (the Go oracle's)", x[i], g, w)
			}
		}
	})
}

// ulp32 is the spacing of the float32s at v's magnitude.
func ulp32(v float32) float64 {
	a := float32(math.Abs(float64(v)))
	return float64(math.Nextafter32(a, float32(math.Inf(1))) - a)
}

// BenchmarkFlashTile is one tile of decode attention with GQA (4 queries,
// 64 keys, head 128): the scores by FlashScores against Dots4 (the kernel
// attention used before), the weighted sum of the values by FlashAccum
// against Axpys4, on the path in use (MISTRALRS_CPU picks it; -count N
// interleaves the pairs).
func BenchmarkFlashTile(b *testing.B) {
	const nq, nk, hd = 4, 64, 128
	r := rand.New(rand.NewPCG(29, 4))
	q, k, v := randF32(r, nq*hd), randF32(r, nk*hd), randF32(r, nk*hd)
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

// TestKVTileF8Codes decodes every E4M3 code (the subnormal ones, the NaN
// codes that read as ±448, both zeros) with KTile and VTile on every path
// against the Go decoder: the random rows of TestKVTilesOracle reach few
// of them.
func TestKVTileF8Codes(t *testing.T) {
	const rows, n = 16, 256
	w := make([]uint16, rows*KVF8E4M3.Words(n))
	b := kvBytes(w)
	for j := range rows {
		for blk := range n / 32 {
			p := b[(j*n/32+blk)*34:]
			h := FP32ToFP16(float32(j+1) / 8)
			p[0], p[1] = byte(h), byte(h>>8)
			for i := range 32 {
				p[2+i] = byte(blk*32 + i + j) // every code, shifted by row
			}
		}
	}
	r := KVRows{T: KVF8E4M3, W: w, Stride: KVF8E4M3.Words(n)}
	want := make([]float32, rows*n)
	for j := range rows {
		decodeKVRow(want[j*n:(j+1)*n], &r, j, n)
	}
	eachPath(t, func(t *testing.T, path string) {
		v, k := make([]float32, rows*n), make([]float32, n*rows)
		VTile(v, n, &r, n, rows)
		KTile(k, rows, &r, n, rows)
		for j := range rows {
			for d := range n {
				if g, x := v[j*n+d], want[j*n+d]; math.Float32bits(g) != math.Float32bits(x) {
					t.Fatalf("VTile: row %d value %d: %v, want %v", j, d, g, x)
				}
				if g, x := k[d*rows+j], want[j*n+d]; math.Float32bits(g) != math.Float32bits(x) {
					t.Fatalf("KTile: row %d value %d: %v, want %v", j, d, g, x)
				}
			}
		}
	})
}

// TestFlashSoftmax: every path's tile softmax gives the oracle's bits for
// rows whose maximum stays below m, moves m up (l and o rescaled), starts
// from m = -Inf (nothing rescaled), holds masked (-Inf) entries or is all
// masked; o of no width, one vector and four, rows ldo apart. Exp gives
// flashExp's bits on every path.
func TestFlashSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 7))
	inf := float32(math.Inf(-1))
	eachPath(t, func(t *testing.T, path string) {
		for _, vd := range []int{0, 16, 64} {
			const nq = 7
			ldo := vd + 16
			s := randF32(rng, nq*FlashTile)
			for j := range s {
				s[j] *= 4
				if j%11 == 0 {
					s[j] = inf
				}
			}
			for j := range FlashTile {
				s[5*FlashTile+j] = inf // row 5: all masked
			}
			m := []float32{inf, 0.5, 30, inf, -3, 2, 1e-3}
			l := randF32(rng, nq)
			for i := range l {
				l[i] = float32(math.Abs(float64(l[i]))) + 1
			}
			o := randF32(rng, nq*ldo)
			gs, gm, gl, gO := clone(s), clone(m), clone(l), clone(o)
			ws, wm, wl, wO := clone(s), clone(m), clone(l), clone(o)
			FlashSoftmax(gs, nq, gm, gl, gO, ldo, vd)
			flashSoftmaxGo(ws, nq, wm, wl, wO, ldo, vd)
			what := fmt.Sprintf("vd %d", vd)
			sameBits(t, what+" weights", gs, ws)
			sameBits(t, what+" m", gm, wm)
			sameBits(t, what+" l", gl, wl)
			sameBits(t, what+" o", gO, wO)
			if wm[2] != 30 || wm[0] == inf || wm[1] == 0.5 {
				t.Fatalf("the rows did not take the paths meant: m %v", wm)
			}
		}
		for _, x := range []float32{-100, -87.5, -10, -0.3, 0, 1, 88, 89} {
			if g, w := Exp(x), flashExp(x); math.Float32bits(g) != math.Float32bits(w) {
				t.Fatalf("Exp(%v) = %v, want %v", x, g, w)
			}
		}
	})
}

func clone(x []float32) []float32 { return append([]float32(nil), x...) }
