package model

import (
	"math"

	"mistralrs/internal/kernels"
)

// rmsnorm sets out = in / rms(in) * w, row by row (rows of len(w)); out may
// be in. The sum of squares is accumulated in float64 as ggml does.
func rmsnorm(out, in, w []float32, eps float32) {
	n := len(w)
	for r := 0; r+n <= len(in); r += n {
		kernels.RMSNorm(out[r:r+n], in[r:r+n], w, eps)
	}
}

// addRows adds bias to each row of x (rows of len(bias)); nil bias is a no-op.
func addRows(x, bias []float32) {
	n := len(bias)
	if n == 0 {
		return
	}
	for r := 0; r+n <= len(x); r += n {
		row := x[r : r+n]
		for i, b := range bias {
			row[i] += b
		}
	}
}

// add sets x += y.
func add(x, y []float32) {
	y = y[:len(x)]
	for i := range x {
		x[i] += y[i]
	}
}

// softmax normalises x in place (vectorised exp where the kernels have
// assembly).
func softmax(x []float32) { kernels.Softmax(x) }

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }
