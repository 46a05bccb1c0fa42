//go:build amd64 && !purego

#include "textflag.h"

// Blocks of 32 weights against blocks of 32 int8 activations.
//
// The int8 products use VPMADDUBSW, which wants one unsigned operand. Q8_0
// (simd_q8_amd64.s) makes the weights non-negative and moves their signs
// onto the activations (VPSIGNB); Q4_0 uses its nibbles (0..15) as they are and subtracts
// 8*d*S afterwards (S = d_a*Σa is part of the activations), except in dot4
// where the correction would need four more registers and the sign trick is
// used on nibble-8. Pair sums are widened by VPMADDWD with ones, converted
// to float and accumulated with the block's scale d_w*d_a. Weight scales
// (halves) are read through f16Table (tab): a load instead of a VCVTPH2PS.
//
// Zen 1 splits 256-bit ops in two and runs VPMADDUBSW/VPMADDWD on one pipe,
// so 256-bit registers save nothing there, while 128-bit halves make the
// per-block tail (convert, scale, FMA) half as wide: the kernels work on X
// registers. Q4_0 also sums the two halves of a block (low and high
// nibbles) as int16 (no overflow: |pair| <= 2*15*127) before one
// VPMADDWD, so a block costs 3 rather than 4 cycles of that pipe.

#define PFDIST 1024

#define HSUM4 \
	VHADDPS      Y1, Y0, Y0; \
	VHADDPS      Y3, Y2, Y2; \
	VHADDPS      Y2, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0

// ONES16 sets Y15 to int16 ones.
#define ONES16 \
	VPCMPEQW Y15, Y15, Y15; \
	VPSRLW   $15, Y15, Y15

// MASK0F sets Y14 to 0x0f bytes.
#define MASK0F \
	MOVL         $0x0f0f0f0f, DX; \
	VMOVD        DX, X14; \
	VPBROADCASTD X14, Y14

// Four activation rows: R9-R12 their quants, BX, DI, R13, R14 their
// scales, AX = 4*block index (quants at 8*AX, scales at AX), R8 f16Table.
#define LOAD4 \
	MOVQ w+0(FP), SI; \
	MOVQ qs+8(FP), AX; \
	MOVQ 0(AX), R9; \
	MOVQ 8(AX), R10; \
	MOVQ 16(AX), R11; \
	MOVQ 24(AX), R12; \
	MOVQ d+16(FP), AX; \
	MOVQ 0(AX), BX; \
	MOVQ 8(AX), DI; \
	MOVQ 16(AX), R13; \
	MOVQ 24(AX), R14; \
	MOVQ nb+24(FP), CX; \
	MOVQ tab+32(FP), R8; \
	XORQ AX, AX; \
	ONES16; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3

#define STORE4 \
	HSUM4; \
	MOVQ    out+40(FP), AX; \
	VMOVUPS X0, (AX); \
	VZEROUPPER

// Q4WORDS sets xl to the 8 int16 sums of nibble*a of the Q4_0 quants at qp
// (low nibbles against a0p, high against a1p); xh is clobbered.
#define Q4WORDS(qp, a0p, a1p, xl, xh) \
	VMOVDQU    qp, xl; \
	VPSRLW     $4, xl, xh; \
	VPAND      X14, xl, xl; \
	VPAND      X14, xh, xh; \
	VPMADDUBSW a0p, xl, xl; \
	VPMADDUBSW a1p, xh, xh; \
	VPADDW     xh, xl, xl

// Q4DOT: acc += d_w*d_a * Σ nibble*a and corr += d_w*S (X13) for one block.
#define Q4DOT(wp, qp, a0p, a1p, dp, sp, xl, xh, xs, xt, acc) \
	Q4WORDS(qp, a0p, a1p, xl, xh); \
	MOVWLZX      wp, DX; \
	VBROADCASTSS (R8)(DX*4), xs; \
	VFMADD231SS  sp, xs, X13; \
	VBROADCASTSS dp, xt; \
	VMULPS       xt, xs, xs; \
	VPMADDWD     X15, xl, xl; \
	VCVTDQ2PS    xl, xl; \
	VFMADD231PS  xl, xs, acc

// Q4ROW: one row of dot4Q4_0 (X registers): nibble-8 in X4 (low) and X5
// (high), their magnitudes in X6, X7, the weight scale in X8.
#define Q4ROW(a0p, a1p, dp, xa, xb, xt, acc) \
	VMOVDQU      a0p, xa; \
	VMOVDQU      a1p, xb; \
	VPSIGNB      X4, xa, xa; \
	VPSIGNB      X5, xb, xb; \
	VPMADDUBSW   xa, X6, xa; \
	VPMADDUBSW   xb, X7, xb; \
	VPADDW       xb, xa, xa; \
	VPMADDWD     X15, xa, xa; \
	VCVTDQ2PS    xa, xa; \
	VBROADCASTSS dp, xt; \
	VMULPS       xt, X8, xt; \
	VFMADD231PS  xa, xt, acc

// func dotQ4_0AVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)
// Works in X registers only; X0, X1 accumulate, X13 sums d_w*S. rows
// consecutive weight rows against one activation row (matrix-vector
// products loop here rather than in Go: a call costs about as much as a
// sixth of a 768-wide row).
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ tab+40(FP), R8
	MOVQ out+56(FP), AX
	ONES16
	MASK0F

q4row:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   s+24(FP), R9
	MOVQ   nb+32(FP), CX
	VXORPS X0, X0, X0
	VXORPS X1, X1, X1
	VXORPS X13, X13, X13
	SUBQ   $2, CX
	JL     q4tail

q4loop:
	PREFETCHT0 PFDIST(SI)
	Q4DOT((SI), 2(SI), (DI), 16(DI), (BX), (R9), X4, X5, X6, X7, X0)
	Q4DOT(18(SI), 20(SI), 32(DI), 48(DI), 4(BX), 4(R9), X8, X9, X10, X11, X1)
	ADDQ $36, SI
	ADDQ $64, DI
	ADDQ $8, BX
	ADDQ $8, R9
	SUBQ $2, CX
	JGE  q4loop

q4tail:
	ADDQ $2, CX
	JZ   q4done
	Q4DOT((SI), 2(SI), (DI), 16(DI), (BX), (R9), X4, X5, X6, X7, X0)
	ADDQ $18, SI

q4done:
	VADDPS      X1, X0, X0
	VHADDPS     X0, X0, X0
	VHADDPS     X0, X0, X0
	MOVL        $0xc1000000, DX // -8.0
	VMOVD       DX, X1
	VFMADD231SS X13, X1, X0
	MOVSS       X0, (AX)
	ADDQ        $4, AX
	DECQ        rows+48(FP)
	JNZ         q4row
	VZEROUPPER
	RET

// func dot4Q4_0AVX2(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, out *[4]float32)
TEXT ·dot4Q4_0AVX2(SB), NOSPLIT, $0-48
	LOAD4
	MASK0F
	MOVL         $0x08080808, DX
	VMOVD        DX, X9
	VPBROADCASTD X9, X9

q4x4loop:
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), X8
	VMOVDQU      2(SI), X4
	VPSRLW       $4, X4, X5
	VPAND        X14, X4, X4
	VPAND        X14, X5, X5
	VPSUBB       X9, X4, X4
	VPSUBB       X9, X5, X5
	VPABSB       X4, X6
	VPABSB       X5, X7
	Q4ROW((R9)(AX*8), 16(R9)(AX*8), (BX)(AX*1), X10, X11, X12, X0)
	Q4ROW((R10)(AX*8), 16(R10)(AX*8), (DI)(AX*1), X10, X11, X12, X1)
	Q4ROW((R11)(AX*8), 16(R11)(AX*8), (R13)(AX*1), X10, X11, X12, X2)
	Q4ROW((R12)(AX*8), 16(R12)(AX*8), (R14)(AX*1), X10, X11, X12, X3)
	ADDQ         $18, SI
	ADDQ         $4, AX
	DECQ         CX
	JNZ          q4x4loop
	STORE4
	RET
