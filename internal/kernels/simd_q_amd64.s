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

// QARGS4 loads the four-input kernels' arguments: SI = w, R9-R12 the
// activation quants, BX, DI, R13, R14 their scales, the frame the pointers
// to their sums (s0-s3), R8 = tab.
#define QARGS4 \
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
	MOVQ tab+40(FP), R8

// QDOT4(SETUP, U, CX4, size) is the body of
// func dot4XAVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int):
// rows consecutive weight rows against four activation rows: row r's
// output for activation row k goes to out[k*stride + r]. R9-R12 point to
// the activation quants, BX, DI, R13, R14 to their scales, the frame holds
// the pointers to their sums S; AX = 4*block index (quants at 8*AX, scales
// and sums at AX). X13 accumulates the four outputs: X8 = d_w, X7 =
// d_a*d_w and X6 = S (four rows), then the offset or minimum term (CX4).
#define QDOT4(SETUP, U, CX4, size) \
	QARGS4; \
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

QKERNELS(·dotQ4_0AVX2, ·dot4Q4_0AVX2X, SETUPQ4_0, WQ4_0, C4OFF, C1Q4_0, UQ4_0, C4OFF, 18)
QKERNELS(·dotQ4_1AVX2, ·dot4Q4_1AVX2X, QXCONST, WQ4_1, C4MIN, C1MIN, UQ4_1, CX4MIN, 20)
QKERNELS(·dotQ5_0AVX2, ·dot4Q5_0AVX2X, SETUPQ5_0, WQ5_0, C4OFF, C1OFF, UQ5_0, C4OFF, 22)
QKERNELS(·dotQ5_1AVX2, ·dot4Q5_1AVX2X, QXCONST, WQ5_1, C4MIN, C1MIN, UQ5_1, CX4MIN, 24)

// The four-input kernels on 256-bit registers (split256 picks them on
// CPUs whose vector units are 256 bits wide): a block's 32 quants in one
// register in element order, two weight rows at a time against the four
// activation rows, so that the scales, sums and activation blocks serve
// both. Per output and block the same exact integer sum and float steps as
// QDOT4 (the X forms), so the same bits.

// QYCONST sets Y15 to int16 ones, Y14 to 0x0f bytes; QYNEG(c) also Y4 =
// the float32 with bits c.
#define QYCONST \
	VPCMPEQW     Y15, Y15, Y15; \
	VPSRLW       $15, Y15, Y15; \
	MOVL         $0x0f0f0f0f, DX; \
	VMOVD        DX, X14; \
	VPBROADCASTD X14, Y14

#define QYNEG(c) \
	QYCONST; \
	MOVL         $c, DX; \
	VMOVD        DX, X4; \
	VBROADCASTSS X4, Y4

#define SETUPYQ4_0 QYNEG(0xc1000000)
#define SETUPYQ5_0 QYNEG(0xc1800000)

// QYNIB(qp, y): y = the 32 nibbles of the 16 bytes at qp in element order
// (low nibbles, then high ones): the bytes in both halves, the high half's
// dwords shifted right by 4, masked.
#define QYNIB(qp, y) \
	VBROADCASTI128 qp, y; \
	VPSRLVD        qyshift<>(SB), y, y; \
	VPAND          Y14, y, y

// QYFIFTH ors the fifth bits (the 32-bit qh at qhp) into y as 0x10:
// byte i/8 of qh spread to byte i, its bit i%8 picked; Y0 is clobbered.
#define QYFIFTH(qhp, y) \
	VPBROADCASTD qhp, Y0; \
	VPSHUFB      qyspread<>(SB), Y0, Y0; \
	VPAND        qybits<>(SB), Y0, Y0; \
	VPCMPEQB     qybits<>(SB), Y0, Y0; \
	VPAND        qyx10<>(SB), Y0, Y0; \
	VPOR         Y0, y, y

// UY<type>(b, y): y = the 32 quants of the block at b.
#define UYQ4_0(b, y) QYNIB(2 b, y)
#define UYQ4_1(b, y) QYNIB(4 b, y)
#define UYQ5_0(b, y) QYNIB(6 b, y); QYFIFTH(2 b, y)
#define UYQ5_1(b, y) QYNIB(8 b, y); QYFIFTH(4 b, y)

// QYA(a, p): p = one activation row's block at a against row 0's quants
// (Y5); QYB against row 1's (Y9).
#define QYA(a, p) \
	VPMADDUBSW a, Y5, p; \
	VPMADDWD   Y15, p, p

#define QYB(a, p) \
	VPMADDUBSW a, Y9, p; \
	VPMADDWD   Y15, p, p

// The offset or minimum term for two weight rows: Y6 = f*S, or Y8 = the
// two rows' minimums m (row 0's in the low half).
#define CYOFF VMULPS Y4, Y6, Y6
#define CYMIN \
	MOVWLZX      2(SI), DX; \
	VBROADCASTSS (R8)(DX*4), X8; \
	MOVWLZX      2(SI)(R15*1), DX; \
	VBROADCASTSS (R8)(DX*4), X5; \
	VINSERTF128  $1, X5, Y8, Y8

// QDOT4Y(SETUP, UY, CY, size) is the body of
// func dot4XAVX2Y(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int):
// QDOT4's registers and frame, with R15 the row size; rows two at a time,
// Y13 accumulating row 0's four outputs in its low half and row 1's in its
// high half: Y8 = d_w, Y7 = d_a*d_w and Y6 = S (the halves for the two
// rows), then the offset or minimum term (CY). An odd last row runs as a
// pair with itself (R15 = 0) and stores the low half.
#define QDOT4Y(SETUP, UY, CY, size) \
	QARGS4; \
	SETUP; \
row: \
	MOVQ  nb+32(FP), R15; \
	IMULQ $size, R15; \
	CMPQ  rows+48(FP), $1; \
	JNE   pair; \
	XORQ  R15, R15; \
pair: \
	MOVQ   nb+32(FP), CX; \
	XORQ   AX, AX; \
	VXORPS Y13, Y13, Y13; \
loop: \
	MOVWLZX      (SI), DX; \
	VBROADCASTSS (R8)(DX*4), X8; \
	MOVWLZX      (SI)(R15*1), DX; \
	VBROADCASTSS (R8)(DX*4), X7; \
	VINSERTF128  $1, X7, Y8, Y8; \
	DA4(X7); \
	VINSERTF128  $1, X7, Y7, Y7; \
	VMULPS       Y8, Y7, Y7; \
	QXGATHER(X6); \
	VINSERTF128  $1, X6, Y6, Y6; \
	CY; \
	UY((SI), Y5); \
	UY((SI)(R15*1), Y9); \
	QYA((R9)(AX*8), Y0); \
	QYA((R10)(AX*8), Y1); \
	QYA((R11)(AX*8), Y2); \
	QYA((R12)(AX*8), Y3); \
	KT2(Y0, Y1, Y10); \
	KT2(Y2, Y3, Y10); \
	KT4(Y0, Y2, Y10); \
	QYB((R9)(AX*8), Y1); \
	QYB((R10)(AX*8), Y2); \
	QYB((R11)(AX*8), Y3); \
	QYB((R12)(AX*8), Y10); \
	KT2(Y1, Y2, Y11); \
	KT2(Y3, Y10, Y11); \
	KT4(Y1, Y3, Y11); \
	KH2(Y0, Y1, Y2, Y3); \
	VCVTDQ2PS    Y2, Y2; \
	VFMADD231PS  Y7, Y2, Y13; \
	VFMADD231PS  Y6, Y8, Y13; \
	ADDQ         $size, SI; \
	ADDQ         $4, AX; \
	DECQ         CX; \
	JNZ          loop; \
	MOVQ         stride+64(FP), CX; \
	SHLQ         $2, CX; \
	STOREX4(X13, out+56(FP), CX, DX); \
	DECQ         rows+48(FP); \
	JZ           done; \
	VEXTRACTF128 $1, Y13, X13; \
	STOREX4(X13, out+56(FP), CX, DX); \
	ADDQ         R15, SI; \
	DECQ         rows+48(FP); \
	JNZ          row; \
done: \
	VZEROUPPER; \
	RET

// QKERNELSY(four, wide, narrow, SETUP, UY, CY, size): a type's four-input
// kernel on 256-bit registers (wide, QDOT4Y) and the entry point the
// tables call (four), which jumps to wide or, where the CPU splits 256-bit
// integer multiplies (split256), to narrow (QDOT4).
#define QKERNELSY(four, wide, narrow, SETUP, UY, CY, size) \
	TEXT wide(SB), NOSPLIT, $32-72; \
	QDOT4Y(SETUP, UY, CY, size); \
	TEXT four(SB), NOSPLIT, $0-72; \
	SPLIT256(wide, narrow)

QKERNELSY(·dot4Q4_0AVX2, ·dot4Q4_0AVX2Y, ·dot4Q4_0AVX2X, SETUPYQ4_0, UYQ4_0, CYOFF, 18)
QKERNELSY(·dot4Q4_1AVX2, ·dot4Q4_1AVX2Y, ·dot4Q4_1AVX2X, QYCONST, UYQ4_1, CYMIN, 20)
QKERNELSY(·dot4Q5_0AVX2, ·dot4Q5_0AVX2Y, ·dot4Q5_0AVX2X, SETUPYQ5_0, UYQ5_0, CYOFF, 22)
QKERNELSY(·dot4Q5_1AVX2, ·dot4Q5_1AVX2Y, ·dot4Q5_1AVX2X, QYCONST, UYQ5_1, CYMIN, 24)

// qyshift: VPSRLVD counts, 0 for the low half's dwords, 4 for the high's.
PERM8(qyshift<>, 0, 0, 0, 0, 4, 4, 4, 4)

// qyspread: VPSHUFB indices, byte i/8 of the broadcast qh to byte i.
DATA qyspread<>+0(SB)/8, $0x0000000000000000
DATA qyspread<>+8(SB)/8, $0x0101010101010101
DATA qyspread<>+16(SB)/8, $0x0202020202020202
DATA qyspread<>+24(SB)/8, $0x0303030303030303
GLOBL qyspread<>(SB), RODATA|NOPTR, $32

SPLAT32(qybits<>, 0x8040201008040201)
SPLAT32(qyx10<>, 0x1010101010101010)

WORDS16(q5lo<>, 0x0000000000000000, 0x0101010101010101)
WORDS16(q5hi<>, 0x0202020202020202, 0x0303030303030303)
SPLAT16(q5bits<>, 0x8040201008040201)
SPLAT16(q5x10<>, 0x1010101010101010)
