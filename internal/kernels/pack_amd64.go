//go:build amd64 && !purego

package kernels

import (
	"maps"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The packed kernels' tables and declarations (vnniPackKernels,
// bwPackKernels, avxvnniPackKernels, avx2PackKernels) are generated into gen_pack_amd64.go
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

// The small-batch Q8_0 kernels (simd_pack_amd64.s: gemmT<k>Q8_0VNNI, k
// tokens in one pass over the weights; the interleaved layout).

//go:noescape
func gemmT2Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemmT3Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemmT4Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemmT5Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemmT6Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemmT7Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemmT8Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

// q8SmallBatch are the avx512 path's Q8_0 kernels of 2-8 tokens.
var q8SmallBatch = [maxSmallBatch + 1]gemmFunc{2: gemmT2Q8_0VNNI, 3: gemmT3Q8_0VNNI, 4: gemmT4Q8_0VNNI,
	5: gemmT5Q8_0VNNI, 6: gemmT6Q8_0VNNI, 7: gemmT7Q8_0VNNI, 8: gemmT8Q8_0VNNI}

// The avx512 path's Q8_0, Q4_K and Q6_K kernels (simd_pack_amd64.s, and
// the gemmT ones above) read the interleaved layout (packed.inter), whose
// single stream per group a one-token product reads faster from memory
// (Zen 4, BenchmarkDecodeAB, 2 threads: Q8_0 +13 %, Q4_K and Q6_K with the
// new one-token kernels +10-25 %). Their gemm4 and gemm42 are the
// generated table's (which the avx512bw and avxvnni kernels mirror) with
// that addressing; Q4_K's and Q6_K's one-token kernels take fewer
// instructions per super-block. The same bits as the table's.

//go:noescape
func gemm1Q4_KInter(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q4_KInter(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm42Q4_KInter(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q6_KInter(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q6_KInter(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1Q8_0Inter(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm4Q8_0Inter(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm42Q8_0Inter(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

// avx2Pack returns the avx2 path's packed kernels on this CPU
// (avx2PackKernels: Q8_0's in simd_packa_amd64.s, the other quantized
// types' in simd_packya_amd64.s), where the vector units are 256 bits wide
// and the CPU converts halves (F16C); none elsewhere (the file layout's
// kernels). Q8_0 and Q6_K read the interleaved layout (Q6_K's one-token
// kernel read memory 10-15 % slower with its scales a second stream), the
// others the file order's groups.
func avx2Pack() map[Type]*packKernels {
	if split256 || !cpu.X86.HasF16C {
		return nil
	}
	return avx2PackKernels
}

// interKernels are the avx512 path's Q8_0, Q4_K and Q6_K kernels.
var interKernels = map[Type]*packKernels{
	Q8_0: {gemm4: gemm4Q8_0Inter, gemm1: gemm1Q8_0Inter, gemm42: gemm42Q8_0Inter, gemmT: q8SmallBatch, sumsPer: 32, sumsMul: 128, inter: true},
	Q4_K: {gemm4: gemm4Q4_KInter, gemm1: gemm1Q4_KInter, gemm42: gemm42Q4_KInter, inter: true},
	Q6_K: {gemm4: gemm4Q6_KInter, gemm1: gemm1Q6_KInter, sumsPer: 16, sumsMul: 32, inter: true},
}

// avx512Pack returns the avx512 path's packed kernels on this CPU: the
// generated table with the interleaved-layout kernels of Q8_0 (with its
// small-batch ones), Q4_K and Q6_K, and the VDPBF16PS kernels for BF16
// where the CPU has AVX512-BF16.
func avx512Pack() map[Type]*packKernels {
	t := maps.Clone(vnniPackKernels)
	maps.Copy(t, interKernels)
	if cpu.X86.HasAVX512BF16 {
		t[BF16] = bf16DPKernels
	}
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
