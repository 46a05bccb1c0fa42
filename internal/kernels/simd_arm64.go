//go:build arm64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// The arm64 assembly kernels (simd_neon_arm64.s) need Advanced SIMD only,
// which every ARMv8-A CPU has, so the neon path is always there. They
// replace the generic entries of dotTable when the neon path is picked (see
// cpu.go); the generic ones are kept so that setPath and SetSIMD can switch
// back (tests compare the two, MISTRALRS_CPU=generic turns the assembly off
// for a whole run). There are no packed kernels here: packTable stays nil.
//
// Only the dot kernels have NEON versions so far; activation quantization,
// DotF32, Axpy, the fp16 conversions and the element-wise kernels run the
// Go loops on every path.

type simdPair struct {
	generic, simd typeKernels
}

// quantizeActAsm stays nil: quantizeAct runs in Go here (MatMul calls it).
var quantizeActAsm func(x []float32, a *Act)

var (
	simdMu      sync.Mutex
	simdKernels = map[Type]*simdPair{}
	simdOn      bool
	pathNow     string // the path installed in dotTable
)

func init() {
	for t, k := range neonKernels() {
		e := dotTable[t]
		if e == nil {
			e = &typeKernels{}
			dotTable[t] = e
		}
		simdKernels[t] = &simdPair{generic: *e, simd: k}
	}
	if _, err := setPath(bestPath()); err != nil {
		panic(err)
	}
}

// pathMissing returns why path name cannot run here, "" when it can.
func pathMissing(name string) string {
	switch name {
	case "generic", "neon":
		return "" // Advanced SIMD is part of ARMv8-A
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

// Path names the instruction-set path in use: "neon" or "generic".
func Path() string {
	simdMu.Lock()
	defer simdMu.Unlock()
	return pathNow
}

// Backend names the kernels in use for reports (llama-bench's backends
// column): "CPU NEON" with the assembly kernels, "CPU Go" without.
func Backend() string {
	if Path() == "neon" {
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

// DotF32 returns Σ a[i]*b[i] over len(a); b must be at least as long.
func DotF32(a, b []float32) float32 { return dotF32Go(a, b) }

// Axpy sets y[i] += alpha*x[i] over len(y); x must be at least as long.
func Axpy(alpha float32, x, y []float32) { axpyGo(alpha, x, y) }

func f16ToF32sSIMD(dst []float32, src []uint16) int                     { return 0 }
func f16RowsSIMD(dst []float32, src []uint16, stride, w, rows int) bool { return false }
func f32ToF16sSIMD(dst []uint16, src []float32) int                     { return 0 }

// int8MulPeakNEON runs n rounds of 8 SMLAL + 8 SMLAL2 on 16-byte vectors
// (128 int8 multiply-adds); BenchmarkInt8MulCeiling uses it, nothing else
// does.
//
//go:noescape
func int8MulPeakNEON(n int)

// int8MulPeak runs n rounds of the ceiling loop of the path in use and
// returns the multiply-adds of a round, 0 when there is no loop.
func int8MulPeak(n int) int {
	if Path() == "neon" {
		int8MulPeakNEON(n)
		return 128
	}
	return 0
}

// tailF16 sums the products of the elements past the last multiple of 8
// (the F16 assembly takes multiples of 8; model rows rarely have a tail).
func tailF16(w []byte, x []float32) float32 {
	var s float32
	for i, v := range x {
		s += FP16ToFP32(binary.LittleEndian.Uint16(w[2*i:])) * v
	}
	return s
}
