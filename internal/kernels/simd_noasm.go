//go:build !(amd64 || arm64) || purego

package kernels

import "fmt"

// Without assembly kernels (architectures other than amd64 and arm64, the
// purego tag) the generic kernels of dotTable are the only ones; SetSIMD
// and SIMD keep the API.

// pathMissing returns why path name cannot run here, "" when it can: only
// the generic path is built.
func pathMissing(name string) string {
	if name == "generic" {
		return ""
	}
	if pathIndex(name) >= 0 {
		return "built without assembly kernels (not amd64 or arm64, or the purego tag)"
	}
	return "no path " + name
}

// setPath accepts only the generic path here.
func setPath(name string) (prev string, err error) {
	if why := pathMissing(name); why != "" {
		return "", fmt.Errorf("kernels: path %s: %s", name, why)
	}
	return "generic", nil
}

// Path names the instruction-set path in use: always "generic" here.
func Path() string { return "generic" }

// SetSIMD would switch to assembly kernels; there are none here, so it
// reports false and changes nothing.
func SetSIMD(on bool) (was bool) { return false }

// SIMD reports whether assembly kernels are in use: never here.
func SIMD() bool { return false }

// quantizeActAsm is nil: no assembly activation quantizer here.
var quantizeActAsm func(x []float32, a *Act)

// DotF32 returns Σ a[i]*b[i] over len(a); b must be at least as long.
func DotF32(a, b []float32) float32 { return dotF32Go(a, b) }

// Axpy sets y[i] += alpha*x[i] over len(y); x must be at least as long.
func Axpy(alpha float32, x, y []float32) { axpyGo(alpha, x, y) }

// Backend names the kernels in use for reports: the pure-Go ones here.
func Backend() string { return "CPU Go" }

// int8MulPeak has no assembly loop to run here.
func int8MulPeak(n int) int { return 0 }

func f16ToF32sSIMD(dst []float32, src []uint16) int                     { return 0 }
func f16RowsSIMD(dst []float32, src []uint16, stride, w, rows int) bool { return false }
func f32ToF16sSIMD(dst []uint16, src []float32) int                     { return 0 }

func hadamardSIMD(x []float32, n int, scale float32) bool { return false }
