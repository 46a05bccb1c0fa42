//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"math"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The assembly kernels need AVX2 and FMA (F16 also F16C). They replace the
// generic entries of dotTable in init; the generic ones are kept so that
// SetSIMD can switch back (tests compare the two, MISTRALRS_NOASM=1 turns
// the assembly off for a whole run).

type simdPair struct {
	generic, simd typeKernels
}

// quantizeActAsm is the assembly quantizeAct (bit-identical results) while
// the assembly kernels are on, else nil; quantizeAct is meant to call it
// when set (about 18 times faster than the Go loop on Zen 1).
var quantizeActAsm func(x []float32, a *Act)

var (
	simdQuantizeAct func(x []float32, a *Act)
	simdMu          sync.Mutex
	simdKernels     = map[Type]*simdPair{}
	simdOn          bool
	simdVec         bool // DotF32 and Axpy use assembly (with simdOn)
)

func init() {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return
	}
	add := func(t Type, k typeKernels) {
		e := dotTable[t]
		if e == nil {
			e = &typeKernels{}
			dotTable[t] = e
		}
		simdKernels[t] = &simdPair{generic: *e, simd: k}
	}
	add(F32, typeKernels{dot: dotF32SIMD, dot4: dot4F32SIMD, dotRows: dotRowsF32SIMD, dot4Rows: dot4RowsF32SIMD})
	add(BF16, typeKernels{dot: dotBF16SIMD, dot4: dot4BF16SIMD, dotRows: dotRowsBF16SIMD, dot4Rows: dot4RowsBF16SIMD})
	add(Q8_0, typeKernels{dot: dotQ8_0SIMD, dot4: dot4Q8_0SIMD, dotRows: dotRowsQ8_0SIMD, dot4Rows: dot4RowsQ8_0SIMD})
	add(Q4_0, typeKernels{dot: dotQ4_0SIMD, dot4: dot4Q4_0SIMD, dotRows: dotRowsQ4_0SIMD, dot4Rows: dot4RowsQ4_0SIMD})
	add(Q4_1, typeKernels{dot: dotQ4_1SIMD, dot4: dot4Q4_1SIMD, dotRows: dotRowsQ4_1SIMD, dot4Rows: dot4RowsQ4_1SIMD})
	add(Q5_0, typeKernels{dot: dotQ5_0SIMD, dot4: dot4Q5_0SIMD, dotRows: dotRowsQ5_0SIMD, dot4Rows: dot4RowsQ5_0SIMD})
	add(Q5_1, typeKernels{dot: dotQ5_1SIMD, dot4: dot4Q5_1SIMD, dotRows: dotRowsQ5_1SIMD, dot4Rows: dot4RowsQ5_1SIMD})
	add(Q4_K, typeKernels{dot: dotQ4_KSIMD, dot4: dot4Q4_KSIMD, dotRows: dotRowsQ4_KSIMD, dot4Rows: dot4RowsQ4_KSIMD})
	add(Q5_K, typeKernels{dot: dotQ5_KSIMD, dot4: dot4Q5_KSIMD, dotRows: dotRowsQ5_KSIMD, dot4Rows: dot4RowsQ5_KSIMD})
	add(Q6_K, typeKernels{dot: dotQ6_KSIMD, dot4: dot4Q6_KSIMD, dotRows: dotRowsQ6_KSIMD, dot4Rows: dot4RowsQ6_KSIMD, sums16: true})
	if cpu.X86.HasF16C {
		add(F16, typeKernels{dot: dotF16SIMD, dot4: dot4F16SIMD, dotRows: dotRowsF16SIMD, dot4Rows: dot4RowsF16SIMD})
	}
	if cpu.X86.HasF16C { // the block scales are rounded to fp16
		simdQuantizeAct = quantizeActSIMD
	}
	SetSIMD(os.Getenv("MISTRALRS_NOASM") == "")
}

// SetSIMD switches the dot kernels between the assembly versions (on, where
// the CPU has the features) and the pure-Go ones, and reports whether the
// assembly was in use before. It must not run while kernels are running.
func SetSIMD(on bool) (was bool) {
	simdMu.Lock()
	defer simdMu.Unlock()
	was = simdOn
	simdOn = on && len(simdKernels) > 0
	quantizeActAsm = nil
	if simdOn {
		quantizeActAsm = simdQuantizeAct
	}
	simdVec = simdOn
	for t, p := range simdKernels {
		k := p.generic
		if simdOn {
			k = p.simd
		}
		e := dotTable[t]
		*e = k
	}
	return was
}

// Backend names the kernels in use for reports (llama-bench's backends
// column): "CPU AVX2" with the assembly kernels, "CPU Go" without.
func Backend() string {
	if SIMD() {
		return "CPU AVX2"
	}
	return "CPU Go"
}

// SIMD reports whether the assembly kernels are in use.
func SIMD() bool {
	simdMu.Lock()
	defer simdMu.Unlock()
	return simdOn
}

// Float kernels: the assembly handles multiples of 8 elements, the rest
// (rare: model dimensions are multiples of 32) is summed here.

func tailF32(w []byte, x []float32) float32 {
	var s float32
	for i, v := range x {
		s += math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:])) * v
	}
	return s
}

func tailF16(w []byte, x []float32) float32 {
	var s float32
	for i, v := range x {
		s += FP16ToFP32(binary.LittleEndian.Uint16(w[2*i:])) * v
	}
	return s
}

//go:noescape
func dotF32AVX2(w, x *float32, n, rows int, out *float32)

//go:noescape
func dot4F32AVX2(w *float32, x *[4]*float32, n, rows int, out *float32, stride int)

//go:noescape
func dotF16AVX2(w *byte, x *float32, n, rows int, out *float32)

//go:noescape
func dot4F16AVX2(w *byte, x *[4]*float32, n, rows int, out *float32, stride int)

func dotF32SIMD(w []byte, a *Act, n int) float32 {
	m := n &^ 7
	var s float32
	if m > 0 {
		_ = w[4*n-1]
		_ = a.F[n-1]
		dotF32AVX2((*float32)(unsafe.Pointer(&w[0])), &a.F[0], m, 1, &s)
	}
	if m < n {
		s += tailF32(w[4*m:], a.F[m:n])
	}
	return s
}

// The float dotRows kernels need rows of a multiple of 8 elements (the
// assembly walks the weights straight through); other lengths loop over dot.

func dotRowsF32SIMD(w []byte, rows int, a *Act, n int, out []float32) {
	if n%8 != 0 || rows == 0 {
		dotRowsOf(dotF32SIMD, 4*n, w, rows, a, n, out)
		return
	}
	_ = w[rows*4*n-1]
	_ = a.F[n-1]
	_ = out[rows-1]
	dotF32AVX2((*float32)(unsafe.Pointer(&w[0])), &a.F[0], n, rows, &out[0])
}

func dot4F32SIMD(w []byte, a *[4]*Act, n int, out *[4]float32) {
	m := n &^ 7
	*out = [4]float32{}
	if m > 0 {
		_ = w[4*n-1]
		var x [4]*float32
		for k := range a {
			_ = a[k].F[n-1]
			x[k] = &a[k].F[0]
		}
		dot4F32AVX2((*float32)(unsafe.Pointer(&w[0])), &x, m, 1, &out[0], 1)
	}
	if m < n {
		for k := range a {
			out[k] += tailF32(w[4*m:], a[k].F[m:n])
		}
	}
}

func dot4RowsF32SIMD(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int) {
	if n%8 != 0 || rows == 0 {
		dot4RowsOf(dot4F32SIMD, 4*n, w, rows, a, n, out, stride)
		return
	}
	checkRows4(rows, out, stride)
	_ = w[rows*4*n-1]
	var x [4]*float32
	for k := range a {
		_ = a[k].F[n-1]
		x[k] = &a[k].F[0]
	}
	dot4F32AVX2((*float32)(unsafe.Pointer(&w[0])), &x, n, rows, &out[0], stride)
}

func dotF16SIMD(w []byte, a *Act, n int) float32 {
	m := n &^ 7
	var s float32
	if m > 0 {
		_ = w[2*n-1]
		_ = a.F[n-1]
		dotF16AVX2(&w[0], &a.F[0], m, 1, &s)
	}
	if m < n {
		s += tailF16(w[2*m:], a.F[m:n])
	}
	return s
}

func dotRowsF16SIMD(w []byte, rows int, a *Act, n int, out []float32) {
	if n%8 != 0 || rows == 0 {
		dotRowsOf(dotF16SIMD, 2*n, w, rows, a, n, out)
		return
	}
	_ = w[rows*2*n-1]
	_ = a.F[n-1]
	_ = out[rows-1]
	dotF16AVX2(&w[0], &a.F[0], n, rows, &out[0])
}

func dot4F16SIMD(w []byte, a *[4]*Act, n int, out *[4]float32) {
	m := n &^ 7
	*out = [4]float32{}
	if m > 0 {
		_ = w[2*n-1]
		var x [4]*float32
		for k := range a {
			_ = a[k].F[n-1]
			x[k] = &a[k].F[0]
		}
		dot4F16AVX2(&w[0], &x, m, 1, &out[0], 1)
	}
	if m < n {
		for k := range a {
			out[k] += tailF16(w[2*m:], a[k].F[m:n])
		}
	}
}

func dot4RowsF16SIMD(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int) {
	if n%8 != 0 || rows == 0 {
		dot4RowsOf(dot4F16SIMD, 2*n, w, rows, a, n, out, stride)
		return
	}
	checkRows4(rows, out, stride)
	_ = w[rows*2*n-1]
	var x [4]*float32
	for k := range a {
		_ = a[k].F[n-1]
		x[k] = &a[k].F[0]
	}
	dot4F16AVX2(&w[0], &x, n, rows, &out[0], stride)
}

//go:noescape
func dotBF16AVX2(w *byte, x *float32, n, rows int, out *float32)

//go:noescape
func dot4BF16AVX2(w *byte, x *[4]*float32, n, rows int, out *float32, stride int)

func tailBF16(w []byte, x []float32) float32 {
	var s float32
	for i, v := range x {
		s += BF16ToFP32(binary.LittleEndian.Uint16(w[2*i:])) * v
	}
	return s
}

func dotBF16SIMD(w []byte, a *Act, n int) float32 {
	m := n &^ 7
	var s float32
	if m > 0 {
		_ = w[2*n-1]
		_ = a.F[n-1]
		dotBF16AVX2(&w[0], &a.F[0], m, 1, &s)
	}
	if m < n {
		s += tailBF16(w[2*m:], a.F[m:n])
	}
	return s
}

func dotRowsBF16SIMD(w []byte, rows int, a *Act, n int, out []float32) {
	if n%8 != 0 || rows == 0 {
		dotRowsOf(dotBF16SIMD, 2*n, w, rows, a, n, out)
		return
	}
	_ = w[rows*2*n-1]
	_ = a.F[n-1]
	_ = out[rows-1]
	dotBF16AVX2(&w[0], &a.F[0], n, rows, &out[0])
}

func dot4BF16SIMD(w []byte, a *[4]*Act, n int, out *[4]float32) {
	m := n &^ 7
	*out = [4]float32{}
	if m > 0 {
		_ = w[2*n-1]
		var x [4]*float32
		for k := range a {
			_ = a[k].F[n-1]
			x[k] = &a[k].F[0]
		}
		dot4BF16AVX2(&w[0], &x, m, 1, &out[0], 1)
	}
	if m < n {
		for k := range a {
			out[k] += tailBF16(w[2*m:], a[k].F[m:n])
		}
	}
}

func dot4RowsBF16SIMD(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int) {
	if n%8 != 0 || rows == 0 {
		dot4RowsOf(dot4BF16SIMD, 2*n, w, rows, a, n, out, stride)
		return
	}
	checkRows4(rows, out, stride)
	_ = w[rows*2*n-1]
	var x [4]*float32
	for k := range a {
		_ = a[k].F[n-1]
		x[k] = &a[k].F[0]
	}
	dot4BF16AVX2(&w[0], &x, n, rows, &out[0], stride)
}

// Quantized kernels take nb blocks of 32; the bounds checks here keep the
// assembly inside the slices.

// tab is f16Table: the kernels read weight scales (halves) through it.

//go:noescape
func f16ToF32AVX2(dst *float32, src *uint16, n int)

//go:noescape
func f32ToF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func f16RowsToF32AVX2(dst *float32, src *uint16, stride, w, rows int)

// f16RowsSIMD converts rows of a multiple of 8 halves; false otherwise.
func f16RowsSIMD(dst []float32, src []uint16, stride, w, rows int) bool {
	if !simdVec || !f16ConvSIMD || w%8 != 0 || w == 0 || rows == 0 {
		return false
	}
	f16RowsToF32AVX2(&dst[0], &src[0], stride, w, rows)
	return true
}

// f16ConvSIMD is set when the CPU has F16C (the conversions below).
var f16ConvSIMD = cpu.X86.HasF16C && cpu.X86.HasAVX2

// f16ToF32sSIMD and f32ToF16sSIMD convert the first multiple of 8 values
// and return how many they did.
func f16ToF32sSIMD(dst []float32, src []uint16) int {
	n := len(src) &^ 7
	if !simdVec || !f16ConvSIMD || n == 0 {
		return 0
	}
	f16ToF32AVX2(&dst[0], &src[0], n)
	return n
}

func f32ToF16sSIMD(dst []uint16, src []float32) int {
	n := len(src) &^ 7
	if !simdVec || !f16ConvSIMD || n == 0 {
		return 0
	}
	f32ToF16AVX2(&dst[0], &src[0], n)
	return n
}

// int8MulPeakAVX2 runs n rounds of 8 VPMADDUBSW + 8 VPMADDWD (128 int8
// multiply-adds); BenchmarkInt8MulCeiling uses it, nothing else does.
func int8MulPeakAVX2(n int)

// int8MulPeak runs the ceiling loop and reports whether there is one.
func int8MulPeak(n int) bool {
	if !simdOn {
		return false
	}
	int8MulPeakAVX2(n)
	return true
}

//go:noescape
func dotQ8_0AVX2(w *byte, qs *int8, d *float32, nb int, tab *float32, rows int, out *float32)

//go:noescape
func dot4Q8_0AVX2(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dotQ4_0AVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)

//go:noescape
func dot4Q4_0AVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

// qargs checks one activation row for nb blocks and returns its pointers.
func qargs(a *Act, nb int) (*int8, *float32) {
	_ = a.Qs[nb*32-1]
	_ = a.D[nb-1]
	return &a.Qs[0], &a.D[0]
}

// q4args does qargs for four rows.
func q4args(a *[4]*Act, nb int) (qs [4]*int8, d [4]*float32) {
	for k := range a {
		qs[k], d[k] = qargs(a[k], nb)
	}
	return
}

func dotQ8_0SIMD(w []byte, a *Act, n int) float32 {
	var o [1]float32
	dotRowsQ8_0SIMD(w, 1, a, n, o[:])
	return o[0]
}

func dotRowsQ8_0SIMD(w []byte, rows int, a *Act, n int, out []float32) {
	nb := n / 32
	if nb == 0 || rows == 0 {
		clear(out[:rows])
		return
	}
	_ = w[rows*nb*34-1]
	_ = out[rows-1]
	qs, d := qargs(a, nb)
	dotQ8_0AVX2(&w[0], qs, d, nb, &f16Table[0], rows, &out[0])
}

func dot4Q8_0SIMD(w []byte, a *[4]*Act, n int, out *[4]float32) {
	dot4RowsQ8_0SIMD(w, 1, a, n, out[:], 1)
}

// checkRows4 checks the output of a dot4Rows call: four rows of at least
// rows values, stride apart.
func checkRows4(rows int, out []float32, stride int) {
	if stride < rows {
		panic("kernels: dot4Rows output stride shorter than its rows")
	}
	_ = out[3*stride+rows-1]
}

func dot4RowsQ8_0SIMD(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int) {
	if rows == 0 {
		return
	}
	checkRows4(rows, out, stride)
	nb := n / 32
	if nb == 0 {
		clearRows4(rows, out, stride)
		return
	}
	_ = w[rows*nb*34-1]
	qs, d := q4args(a, nb)
	dot4Q8_0AVX2(&w[0], &qs, &d, nb, &f16Table[0], rows, &out[0], stride)
}

func dotQ4_0SIMD(w []byte, a *Act, n int) float32 {
	var o [1]float32
	dotRowsQ4_0SIMD(w, 1, a, n, o[:])
	return o[0]
}

func dot4Q4_0SIMD(w []byte, a *[4]*Act, n int, out *[4]float32) {
	dot4RowsQ4_0SIMD(w, 1, a, n, out[:], 1)
}

func dot4RowsQ4_0SIMD(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int) {
	if rows == 0 {
		return
	}
	checkRows4(rows, out, stride)
	nb := n / 32
	if nb == 0 {
		clearRows4(rows, out, stride)
		return
	}
	_ = w[rows*nb*18-1]
	qs, d := q4args(a, nb)
	var s [4]*float32
	for k := range a {
		_ = a[k].S[nb-1]
		s[k] = &a[k].S[0]
	}
	dot4Q4_0AVX2(&w[0], &qs, &d, &s, nb, &f16Table[0], rows, &out[0], stride)
}

//go:noescape
func dotQ4_1AVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)

//go:noescape
func dotQ5_0AVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)

//go:noescape
func dotQ5_1AVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)

// sArgs checks rows rows of nb blocks (of 32 elements, or super-blocks of
// 256 with nsub = 8 activation blocks each) of bsize bytes for a kernel that
// takes the activation sums S, and returns the activation pointers; ok is
// false (out cleared) when there is nothing to compute. The kernels are
// called directly by their wrappers: a call through a function value would
// make the arguments escape.
func sArgs(w []byte, rows int, a *Act, nb, nsub, bsize int, out []float32) (qs *int8, d, s *float32, ok bool) {
	if nb == 0 || rows == 0 {
		clear(out[:rows])
		return nil, nil, nil, false
	}
	_ = w[rows*nb*bsize-1]
	_ = out[rows-1]
	qs, d = qargs(a, nb*nsub)
	_ = a.S[nb*nsub-1]
	return qs, d, &a.S[0], true
}

func dotRowsQ4_0SIMD(w []byte, rows int, a *Act, n int, out []float32) {
	nb := n / 32
	if qs, d, s, ok := sArgs(w, rows, a, nb, 1, 18, out); ok {
		dotQ4_0AVX2(&w[0], qs, d, s, nb, &f16Table[0], rows, &out[0])
	}
}

func dotRowsQ4_1SIMD(w []byte, rows int, a *Act, n int, out []float32) {
	nb := n / 32
	if qs, d, s, ok := sArgs(w, rows, a, nb, 1, 20, out); ok {
		dotQ4_1AVX2(&w[0], qs, d, s, nb, &f16Table[0], rows, &out[0])
	}
}

func dotRowsQ5_0SIMD(w []byte, rows int, a *Act, n int, out []float32) {
	nb := n / 32
	if qs, d, s, ok := sArgs(w, rows, a, nb, 1, 22, out); ok {
		dotQ5_0AVX2(&w[0], qs, d, s, nb, &f16Table[0], rows, &out[0])
	}
}

func dotRowsQ5_1SIMD(w []byte, rows int, a *Act, n int, out []float32) {
	nb := n / 32
	if qs, d, s, ok := sArgs(w, rows, a, nb, 1, 24, out); ok {
		dotQ5_1AVX2(&w[0], qs, d, s, nb, &f16Table[0], rows, &out[0])
	}
}

//go:noescape
func dot4Q4_1AVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q5_0AVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q5_1AVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

// s4Args checks a four-input call over rows rows of nb blocks of bsize
// bytes for a kernel that takes the activation sums S, and returns the
// activation pointers; ok is false (out cleared) when there is nothing to
// compute.
func s4Args(w []byte, rows int, a *[4]*Act, nb, bsize int, out []float32, stride int) (qs [4]*int8, d, s [4]*float32, ok bool) {
	if rows == 0 {
		return qs, d, s, false
	}
	checkRows4(rows, out, stride)
	if nb == 0 {
		clearRows4(rows, out, stride)
		return qs, d, s, false
	}
	_ = w[rows*nb*bsize-1]
	qs, d = q4args(a, nb)
	for k := range a {
		_ = a[k].S[nb-1]
		s[k] = &a[k].S[0]
	}
	return qs, d, s, true
}

func dot4RowsQ4_1SIMD(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int) {
	if qs, d, s, ok := s4Args(w, rows, a, n/32, 20, out, stride); ok {
		dot4Q4_1AVX2(&w[0], &qs, &d, &s, n/32, &f16Table[0], rows, &out[0], stride)
	}
}

func dot4RowsQ5_0SIMD(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int) {
	if qs, d, s, ok := s4Args(w, rows, a, n/32, 22, out, stride); ok {
		dot4Q5_0AVX2(&w[0], &qs, &d, &s, n/32, &f16Table[0], rows, &out[0], stride)
	}
}

func dot4RowsQ5_1SIMD(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int) {
	if qs, d, s, ok := s4Args(w, rows, a, n/32, 24, out, stride); ok {
		dot4Q5_1AVX2(&w[0], &qs, &d, &s, n/32, &f16Table[0], rows, &out[0], stride)
	}
}

func dot4Q4_1SIMD(w []byte, a *[4]*Act, n int, out *[4]float32) {
	dot4RowsQ4_1SIMD(w, 1, a, n, out[:], 1)
}

func dot4Q5_0SIMD(w []byte, a *[4]*Act, n int, out *[4]float32) {
	dot4RowsQ5_0SIMD(w, 1, a, n, out[:], 1)
}

func dot4Q5_1SIMD(w []byte, a *[4]*Act, n int, out *[4]float32) {
	dot4RowsQ5_1SIMD(w, 1, a, n, out[:], 1)
}

// The dot kernels are their dotRows on one row.

func dotQ4_1SIMD(w []byte, a *Act, n int) float32 {
	var o [1]float32
	dotRowsQ4_1SIMD(w, 1, a, n, o[:])
	return o[0]
}

func dotQ5_0SIMD(w []byte, a *Act, n int) float32 {
	var o [1]float32
	dotRowsQ5_0SIMD(w, 1, a, n, o[:])
	return o[0]
}

func dotQ5_1SIMD(w []byte, a *Act, n int) float32 {
	var o [1]float32
	dotRowsQ5_1SIMD(w, 1, a, n, o[:])
	return o[0]
}

// K-quants take nsb super-blocks of 256.

//go:noescape
func dotQ4_KAVX2(w *byte, qs *int8, d, s *float32, nsb int, tab *float32, rows int, out *float32)

func dotQ4_KSIMD(w []byte, a *Act, n int) float32 {
	var o [1]float32
	dotRowsQ4_KSIMD(w, 1, a, n, o[:])
	return o[0]
}

func dotRowsQ4_KSIMD(w []byte, rows int, a *Act, n int, out []float32) {
	nsb := n / 256
	if qs, d, s, ok := sArgs(w, rows, a, nsb, 8, 144, out); ok {
		dotQ4_KAVX2(&w[0], qs, d, s, nsb, &f16Table[0], rows, &out[0])
	}
}

//go:noescape
func dot4Q4_KAVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)

func dot4Q4_KSIMD(w []byte, a *[4]*Act, n int, out *[4]float32) {
	dot4RowsQ4_KSIMD(w, 1, a, n, out[:], 1)
}

func dot4RowsQ4_KSIMD(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int) {
	if rows == 0 {
		return
	}
	checkRows4(rows, out, stride)
	nsb := n / 256
	if nsb == 0 {
		clearRows4(rows, out, stride)
		return
	}
	_ = w[rows*nsb*144-1]
	qs, d := q4args(a, nsb*8)
	var s [4]*float32
	for k := range a {
		_ = a[k].S[nsb*8-1]
		s[k] = &a[k].S[0]
	}
	dot4Q4_KAVX2(&w[0], &qs, &d, &s, nsb, &f16Table[0], rows, &out[0], stride)
}

//go:noescape
func dotQ6_KAVX2(w *byte, qs *int8, d *float32, b *int16, nsb int, tab *float32, rows int, out *float32)

// sums16Of returns the activations' sums of 16 quants over nsb Q6_K
// super-blocks: a.B as MatMul fills it, else computed into buf (or a new
// slice when longer).
func sums16Of(a *Act, nsb int, buf *[1024]int16) []int16 {
	if len(a.B) >= nsb*16 {
		return a.B
	}
	c := Act{Qs: a.Qs[:nsb*256], B: buf[:0]}
	actSums16(&c)
	return c.B
}

func dotQ6_KSIMD(w []byte, a *Act, n int) float32 {
	var o [1]float32
	dotRowsQ6_KSIMD(w, 1, a, n, o[:])
	return o[0]
}

func dotRowsQ6_KSIMD(w []byte, rows int, a *Act, n int, out []float32) {
	nsb := n / 256
	if nsb == 0 || rows == 0 {
		clear(out[:rows])
		return
	}
	_ = w[rows*nsb*210-1]
	_ = out[rows-1]
	qs, d := qargs(a, nsb*8)
	var buf [1024]int16
	b := sums16Of(a, nsb, &buf)
	_ = b[nsb*16-1]
	dotQ6_KAVX2(&w[0], qs, d, &b[0], nsb, &f16Table[0], rows, &out[0])
}

//go:noescape
func dot4Q5_KAVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)

func dot4Q5_KSIMD(w []byte, a *[4]*Act, n int, out *[4]float32) {
	dot4RowsQ5_KSIMD(w, 1, a, n, out[:], 1)
}

func dot4RowsQ5_KSIMD(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int) {
	if rows == 0 {
		return
	}
	checkRows4(rows, out, stride)
	nsb := n / 256
	if nsb == 0 {
		clearRows4(rows, out, stride)
		return
	}
	_ = w[rows*nsb*176-1]
	qs, d := q4args(a, nsb*8)
	var s [4]*float32
	for k := range a {
		_ = a[k].S[nsb*8-1]
		s[k] = &a[k].S[0]
	}
	dot4Q5_KAVX2(&w[0], &qs, &d, &s, nsb, &f16Table[0], rows, &out[0], stride)
}

//go:noescape
func dotQ5_KAVX2(w *byte, qs *int8, d, s *float32, nsb int, tab *float32, rows int, out *float32)

func dotQ5_KSIMD(w []byte, a *Act, n int) float32 {
	var o [1]float32
	dotRowsQ5_KSIMD(w, 1, a, n, o[:])
	return o[0]
}

func dotRowsQ5_KSIMD(w []byte, rows int, a *Act, n int, out []float32) {
	nsb := n / 256
	if qs, d, s, ok := sArgs(w, rows, a, nsb, 8, 176, out); ok {
		dotQ5_KAVX2(&w[0], qs, d, s, nsb, &f16Table[0], rows, &out[0])
	}
}

//go:noescape
func quantizeActAVX2(x *float32, qs *int8, d, s *float32, nb int)

//go:noescape
func quantizeAct8AVX2(x *float32, qs *int8, d, s *float32, ng int)

// quantizeActSIMD is quantizeAct in assembly.
func quantizeActSIMD(x []float32, a *Act) {
	n := len(x)
	nb := n / 32
	a.Qs = growInt8(a.Qs, n)
	a.D = growF32(a.D, nb)
	a.S = growF32(a.S, nb)
	if nb == 0 {
		return
	}
	_ = x[nb*32-1]
	_ = a.Qs[nb*32-1]
	_ = a.D[nb-1]
	_ = a.S[nb-1]
	b := nb &^ 7
	if b > 0 {
		quantizeAct8AVX2(&x[0], &a.Qs[0], &a.D[0], &a.S[0], b/8)
	}
	if b < nb {
		quantizeActAVX2(&x[b*32], &a.Qs[b*32], &a.D[b], &a.S[b], nb-b)
	}
}

//go:noescape
func dot4Q6_KAVX2(w *byte, qs *[4]*int8, d *[4]*float32, b *[4]*int16, nsb int, tab *float32, rows int, out *float32, stride int)

func dot4Q6_KSIMD(w []byte, a *[4]*Act, n int, out *[4]float32) {
	dot4RowsQ6_KSIMD(w, 1, a, n, out[:], 1)
}

// dot4RowsQ6_KSIMD takes the activations' sums of 16 quants (Act.B) from
// MatMul; without them it runs the one-input kernel per activation row (the
// same results), which computes them.
func dot4RowsQ6_KSIMD(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int) {
	if rows == 0 {
		return
	}
	checkRows4(rows, out, stride)
	nsb := n / 256
	if nsb == 0 {
		clearRows4(rows, out, stride)
		return
	}
	_ = w[rows*nsb*210-1]
	qs, d := q4args(a, nsb*8)
	var b [4]*int16
	for k := range a {
		if len(a[k].B) < nsb*16 {
			for k := range a {
				dotRowsQ6_KSIMD(w, rows, a[k], n, out[k*stride:k*stride+rows])
			}
			return
		}
		b[k] = &a[k].B[0]
	}
	dot4Q6_KAVX2(&w[0], &qs, &d, &b, nsb, &f16Table[0], rows, &out[0], stride)
}

//go:noescape
func dotVecAVX2(a, b *float32, n int) float32

//go:noescape
func axpyAVX2(alpha float32, x, y *float32, n int)

// DotF32 returns Σ a[i]*b[i] over len(a); b must be at least as long.
func DotF32(a, b []float32) float32 {
	n := len(a)
	if !simdVec || n < 8 {
		return dotF32Go(a, b)
	}
	b = b[:n]
	m := n &^ 7
	s := dotVecAVX2(&a[0], &b[0], m)
	for i := m; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

// Axpy sets y[i] += alpha*x[i] over len(y); x must be at least as long.
func Axpy(alpha float32, x, y []float32) {
	n := len(y)
	if !simdVec || n < 8 {
		axpyGo(alpha, x, y)
		return
	}
	x = x[:n]
	m := n &^ 7
	axpyAVX2(alpha, &x[0], &y[0], m)
	for i := m; i < n; i++ {
		y[i] += alpha * x[i]
	}
}
