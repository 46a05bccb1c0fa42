//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"golang.org/x/sys/cpu"
)

// The assembly kernels need AVX2 and FMA (F16 also F16C). They replace the
// generic entries of dotTable when the avx2 path is picked (see cpu.go); the
// generic ones are kept so that setPath and SetSIMD can switch back (tests
// compare the two, MISTRALRS_CPU=generic turns the assembly off for a whole
// run).

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
	simdVec         bool   // DotF32 and Axpy use assembly (with simdOn)
	pathNow         string // the path installed in dotTable
)

func init() {
	if pathMissing("avx2") == "" {
		for t, k := range avx2Kernels() {
			e := dotTable[t]
			if e == nil {
				e = &typeKernels{}
				dotTable[t] = e
			}
			simdKernels[t] = &simdPair{generic: *e, simd: k}
		}
		if cpu.X86.HasF16C { // the block scales are rounded to fp16
			simdQuantizeAct = quantizeActSIMD
		}
	}
	if _, err := setPath(bestPath()); err != nil {
		panic(err)
	}
}

// pathMissing returns why path name cannot run here, "" when it can.
func pathMissing(name string) string {
	switch name {
	case "generic":
		return ""
	case "avx2":
		if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
			return "the CPU lacks AVX2/FMA"
		}
		return ""
	case "avx512":
		if why := pathMissing("avx2"); why != "" {
			return why
		}
		if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BW || !cpu.X86.HasAVX512VL || !cpu.X86.HasAVX512VNNI || !cpu.X86.HasF16C {
			return "the CPU (or its OS) lacks AVX-512 F/BW/VL with VNNI"
		}
		return ""
	}
	return "no path " + name
}

// setPath installs the kernels of path name (one of cpuPaths the CPU has;
// MISTRALRS_CPU is not consulted) and returns the path installed before. It
// must not run while kernels are running.
func setPath(name string) (prev string, err error) {
	if why := pathMissing(name); why != "" {
		return "", fmt.Errorf("kernels: path %s: %s", name, why)
	}
	simdMu.Lock()
	defer simdMu.Unlock()
	prev = pathNow
	pathNow = name
	simdOn = name != "generic"
	packTable = nil
	if name == "avx512" {
		packTable = vnniPackKernels
	}
	attn512 = name == "avx512"
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
		*dotTable[t] = k
	}
	return prev, nil
}

// SetSIMD switches the dot kernels between the assembly versions (on: the
// highest path the CPU has within MISTRALRS_CPU) and the pure-Go ones, and
// reports whether assembly was in use before. It must not run while
// kernels are running.
func SetSIMD(on bool) (was bool) {
	name := "generic"
	if on {
		name = bestPath()
	}
	prev, err := setPath(name)
	if err != nil {
		panic(err) // bestPath picks only paths the CPU has
	}
	return prev != "generic"
}

// Path names the instruction-set path in use: "avx512", "avx2" or "generic".
func Path() string {
	simdMu.Lock()
	defer simdMu.Unlock()
	return pathNow
}

// Backend names the kernels in use for reports (llama-bench's backends
// column): "CPU AVX512-VNNI", "CPU AVX2" with the assembly kernels, "CPU
// Go" without.
func Backend() string {
	switch Path() {
	case "avx512":
		return "CPU AVX512-VNNI"
	case "avx2":
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

func tailBF16(w []byte, x []float32) float32 {
	var s float32
	for i, v := range x {
		s += BF16ToFP32(binary.LittleEndian.Uint16(w[2*i:])) * v
	}
	return s
}

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

// int8MulPeak runs n rounds of the ceiling loop of the path in use and
// returns the multiply-adds of a round, 0 when there is no loop: AVX2
// VPMADDUBSW/VPMADDWD pairs (128), the same on 512-bit registers on the
// avx512bw path (512), or on the avx512 path VPDPBUSD (512).
func int8MulPeak(n int) int {
	switch Path() {
	case "avx512":
		int8MulPeakVNNI(n)
		return 512
	case "avx512bw":
		int8MulPeakBW(n)
		return 512
	case "avx2":
		int8MulPeakAVX2(n)
		return 128
	}
	return 0
}

// checkRows4 checks the output of a dot4Rows call: four rows of at least
// rows values, stride apart.
func checkRows4(rows int, out []float32, stride int) {
	if stride < rows {
		panic("kernels: dot4Rows output stride shorter than its rows")
	}
	_ = out[3*stride+rows-1]
}

// fArgs4 checks four float activation rows of n elements (n > 0) and
// returns their pointers.
func fArgs4(a *[4]*Act, n int) (x [4]*float32) {
	for k := range a {
		_ = a[k].F[n-1]
		x[k] = &a[k].F[0]
	}
	return x
}

// The wrappers of the quantized kernels (gen_*.go) check their arguments
// with the functions below, so that the assembly stays inside the slices,
// and call the kernels directly: a call through a function value would make
// the arguments escape. The kernels take nb blocks of 32 elements, or
// super-blocks of 256 (nsub = 8 activation blocks each), of bsize bytes;
// tab is f16Table (they read the weight scales, halves, through it).

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

// dArgs checks rows rows of nb blocks against one activation row and
// returns the activation pointers; ok is false (out cleared) when there is
// nothing to compute.
func dArgs(w []byte, rows int, a *Act, nb, nsub, bsize int, out []float32) (qs *int8, d *float32, ok bool) {
	if nb == 0 || rows == 0 {
		clear(out[:rows])
		return nil, nil, false
	}
	_ = w[rows*nb*bsize-1]
	_ = out[rows-1]
	qs, d = qargs(a, nb*nsub)
	return qs, d, true
}

// sArgs is dArgs for kernels that also take the activation sums S.
func sArgs(w []byte, rows int, a *Act, nb, nsub, bsize int, out []float32) (qs *int8, d, s *float32, ok bool) {
	if qs, d, ok = dArgs(w, rows, a, nb, nsub, bsize, out); !ok {
		return nil, nil, nil, false
	}
	_ = a.S[nb*nsub-1]
	return qs, d, &a.S[0], true
}

// d4Args is dArgs for four activation rows, whose results go to out
// stride apart.
func d4Args(w []byte, rows int, a *[4]*Act, nb, nsub, bsize int, out []float32, stride int) (qs [4]*int8, d [4]*float32, ok bool) {
	if rows == 0 {
		return qs, d, false
	}
	checkRows4(rows, out, stride)
	if nb == 0 {
		clearRows4(rows, out, stride)
		return qs, d, false
	}
	_ = w[rows*nb*bsize-1]
	qs, d = q4args(a, nb*nsub)
	return qs, d, true
}

// s4Args is d4Args for kernels that also take the activation sums S.
func s4Args(w []byte, rows int, a *[4]*Act, nb, nsub, bsize int, out []float32, stride int) (qs [4]*int8, d, s [4]*float32, ok bool) {
	if qs, d, ok = d4Args(w, rows, a, nb, nsub, bsize, out, stride); !ok {
		return qs, d, s, false
	}
	for k := range a {
		_ = a[k].S[nb*nsub-1]
		s[k] = &a[k].S[0]
	}
	return qs, d, s, true
}

// b4Args returns the four activation rows' sums of 16 quants (Act.B) over
// nsb super-blocks of 256; ok is false when a row has none.
func b4Args(a *[4]*Act, nsb int) (b [4]*int16, ok bool) {
	for k := range a {
		if len(a[k].B) < nsb*16 {
			return b, false
		}
		b[k] = &a[k].B[0]
	}
	return b, true
}

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
