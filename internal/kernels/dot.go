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
	B  []int16   // per 16 quants: Σ Qs, for kernels that ask for it (typeKernels.sums16)
	I  []int32   // integer sums of Qs for the packed kernels that ask for them (packKernels.sums)
}

// actSums16 fills a.B from a.Qs.
func actSums16(a *Act) {
	n := len(a.Qs) / 16
	if cap(a.B) < n {
		a.B = make([]int16, n)
	}
	a.B = a.B[:n]
	for g := range a.B {
		q := (*[16]int8)(a.Qs[g*16:])
		var s int16
		for _, v := range q {
			s += int16(v)
		}
		a.B[g] = s
	}
}

// actSums fills a.I (already sized: len(a.Qs)/per values) with the sums of
// each run of per quants (16 or 32) times mul: the offset correction a
// packed kernel subtracts from its raw integer sums (Q8_0: 128 per block of
// 32, Q6_K: 32 per 16).
func actSums(a *Act, per int, mul int32) {
	if actSumsAsm != nil {
		actSumsAsm(a, per, mul)
		return
	}
	actSumsGo(a, per, mul)
}

// actSumsAsm is the assembly actSums where there is one (the same sums).
var actSumsAsm func(a *Act, per int, mul int32)

// actSumsGo is actSums in Go: the oracle.
func actSumsGo(a *Act, per int, mul int32) {
	for g := range a.I {
		var s0, s1, s2, s3 int32
		for j := g * per; j < (g+1)*per; j += 4 {
			q := (*[4]int8)(a.Qs[j:])
			s0 += int32(q[0])
			s1 += int32(q[1])
			s2 += int32(q[2])
			s3 += int32(q[3])
		}
		a.I[g] = mul * ((s0 + s1) + (s2 + s3))
	}
}

// dotFunc returns the dot product of one weight row w (n elements) with one
// activation row.
type dotFunc func(w []byte, a *Act, n int) float32

// dot4Func computes one weight row against four activation rows, so that the
// weight row is read from memory once for four inputs (prefill, batches).
type dot4Func func(w []byte, a *[4]*Act, n int, out *[4]float32)

// dotRowsFunc sets out[r] to the dot product of weight row r with one
// activation row for the rows consecutive rows (n elements each) at the
// start of w: a matrix-vector product whose loop over rows runs inside the
// kernel, which saves a call per row (about a sixth of a 768-wide Q8_0 row's
// time).
type dotRowsFunc func(w []byte, rows int, a *Act, n int, out []float32)

// dot4RowsFunc is dot4 over rows consecutive weight rows (n elements each)
// at the start of w: row r's product with activation row k goes to
// out[k*stride + r] (stride >= rows).
type dot4RowsFunc func(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int)

type typeKernels struct {
	dot      dotFunc
	dot4     dot4Func     // nil: dot is called four times
	dotRows  dotRowsFunc  // nil: dot is called per row
	dot4Rows dot4RowsFunc // nil: dot4 is called per row
	sums16   bool         // the kernels want Act.B (MatMul fills it; they compute it otherwise)
}

// dotTable holds the kernels of each type. The pure-Go versions are
// installed first (package variable initialisation, which precedes every
// init function); assembly versions replace them in init functions of the
// _amd64 files when the CPU has the features they need.
var dotTable = genericKernels()

// clearRows4 zeroes the outputs of a dot4Rows call.
func clearRows4(rows int, out []float32, stride int) {
	for k := 0; k < 4; k++ {
		clear(out[k*stride : k*stride+rows])
	}
}
