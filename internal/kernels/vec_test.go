package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestDotF32Axpy(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{0, 1, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 64, 100, 128, 1000} {
		a, b := make([]float32, n), make([]float32, n+3) // b may be longer
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		for i := range b {
			b[i] = float32(rng.NormFloat64())
		}
		var want, mag float64
		for i := range a {
			want += float64(a[i]) * float64(b[i])
			mag += math.Abs(float64(a[i]) * float64(b[i]))
		}
		for _, got := range []float32{DotF32(a, b), dotF32Go(a, b)} {
			if math.Abs(float64(got)-want) > 1e-6*mag+1e-30 {
				t.Errorf("n=%d: DotF32 %g, want %g", n, got, want)
			}
		}
		alpha := float32(rng.NormFloat64())
		y := append([]float32(nil), a...)
		Axpy(alpha, b, y)
		for i := range y {
			w := float64(a[i]) + float64(alpha)*float64(b[i])
			if math.Abs(float64(y[i])-w) > 1e-6*(math.Abs(float64(a[i]))+math.Abs(float64(alpha*b[i]))) {
				t.Fatalf("n=%d: Axpy y[%d] = %g, want %g", n, i, y[i], w)
			}
		}
	}
}

// BenchmarkAttentionVec is attention's inner work per cached position and
// head: a dot product and an axpy of one head (64 or 128 values).
func BenchmarkAttentionVec(b *testing.B) {
	for _, n := range []int{64, 128} {
		x, y := randRow(rand.New(rand.NewPCG(23, 23)), n), randRow(rand.New(rand.NewPCG(24, 24)), n)
		b.Run(fmt.Sprintf("DotF32/%d", n), func(b *testing.B) {
			var s float32
			for b.Loop() {
				s += DotF32(x, y)
			}
			benchSink = s
		})
		b.Run(fmt.Sprintf("dotGo/%d", n), func(b *testing.B) {
			var s float32
			for b.Loop() {
				s += dotF32Go(x, y)
			}
			benchSink = s
		})
		b.Run(fmt.Sprintf("Axpy/%d", n), func(b *testing.B) {
			for b.Loop() {
				Axpy(1e-9, x, y)
			}
		})
		b.Run(fmt.Sprintf("axpyGo/%d", n), func(b *testing.B) {
			for b.Loop() {
				axpyGo(1e-9, x, y)
			}
		})
	}
}

func TestBackend(t *testing.T) {
	want := map[string]string{"generic": "CPU Go", "avx2": "CPU AVX2", "avxvnni": "CPU AVX-VNNI", "avx512bw": "CPU AVX512", "avx512": "CPU AVX512-VNNI",
		"neon": "CPU NEON", "dotprod": "CPU NEON-DOTPROD", "i8mm": "CPU NEON-I8MM"}[Path()]
	if b := Backend(); b != want || SIMD() != (Path() != "generic") {
		t.Errorf("Backend() = %q with SIMD() = %v on path %s", b, SIMD(), Path())
	}
}
