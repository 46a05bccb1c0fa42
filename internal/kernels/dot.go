package kernels

// Act is one row of activations prepared for a weight type: F for float
// weight types (F32, F16, BF16), the 8-bit form for quantized ones. Quantized
// activations use blocks of 32 whatever the weight type, so one form serves
// every quantized type (K-quants combine per-32 sums with their sub-block
// scales).
type Act struct {
	F  []float32 // float activations
	Qs []int8    // quantized activations, len n: x[i] ≈ D[i/32] * Qs[i]
	D  []float32 // per block of 32: scale
	S  []float32 // per block of 32: D[b] * Σ Qs in the block (for types with minimums)
}

// dotFunc returns the dot product of one weight row w (n elements) with one
// activation row.
type dotFunc func(w []byte, a *Act, n int) float32

// dot4Func computes one weight row against four activation rows, so that the
// weight row is read from memory once for four inputs (prefill, batches).
type dot4Func func(w []byte, a *[4]*Act, n int, out *[4]float32)

type typeKernels struct {
	dot  dotFunc
	dot4 dot4Func // nil: dot is called four times
}

// dotTable holds the kernels of each type. The pure-Go versions are
// installed first (package variable initialisation, which precedes every
// init function); assembly versions replace them in init functions of the
// _amd64 files when the CPU has the features they need.
var dotTable = genericKernels()
