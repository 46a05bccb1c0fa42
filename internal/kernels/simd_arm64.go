//go:build arm64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"golang.org/x/sys/cpu"
)

// The arm64 assembly kernels (simd_neon_arm64.s) need Advanced SIMD, which
// every ARMv8-A CPU has, so the neon path is always there; the dotprod
// path adds the kernels that form their integer sums with SDOT (ARMv8.2-A's
// dot product instructions, optional before ARMv8.4-A) and keeps the neon
// ones of the other types. A path's kernels replace the generic entries of
// dotTable when it is picked (see cpu.go); the generic ones are kept so
// that setPath and SetSIMD can switch back (tests compare them,
// MISTRALRS_CPU=generic turns the assembly off for a whole run). There are
// no packed kernels here: packTable stays nil.
//
// The dot kernels, activation quantization, the fp16 conversions, DotF32
// and Axpy have assembly versions; the element-wise and attention kernels
// (elem_noasm.go) run the Go loops on every path so far.

// simdPair holds a type's generic kernels and those of the highest path
// the dispatch allowed at start (what the tests call the assembly ones).
type simdPair struct {
	generic, simd typeKernels
}

// quantizeActAsm is the assembly quantizeAct (bit-identical results) while
// the assembly kernels are on, else nil; MatMul calls it when set.
var quantizeActAsm func(x []float32, a *Act)

// simdQuantizeAct is the assembly quantizeAct (the tests' name for it).
var simdQuantizeAct = quantizeActNEONGo

//go:noescape
func quantizeActNEON(x *float32, qs *int8, d, s *float32, nb int)

// quantizeActNEONGo is quantizeAct in assembly.
func quantizeActNEONGo(x []float32, a *Act) {
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
	quantizeActNEON(&x[0], &a.Qs[0], &a.D[0], &a.S[0], nb)
}

var (
	simdMu      sync.Mutex
	simdKernels = map[Type]*simdPair{}
	pathKernels = map[string]map[Type]typeKernels{} // by path: the kernels that replace the generic ones
	simdOn      bool
	simdVec     bool   // DotF32, Axpy and the fp16 conversions use assembly (read without the lock, as the kernels read dotTable)
	pathNow     string // the path installed in dotTable
)

func init() {
	pathKernels["neon"] = neonKernels()
	dp := neonKernels()
	for t, k := range dotprodKernels() {
		dp[t] = k
	}
	pathKernels["dotprod"] = dp
	best := bestPath()
	for t := range dp {
		e := dotTable[t]
		if e == nil {
			e = &typeKernels{}
			dotTable[t] = e
		}
		p := &simdPair{generic: *e, simd: *e}
		if k, ok := pathKernels[best][t]; ok {
			p.simd = k
		}
		simdKernels[t] = p
	}
	if best == "generic" { // MISTRALRS_CPU=generic: the tests compare the neon kernels
		for t, k := range pathKernels["neon"] {
			simdKernels[t].simd = k
		}
	}
	if _, err := setPath(best); err != nil {
		panic(err)
	}
}

// pathMissing returns why path name cannot run here, "" when it can.
func pathMissing(name string) string {
	switch name {
	case "generic", "neon":
		return "" // Advanced SIMD is part of ARMv8-A
	case "dotprod":
		if !cpu.ARM64.HasASIMDDP {
			return "the CPU lacks the dot product instructions (SDOT, asimddp)"
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
	simdVec = simdOn
	quantizeActAsm = nil
	if simdOn {
		quantizeActAsm = simdQuantizeAct
	}
	for t, p := range simdKernels {
		k := p.generic
		if pk, ok := pathKernels[name][t]; ok {
			k = pk
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

// Path names the instruction-set path in use: "dotprod", "neon" or
// "generic".
func Path() string {
	simdMu.Lock()
	defer simdMu.Unlock()
	return pathNow
}

// Backend names the kernels in use for reports (llama-bench's backends
// column): "CPU NEON-DOTPROD", "CPU NEON" with the assembly kernels, "CPU
// Go" without.
func Backend() string {
	switch Path() {
	case "dotprod":
		return "CPU NEON-DOTPROD"
	case "neon":
		return "CPU NEON"
	}
	return "CPU Go"
}

// SIMD reports whether the assembly kernels are in use.
func SIMD() bool {
	simdMu.Lock()
	defer simdMu.Unlock()
	return simdOn
}

//go:noescape
func axpyNEON(alpha float32, x, y *float32, n int)

// DotF32 returns Σ a[i]*b[i] over len(a); b must be at least as long. The
// F32 dot kernel does the multiples of 8.
func DotF32(a, b []float32) float32 {
	n := len(a)
	if !simdVec || n < 8 {
		return dotF32Go(a, b)
	}
	b = b[:n]
	m := n &^ 7
	var s float32
	dotF32NEON(&a[0], &b[0], m, 1, &s)
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
	axpyNEON(alpha, &x[0], &y[0], m)
	for i := m; i < n; i++ {
		y[i] += alpha * x[i]
	}
}

//go:noescape
func f16ToF32NEON(dst *float32, src *uint16, n int)

//go:noescape
func f32ToF16NEON(dst *uint16, src *float32, n int)

//go:noescape
func f16RowsToF32NEON(dst *float32, src *uint16, stride, w, rows int)

// f16RowsSIMD converts rows of a multiple of 8 halves; false otherwise.
func f16RowsSIMD(dst []float32, src []uint16, stride, w, rows int) bool {
	if !simdVec || w%8 != 0 || w == 0 || rows == 0 {
		return false
	}
	f16RowsToF32NEON(&dst[0], &src[0], stride, w, rows)
	return true
}

// f16ToF32sSIMD and f32ToF16sSIMD convert the first multiple of 8 values
// and return how many they did.
func f16ToF32sSIMD(dst []float32, src []uint16) int {
	n := len(src) &^ 7
	if !simdVec || n == 0 {
		return 0
	}
	f16ToF32NEON(&dst[0], &src[0], n)
	return n
}

func f32ToF16sSIMD(dst []uint16, src []float32) int {
	n := len(src) &^ 7
	if !simdVec || n == 0 {
		return 0
	}
	f32ToF16NEON(&dst[0], &src[0], n)
	return n
}

// int8MulPeakNEON runs n rounds of 8 SMLAL + 8 SMLAL2 on 16-byte vectors
// (128 int8 multiply-adds); BenchmarkInt8MulCeiling uses it, nothing else
// does.
//
//go:noescape
func int8MulPeakNEON(n int)

// int8MulPeakSDOT runs n rounds of 16 SDOT (256 int8 multiply-adds).
//
//go:noescape
func int8MulPeakSDOT(n int)

// int8MulPeak runs n rounds of the ceiling loop of the path in use and
// returns the multiply-adds of a round, 0 when there is no loop: SMLAL and
// SMLAL2 (128), or on the dotprod path SDOT (256).
func int8MulPeak(n int) int {
	switch Path() {
	case "dotprod":
		int8MulPeakSDOT(n)
		return 256
	case "neon":
		int8MulPeakNEON(n)
		return 128
	}
	return 0
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

func tailBF16(w []byte, x []float32) float32 {
	var s float32
	for i, v := range x {
		s += BF16ToFP32(binary.LittleEndian.Uint16(w[2*i:])) * v
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
