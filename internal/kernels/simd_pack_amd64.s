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

// func actSumsAVX2(qs *int8, out *int32, n, per, mul int)
// out[g] = mul * Σ qs[per*g:per*(g+1)] for g < n, per a multiple of 16:
// the bytes flipped to unsigned (x^0x80 = x+128) and summed by VPSADBW
// against zero 16 at a time, minus 128*per.
TEXT ·actSumsAVX2(SB), NOSPLIT, $0-40
	MOVQ         qs+0(FP), SI
	MOVQ         out+8(FP), DI
	MOVQ         n+16(FP), CX
	MOVQ         per+24(FP), R9
	MOVQ         mul+32(FP), R8
	MOVQ         R9, R10
	SHLQ         $7, R10
	SHRQ         $4, R9
	MOVL         $0x80808080, AX
	MOVD         AX, X15
	VPBROADCASTD X15, X15
	VPXOR        X14, X14, X14
	TESTQ        CX, CX
	JZ           sumsdone

sumsloop:
	VPXOR   X0, X0, X0
	MOVQ    R9, DX

sumspiece:
	VPXOR   (SI), X15, X1
	VPSADBW X14, X1, X1
	VPADDQ  X1, X0, X0
	ADDQ    $16, SI
	DECQ    DX
	JNZ     sumspiece

	VPSHUFD $0x4e, X0, X1
	VPADDQ  X1, X0, X0
	VMOVQ   X0, AX
	SUBQ    R10, AX
	IMULQ   R8, AX
	MOVL    AX, (DI)
	ADDQ    $4, DI
	DECQ    CX
	JNZ     sumsloop

sumsdone:
	VZEROUPPER
	RET
