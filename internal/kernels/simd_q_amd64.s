//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"
#include "simd_data.h"

// Q4_0, Q4_1, Q5_0 and Q5_1 kernels: blocks of 32 quants with a half d
// (and for Q4_1/Q5_1 a half minimum m) before them. The quants (0..15, or
// 0..31 with the fifth bit) are VPMADDUBSW's unsigned operand as they are,
// against the activations; the low and high halves of a block are summed
// as int16 (|pair| <= 2*31*127) before one VPMADDWD, so a block costs 3
// cycles of the pipe that runs both. The offset (Q4_0: -8*d, Q5_0: -16*d)
// or minimum (m) is applied through S = d_a*Σa (part of the activations).
// Every kernel does, per output and block, acc = fma(float(X), d*d_a, acc)
// then acc = fma(c, f*S, acc) with X the exact Σ q*a, c = m (f = 1) or
// c = d (f = -8 or -16): the one-input kernels on four rows in the lanes of
// one register, the four-input ones on four activation rows, after a
// transposition of four blocks' sums (as the Q8_0 kernels). So a row gives
// the same bits alone or in a batch. The fifth bits of Q5 are spread to
// bytes with VPSHUFB (byte i/8 of qh to byte i), a bit mask and a compare.
//
// The kernels are two skeletons (QDOT, QDOT4) instantiated per type with
// its block size and macros: SETUP (constants), W and U (a block's quants),
// C4, C1 and CX4 (the offset or minimum term).

// QXCONST sets X15 to int16 ones, X14 to 0x0f bytes.
#define QXCONST \
	VPCMPEQW     X15, X15, X15; \
	VPSRLW       $15, X15, X15; \
	MOVL         $0x0f0f0f0f, DX; \
	VMOVD        DX, X14; \
	VPBROADCASTD X14, X14

// QXNEG(c): QXCONST and X4 = the float32 with bits c (-8.0, -16.0).
#define QXNEG(c) \
	QXCONST; \
	MOVL         $c, DX; \
	VMOVD        DX, X4; \
	VBROADCASTSS X4, X4

#define SETUPQ4_0 QXNEG(0xc1000000)
#define SETUPQ5_0 QXNEG(0xc1800000)

// QXNIB sets xl, xh to the low and high nibbles of the 16 bytes at qp.
#define QXNIB(qp, xl, xh) \
	VMOVDQU qp, xl; \
	VPSRLW  $4, xl, xh; \
	VPAND   X14, xl, xl; \
	VPAND   X14, xh, xh

// QXFIFTH ors the fifth bits (the 32-bit qh at qhp) into xl (bits 0-15)
// and xh (16-31) as 0x10; u and v are clobbered.
#define QXFIFTH(qhp, xl, xh, u, v) \
	VMOVD    qhp, u; \
	VPSHUFB  q5lo<>(SB), u, v; \
	VPAND    q5bits<>(SB), v, v; \
	VPCMPEQB q5bits<>(SB), v, v; \
	VPAND    q5x10<>(SB), v, v; \
	VPOR     v, xl, xl; \
	VPSHUFB  q5hi<>(SB), u, v; \
	VPAND    q5bits<>(SB), v, v; \
	VPCMPEQB q5bits<>(SB), v, v; \
	VPAND    q5x10<>(SB), v, v; \
	VPOR     v, xh, xh

// QXSUM: p = the 4 int32 partial sums of quants xl (elements 0-15), xh
// (16-31) times the activation block at (DI); xh is clobbered.
#define QXSUM(xl, xh, p) \
	VPMADDUBSW (DI), xl, p; \
	VPMADDUBSW 16(DI), xh, xh; \
	VPADDW     xh, p, p; \
	VPMADDWD   X15, p, p

// Q4W: the 4 int32 partial sums p of Σ nibble*a of one Q4_0 weight block
// (quants at qp) against the activation block at (DI); t is clobbered.
#define Q4W(qp, p, t) \
	VMOVDQU    qp, p; \
	VPSRLW     $4, p, t; \
	VPAND      X14, p, p; \
	VPAND      X14, t, t; \
	VPMADDUBSW (DI), p, p; \
	VPMADDUBSW 16(DI), t, t; \
	VPADDW     t, p, p; \
	VPMADDWD   X15, p, p

// U<type>(b) sets X5, X9 to the quants 0-15 and 16-31 of the block at b
// (an address without displacement); X1, X3 clobbered.
#define UQ4_0(b) QXNIB(2 b, X5, X9)
#define UQ4_1(b) QXNIB(4 b, X5, X9)
#define UQ5_0(b) QXNIB(6 b, X5, X9); QXFIFTH(2 b, X5, X9, X1, X3)
#define UQ5_1(b) QXNIB(8 b, X5, X9); QXFIFTH(4 b, X5, X9, X1, X3)

// W<type>(b, p): p = the 4 int32 partial sums of the block at b against
// the activation block at (DI).
#define WQ4_0(b, p) Q4W(2 b, p, X1)
#define WQ4_1(b, p) UQ4_1(b); QXSUM(X5, X9, p)
#define WQ5_0(b, p) UQ5_0(b); QXSUM(X5, X9, p)
#define WQ5_1(b, p) UQ5_1(b); QXSUM(X5, X9, p)

// QXA: one activation row's block (halves at a0, a1) against the weight
// quants in X5 (0-15) and X9 (16-31): p = partial sums; t is clobbered.
#define QXA(a0, a1, p, t) \
	VPMADDUBSW a0, X5, p; \
	VPMADDUBSW a1, X9, t; \
	VPADDW     t, p, p; \
	VPMADDWD   X15, p, p

// The offset or minimum term, X6 = f*S (or S) times X8 = c, given X6 = S:
// C4<type> for four weight rows (one activation row), C1<type> for one
// weight row (VMOVSS or VMULSS of S from (R10) included), CX4<type> for
// one weight row and four activation rows.
#define C4OFF VMULPS X4, X6, X6
#define C4MIN W4HALVES(2)
#define C1Q4_0 VMULSS (R10), X4, X6
#define C1OFF VMOVSS (R10), X6; VMULSS X4, X6, X6
#define C1MIN VMOVSS (R10), X6; MOVWLZX 2(SI), DX; VMOVSS (R8)(DX*4), X8
#define CX4MIN MOVWLZX 2(SI), DX; VBROADCASTSS (R8)(DX*4), X8

// QROW starts a row (or four): DI, BX, R10 at the activation quants,
// scales and sums, CX = nb, X13 = 0.
#define QROW \
	MOVQ   qs+8(FP), DI; \
	MOVQ   d+16(FP), BX; \
	MOVQ   s+24(FP), R10; \
	MOVQ   nb+32(FP), CX; \
	VXORPS X13, X13, X13

// QDOT(SETUP, W, C4, C1, size) is the body of
// func dotXAVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32):
// rows consecutive weight rows (blocks of size bytes) against one
// activation row (matrix-vector products loop here rather than in Go: a
// call costs about as much as a sixth of a 768-wide row): four rows at a
// time (X13 accumulates their outputs), the last rows%4 one by one. R13 is
// the row size, R9 three rows, R15 the prefetch pointer. In the four-row
// loop X8 = the four rows' d_w, X7 = d_w*d_a, then the offset or minimum
// term (C4). Four short rows at once do not look like a stream to the
// hardware prefetcher: the next four rows' blocks are fetched a block
// ahead.
#define QDOT(SETUP, W, C4, C1, size) \
	MOVQ  w+0(FP), SI; \
	MOVQ  tab+40(FP), R8; \
	MOVQ  out+56(FP), AX; \
	MOVQ  nb+32(FP), R13; \
	IMULQ $size, R13; \
	LEAQ  (R13)(R13*2), R9; \
	SETUP; \
	SUBQ  $4, rows+48(FP); \
	JL    one; \
four: \
	QROW; \
	LEAQ   (SI)(R9*1), R15; \
	ADDQ   R13, R15; \
fourloop: \
	W4HALVES(0); \
	VBROADCASTSS (BX), X7; \
	VMULPS       X7, X8, X7; \
	VBROADCASTSS (R10), X6; \
	C4; \
	PREFETCHT0   (R15); \
	PREFETCHT0   64(R15); \
	ADDQ         $(4*size), R15; \
	W((SI), X0); \
	W((SI)(R13*1), X2); \
	W((SI)(R13*2), X10); \
	W((SI)(R9*1), X12); \
	XT4; \
	VCVTDQ2PS    X0, X0; \
	VFMADD231PS  X7, X0, X13; \
	VFMADD231PS  X6, X8, X13; \
	ADDQ         $size, SI; \
	ADDQ         $32, DI; \
	ADDQ         $4, BX; \
	ADDQ         $4, R10; \
	DECQ         CX; \
	JNZ          fourloop; \
	VMOVUPS X13, (AX); \
	ADDQ    $16, AX; \
	ADDQ    R9, SI; \
	SUBQ    $4, rows+48(FP); \
	JGE     four; \
one: \
	ADDQ $4, rows+48(FP); \
	JZ   done; \
onerow: \
	QROW; \
oneloop: \
	W((SI), X0); \
	ISUM1; \
	VCVTDQ2PS   X0, X0; \
	MOVWLZX     (SI), DX; \
	VMOVSS      (R8)(DX*4), X8; \
	VMULSS      (BX), X8, X7; \
	C1; \
	VFMADD231SS X7, X0, X13; \
	VFMADD231SS X6, X8, X13; \
	ADDQ        $size, SI; \
	ADDQ        $32, DI; \
	ADDQ        $4, BX; \
	ADDQ        $4, R10; \
	DECQ        CX; \
	JNZ         oneloop; \
	VMOVSS X13, (AX); \
	ADDQ   $4, AX; \
	DECQ   rows+48(FP); \
	JNZ    onerow; \
done: \
	VZEROUPPER; \
	RET

// QXGATHER sets x to the four activation rows' sums S for block index
// AX/4 (pointers to their arrays in the frame, s0-s3).
#define QXGATHER(x) \
	MOVQ      s0-32(SP), DX; \
	VMOVSS    (DX)(AX*1), x; \
	MOVQ      s1-24(SP), DX; \
	VINSERTPS $0x10, (DX)(AX*1), x, x; \
	MOVQ      s2-16(SP), DX; \
	VINSERTPS $0x20, (DX)(AX*1), x, x; \
	MOVQ      s3-8(SP), DX; \
	VINSERTPS $0x30, (DX)(AX*1), x, x

// QDOT4(SETUP, U, CX4, size) is the body of
// func dot4XAVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int):
// rows consecutive weight rows against four activation rows: row r's
// output for activation row k goes to out[k*stride + r]. R9-R12 point to
// the activation quants, BX, DI, R13, R14 to their scales, the frame holds
// the pointers to their sums S; AX = 4*block index (quants at 8*AX, scales
// and sums at AX). X13 accumulates the four outputs: X8 = d_w, X7 =
// d_a*d_w and X6 = S (four rows), then the offset or minimum term (CX4).
#define QDOT4(SETUP, U, CX4, size) \
	MOVQ w+0(FP), SI; \
	MOVQ s+24(FP), AX; \
	MOVQ 0(AX), DX; \
	MOVQ DX, s0-32(SP); \
	MOVQ 8(AX), DX; \
	MOVQ DX, s1-24(SP); \
	MOVQ 16(AX), DX; \
	MOVQ DX, s2-16(SP); \
	MOVQ 24(AX), DX; \
	MOVQ DX, s3-8(SP); \
	MOVQ qs+8(FP), AX; \
	PTRS4(R9, R10, R11, R12); \
	MOVQ d+16(FP), AX; \
	PTRS4(BX, DI, R13, R14); \
	MOVQ tab+40(FP), R8; \
	MOVQ stride+64(FP), R15; \
	SHLQ $2, R15; \
	SETUP; \
row: \
	MOVQ   nb+32(FP), CX; \
	XORQ   AX, AX; \
	VXORPS X13, X13, X13; \
loop: \
	MOVWLZX      (SI), DX; \
	VBROADCASTSS (R8)(DX*4), X8; \
	DA4(X7); \
	VMULPS       X8, X7, X7; \
	QXGATHER(X6); \
	CX4; \
	U((SI)); \
	QXA((R9)(AX*8), 16(R9)(AX*8), X0, X1); \
	QXA((R10)(AX*8), 16(R10)(AX*8), X2, X1); \
	QXA((R11)(AX*8), 16(R11)(AX*8), X10, X1); \
	QXA((R12)(AX*8), 16(R12)(AX*8), X12, X1); \
	XT4; \
	VCVTDQ2PS    X0, X0; \
	VFMADD231PS  X7, X0, X13; \
	VFMADD231PS  X6, X8, X13; \
	ADDQ         $size, SI; \
	ADDQ         $4, AX; \
	DECQ         CX; \
	JNZ          loop; \
	STOREX4(X13, out+56(FP), R15, DX); \
	DECQ       rows+48(FP); \
	JNZ        row; \
	VZEROUPPER; \
	RET

// QKERNELS(one, four, SETUP, W, C4, C1, U, CX4, size) is a type's two
// kernels (its TEXT symbols one and four), QDOT and QDOT4 with its macros:
// func dotXAVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)
// func dot4XAVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
#define QKERNELS(one, four, SETUP, W, C4, C1, U, CX4, size) \
	TEXT one(SB), NOSPLIT, $0-64; \
	QDOT(SETUP, W, C4, C1, size); \
	TEXT four(SB), NOSPLIT, $32-72; \
	QDOT4(SETUP, U, CX4, size)

QKERNELS(·dotQ4_0AVX2, ·dot4Q4_0AVX2, SETUPQ4_0, WQ4_0, C4OFF, C1Q4_0, UQ4_0, C4OFF, 18)
QKERNELS(·dotQ4_1AVX2, ·dot4Q4_1AVX2, QXCONST, WQ4_1, C4MIN, C1MIN, UQ4_1, CX4MIN, 20)
QKERNELS(·dotQ5_0AVX2, ·dot4Q5_0AVX2, SETUPQ5_0, WQ5_0, C4OFF, C1OFF, UQ5_0, C4OFF, 22)
QKERNELS(·dotQ5_1AVX2, ·dot4Q5_1AVX2, QXCONST, WQ5_1, C4MIN, C1MIN, UQ5_1, CX4MIN, 24)

WORDS16(q5lo<>, 0x0000000000000000, 0x0101010101010101)
WORDS16(q5hi<>, 0x0202020202020202, 0x0303030303030303)
SPLAT16(q5bits<>, 0x8040201008040201)
SPLAT16(q5x10<>, 0x1010101010101010)
