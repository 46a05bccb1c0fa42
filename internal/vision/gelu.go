package vision

import (
	"math"
	"sync"

	"mistralrs/internal/kernels"
)

// geluTable is llama.cpp's CPU GELU: the tanh form evaluated once per half
// value and rounded to half, looked up by the input rounded to half. Its
// inputs are every half value, so the table is derived here rather than
// read from anywhere; the fixture's copy of ggml's checks it. Made on first
// use: a text-only process never pays for it.
var geluTable = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		x := kernels.FP16ToFP32(uint16(i))
		t[i] = kernels.FP16ToFP32(kernels.FP32ToFP16(geluTanh32(x)))
	}
	return &t
})

// geluTanh32 is 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²))) evaluated as
// ggml writes it, each step rounded to float32 (tanh itself correctly
// rounded from float64, as a good tanhf is).
func geluTanh32(x float32) float32 {
	const (
		coefA       = float32(0.044715)
		sqrt2OverPi = float32(0.79788456080286535587989211986876)
	)
	inner := float32(1 + float32(float32(coefA*x)*x))
	arg := float32(float32(sqrt2OverPi*x) * inner)
	th := float32(math.Tanh(float64(arg)))
	return float32(float32(0.5*x) * float32(1+th))
}

// geluF16 applies llama.cpp's GELU in place: 0 at or below −10, x at or
// above 10, the table between.
func geluF16(x []float32) {
	t := geluTable()
	var buf [256]uint16
	for len(x) > 0 {
		n := min(len(x), len(buf))
		kernels.F32ToF16s(buf[:n], x[:n])
		for i, v := range x[:n] {
			switch {
			case v <= -10:
				x[i] = 0
			case v >= 10:
			default:
				x[i] = t[buf[i]]
			}
		}
		x = x[n:]
	}
}

// roundF16 rounds every value of x to half precision and back, as
// llama.cpp's CPU backend does to the input of a product with F16 weights.
func roundF16(x []float32) {
	var buf [256]uint16
	for len(x) > 0 {
		n := min(len(x), len(buf))
		kernels.F32ToF16s(buf[:n], x[:n])
		kernels.F16ToF32s(x[:n], buf[:n])
		x = x[n:]
	}
}

// roundBF16 is roundF16 for BF16 weights.
func roundBF16(x []float32) {
	for i, v := range x {
		x[i] = kernels.BF16ToFP32(kernels.FP32ToBF16(v))
	}
}

// roundFor rounds x the way llama.cpp rounds the input of a product with
// weights of type t (nothing for F32; quantized types are quantized by
// kernels.MatMul itself).
func roundFor(t kernels.Type, x []float32) {
	switch t {
	case kernels.F16:
		roundF16(x)
	case kernels.BF16:
		roundBF16(x)
	}
}
