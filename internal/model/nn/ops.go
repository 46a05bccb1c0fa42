package nn

import (
	"math"

	"mistralrs/internal/kernels"
)

// RMSNorm sets out = in / rms(in) * w, row by row (rows of len(w)); out may
// be in. The sum of squares is accumulated in float64 as ggml does.
func RMSNorm(out, in, w []float32, eps float32) {
	n := len(w)
	for r := 0; r+n <= len(in); r += n {
		kernels.RMSNorm(out[r:r+n], in[r:r+n], w, eps)
	}
}

// AddRows adds bias to each row of x (rows of len(bias)); nil bias is a no-op.
func AddRows(x, bias []float32) {
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

// Add sets x += y.
func Add(x, y []float32) {
	y = y[:len(x)]
	for i := range x {
		x[i] += y[i]
	}
}

// GELUMul sets g = gelu(g) * u with the tanh approximation of GELU
// (gemma's gelu_pytorch_tanh); u is overwritten. Since
// 0.5·(1 + tanh(z)) = sigmoid(2z), gelu(x)·u = t·sigmoid(t)·(u·x/t) with
// t = 2z = 2c·x·(1 + 0.044715·x²): the vectorised SiLU kernel does the
// rest, and x/t = 1/(2c·(1 + 0.044715·x²)) never divides by zero.
func GELUMul(g, u []float32) {
	u = u[:len(g)]
	const c2 = 2 * 0.7978845608028654 // 2·sqrt(2/pi)
	for i, x := range g {
		a := c2 * (1 + 0.044715*x*x)
		g[i] = x * a
		u[i] /= a
	}
	kernels.SiLUMul(g, u)
}

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }
