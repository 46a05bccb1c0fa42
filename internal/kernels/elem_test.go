package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// bothModes runs f with the assembly kernels (where there are any) and with
// the Go loops.
func bothModes(t *testing.T, f func(t *testing.T)) {
	was := SetSIMD(true)
	defer SetSIMD(was)
	t.Run(fmt.Sprintf("simd=%v", SIMD()), f)
	SetSIMD(false)
	t.Run("simd=false", f)
}

func elemLengths() []int {
	return []int{1, 3, 7, 8, 9, 15, 16, 17, 24, 31, 33, 64, 100, 768, 2051}
}

// relErr is |got-want| / |want| (|got-want| when want is 0).
func relErr(got float32, want float64) float64 {
	d := math.Abs(float64(got) - want)
	if want != 0 {
		d /= math.Abs(want)
	}
	return d
}

func TestExpGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	worst := 0.0
	for i := 0; i < 200000; i++ {
		x := float32(rng.Float64()*176 - 88)
		want := math.Exp(float64(x))
		if want < 0x1p-126 {
			continue
		}
		worst = max(worst, relErr(expGo(x), want))
	}
	if worst > 3e-7 {
		t.Errorf("expGo: worst relative error %g", worst)
	}
	for _, c := range []struct{ x, want float32 }{
		{0, 1}, {-200, 0}, {-88, 0}, {200, float32(math.Inf(1))}, {float32(math.Inf(-1)), 0},
	} {
		if got := expGo(c.x); got != c.want && !(c.x == -88 && got < 1e-38) {
			t.Errorf("expGo(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	if nan := float32(math.NaN()); !math.IsNaN(float64(expGo(nan))) {
		t.Error("expGo(NaN) is not NaN")
	}
}

func TestSiLUMul(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(33, 34))
		for _, n := range elemLengths() {
			g, u := make([]float32, n), make([]float32, n+2)
			for i := range g {
				g[i] = float32(rng.NormFloat64() * 6)
			}
			for i := range u {
				u[i] = float32(rng.NormFloat64())
			}
			if n > 4 {
				g[0], g[1], g[2], g[3] = -100, 100, 0, -1e30
			}
			got := append([]float32(nil), g...)
			SiLUMul(got, u)
			for i, x := range g {
				want := float64(x) / (1 + math.Exp(-float64(x))) * float64(u[i])
				if e := math.Abs(float64(got[i]) - want); e > 1e-6*math.Abs(want)+1e-37 {
					t.Fatalf("n=%d: silu(%g)*%g = %g, want %g", n, x, u[i], got[i], want)
				}
			}
		}
		g := []float32{float32(math.NaN())}
		SiLUMul(g, []float32{1})
		if !math.IsNaN(float64(g[0])) {
			t.Errorf("silu(NaN) = %g", g[0])
		}
	})
}

func TestSoftmax(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(35, 36))
		for _, n := range elemLengths() {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 10)
			}
			if n > 2 {
				x[1] = -1e4 // underflows to 0
			}
			mx := math.Inf(-1)
			for _, v := range x {
				mx = math.Max(mx, float64(v))
			}
			want := make([]float64, n)
			var sum float64
			for i, v := range x {
				want[i] = math.Exp(float64(v - float32(mx)))
				sum += want[i]
			}
			got := append([]float32(nil), x...)
			Softmax(got)
			for i := range want {
				w := want[i] / sum
				if e := math.Abs(float64(got[i]) - w); e > 1e-6*w+1e-38 {
					t.Fatalf("n=%d: softmax[%d] = %g, want %g", n, i, got[i], w)
				}
			}
		}
	})
}

func TestRMSNorm(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(37, 38))
		for _, n := range elemLengths() {
			x, w := make([]float32, n), make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 3)
				w[i] = float32(rng.NormFloat64())
			}
			var ss float64
			for _, v := range x {
				ss += float64(v) * float64(v)
			}
			scale := 1 / math.Sqrt(ss/float64(n)+1e-5)
			out := make([]float32, n)
			RMSNorm(out, x, w, 1e-5)
			for i := range x {
				want := float64(x[i]) * scale * float64(w[i])
				if e := math.Abs(float64(out[i]) - want); e > 1e-6*math.Abs(want)+1e-30 {
					t.Fatalf("n=%d: rmsnorm[%d] = %g, want %g", n, i, out[i], want)
				}
			}
			RMSNorm(x, x, w, 1e-5) // in place
			for i := range x {
				if x[i] != out[i] {
					t.Fatalf("n=%d: in-place rmsnorm[%d] = %g, want %g", n, i, x[i], out[i])
				}
			}
		}
	})
}

// TestElemPositionInvariant: an element's result must not depend on where
// it lies in the slice (the model splits swiglu by ranges that depend on
// the batch).
func TestElemPositionInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 40))
	const n = 67
	g, u := make([]float32, n), make([]float32, n)
	for i := range g {
		g[i] = float32(rng.NormFloat64() * 4)
		u[i] = float32(rng.NormFloat64())
	}
	whole := append([]float32(nil), g...)
	SiLUMul(whole, u)
	for lo := 0; lo < n; lo++ {
		for _, hi := range []int{lo + 1, min(lo+5, n), min(lo+13, n), n} {
			part := append([]float32(nil), g[lo:hi]...)
			SiLUMul(part, u[lo:hi])
			for i := range part {
				if math.Float32bits(part[i]) != math.Float32bits(whole[lo+i]) {
					t.Fatalf("silu of element %d differs in [%d,%d): %g vs %g", lo+i, lo, hi, part[i], whole[lo+i])
				}
			}
		}
	}
}

func BenchmarkElem(b *testing.B) {
	rng := rand.New(rand.NewPCG(41, 42))
	g, u := randRow(rng, 2048), randRow(rng, 2048)
	buf := make([]float32, 2048)
	for _, simd := range []bool{true, false} {
		was := SetSIMD(simd)
		b.Run(fmt.Sprintf("SiLUMul/2048/simd=%v", simd), func(b *testing.B) {
			for b.Loop() {
				copy(buf, g)
				SiLUMul(buf, u)
			}
		})
		b.Run(fmt.Sprintf("Softmax/512/simd=%v", simd), func(b *testing.B) {
			for b.Loop() {
				copy(buf, g[:512])
				Softmax(buf[:512])
			}
		})
		b.Run(fmt.Sprintf("RMSNorm/768/simd=%v", simd), func(b *testing.B) {
			for b.Loop() {
				RMSNorm(buf[:768], g[:768], u[:768], 1e-5)
			}
		})
		SetSIMD(was)
	}
}

// TestDotsAxpys: the span kernels give the bits of DotF32 and Axpy called
// position by position.
func TestDotsAxpys(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(43, 44))
		for _, hd := range []int{4, 8, 12, 16, 24, 64, 72, 80, 128, 136, 256} {
			for _, cnt := range []int{1, 2, 4, 5, 8, 11, 16, 17, 35, 48} {
				stride := hd*2 + 8
				q := randRow(rng, hd)
				k := randRow(rng, (cnt-1)*stride+hd)
				got := make([]float32, cnt)
				Dots(got, q, k, stride, 0.125)
				for j := range got {
					want := DotF32(q, k[j*stride:]) * 0.125
					if math.Float32bits(got[j]) != math.Float32bits(want) {
						t.Fatalf("hd=%d cnt=%d: Dots[%d] = %g, want %g", hd, cnt, j, got[j], want)
					}
				}
				w := randRow(rng, cnt)
				y := randRow(rng, hd)
				want := append([]float32(nil), y...)
				for j := range w {
					Axpy(w[j], k[j*stride:], want)
				}
				Axpys(y, w, k, stride)
				for i := range y {
					if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
						t.Fatalf("hd=%d cnt=%d: Axpys y[%d] = %g, want %g", hd, cnt, i, y[i], want[i])
					}
				}
			}
		}
	})
}

// TestDots4Axpys4: the four-query kernels give each query the bits of Dots
// and Axpys alone.
func TestDots4Axpys4(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(47, 48))
		for _, hd := range []int{4, 8, 12, 16, 24, 64, 72, 80, 128, 136} {
			for _, cnt := range []int{0, 1, 2, 3, 5, 17} {
				stride := hd*3 + 8
				k := randRow(rng, max(cnt-1, 0)*stride+hd)
				var q, out, y, w [4][]float32
				for g := range 4 {
					q[g], out[g] = randRow(rng, hd), make([]float32, cnt)
					y[g], w[g] = randRow(rng, hd), randRow(rng, cnt)
				}
				y0 := y
				for g := range 4 {
					y0[g] = append([]float32(nil), y[g]...)
				}
				Dots4(&out, &q, k, stride, 0.125)
				Axpys4(&y, &w, k, stride)
				for g := range 4 {
					want := make([]float32, cnt)
					Dots(want, q[g], k, stride, 0.125)
					Axpys(y0[g], w[g], k, stride)
					for j := range want {
						if math.Float32bits(out[g][j]) != math.Float32bits(want[j]) {
							t.Fatalf("hd=%d cnt=%d: Dots4 query %d [%d] = %g, Dots %g", hd, cnt, g, j, out[g][j], want[j])
						}
					}
					for i := range y0[g] {
						if math.Float32bits(y[g][i]) != math.Float32bits(y0[g][i]) {
							t.Fatalf("hd=%d cnt=%d: Axpys4 output %d [%d] = %g, Axpys %g", hd, cnt, g, i, y[g][i], y0[g][i])
						}
					}
				}
			}
		}
	})
}

// TestDotsAxpysF16: over rows of halves, the F16 kernels give the bits of
// Dots and Axpys over the converted rows.
func TestDotsAxpysF16(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(49, 50))
		for _, hd := range []int{8, 16, 24, 64, 72, 128} {
			for _, cnt := range []int{1, 3, 4, 5, 9, 16, 33} {
				stride := hd*2 + 8
				k16 := make([]uint16, (cnt-1)*stride+hd)
				for i := range k16 {
					k16[i] = FP32ToFP16(float32(rng.NormFloat64()))
				}
				k := make([]float32, len(k16))
				F16ToF32s(k, k16)
				q := randRow(rng, hd)
				got, want := make([]float32, cnt), make([]float32, cnt)
				DotsF16(got, q, k16, stride, 0.125)
				Dots(want, q, k, stride, 0.125)
				w, y := randRow(rng, cnt), randRow(rng, hd)
				y2 := append([]float32(nil), y...)
				AxpysF16(y, w, k16, stride)
				Axpys(y2, w, k, stride)
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
						t.Fatalf("hd=%d cnt=%d: DotsF16[%d] = %g, Dots %g", hd, cnt, j, got[j], want[j])
					}
				}
				for i := range y {
					if math.Float32bits(y[i]) != math.Float32bits(y2[i]) {
						t.Fatalf("hd=%d cnt=%d: AxpysF16 y[%d] = %g, Axpys %g", hd, cnt, i, y[i], y2[i])
					}
				}
			}
		}
	})
}

// TestRope: the assembly rotation gives the Go loop's bits.
func TestRope(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	for _, neox := range []bool{false, true} {
		for _, c := range []struct{ hd, half, heads int }{{64, 32, 3}, {128, 64, 2}, {64, 16, 2}, {80, 40, 2}, {12, 6, 2}, {8, 4, 1}} {
			x := randRow(rng, c.hd*c.heads)
			cos, sin := randRow(rng, c.half), randRow(rng, c.half)
			var res [2][]float32
			for i, simd := range []bool{true, false} {
				was := SetSIMD(simd)
				res[i] = append([]float32(nil), x...)
				Rope(res[i], c.hd, cos, sin, neox)
				SetSIMD(was)
			}
			for i := range x {
				if math.Float32bits(res[0][i]) != math.Float32bits(res[1][i]) {
					t.Fatalf("neox=%v %+v: x[%d] = %g, Go loop %g", neox, c, i, res[0][i], res[1][i])
				}
			}
			if res[1][0] == x[0] && res[1][1] == x[1] {
				t.Fatalf("neox=%v %+v: nothing rotated", neox, c)
			}
		}
	}
}

// Hadamard's assembly gives the Go loop's bits, run by run, for every order
// it takes (and leaves a trailing partial run alone); the Go loop's product
// is checked against the matrix in nn's TestHadamard.
func TestHadamardBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	for _, n := range []int{1, 2, 8, 64, 128, 256, 512} {
		for _, runs := range []int{1, 3} {
			x := randRow(rng, runs*n+n/2) // and half a run, left alone
			if len(x) > 1 {
				x[0], x[1] = 0, float32(math.Copysign(0, -1)) // signed zeros
			}
			var res [2][]float32
			for i, simd := range []bool{true, false} {
				was := SetSIMD(simd)
				res[i] = append([]float32(nil), x...)
				Hadamard(res[i], n)
				SetSIMD(was)
			}
			for i := range x {
				if math.Float32bits(res[0][i]) != math.Float32bits(res[1][i]) {
					t.Fatalf("n %d, %d runs: x[%d] = %g, Go loop %g", n, runs, i, res[0][i], res[1][i])
				}
			}
			for i := runs * n; i < len(x); i++ {
				if res[0][i] != x[i] {
					t.Fatalf("n %d: value %d after the last run changed", n, i)
				}
			}
			if n > 2 && res[0][2] == x[2] && res[0][3] == x[3] {
				t.Fatalf("n %d: nothing rotated", n)
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("order 48 did not panic")
		}
	}()
	Hadamard(make([]float32, 96), 48)
}

func BenchmarkHadamard(b *testing.B) {
	// What one decode token of the 1.2B llama shape rotates per layer:
	// 32 query, 8 key, 8 value and 32 output heads of 64.
	x := randRow(rand.New(rand.NewPCG(1, 2)), 80*64)
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		Hadamard(x, 64)
	}
}
