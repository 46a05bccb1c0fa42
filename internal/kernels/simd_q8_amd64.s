//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"

// Q8_0 kernels. Every output, whichever kernel computes it, is the same
// sequence of float operations: per block the exact integer sum S of the
// 32 products, then acc = fma(float(S), d_w*d_a, acc) in block order from
// acc = 0. So a row gives the same bits alone or in a batch of any size
// (MatMul mixes the four-row, four-input and one-row kernels by shape).
//
// The four-way kernels reduce the four lanes of four blocks' integer sums
// with one transposition (VPUNPCK*), so that one conversion, one scale
// product and one FMA serve four outputs, which also keeps the FMA and
// convert pipes off the one that runs VPMADDUBSW/VPMADDWD.

// Q8ONES sets X15 to int16 ones.
#define Q8ONES \
	VPCMPEQW X15, X15, X15; \
	VPSRLW   $15, X15, X15

// Q8SUM: p = the 4 int32 partial sums of a block: |x| in (xa0, xa1),
// y·sign(x) in (p, t) on entry (halves); t is clobbered.
#define Q8SUM(xa0, xa1, p, t) \
	VPMADDUBSW p, xa0, p; \
	VPMADDUBSW t, xa1, t; \
	VPMADDWD   X15, p, p; \
	VPMADDWD   X15, t, t; \
	VPADDD     t, p, p

// Q8W: one weight row's block (quant halves at w0, w1) against the
// activation block in X4, X5 (halves): p = partial sums; t, X6, X7 are
// clobbered. The weights are the unsigned operand as |w| (so that -128
// works, as in ggml), the activations carry their signs.
#define Q8W(w0, w1, p, t) \
	VMOVDQU w0, p; \
	VMOVDQU w1, t; \
	VPABSB  p, X6; \
	VPABSB  t, X7; \
	VPSIGNB p, X4, p; \
	VPSIGNB t, X5, t; \
	Q8SUM(X6, X7, p, t)

// func dotQ8_0AVX2(w *byte, qs *int8, d *float32, nb int, tab *float32, rows int, out *float32)
// rows consecutive weight rows against one activation row: four rows at a
// time (X14 accumulates their four outputs), the last rows%4 one by one.
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-56
	MOVQ  w+0(FP), SI
	MOVQ  tab+32(FP), R8
	MOVQ  out+48(FP), AX
	MOVQ  nb+24(FP), R13
	IMULQ $34, R13                  // row bytes
	LEAQ  (R13)(R13*2), R9          // 3 rows
	MOVQ  rows+40(FP), R10
	Q8ONES
	SUBQ  $4, R10
	JL    q8one

q8four:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   nb+24(FP), CX
	VXORPS X14, X14, X14
	LEAQ   (SI)(R9*1), R15
	ADDQ   R13, R15                 // the next four rows

q8fourloop:
	// X8 = the four rows' d_w times d_a.
	W4HALVES(0)
	VBROADCASTSS (BX), X9
	VMULPS       X9, X8, X8

	// Four short rows at once do not look like a stream to the hardware
	// prefetcher (a third slower from memory than one row at a time):
	// fetch the next four rows' 136 bytes a block ahead.
	PREFETCHT0   (R15)
	PREFETCHT0   64(R15)
	PREFETCHT0   128(R15)
	ADDQ         $136, R15
	VMOVDQU      (DI), X4
	VMOVDQU      16(DI), X5
	Q8W(2(SI), 18(SI), X0, X1)
	Q8W(2(SI)(R13*1), 18(SI)(R13*1), X2, X3)
	Q8W(2(SI)(R13*2), 18(SI)(R13*2), X10, X11)
	Q8W(2(SI)(R9*1), 18(SI)(R9*1), X12, X13)
	XT4
	VCVTDQ2PS    X0, X0
	VFMADD231PS  X8, X0, X14
	ADDQ         $34, SI
	ADDQ         $32, DI
	ADDQ         $4, BX
	DECQ         CX
	JNZ          q8fourloop

	VMOVUPS X14, (AX)
	ADDQ    $16, AX
	ADDQ    R9, SI                  // SI is at the end of the first row
	SUBQ    $4, R10
	JGE     q8four

q8one:
	ADDQ $4, R10
	JZ   q8done

q8onerow:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   nb+24(FP), CX
	VXORPS X14, X14, X14

q8oneloop:
	VMOVDQU     (DI), X4
	VMOVDQU     16(DI), X5
	Q8W(2(SI), 18(SI), X0, X1)
	ISUM1
	VCVTDQ2PS   X0, X0
	MOVWLZX     (SI), DX
	VMOVSS      (R8)(DX*4), X8
	VMULSS      (BX), X8, X8
	VFMADD231SS X8, X0, X14
	ADDQ        $34, SI
	ADDQ        $32, DI
	ADDQ        $4, BX
	DECQ        CX
	JNZ         q8oneloop

	VMOVSS X14, (AX)
	ADDQ   $4, AX
	DECQ   R10
	JNZ    q8onerow

q8done:
	VZEROUPPER
	RET

// Q8A: one activation row's block (quant halves at a0, a1) against the
// weight block in X4, X5 (halves) with magnitudes in X6, X7: p = partial
// sums.
#define Q8A(a0, a1, p, t) \
	VMOVDQU    a0, p; \
	VMOVDQU    a1, t; \
	VPSIGNB    X4, p, p; \
	VPSIGNB    X5, t, t; \
	Q8SUM(X6, X7, p, t)

// func dot4Q8_0AVX2(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
// rows consecutive weight rows against four activation rows: row r's
// output for activation row k goes to out[k*stride + r]. R9-R12 point to
// the activation quants, BX, DI, R13, R14 to their scales, AX = 4*block
// index (quants at 8*AX, scales at AX). X14 accumulates the four outputs.
TEXT ·dot4Q8_0AVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ qs+8(FP), AX
	PTRS4(R9, R10, R11, R12)
	MOVQ d+16(FP), AX
	PTRS4(BX, DI, R13, R14)
	MOVQ tab+32(FP), R8
	MOVQ stride+56(FP), R15
	SHLQ $2, R15
	Q8ONES

q8x4row:
	MOVQ   nb+24(FP), CX
	XORQ   AX, AX
	VXORPS X14, X14, X14

q8x4loop:
	// X9 = the four activation rows' d_a times d_w.
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), X8
	DA4(X9)
	VMULPS       X8, X9, X9
	VMOVDQU      2(SI), X4
	VMOVDQU      18(SI), X5
	VPABSB       X4, X6
	VPABSB       X5, X7
	Q8A((R9)(AX*8), 16(R9)(AX*8), X0, X1)
	Q8A((R10)(AX*8), 16(R10)(AX*8), X2, X3)
	Q8A((R11)(AX*8), 16(R11)(AX*8), X10, X11)
	Q8A((R12)(AX*8), 16(R12)(AX*8), X12, X13)
	XT4
	VCVTDQ2PS    X0, X0
	VFMADD231PS  X9, X0, X14
	ADDQ         $34, SI
	ADDQ         $4, AX
	DECQ         CX
	JNZ          q8x4loop

	STOREX4(X14, out+48(FP), R15, DX)
	DECQ       rows+40(FP)
	JNZ        q8x4row
	VZEROUPPER
	RET
