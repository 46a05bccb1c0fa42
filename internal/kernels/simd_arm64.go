//go:build arm64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// The arm64 assembly kernels (simd_neon_arm64.s) need Advanced SIMD, which
// every ARMv8-A CPU has, so the neon path is always there; the dotprod
// path adds the kernels that form their integer sums with SDOT (ARMv8.2-A's
// dot product instructions, optional before ARMv8.4-A) and keeps the neon
// ones of the other types; the i8mm path (FEAT_I8MM's SMMLA, optional from
// ARMv8.2-A, mandatory from ARMv8.6-A: Neoverse V1/N2 and later, Apple M2
// and later) replaces the dotprod four-input kernels of the types it has
// with ones that take the weight rows in pairs and keeps the rest of
// dotprod's. A path's kernels replace the generic entries of dotTable when
// it is picked (see cpu.go); the generic ones are kept so that setPath and
// SetSIMD can switch back (tests compare them, MISTRALRS_CPU=generic turns
// the assembly off for a whole run). There are no packed kernels here:
// packTable stays nil.
//
// The dot kernels, activation quantization, the fp16 conversions, DotF32,
// Axpy, flash attention's tile kernels (flash_arm64.go), FlashAccumKV
// (flash_accumkv_arm64.go) and Hadamard (elem_arm64.go) have assembly
// versions; the other element-wise and attention kernels (elem_noasm.go)
// run the Go loops on every path so far.

// simdQuantizeAct is the assembly quantizeAct (the tests' name for it).
var simdQuantizeAct = quantizeActNEONGo

//go:noescape
func quantizeActNEON(x *float32, qs *int8, d, s *float32, nb int)

// quantizeActNEONGo is quantizeAct in assembly.
func quantizeActNEONGo(x []float32, a *Act) {
	if nb := growAct(x, a); nb > 0 {
		quantizeActNEON(&x[0], &a.Qs[0], &a.D[0], &a.S[0], nb)
	}
}

// pathKernels holds by path the kernels that replace the generic ones.
var pathKernels = map[string]map[Type]typeKernels{}

func init() {
	pathKernels["neon"] = neonKernels()
	dp := neonKernels()
	for t, k := range dotprodKernels() {
		dp[t] = k
	}
	pathKernels["dotprod"] = dp
	mm := map[Type]typeKernels{}
	for t, k := range dp {
		mm[t] = k
	}
	for t, k := range i8mmKernels() {
		mm[t] = k
	}
	pathKernels["i8mm"] = mm
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
	case "i8mm":
		if why := pathMissing("dotprod"); why != "" {
			return why
		}
		if !cpu.ARM64.HasI8MM {
			return "the CPU lacks the Int8 matrix multiply instructions (SMMLA, i8mm)"
		}
		return ""
	}
	return "no path " + name
}

// installPath puts the kernels of path name in dotTable (setPath, with
// simdMu held).
func installPath(name string) {
	for t, p := range simdKernels {
		k := p.generic
		if pk, ok := pathKernels[name][t]; ok {
			k = pk
		}
		*dotTable[t] = k
	}
}

// backendNames are Backend's names of the paths.
var backendNames = map[string]string{
	"i8mm":    "CPU NEON-I8MM",
	"dotprod": "CPU NEON-DOTPROD",
	"neon":    "CPU NEON",
}

//go:noescape
func axpyNEON(alpha float32, x, y *float32, n int)

//go:noescape
func f16ToF32NEON(dst *float32, src *uint16, n int)

//go:noescape
func f32ToF16NEON(dst *uint16, src *float32, n int)

//go:noescape
func f16RowsToF32NEON(dst *float32, src *uint16, stride, w, rows int)

// f16ConvSIMD: FCVTL and FCVTN are part of Advanced SIMD.
const f16ConvSIMD = true

// The kernels of the vector helpers (simd_asm.go); the F32 dot kernel
// does DotF32's multiples of 8.

func dotVecAsm(a, b *float32, n int) float32 {
	var s float32
	dotF32NEON(a, b, n, 1, &s)
	return s
}

func axpyAsm(alpha float32, x, y *float32, n int)  { axpyNEON(alpha, x, y, n) }
func f16ToF32Asm(dst *float32, src *uint16, n int) { f16ToF32NEON(dst, src, n) }
func f32ToF16Asm(dst *uint16, src *float32, n int) { f32ToF16NEON(dst, src, n) }
func f16RowsToF32Asm(dst *float32, src *uint16, stride, w, rows int) {
	f16RowsToF32NEON(dst, src, stride, w, rows)
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

// int8MulPeakSMMLA runs n rounds of 16 SMMLA (512 int8 multiply-adds).
//
//go:noescape
func int8MulPeakSMMLA(n int)

// int8MulPeak runs n rounds of the ceiling loop of the path in use and
// returns the multiply-adds of a round, 0 when there is no loop: SMLAL and
// SMLAL2 (128), on the dotprod path SDOT (256), on the i8mm path SMMLA
// (512).
func int8MulPeak(n int) int {
	switch Path() {
	case "i8mm":
		int8MulPeakSMMLA(n)
		return 512
	case "dotprod":
		int8MulPeakSDOT(n)
		return 256
	case "neon":
		int8MulPeakNEON(n)
		return 128
	}
	return 0
}
