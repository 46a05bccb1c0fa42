//go:build amd64 && !purego

package kernels

import "math"

//go:noescape
func siluMulAVX2(gate, up *float32, n int)

//go:noescape
func expSubSumAVX2(x *float32, n int, sub float32) float64

//go:noescape
func maxAVX2(x *float32, n int) float32

//go:noescape
func scaleAVX2(x *float32, n int, s float32)

//go:noescape
func sumSqAVX2(x *float32, n int) float64

//go:noescape
func mulScaleAVX2(out, x, w *float32, n int, s float32)

// The element-wise kernels run with the vector helpers (simdVec): they need
// AVX2 and FMA too. Each returns false when the Go loop is to run.

func siluMulSIMD(g, u []float32) bool {
	if !simdVec {
		return false
	}
	n := len(g)
	u = u[:n]
	m := n &^ 7
	if m > 0 {
		siluMulAVX2(&g[0], &u[0], m)
	}
	if m < n {
		var bg, bu [8]float32
		copy(bg[:], g[m:])
		copy(bu[:], u[m:])
		siluMulAVX2(&bg[0], &bu[0], 8)
		copy(g[m:], bg[:])
	}
	return true
}

func softmaxSIMD(x []float32) bool {
	if !simdVec {
		return false
	}
	n := len(x)
	m := n &^ 7
	mx := x[0]
	if m > 0 {
		mx = maxAVX2(&x[0], m)
	}
	for _, v := range x[m:] {
		mx = max(mx, v)
	}
	var sum float64
	if m > 0 {
		sum = expSubSumAVX2(&x[0], m, mx)
	}
	if m < n {
		// exp(-Inf) is 0: the padding adds nothing to the sum.
		var b [8]float32
		for i := range b {
			b[i] = float32(math.Inf(-1))
		}
		copy(b[:], x[m:])
		sum += expSubSumAVX2(&b[0], 8, mx)
		copy(x[m:], b[:])
	}
	inv := float32(1 / sum)
	if m > 0 {
		scaleAVX2(&x[0], m, inv)
	}
	for i := m; i < n; i++ {
		x[i] *= inv
	}
	return true
}

func sumSqSIMD(x []float32) (float64, bool) {
	if !simdVec {
		return 0, false
	}
	n := len(x)
	m := n &^ 7
	var sum float64
	if m > 0 {
		sum = sumSqAVX2(&x[0], m)
	}
	for _, v := range x[m:] {
		sum += float64(v * v)
	}
	return sum, true
}

func mulScaleSIMD(out, in, w []float32, s float32) bool {
	if !simdVec {
		return false
	}
	n := len(w)
	in, out = in[:n], out[:n]
	m := n &^ 7
	if m > 0 {
		mulScaleAVX2(&out[0], &in[0], &w[0], m, s)
	}
	for i := m; i < n; i++ {
		out[i] = in[i] * s * w[i]
	}
	return true
}

//go:noescape
func dotsAVX2(q, k *float32, hd, stride, cnt int, scale float32, out *float32)

//go:noescape
func axpysAVX2(y *float32, hd int, w, x *float32, stride, cnt int)

//go:noescape
func dotsF16AVX2(q *float32, k *uint16, hd, stride, cnt int, scale float32, out *float32)

//go:noescape
func axpysF16AVX2(y *float32, hd int, w *float32, x *uint16, stride, cnt int)

//go:noescape
func dotsAVX512(q, k *float32, hd, stride, cnt int, scale float32, out *float32)

//go:noescape
func axpysAVX512(y *float32, hd int, w, x *float32, stride, cnt int)

//go:noescape
func dotsF16AVX512(q *float32, k *uint16, hd, stride, cnt int, scale float32, out *float32)

//go:noescape
func axpysF16AVX512(y *float32, hd int, w *float32, x *uint16, stride, cnt int)

// attn512 is set on the avx512 path: the attention kernels with the AVX2
// kernels' bits in 512-bit registers (simd_attn512_amd64.s) take head
// sizes of a multiple of 16, and dots 16 positions at a time (the rest go
// to the AVX2 kernel).
var attn512 bool

// dots512 returns how many leading positions of out the AVX-512 dots
// kernels take (a multiple of 16; 0 when they do not apply).
func dots512(out, q []float32) int {
	if !attn512 || len(q)%16 != 0 {
		return 0
	}
	return len(out) &^ 15
}

func dotsF16SIMD(out, q []float32, k []uint16, stride int, scale float32) bool {
	if !simdVec || !f16ConvSIMD || len(q) == 0 || len(q)%8 != 0 {
		return false
	}
	n := dots512(out, q)
	if n > 0 {
		dotsF16AVX512(&q[0], &k[0], len(q), stride, n, scale, &out[0])
	}
	if n < len(out) {
		dotsF16AVX2(&q[0], &k[n*stride], len(q), stride, len(out)-n, scale, &out[n])
	}
	return true
}

func axpysF16SIMD(y, w []float32, x []uint16, stride int) bool {
	if !simdVec || !f16ConvSIMD || len(y) == 0 || len(y)%8 != 0 {
		return false
	}
	if attn512 && len(y)%16 == 0 {
		axpysF16AVX512(&y[0], len(y), &w[0], &x[0], stride, len(w))
		return true
	}
	axpysF16AVX2(&y[0], len(y), &w[0], &x[0], stride, len(w))
	return true
}

//go:noescape
func dots4AVX2(q *[4]*float32, k *float32, hd, stride, cnt int, scale float32, out *[4]*float32)

//go:noescape
func axpys4AVX2(y *[4]*float32, hd int, w *[4]*float32, x *float32, stride, cnt int)

// dots4SIMD and axpys4SIMD: Dots4 and Axpys4 (their callers checked the
// lengths) for head sizes of a multiple of 8.
func dots4SIMD(out, q *[4][]float32, k []float32, stride int, scale float32) bool {
	hd := len(q[0])
	if !simdVec || hd == 0 || hd%8 != 0 {
		return false
	}
	qp := [4]*float32{&q[0][0], &q[1][0], &q[2][0], &q[3][0]}
	op := [4]*float32{&out[0][0], &out[1][0], &out[2][0], &out[3][0]}
	dots4AVX2(&qp, &k[0], hd, stride, len(out[0]), scale, &op)
	return true
}

func axpys4SIMD(y, w *[4][]float32, x []float32, stride int) bool {
	hd := len(y[0])
	if !simdVec || hd == 0 || hd%8 != 0 {
		return false
	}
	yp := [4]*float32{&y[0][0], &y[1][0], &y[2][0], &y[3][0]}
	wp := [4]*float32{&w[0][0], &w[1][0], &w[2][0], &w[3][0]}
	axpys4AVX2(&yp, hd, &wp, &x[0], stride, len(w[0]))
	return true
}

// dotsSIMD and axpysSIMD take head sizes of a multiple of 8 (DotF32 and
// Axpy add the rest in Go; the callers loop over those then).
func dotsSIMD(out, q, k []float32, stride int, scale float32) bool {
	if !simdVec || len(q) == 0 || len(q)%8 != 0 {
		return false
	}
	n := dots512(out, q)
	if n > 0 {
		dotsAVX512(&q[0], &k[0], len(q), stride, n, scale, &out[0])
	}
	if n < len(out) {
		dotsAVX2(&q[0], &k[n*stride], len(q), stride, len(out)-n, scale, &out[n])
	}
	return true
}

func axpysSIMD(y, w, x []float32, stride int) bool {
	if !simdVec || len(y) == 0 || len(y)%8 != 0 {
		return false
	}
	if attn512 && len(y)%16 == 0 {
		axpysAVX512(&y[0], len(y), &w[0], &x[0], stride, len(w))
		return true
	}
	axpysAVX2(&y[0], len(y), &w[0], &x[0], stride, len(w))
	return true
}

//go:noescape
func ropeNeoxAVX2(x *float32, heads, hd, half int, cos, sin *float32)

//go:noescape
func ropePairsAVX2(x *float32, heads, hd, half int, cos, sin *float32)

func ropeSIMD(x []float32, hd, half int, cos, sin []float32, neox bool) bool {
	heads := len(x) / hd
	if !simdVec || heads == 0 || half == 0 {
		return false
	}
	if neox && half%8 != 0 || !neox && half%4 != 0 {
		return false
	}
	_ = x[(heads-1)*hd+2*half-1]
	_, _ = cos[half-1], sin[half-1]
	if neox {
		ropeNeoxAVX2(&x[0], heads, hd, half, &cos[0], &sin[0])
	} else {
		ropePairsAVX2(&x[0], heads, hd, half, &cos[0], &sin[0])
	}
	return true
}

//go:noescape
func hadamardAVX2(x *float32, runs, n int, scale float32)

// hadamardAsm is hadamardSIMD's kernel (a block of 64 in eight registers).
var hadamardAsm = hadamardAVX2
