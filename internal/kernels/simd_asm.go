//go:build (amd64 || arm64) && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// What the architectures with assembly kernels share: the path switching
// and the Go side of the vector helpers. Each one's simd_<arch>.go says
// which of its paths the CPU can run (pathMissing), fills simdKernels at
// start, sets simdQuantizeAct, puts a path's kernels in place
// (installPath) and names its vector kernels (dotVecAsm, axpyAsm, the
// fp16 conversions).

// simdPair holds a type's generic kernels and those of the highest path
// the dispatch allowed at start (what the tests call the assembly ones).
type simdPair struct {
	generic, simd typeKernels
}

// quantizeActAsm is the assembly quantizeAct (bit-identical results) while
// the assembly kernels are on, else nil; MatMul calls it when set.
var quantizeActAsm func(x []float32, a *Act)

var (
	simdMu      sync.Mutex
	simdKernels = map[Type]*simdPair{}
	simdOn      bool
	simdVec     bool   // the vector helpers (DotF32, Axpy, the fp16 conversions, amd64's element-wise kernels) use assembly; read without the lock, as the kernels read dotTable
	pathNow     string // the path installed in dotTable
)

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
	installPath(name)
	installFlash(name)
	installAccumKV(name)
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

// Path names the instruction-set path in use, one of cpuPaths: "avx512",
// "avx512bw", "avx2" or "generic" on amd64, "i8mm", "dotprod", "neon" or
// "generic" on arm64.
func Path() string {
	simdMu.Lock()
	defer simdMu.Unlock()
	return pathNow
}

// Backend names the kernels in use for reports (llama-bench's backends
// column): with the assembly kernels the path's name in backendNames
// ("CPU AVX512-VNNI", "CPU AVX512", "CPU AVX-VNNI", "CPU AVX2"; "CPU NEON-I8MM", "CPU
// NEON-DOTPROD", "CPU NEON"), "CPU Go" without.
func Backend() string {
	if b, ok := backendNames[Path()]; ok {
		return b
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

// The vector helpers: the architecture's kernels do the multiples of 8
// elements.

// DotF32 returns Σ a[i]*b[i] over len(a); b must be at least as long.
func DotF32(a, b []float32) float32 {
	n := len(a)
	if !simdVec || n < 8 {
		return dotF32Go(a, b)
	}
	b = b[:n]
	m := n &^ 7
	s := dotVecAsm(&a[0], &b[0], m)
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
	axpyAsm(alpha, &x[0], &y[0], m)
	for i := m; i < n; i++ {
		y[i] += alpha * x[i]
	}
}

// f16RowsSIMD converts rows of a multiple of 8 halves; false otherwise.
func f16RowsSIMD(dst []float32, src []uint16, stride, w, rows int) bool {
	if !simdVec || !f16ConvSIMD || w%8 != 0 || w == 0 || rows == 0 {
		return false
	}
	f16RowsToF32Asm(&dst[0], &src[0], stride, w, rows)
	return true
}

// f16ToF32sSIMD and f32ToF16sSIMD convert the first multiple of 8 values
// and return how many they did.
func f16ToF32sSIMD(dst []float32, src []uint16) int {
	n := len(src) &^ 7
	if !simdVec || !f16ConvSIMD || n == 0 {
		return 0
	}
	f16ToF32Asm(&dst[0], &src[0], n)
	return n
}

func f32ToF16sSIMD(dst []uint16, src []float32) int {
	n := len(src) &^ 7
	if !simdVec || !f16ConvSIMD || n == 0 {
		return 0
	}
	f32ToF16Asm(&dst[0], &src[0], n)
	return n
}

// growAct sizes a for the nb = len(x)/32 blocks of x, checks the lengths
// the assembly quantizer reads and writes, and returns nb.
func growAct(x []float32, a *Act) (nb int) {
	n := len(x)
	nb = n / 32
	a.Qs = grow(a.Qs, n)
	a.D = grow(a.D, nb)
	a.S = grow(a.S, nb)
	if nb > 0 {
		_ = x[nb*32-1]
		_ = a.Qs[nb*32-1]
		_ = a.D[nb-1]
		_ = a.S[nb-1]
	}
	return nb
}

// hadamardSIMD is Hadamard in the architecture's assembly (hadamardAsm) for
// orders of at least 64, the rotation's: the kernels hold a block of 64
// in registers.
func hadamardSIMD(x []float32, n int, scale float32) bool {
	if !simdVec || n < 64 {
		return false
	}
	if runs := len(x) / n; runs > 0 {
		hadamardAsm(&x[0], runs, n, scale)
	}
	return true
}
