//go:build amd64 && !purego

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func gemm4Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q4_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q4_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func int8MulPeakVNNI(n int)

// vnniPackKernels are the avx512 path's kernels over packed weights.
var vnniPackKernels = map[Type]*packKernels{
	Q8_0: {gemm4: gemm4Q8_0VNNI, gemm1: gemm1Q8_0VNNI, gemm42: gemm42Q8_0VNNI, sumsPer: 32, sumsMul: 128},
	Q4_0: {gemm4: gemm4Q4_0VNNI, gemm1: gemm1Q4_0VNNI, gemm42: gemm42Q4_0VNNI},
	F16:  {gemm4: gemm4F16AVX512, gemm1: gemm1F16AVX512},
	BF16: {gemm4: gemm4BF16AVX512, gemm1: gemm1BF16AVX512},
	Q4_1: {gemm4: gemm4Q4_1VNNI, gemm1: gemm1Q4_1VNNI, gemm42: gemm42Q4_1VNNI},
	Q5_0: {gemm4: gemm4Q5_0VNNI, gemm1: gemm1Q5_0VNNI, gemm42: gemm42Q5_0VNNI},
	Q5_1: {gemm4: gemm4Q5_1VNNI, gemm1: gemm1Q5_1VNNI, gemm42: gemm42Q5_1VNNI},
	Q4_K: {gemm4: gemm4Q4_KVNNI, gemm1: gemm1Q4_KVNNI, gemm42: gemm42Q4_KVNNI},
	Q5_K: {gemm4: gemm4Q5_KVNNI, gemm1: gemm1Q5_KVNNI, gemm42: gemm42Q5_KVNNI},
	Q6_K: {gemm4: gemm4Q6_KVNNI, gemm1: gemm1Q6_KVNNI, sumsPer: 16, sumsMul: 32},
}

//go:noescape
func gemm4Q4_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q4_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q5_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q5_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q6_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q6_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q4_1VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q4_1VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q5_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q5_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q5_1VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q5_1VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4F16AVX512(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1F16AVX512(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4BF16AVX512(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1BF16AVX512(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q4_KBW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q4_KBW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q5_KBW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q5_KBW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q6_KBW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q6_KBW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q4_1BW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q4_1BW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q5_0BW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q5_0BW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q5_1BW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q5_1BW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q4_0BW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q4_0BW(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func int8MulPeakBW(n int)

// bwPackKernels are the avx512bw path's: the VNNI ones' layouts and
// results without VPDPBUSD, for every type but Q8_0 (whose w+128 would
// overflow VPMADDUBSW's int16 pairs: it keeps the AVX2 kernels there).
var bwPackKernels = map[Type]*packKernels{
	F16:  vnniPackKernels[F16],
	BF16: vnniPackKernels[BF16],
	Q4_0: {gemm4: gemm4Q4_0BW, gemm1: gemm1Q4_0BW},
	Q4_1: {gemm4: gemm4Q4_1BW, gemm1: gemm1Q4_1BW},
	Q5_0: {gemm4: gemm4Q5_0BW, gemm1: gemm1Q5_0BW},
	Q5_1: {gemm4: gemm4Q5_1BW, gemm1: gemm1Q5_1BW},
	Q4_K: {gemm4: gemm4Q4_KBW, gemm1: gemm1Q4_KBW},
	Q5_K: {gemm4: gemm4Q5_KBW, gemm1: gemm1Q5_KBW},
	Q6_K: {gemm4: gemm4Q6_KBW, gemm1: gemm1Q6_KBW, sumsPer: 16, sumsMul: 32},
}

//go:noescape
func actSumsAVX2(qs *int8, out *int32, n, per, mul int)

func init() {
	if !cpu.X86.HasAVX2 {
		return
	}
	actSumsAsm = func(a *Act, per int, mul int32) {
		if len(a.I) == 0 {
			return
		}
		_ = a.Qs[len(a.I)*per-1]
		actSumsAVX2(&a.Qs[0], &a.I[0], len(a.I), per, int(mul))
	}
}

// The avxvnni path's kernels (simd_packy_amd64.s): the avx512 path's
// layouts and bits in 256-bit registers with the VEX VPDPBUSD, for the
// quantized types but Q6_K. Q6_K, F16 and BF16 keep the AVX2 kernels there:
// the one-token Q6_K kernel over the packed layout (its 6-bit unpack for
// 8 rows per register, without AVX-512's VPTERNLOGD) decoded at 0.5-0.65x
// the AVX2 one (Zen 5, 134M Q6_K model; 0.75x with both halves of a chunk
// per step), where prefill gained 1.6-1.8x.
var avxvnniPackKernels = map[Type]*packKernels{
	Q8_0: {gemm4: gemm4Q8_0AVXVNNI, gemm1: gemm1Q8_0AVXVNNI, sumsPer: 32, sumsMul: 128},
	Q4_0: {gemm4: gemm4Q4_0AVXVNNI, gemm1: gemm1Q4_0AVXVNNI},
	Q4_1: {gemm4: gemm4Q4_1AVXVNNI, gemm1: gemm1Q4_1AVXVNNI},
	Q5_0: {gemm4: gemm4Q5_0AVXVNNI, gemm1: gemm1Q5_0AVXVNNI},
	Q5_1: {gemm4: gemm4Q5_1AVXVNNI, gemm1: gemm1Q5_1AVXVNNI},
	Q4_K: {gemm4: gemm4Q4_KAVXVNNI, gemm1: gemm1Q4_KAVXVNNI},
	Q5_K: {gemm4: gemm4Q5_KAVXVNNI, gemm1: gemm1Q5_KAVXVNNI},
}

//go:noescape
func gemm4Q8_0AVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q8_0AVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q4_0AVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q4_0AVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q4_1AVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q4_1AVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q5_0AVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q5_0AVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q5_1AVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q5_1AVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q4_KAVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q4_KAVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q5_KAVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q5_KAVXVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func int8MulPeakAVXVNNI(n int)

//go:noescape
func gemm42Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm42Q4_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm42Q4_1VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm42Q5_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm42Q5_1VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm42Q4_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm42Q5_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
