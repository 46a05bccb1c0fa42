//go:build amd64 && !purego

#include "textflag.h"

// PMAC: one VPDPBUSD with the activation bytes broadcast from memory.
#define PMAC(m, w, y) VPDPBUSD.BCST m, w, y

#include "simd_pack_amd64.h"

// func gemm4Q4_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm4Q4_KVNNI(SB), NOSPLIT, $0-88
	PKARGS
	KCONST
	PKGEMMK4(Q4KSB, KTOK4, 2048, 320, 32)

// func gemm1Q4_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm1Q4_KVNNI(SB), NOSPLIT, $0-88
	PKARGS
	KCONST
	PKGEMMK1(Q4KSB, KTOK1, PFQ4_K, 2048, 320, 32)

// func gemm4Q5_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm4Q5_KVNNI(SB), NOSPLIT, $0-88
	PKARGS
	KCONST5
	PKGEMMK4(Q5KSB, KTOK4, 2560, 320, 32)

// func gemm1Q5_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm1Q5_KVNNI(SB), NOSPLIT, $0-88
	PKARGS
	KCONST5
	PKGEMMK1(Q5KSB, KTOK1, PFQ5_K, 2560, 320, 32)

// func gemm4Q6_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm4Q6_KVNNI(SB), NOSPLIT, $0-88
	PKARGS
	KCONST6
	PKGEMMK4(Q6KSB, Q6TOK4, 3072, 288, 64)

// func gemm1Q6_KVNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm1Q6_KVNNI(SB), NOSPLIT, $0-88
	PKARGS
	KCONST6
	PKGEMMK1(Q6KSB, Q6TOK1, PFQ6_K, 3072, 288, 64)

// func gemm4Q4_1VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm4Q4_1VNNI(SB), NOSPLIT, $0-88
	PKARGS
	Q4CONST
	PKGEMM4(Q41W, Q4TOK, 256, 64)

// func gemm1Q4_1VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm1Q4_1VNNI(SB), NOSPLIT, $0-88
	PKARGS
	Q4CONST
	PKGEMM1(Q41W, Q4TOK1, PFQ4_0, 256, 64)

// func gemm4Q5_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm4Q5_0VNNI(SB), NOSPLIT, $0-88
	PKARGS
	Q5CONST
	PKGEMM4(Q50W, Q4TOK, 320, 32)

// func gemm1Q5_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm1Q5_0VNNI(SB), NOSPLIT, $0-88
	PKARGS
	Q5CONST
	PKGEMM1(Q50W, Q4TOK1, PFQ5, 320, 32)

// func gemm4Q5_1VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm4Q5_1VNNI(SB), NOSPLIT, $0-88
	PKARGS
	Q5CONST
	PKGEMM4(Q51W, Q4TOK, 320, 64)

// func gemm1Q5_1VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm1Q5_1VNNI(SB), NOSPLIT, $0-88
	PKARGS
	Q5CONST
	PKGEMM1(Q51W, Q4TOK1, PFQ5, 320, 64)

// func gemm4F16AVX512(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm4F16AVX512(SB), NOSPLIT, $0-88
	PKARGS
	FGROUP(F16C, FTOK4, FZERO4, FSUM4, FSTORE4)

// func gemm1F16AVX512(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm1F16AVX512(SB), NOSPLIT, $0-88
	PKARGS
	FGROUP(F16C, FTOK1, FZERO1, FSUM1, FSTORE1)

// func gemm4BF16AVX512(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm4BF16AVX512(SB), NOSPLIT, $0-88
	PKARGS
	FGROUP(BF16C, FTOK4, FZERO4, FSUM4, FSTORE4)

// func gemm1BF16AVX512(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm1BF16AVX512(SB), NOSPLIT, $0-88
	PKARGS
	FGROUP(BF16C, FTOK1, FZERO1, FSUM1, FSTORE1)

// func gemm4Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm4Q8_0VNNI(SB), NOSPLIT, $0-88
	PKARGS
	PKGEMM4(Q8W, Q8TOK, 512, 32)

// func gemm1Q8_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm1Q8_0VNNI(SB), NOSPLIT, $0-88
	PKARGS
	PKGEMM1(Q8W, Q8TOK1, PFQ8_0, 512, 32)

// func gemm4Q4_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm4Q4_0VNNI(SB), NOSPLIT, $0-88
	PKARGS
	Q4CONST
	PKGEMM4(Q4W, Q4TOK, 256, 32)

// func gemm1Q4_0VNNI(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemm1Q4_0VNNI(SB), NOSPLIT, $0-88
	PKARGS
	Q4CONST
	PKGEMM1(Q4W, Q4TOK1, PFQ4_0, 256, 32)

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
