//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"

// The prefetches (PFQ8I) are the AVX-512 kernels'.
#include "simd_pack_amd64.h"

// AVX2 kernels over the packed Q8_0 layout (pack.go, the interleaved
// variant: a block's 512 bytes of quants, eight 64-byte chunks of 16 rows ×
// 4 bytes, then its 16 rows' scales): the avx2 path's on CPUs whose vector
// units are 256 bits wide (split256 false). A chunk half (8 rows × 4
// bytes) is one register: its 8 lanes are 8 rows, so a block's eight
// chunk halves leave each row's exact block sum in its lane without the
// horizontal reductions (shuffles) of the kernels over the file's rows,
// which bounded those at a third of the multiply pipes' rate (Zen 3).
// The chunks hold w+128 (the VPDPBUSD kernels' unsigned operand): XOR
// 0x80 gives w back, and each product runs as the file kernels' do,
// |w| × (a·sign(w)) by VPMADDUBSW (a pair of products fits int16) and
// VPMADDWD by ones. Per output and block the float steps are the other
// Q8_0 kernels': acc = fma(float(S), d_w*d_a, acc), so the same bits.
//
// Arguments (packKernels' gemmFunc): func(w *byte, nb, groups int, qs
// *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out
// *float32, ostride int, mask int); s is not read.
//
// Registers: SI the block, R12 the group's start, DI the first token's
// quants, R8/R9 one and three token strides of quants, BX the first
// token's block scale, R10/R11 one and three strides of scales (bytes), AX
// the group's outputs for the first token, R13/R14 one and three output
// strides (bytes), CX blocks left, R15 groups left, DX the half. Y0-Y3 the
// tokens' block sums, Y4 a chunk half (w), Y5 |w|, Y6 a product, Y7 the
// rows' scales, Y8 a token's scale times them, Y10-Y13 the outputs, Y14 =
// 0x80 bytes, Y15 = int16 ones.

// PAARGS loads the arguments and the constants.
#define PAARGS \
	MOVQ         w+0(FP), SI; \
	MOVQ         qstride+32(FP), R8; \
	LEAQ         (R8)(R8*2), R9; \
	MOVQ         dstride+56(FP), R10; \
	SHLQ         $2, R10; \
	LEAQ         (R10)(R10*2), R11; \
	MOVQ         out+64(FP), AX; \
	MOVQ         ostride+72(FP), R13; \
	SHLQ         $2, R13; \
	LEAQ         (R13)(R13*2), R14; \
	MOVQ         groups+16(FP), R15; \
	VPCMPEQW     Y15, Y15, Y15; \
	VPSRLW       $15, Y15, Y15; \
	MOVL         $0x80808080, DX; \
	VMOVD        DX, X14; \
	VPBROADCASTD X14, Y14

// PAW(m): Y4 = the chunk half at m as w, Y5 = |w|.
#define PAW(m) \
	VMOVDQU m, Y4; \
	VPXOR   Y14, Y4, Y4; \
	VPABSB  Y4, Y5

// PAT(m, y): y += the 8 rows' 4-byte products of the chunk half in Y4/Y5
// with the 4 activation bytes at m.
#define PAT(m, y) \
	VPBROADCASTD m, Y6; \
	VPSIGNB      Y4, Y6, Y6; \
	VPMADDUBSW   Y6, Y5, Y6; \
	VPMADDWD     Y15, Y6, Y6; \
	VPADDD       Y6, y, y

// PACH4(k): chunk k's half (DX: 0 or 32) against the four tokens.
#define PACH4(k) \
	PAW((64*k)(SI)(DX*1)); \
	PAT((4*k)(DI), Y0); \
	PAT((4*k)(DI)(R8*1), Y1); \
	PAT((4*k)(DI)(R8*2), Y2); \
	PAT((4*k)(DI)(R9*1), Y3)

// PACH1(k): chunk k's two halves against one token.
#define PACH1(k) \
	PAW((64*k)(SI)); \
	PAT((4*k)(DI), Y0); \
	PAW((64*k+32)(SI)); \
	PAT((4*k)(DI), Y1)

// PAF(dd, y, acc): acc += float(y) * (Y7 * the token's scale at dd).
#define PAF(dd, y, acc) \
	VBROADCASTSS dd, Y8; \
	VMULPS       Y7, Y8, Y8; \
	VCVTDQ2PS    y, y; \
	VFMADD231PS  Y8, y, acc

// PASTORE(y, o): the 8 outputs in y to o, the lanes of Y9 (PAMASK).
#define PASTORE(y, o) \
	VMASKMOVPS y, Y9, o

// PAMASK(full): Y9 = the lanes of half DX (0 or 32) that the stores
// write: all but in the last group, where the caller's mask bits (8 per
// half) pick. CX and R12 are clobbered.
#define PAMASK(full) \
	VPCMPEQD     Y9, Y9, Y9; \
	CMPQ         R15, $1; \
	JNE          full; \
	MOVQ         DX, CX; \
	SHRQ         $2, CX; \
	MOVQ         mask+80(FP), R12; \
	SHRQ         CX, R12; \
	VMOVD        R12, X9; \
	VPBROADCASTD X9, Y9; \
	VPAND        palanes<>(SB), Y9, Y9; \
	VPCMPEQD     palanes<>(SB), Y9, Y9; \
full:

// palanes: lane i holds bit i.
DATA palanes<>+0(SB)/8, $0x0000000200000001
DATA palanes<>+8(SB)/8, $0x0000000800000004
DATA palanes<>+16(SB)/8, $0x0000002000000010
DATA palanes<>+24(SB)/8, $0x0000008000000040
GLOBL palanes<>(SB), RODATA|NOPTR, $32

// func gemm4Q8_0AVX2P(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
// Four tokens: each group in two passes over its blocks, rows 0-7 (DX =
// 0) and rows 8-15 (DX = 32), a pass's four outputs in Y10-Y13.
TEXT ·gemm4Q8_0AVX2P(SB), NOSPLIT, $0-88
	PAARGS

pa4group:
	XORQ DX, DX

pa4half:
	MOVQ   qs+24(FP), DI
	MOVQ   d+40(FP), BX
	MOVQ   nb+8(FP), CX
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13

pa4loop:
	VPXOR     Y0, Y0, Y0
	VPXOR     Y1, Y1, Y1
	VPXOR     Y2, Y2, Y2
	VPXOR     Y3, Y3, Y3
	PACH4(0)
	PACH4(1)
	PACH4(2)
	PACH4(3)
	PACH4(4)
	PACH4(5)
	PACH4(6)
	PACH4(7)
	MOVQ      DX, R12
	SHRQ      $1, R12
	VCVTPH2PS 512(SI)(R12*1), Y7
	PAF((BX), Y0, Y10)
	PAF((BX)(R10*1), Y1, Y11)
	PAF((BX)(R10*2), Y2, Y12)
	PAF((BX)(R11*1), Y3, Y13)
	ADDQ      $544, SI
	ADDQ      $32, DI
	ADDQ      $4, BX
	DECQ      CX
	JNZ       pa4loop

	PAMASK(pa4full)
	PASTORE(Y10, (AX)(DX*1))
	LEAQ     (AX)(DX*1), CX
	PASTORE(Y11, (CX)(R13*1))
	PASTORE(Y12, (CX)(R13*2))
	PASTORE(Y13, (CX)(R14*1))
	ADDQ     $32, DX
	CMPQ     DX, $64
	JEQ      pa4next
	MOVQ     nb+8(FP), CX
	IMULQ    $544, CX
	SUBQ     CX, SI                 // back to the group's start
	JMP      pa4half

pa4next:
	ADDQ $64, AX
	DECQ R15
	JNZ  pa4group
	VZEROUPPER
	RET

// func gemm1Q8_0AVX2P(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
// One token (decode): both halves of each chunk in one pass, their sums in
// Y0 and Y1, their outputs in Y10 and Y11.
TEXT ·gemm1Q8_0AVX2P(SB), NOSPLIT, $0-88
	PAARGS

pa1group:
	MOVQ   qs+24(FP), DI
	MOVQ   d+40(FP), BX
	MOVQ   nb+8(FP), CX
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

pa1loop:
	PFQ8I
	VPXOR        Y0, Y0, Y0
	VPXOR        Y1, Y1, Y1
	PACH1(0)
	PACH1(1)
	PACH1(2)
	PACH1(3)
	PACH1(4)
	PACH1(5)
	PACH1(6)
	PACH1(7)
	VBROADCASTSS (BX), Y8
	VCVTPH2PS    512(SI), Y7
	VMULPS       Y7, Y8, Y7
	VCVTDQ2PS    Y0, Y0
	VFMADD231PS  Y7, Y0, Y10
	VCVTPH2PS    528(SI), Y7
	VMULPS       Y7, Y8, Y7
	VCVTDQ2PS    Y1, Y1
	VFMADD231PS  Y7, Y1, Y11
	ADDQ         $544, SI
	ADDQ         $32, DI
	ADDQ         $4, BX
	DECQ         CX
	JNZ          pa1loop

	XORQ DX, DX
	PAMASK(pa1full0)
	PASTORE(Y10, (AX))
	MOVQ $32, DX
	PAMASK(pa1full1)
	PASTORE(Y11, 32(AX))
	ADDQ $64, AX
	DECQ R15
	JNZ  pa1group
	VZEROUPPER
	RET
