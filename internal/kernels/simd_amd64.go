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
	case "avx512bw":
		if why := pathMissing("avx2"); why != "" {
			return why
		}
		if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BW || !cpu.X86.HasAVX512VL || !cpu.X86.HasF16C {
			return "the CPU (or its OS) lacks AVX-512 F/BW/VL"
		}
		return ""
	case "avx512":
		if why := pathMissing("avx512bw"); why != "" {
			return why
		}
		if !cpu.X86.HasAVX512VNNI {
			return "the CPU lacks AVX512-VNNI"
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
	packTable = map[string]map[Type]*packKernels{"avx512": vnniPackKernels, "avx512bw": bwPackKernels}[name]
	attn512 = packTable != nil
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

// Path names the instruction-set path in use: "avx512", "avx512bw", "avx2"
// or "generic".
func Path() string {
	simdMu.Lock()
	defer simdMu.Unlock()
	return pathNow
}

// Backend names the kernels in use for reports (llama-bench's backends
// column): "CPU AVX512-VNNI", "CPU AVX512", "CPU AVX2" with the assembly
// kernels, "CPU Go" without.
func Backend() string {
	switch Path() {
	case "avx512":
		return "CPU AVX512-VNNI"
	case "avx512bw":
		return "CPU AVX512"
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
