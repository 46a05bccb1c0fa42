//go:build arm64 && !purego

package kernels

//go:noescape
func hadamardNEON(x *float32, runs, n int, scale float32)

// hadamardSIMD: Hadamard for orders of at least 64 (the rotation's; the
// kernel holds a block of 64 in sixteen registers).
func hadamardSIMD(x []float32, n int, scale float32) bool {
	if !simdVec || n < 64 {
		return false
	}
	if runs := len(x) / n; runs > 0 {
		hadamardNEON(&x[0], runs, n, scale)
	}
	return true
}
