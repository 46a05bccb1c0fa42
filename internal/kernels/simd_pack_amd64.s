//go:build amd64 && !purego

#include "textflag.h"

// PMAC: one VPDPBUSD with the activation bytes broadcast from memory.
#define PMAC(m, w, y) VPDPBUSD.BCST m, w, y

#include "simd_pack_amd64.h"

// The kernels, declared in pack_amd64.go as
// func(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
// (gemm4<type> for four tokens, gemm1<type> for one: GEMM4<type> and
// GEMM1<type> in simd_pack_amd64.h).

TEXT ·gemm4Q4_0VNNI(SB), NOSPLIT, $0-88
	GEMM4Q4_0

TEXT ·gemm1Q4_0VNNI(SB), NOSPLIT, $0-88
	GEMM1Q4_0

TEXT ·gemm4Q4_1VNNI(SB), NOSPLIT, $0-88
	GEMM4Q4_1

TEXT ·gemm1Q4_1VNNI(SB), NOSPLIT, $0-88
	GEMM1Q4_1

TEXT ·gemm4Q5_0VNNI(SB), NOSPLIT, $0-88
	GEMM4Q5_0

TEXT ·gemm1Q5_0VNNI(SB), NOSPLIT, $0-88
	GEMM1Q5_0

TEXT ·gemm4Q5_1VNNI(SB), NOSPLIT, $0-88
	GEMM4Q5_1

TEXT ·gemm1Q5_1VNNI(SB), NOSPLIT, $0-88
	GEMM1Q5_1

TEXT ·gemm4Q8_0VNNI(SB), NOSPLIT, $0-88
	GEMM4Q8_0

TEXT ·gemm1Q8_0VNNI(SB), NOSPLIT, $0-88
	GEMM1Q8_0

TEXT ·gemm4Q4_KVNNI(SB), NOSPLIT, $0-88
	GEMM4Q4_K

TEXT ·gemm1Q4_KVNNI(SB), NOSPLIT, $0-88
	GEMM1Q4_K

TEXT ·gemm4Q5_KVNNI(SB), NOSPLIT, $0-88
	GEMM4Q5_K

TEXT ·gemm1Q5_KVNNI(SB), NOSPLIT, $0-88
	GEMM1Q5_K

TEXT ·gemm4Q6_KVNNI(SB), NOSPLIT, $0-88
	GEMM4Q6_K

TEXT ·gemm1Q6_KVNNI(SB), NOSPLIT, $0-88
	GEMM1Q6_K

TEXT ·gemm4F16AVX512(SB), NOSPLIT, $0-88
	GEMM4F16

TEXT ·gemm1F16AVX512(SB), NOSPLIT, $0-88
	GEMM1F16

TEXT ·gemm4BF16AVX512(SB), NOSPLIT, $0-88
	GEMM4BF16

TEXT ·gemm1BF16AVX512(SB), NOSPLIT, $0-88
	GEMM1BF16

// func int8MulPeakVNNI(n int)
// n rounds of 8 independent VPDPBUSD on 512-bit registers (64
// multiply-adds each): the int8 multiply-add rate of the packed kernels'
// instruction.
TEXT ·int8MulPeakVNNI(SB), NOSPLIT, $0-8
	MOVQ   n+0(FP), CX
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9

vnniloop:
	VPDPBUSD Z8, Z9, Z0
	VPDPBUSD Z8, Z9, Z1
	VPDPBUSD Z8, Z9, Z2
	VPDPBUSD Z8, Z9, Z3
	VPDPBUSD Z8, Z9, Z4
	VPDPBUSD Z8, Z9, Z5
	VPDPBUSD Z8, Z9, Z6
	VPDPBUSD Z8, Z9, Z7
	DECQ     CX
	JNZ      vnniloop
	VZEROUPPER
	RET

// func actSums16AVX2(qs *int8, out *int32, n int, mul int)
// out[g] = mul * Σ qs[16g:16g+16] for g < n: the bytes flipped to
// unsigned (x^0x80 = x+128) and summed by VPSADBW against zero, minus
// 16*128; two runs of 16 per iteration when n allows.
TEXT ·actSums16AVX2(SB), NOSPLIT, $0-32
	MOVQ         qs+0(FP), SI
	MOVQ         out+8(FP), DI
	MOVQ         n+16(FP), CX
	MOVQ         mul+24(FP), R8
	MOVL         $0x80808080, AX
	MOVD         AX, X15
	VPBROADCASTD X15, X15
	VPXOR        X14, X14, X14
	TESTQ        CX, CX
	JZ           sumsdone

sumsloop:
	VPXOR    (SI), X15, X0
	VPSADBW  X14, X0, X0
	VPSHUFD  $0x4e, X0, X1
	VPADDQ   X1, X0, X0
	VMOVQ    X0, AX
	SUBQ     $2048, AX
	IMULQ    R8, AX
	MOVL     AX, (DI)
	ADDQ     $16, SI
	ADDQ     $4, DI
	DECQ     CX
	JNZ      sumsloop

sumsdone:
	VZEROUPPER
	RET
