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

// gemm42Q8_0VNNI is gemm4Q8_0VNNI on two groups at a time (an even
// number of them): each chunk of group A (Z0) and of group B (Z1, gbytes
// = R14 further) times the four tokens' activation dwords broadcast once
// into Z2-Z5, so 8 VPDPBUSD need 6 loads where gemm4 has 4 for 5 (it is
// bound by loads: 71% of the VNNI ceiling on one Zen 5 core, gemm4 52-64%).
// The same per-lane operations as gemm4: the same bits. The batched
// decode of the Q8_0 model spends most of its step here. The other types
// have no such kernel: their constants leave too few of the 32
// registers (Q6_K would need 16 integer sums).
#define Q8P(k) \
	VMOVDQU32    (64*k)(SI), Z0; \
	VMOVDQU32    (64*k)(SI)(R14*1), Z1; \
	VPBROADCASTD (4*k)(DI), Z2; \
	VPBROADCASTD (4*k)(DI)(R8*1), Z3; \
	VPBROADCASTD (4*k)(DI)(R8*2), Z4; \
	VPBROADCASTD (4*k)(DI)(R9*1), Z5; \
	VPDPBUSD     Z2, Z0, Z24; \
	VPDPBUSD     Z3, Z0, Z25; \
	VPDPBUSD     Z4, Z0, Z26; \
	VPDPBUSD     Z5, Z0, Z27; \
	VPDPBUSD     Z2, Z1, Z28; \
	VPDPBUSD     Z3, Z1, Z29; \
	VPDPBUSD     Z4, Z1, Z30; \
	VPDPBUSD     Z5, Z1, Z31

#define Q8PF(sc, dd, ss, y, acc, x) \
	VPSUBD.BCST ss, y, y; \
	VCVTDQ2PS   y, y; \
	VMULPS.BCST dd, sc, x; \
	VFMADD231PS x, y, acc

// func gemm42Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm42Q8_0VNNI(SB), NOSPLIT, $0-88
	PKARGS
	MOVQ  nb+8(FP), R14
	IMULQ $(512+32), R14

pair:
	PKGROUP(512)
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23

ploop:
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	Q8P(0)
	Q8P(1)
	Q8P(2)
	Q8P(3)
	Q8P(4)
	Q8P(5)
	Q8P(6)
	Q8P(7)
	VCVTPH2PS (R12), Z8
	VCVTPH2PS (R12)(R14*1), Z9
	Q8PF(Z8, (BX), (DX), Z24, Z16, Z10)
	Q8PF(Z8, (BX)(R10*1), (DX)(R10*1), Z25, Z17, Z11)
	Q8PF(Z8, (BX)(R10*2), (DX)(R10*2), Z26, Z18, Z12)
	Q8PF(Z8, (BX)(R11*1), (DX)(R11*1), Z27, Z19, Z13)
	Q8PF(Z9, (BX), (DX), Z28, Z20, Z14)
	Q8PF(Z9, (BX)(R10*1), (DX)(R10*1), Z29, Z21, Z15)
	Q8PF(Z9, (BX)(R10*2), (DX)(R10*2), Z30, Z22, Z10)
	Q8PF(Z9, (BX)(R11*1), (DX)(R11*1), Z31, Z23, Z11)
	PKNEXT(512, 32, 1, 4, ploop)
	MOVQ    R12, SI
	ADDQ    R14, SI
	LEAQ    (R13)(R13*2), CX
	VMOVUPS Z16, (AX)
	VMOVUPS Z17, (AX)(R13*1)
	VMOVUPS Z18, (AX)(R13*2)
	VMOVUPS Z19, (AX)(CX*1)
	CMPQ    R15, $2
	JNE     pfull
	MOVQ    mask+80(FP), DX
	KMOVW   DX, K1

pfull:
	VMOVUPS Z20, K1, 64(AX)
	VMOVUPS Z21, K1, 64(AX)(R13*1)
	VMOVUPS Z22, K1, 64(AX)(R13*2)
	VMOVUPS Z23, K1, 64(AX)(CX*1)
	ADDQ    $128, AX
	SUBQ    $2, R15
	JNZ     pair
	VZEROUPPER
	RET
