//go:build amd64 && !purego

package kernels

import (
	"maps"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The packed kernels' tables and declarations (vnniPackKernels,
// bwPackKernels, avxvnniPackKernels) are generated into gen_pack_amd64.go
// from the table in internal/gen.

// The int8 multiply-add ceilings of the packed paths (BenchmarkInt8MulCeiling).

//go:noescape
func int8MulPeakVNNI(n int)

//go:noescape
func int8MulPeakBW(n int)

//go:noescape
func int8MulPeakAVXVNNI(n int)

//go:noescape
func actSumsAVX2(qs *int8, out *int32, n, per, mul int)

//go:noescape
func gemm4BF16DP(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1BF16DP(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func f32ToBF16AVX512(dst *uint16, src *float32, n int)

// bf16DPKernels replace vnniPackKernels[BF16] on the avx512 path where the
// CPU has AVX512-BF16 (VDPBF16PS; the activations rounded to bfloat16).
var bf16DPKernels = &packKernels{gemm4: gemm4BF16DP, gemm1: gemm1BF16DP, bf16: true}

// avx512Pack returns the avx512 path's packed kernels on this CPU.
func avx512Pack() map[Type]*packKernels {
	if !cpu.X86.HasAVX512BF16 {
		return vnniPackKernels
	}
	t := maps.Clone(vnniPackKernels)
	t[BF16] = bf16DPKernels
	return t
}

func init() {
	if !cpu.X86.HasAVX2 {
		return
	}
	if cpu.X86.HasAVX512BF16 {
		toBF16Asm = f32ToBF16AVX512
	}
	actSumsAsm = func(a *Act, per int, mul int32) {
		if len(a.I) == 0 {
			return
		}
		_ = a.Qs[len(a.I)*per-1]
		actSumsAVX2(&a.Qs[0], &a.I[0], len(a.I), per, int(mul))
	}
}
