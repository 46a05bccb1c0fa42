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

// Q8ARGS4 loads the four-input kernels' arguments: SI = w, R9-R12 the
// activation quants, BX, DI, R13, R14 their scales, R8 = tab.
#define Q8ARGS4 \
	MOVQ w+0(FP), SI; \
	MOVQ qs+8(FP), AX; \
	PTRS4(R9, R10, R11, R12); \
	MOVQ d+16(FP), AX; \
	PTRS4(BX, DI, R13, R14); \
	MOVQ tab+32(FP), R8

// Q8A: one activation row's block (quant halves at a0, a1) against the
// weight block in X4, X5 (halves) with magnitudes in X6, X7: p = partial
// sums.
#define Q8A(a0, a1, p, t) \
	VMOVDQU    a0, p; \
	VMOVDQU    a1, t; \
	VPSIGNB    X4, p, p; \
	VPSIGNB    X5, t, t; \
	Q8SUM(X6, X7, p, t)

// func dot4Q8_0AVX2X(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
// dot4Q8_0AVX2 on 128-bit registers (for CPUs that split 256-bit integer
// multiplies, see split256): rows consecutive weight rows against four
// activation rows: row r's output for activation row k goes to
// out[k*stride + r]. R9-R12 point to the activation quants, BX, DI, R13,
// R14 to their scales, AX = 4*block index (quants at 8*AX, scales at AX).
// X14 accumulates the four outputs.
TEXT ·dot4Q8_0AVX2X(SB), NOSPLIT, $0-64
	Q8ARGS4
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

// Q8Y2: row 0's block (weights Y4, magnitudes Y6) and row 1's (Y5, Y7)
// against one activation row's block (32 quants at a) on 256-bit
// registers: p0, p1 = the two rows' 8 partial sums (Y15 = int16 ones).
#define Q8Y2(a, p0, p1) \
	VMOVDQU    a, p0; \
	VPSIGNB    Y5, p0, p1; \
	VPSIGNB    Y4, p0, p0; \
	VPMADDUBSW p0, Y6, p0; \
	VPMADDUBSW p1, Y7, p1; \
	VPMADDWD   Y15, p0, p0; \
	VPMADDWD   Y15, p1, p1

// func dot4Q8_0AVX2Y(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
// The four-input kernel on 256-bit registers: a block's 32 products
// against an activation row in one register, two weight rows at a time
// against the four activation rows (their scales and activation loads
// shared). The eight registers of partial sums are reduced per 128-bit
// half (KT2/KT4) and the halves added (KH2): Y14 holds row 0's four
// outputs in its low half and row 1's in its high half. An odd last row
// runs as a pair with itself (R15 = 0) and stores its low half. The same
// exact integer sums and float steps as dot4Q8_0AVX2X, so the same bits.
TEXT ·dot4Q8_0AVX2Y(SB), NOSPLIT, $0-64
	Q8ARGS4
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15
	CMPQ     rows+40(FP), $0
	JEQ      q8y2done

q8y2row:
	MOVQ  nb+24(FP), R15
	IMULQ $34, R15
	CMPQ  rows+40(FP), $1
	JNE   q8y2pair
	XORQ  R15, R15                  // an odd last row: a pair with itself

q8y2pair:
	MOVQ   nb+24(FP), CX
	XORQ   AX, AX
	VXORPS Y14, Y14, Y14

q8y2loop:
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), X8
	MOVWLZX      (SI)(R15*1), DX
	VBROADCASTSS (R8)(DX*4), X4
	VINSERTF128  $1, X4, Y8, Y8
	DA4(X9)
	VINSERTF128  $1, X9, Y9, Y9
	VMULPS       Y8, Y9, Y9
	VMOVDQU      2(SI), Y4
	VMOVDQU      2(SI)(R15*1), Y5
	VPABSB       Y4, Y6
	VPABSB       Y5, Y7
	Q8Y2((R9)(AX*8), Y0, Y1)
	Q8Y2((R10)(AX*8), Y2, Y3)
	Q8Y2((R11)(AX*8), Y10, Y11)
	Q8Y2((R12)(AX*8), Y12, Y13)
	KT2(Y0, Y2, Y4)
	KT2(Y10, Y12, Y6)
	KT4(Y0, Y10, Y4)
	KT2(Y1, Y3, Y5)
	KT2(Y11, Y13, Y7)
	KT4(Y1, Y11, Y5)
	KH2(Y0, Y1, Y2, Y3)
	VCVTDQ2PS    Y2, Y2
	VFMADD231PS  Y9, Y2, Y14
	ADDQ         $34, SI
	ADDQ         $4, AX
	DECQ         CX
	JNZ          q8y2loop

	MOVQ         stride+56(FP), CX
	SHLQ         $2, CX
	STOREX4(X14, out+48(FP), CX, DX)
	DECQ         rows+40(FP)
	JZ           q8y2done
	VEXTRACTF128 $1, Y14, X14
	STOREX4(X14, out+48(FP), CX, DX)
	ADDQ         R15, SI            // past row 1
	DECQ         rows+40(FP)
	JNZ          q8y2row

q8y2done:
	VZEROUPPER
	RET

// func dot4Q8_0AVX2(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
// The avx2 path's four-input Q8_0 kernel: the 128-bit one where the CPU
// splits 256-bit integer multiplies (split256), else the 256-bit one.
TEXT ·dot4Q8_0AVX2(SB), NOSPLIT, $0-64
	SPLIT256(·dot4Q8_0AVX2Y, ·dot4Q8_0AVX2X)
