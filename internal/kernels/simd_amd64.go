//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// The assembly kernels need AVX2 and FMA (F16 also F16C). They replace the
// generic entries of dotTable when the avx2 path is picked (see cpu.go); the
// generic ones are kept so that setPath and SetSIMD can switch back (tests
// compare the two, MISTRALRS_CPU=generic turns the assembly off for a whole
// run).

// simdQuantizeAct is the assembly quantizeAct (about 18 times faster than
// the Go loop on Zen 1) where the CPU has F16C, else nil.
var simdQuantizeAct func(x []float32, a *Act)

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
	case "avxvnni":
		if why := pathMissing("avx2"); why != "" {
			return why
		}
		if !cpu.X86.HasAVXVNNI || !cpu.X86.HasF16C {
			return "the CPU lacks AVX-VNNI"
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

// installPath puts the kernels of path name in dotTable and packTable
// (setPath, with simdMu held).
func installPath(name string) {
	packTable = map[string]map[Type]*packKernels{"avx512": avx512Pack(), "avx512bw": bwPackKernels, "avxvnni": avxvnniPackKernels, "avx2": avx2Pack()}[name]
	attn512 = name == "avx512" || name == "avx512bw"
	for t, p := range simdKernels {
		k := p.generic
		if simdOn {
			k = p.simd
		}
		*dotTable[t] = k
	}
}

// backendNames are Backend's names of the paths.
var backendNames = map[string]string{
	"avx512":   "CPU AVX512-VNNI",
	"avx512bw": "CPU AVX512",
	"avxvnni":  "CPU AVX-VNNI",
	"avx2":     "CPU AVX2",
}

// int8MulPeakAVX2 runs n rounds of 8 VPMADDUBSW + 8 VPMADDWD (128 int8
// multiply-adds); BenchmarkInt8MulCeiling uses it, nothing else does.
func int8MulPeakAVX2(n int)

// int8MulPeak runs n rounds of the ceiling loop of the path in use and
// returns the multiply-adds of a round, 0 when there is no loop: AVX2
// VPMADDUBSW/VPMADDWD pairs (128), the same on 512-bit registers on the
// avx512bw path (512), or VPDPBUSD on the avx512 path (512) and on
// 256-bit registers on the avxvnni path (256).
func int8MulPeak(n int) int {
	switch Path() {
	case "avxvnni":
		int8MulPeakAVXVNNI(n)
		return 256
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
	nb := growAct(x, a)
	b := nb &^ 7
	if b > 0 {
		quantizeAct8AVX2(&x[0], &a.Qs[0], &a.D[0], &a.S[0], b/8)
	}
	if b < nb {
		quantizeActAVX2(&x[b*32], &a.Qs[b*32], &a.D[b], &a.S[b], nb-b)
	}
}

//go:noescape
func f16ToF32AVX2(dst *float32, src *uint16, n int)

//go:noescape
func f32ToF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func f16RowsToF32AVX2(dst *float32, src *uint16, stride, w, rows int)

// f16ConvSIMD is set when the CPU has F16C (the fp16 conversions).
var f16ConvSIMD = cpu.X86.HasF16C && cpu.X86.HasAVX2

//go:noescape
func dotVecAVX2(a, b *float32, n int) float32

//go:noescape
func axpyAVX2(alpha float32, x, y *float32, n int)

// The kernels of the vector helpers (simd_asm.go).

func dotVecAsm(a, b *float32, n int) float32       { return dotVecAVX2(a, b, n) }
func axpyAsm(alpha float32, x, y *float32, n int)  { axpyAVX2(alpha, x, y, n) }
func f16ToF32Asm(dst *float32, src *uint16, n int) { f16ToF32AVX2(dst, src, n) }
func f32ToF16Asm(dst *uint16, src *float32, n int) { f32ToF16AVX2(dst, src, n) }
func f16RowsToF32Asm(dst *float32, src *uint16, stride, w, rows int) {
	f16RowsToF32AVX2(dst, src, stride, w, rows)
}
