//go:build amd64 && !purego

#include "textflag.h"

// Q4_1, Q5_0 and Q5_1 against 8-bit activations, built like the Q4_0
// kernel (see simd_q_amd64.s): unsigned quants straight into VPMADDUBSW in
// 128-bit halves, the offset (Q5_0: -16*d) or minimum (m) applied through
// S = d_a*Σa: result = Σ d*d_a*Σq*a + cfac*Σ c*S with c = d (cfac = -16)
// or c = m (cfac = 1). The fifth bits of Q5 are spread to bytes with
// VPSHUFB (byte i/8 of qh to byte i), a bit mask and a compare.

// ONES16 sets Y15 to int16 ones.
#define ONES16 \
	VPCMPEQW Y15, Y15, Y15; \
	VPSRLW   $15, Y15, Y15

// MASK0F sets Y14 to 0x0f bytes.
#define MASK0F \
	MOVL         $0x0f0f0f0f, DX; \
	VMOVD        DX, X14; \
	VPBROADCASTD X14, Y14

// NIBBLES sets xl, xh to the low and high nibbles of the 16 bytes at qp.
#define NIBBLES(qp, xl, xh) \
	VMOVDQU qp, xl; \
	VPSRLW  $4, xl, xh; \
	VPAND   X14, xl, xl; \
	VPAND   X14, xh, xh

// FIFTH ors the fifth bits (the 32-bit qh at qhp) into xl (bits 0-15) and
// xh (16-31) as 0x10; xt and X12 are clobbered.
#define FIFTH(qhp, xl, xh, xt) \
	VMOVD    qhp, xt; \
	VPSHUFB  q5lo<>(SB), xt, X12; \
	VPAND    q5bits<>(SB), X12, X12; \
	VPCMPEQB q5bits<>(SB), X12, X12; \
	VPAND    q5x10<>(SB), X12, X12; \
	VPOR     X12, xl, xl; \
	VPSHUFB  q5hi<>(SB), xt, X12; \
	VPAND    q5bits<>(SB), X12, X12; \
	VPCMPEQB q5bits<>(SB), X12, X12; \
	VPAND    q5x10<>(SB), X12, X12; \
	VPOR     X12, xh, xh

// WORDS: xl = the 8 int16 sums of q*a (xl: quants 0-15 against a0p, xh:
// 16-31 against a1p).
#define WORDS(a0p, a1p, xl, xh) \
	VPMADDUBSW a0p, xl, xl; \
	VPMADDUBSW a1p, xh, xh; \
	VPADDW     xh, xl, xl

// SCALE: xs = d*d_a (d the half at wp) and X13 += c*S (c the half at cp).
#define SCALE(wp, cp, dp, sp, xs, xt) \
	MOVWLZX      cp, DX; \
	VMOVSS       (R8)(DX*4), xt; \
	VFMADD231SS  sp, xt, X13; \
	MOVWLZX      wp, DX; \
	VBROADCASTSS (R8)(DX*4), xs; \
	VBROADCASTSS dp, xt; \
	VMULPS       xt, xs, xs

// ACC: acc += xs * float(Σ of the words in xl).
#define ACC(xl, xs, acc) \
	VPMADDWD    X15, xl, xl; \
	VCVTDQ2PS   xl, xl; \
	VFMADD231PS xl, xs, acc

// func dotQ4_1AVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)
// rows consecutive weight rows, as dotQ4_0AVX2.
TEXT ·dotQ4_1AVX2(SB), NOSPLIT, $0-64
	MOVQ   w+0(FP), SI
	MOVQ   tab+40(FP), R8
	MOVQ   out+56(FP), AX
	ONES16
	MASK0F

q4_1row:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   s+24(FP), R9
	MOVQ   nb+32(FP), CX
	VXORPS X0, X0, X0
	VXORPS X1, X1, X1
	VXORPS X13, X13, X13
	SUBQ   $2, CX
	JL     q4_1tail

q4_1loop:
	NIBBLES(4(SI), X4, X5)
	WORDS(0(DI), 16(DI), X4, X5)
	SCALE(0(SI), 2(SI), 0(BX), 0(R9), X6, X7)
	ACC(X4, X6, X0)
	NIBBLES(24(SI), X8, X9)
	WORDS(32(DI), 48(DI), X8, X9)
	SCALE(20(SI), 22(SI), 4(BX), 4(R9), X10, X11)
	ACC(X8, X10, X1)
	ADDQ $40, SI
	ADDQ $64, DI
	ADDQ $8, BX
	ADDQ $8, R9
	SUBQ $2, CX
	JGE  q4_1loop

q4_1tail:
	ADDQ $2, CX
	JZ   q4_1done
	NIBBLES(4(SI), X4, X5)
	WORDS(0(DI), 16(DI), X4, X5)
	SCALE(0(SI), 2(SI), 0(BX), 0(R9), X6, X7)
	ACC(X4, X6, X0)
	ADDQ $20, SI

q4_1done:
	VADDPS      X1, X0, X0
	VHADDPS     X0, X0, X0
	VHADDPS     X0, X0, X0
	MOVL        $0x3f800000, DX // 1.0
	VMOVD       DX, X1
	VFMADD231SS X13, X1, X0
	MOVSS       X0, (AX)
	ADDQ        $4, AX
	DECQ        rows+48(FP)
	JNZ         q4_1row
	VZEROUPPER
	RET

// func dotQ5_0AVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)
// rows consecutive weight rows, as dotQ4_0AVX2.
TEXT ·dotQ5_0AVX2(SB), NOSPLIT, $0-64
	MOVQ   w+0(FP), SI
	MOVQ   tab+40(FP), R8
	MOVQ   out+56(FP), AX
	ONES16
	MASK0F

q5_0row:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   s+24(FP), R9
	MOVQ   nb+32(FP), CX
	VXORPS X0, X0, X0
	VXORPS X1, X1, X1
	VXORPS X13, X13, X13
	SUBQ   $2, CX
	JL     q5_0tail

q5_0loop:
	NIBBLES(6(SI), X4, X5)
	FIFTH(2(SI), X4, X5, X2)
	WORDS(0(DI), 16(DI), X4, X5)
	SCALE(0(SI), 0(SI), 0(BX), 0(R9), X6, X7)
	ACC(X4, X6, X0)
	NIBBLES(28(SI), X8, X9)
	FIFTH(24(SI), X8, X9, X3)
	WORDS(32(DI), 48(DI), X8, X9)
	SCALE(22(SI), 22(SI), 4(BX), 4(R9), X10, X11)
	ACC(X8, X10, X1)
	ADDQ $44, SI
	ADDQ $64, DI
	ADDQ $8, BX
	ADDQ $8, R9
	SUBQ $2, CX
	JGE  q5_0loop

q5_0tail:
	ADDQ $2, CX
	JZ   q5_0done
	NIBBLES(6(SI), X4, X5)
	FIFTH(2(SI), X4, X5, X2)
	WORDS(0(DI), 16(DI), X4, X5)
	SCALE(0(SI), 0(SI), 0(BX), 0(R9), X6, X7)
	ACC(X4, X6, X0)
	ADDQ $22, SI

q5_0done:
	VADDPS      X1, X0, X0
	VHADDPS     X0, X0, X0
	VHADDPS     X0, X0, X0
	MOVL        $0xc1800000, DX // -16.0
	VMOVD       DX, X1
	VFMADD231SS X13, X1, X0
	MOVSS       X0, (AX)
	ADDQ        $4, AX
	DECQ        rows+48(FP)
	JNZ         q5_0row
	VZEROUPPER
	RET

// func dotQ5_1AVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)
// rows consecutive weight rows, as dotQ4_0AVX2.
TEXT ·dotQ5_1AVX2(SB), NOSPLIT, $0-64
	MOVQ   w+0(FP), SI
	MOVQ   tab+40(FP), R8
	MOVQ   out+56(FP), AX
	ONES16
	MASK0F

q5_1row:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   s+24(FP), R9
	MOVQ   nb+32(FP), CX
	VXORPS X0, X0, X0
	VXORPS X1, X1, X1
	VXORPS X13, X13, X13
	SUBQ   $2, CX
	JL     q5_1tail

q5_1loop:
	NIBBLES(8(SI), X4, X5)
	FIFTH(4(SI), X4, X5, X2)
	WORDS(0(DI), 16(DI), X4, X5)
	SCALE(0(SI), 2(SI), 0(BX), 0(R9), X6, X7)
	ACC(X4, X6, X0)
	NIBBLES(32(SI), X8, X9)
	FIFTH(28(SI), X8, X9, X3)
	WORDS(32(DI), 48(DI), X8, X9)
	SCALE(24(SI), 26(SI), 4(BX), 4(R9), X10, X11)
	ACC(X8, X10, X1)
	ADDQ $48, SI
	ADDQ $64, DI
	ADDQ $8, BX
	ADDQ $8, R9
	SUBQ $2, CX
	JGE  q5_1loop

q5_1tail:
	ADDQ $2, CX
	JZ   q5_1done
	NIBBLES(8(SI), X4, X5)
	FIFTH(4(SI), X4, X5, X2)
	WORDS(0(DI), 16(DI), X4, X5)
	SCALE(0(SI), 2(SI), 0(BX), 0(R9), X6, X7)
	ACC(X4, X6, X0)
	ADDQ $24, SI

q5_1done:
	VADDPS      X1, X0, X0
	VHADDPS     X0, X0, X0
	VHADDPS     X0, X0, X0
	MOVL        $0x3f800000, DX // 1.0
	VMOVD       DX, X1
	VFMADD231SS X13, X1, X0
	MOVSS       X0, (AX)
	ADDQ        $4, AX
	DECQ        rows+48(FP)
	JNZ         q5_1row
	VZEROUPPER
	RET

DATA q5lo<>+0(SB)/8, $0x0000000000000000
DATA q5lo<>+8(SB)/8, $0x0101010101010101
GLOBL q5lo<>(SB), RODATA|NOPTR, $16

DATA q5hi<>+0(SB)/8, $0x0202020202020202
DATA q5hi<>+8(SB)/8, $0x0303030303030303
GLOBL q5hi<>(SB), RODATA|NOPTR, $16

DATA q5bits<>+0(SB)/8, $0x8040201008040201
DATA q5bits<>+8(SB)/8, $0x8040201008040201
GLOBL q5bits<>(SB), RODATA|NOPTR, $16

DATA q5x10<>+0(SB)/8, $0x1010101010101010
DATA q5x10<>+8(SB)/8, $0x1010101010101010
GLOBL q5x10<>(SB), RODATA|NOPTR, $16
