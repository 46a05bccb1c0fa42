package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"mistralrs/internal/kernels"
)

// kernels.Hadamard is the product by Sylvester's Walsh-Hadamard matrix over
// sqrt(n), built as llama.cpp builds its rotation (H_2s from H_s), per
// run of n values; it is its own inverse.
func TestHadamard(t *testing.T) {
	for _, n := range []int{1, 2, 64, 128, 256} {
		h := make([]float64, n*n)
		h[0] = 1 / math.Sqrt(float64(n))
		for s := 1; s < n; s *= 2 {
			for i := range s {
				for j := range s {
					v := h[i*n+j]
					h[(i+s)*n+j], h[i*n+j+s], h[(i+s)*n+j+s] = v, v, -v
				}
			}
		}
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		x := make([]float32, 3*n) // three heads
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		y := append([]float32(nil), x...)
		kernels.Hadamard(y, n)
		for c := 0; c < len(x); c += n {
			for i := range n {
				var want float64
				for j := range n {
					want += h[i*n+j] * float64(x[c+j])
				}
				if d := math.Abs(float64(y[c+i]) - want); d > 1e-5 {
					t.Fatalf("n %d, run %d, row %d: %v, want %v", n, c/n, i, y[c+i], want)
				}
			}
		}
		kernels.Hadamard(y, n)
		for i := range x {
			if d := math.Abs(float64(y[i] - x[i])); d > 1e-5 {
				t.Fatalf("n %d: rotating twice moved value %d from %v to %v", n, i, x[i], y[i])
			}
		}
	}
}
