//go:build amd64 && !purego

#include "textflag.h"

// Q4_1, Q5_0 and Q5_1 kernels in the Q4_0 scheme (see simd_q_amd64.s):
// unsigned quants (0..15, or 0..31 with the fifth bit) straight into
// VPMADDUBSW, the two halves of a block summed as int16 (|pair| <=
// 2*31*127) before one VPMADDWD; the offset (Q5_0: -16*d) or minimum (m)
// applied through S = d_a*Σa. Every kernel does, per output and block,
// acc = fma(float(X), d*d_a, acc) then acc = fma(c, f*S, acc) with X the
// exact Σ q*a, c = m (f = 1) or c = d (f = -16): the one-input kernels
// on four rows in the lanes of one register, the four-input ones on four
// activation rows, after a transposition of four blocks' sums. So a row
// gives the same bits alone or in a batch. The fifth bits of Q5 are spread
// to bytes with VPSHUFB (byte i/8 of qh to byte i), a bit mask and a
// compare.

// QXCONST sets X15 to int16 ones, X14 to 0x0f bytes.
#define QXCONST \
	VPCMPEQW     X15, X15, X15; \
	VPSRLW       $15, X15, X15; \
	MOVL         $0x0f0f0f0f, DX; \
	VMOVD        DX, X14; \
	VPBROADCASTD X14, X14

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

// QXA: one activation row's block (halves at a0, a1) against the weight
// quants in X5 (0-15) and X9 (16-31): p = partial sums; t is clobbered.
#define QXA(a0, a1, p, t) \
	VPMADDUBSW a0, X5, p; \
	VPMADDUBSW a1, X9, t; \
	VPADDW     t, p, p; \
	VPMADDWD   X15, p, p

// QXT4: X0 = [ΣX0, ΣX2, ΣX10, ΣX12] (lane sums); X1, X3 are clobbered.
#define QXT4 \
	VPUNPCKLDQ  X2, X0, X1; \
	VPUNPCKHDQ  X2, X0, X0; \
	VPADDD      X1, X0, X0; \
	VPUNPCKLDQ  X12, X10, X3; \
	VPUNPCKHDQ  X12, X10, X10; \
	VPADDD      X3, X10, X10; \
	VPUNPCKLQDQ X10, X0, X1; \
	VPUNPCKHQDQ X10, X0, X0; \
	VPADDD      X1, X0, X0

// func dotQ4_1AVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)
// rows consecutive weight rows against one activation row: four rows at
// a time (X13 accumulates their outputs), the last rows%4 one by one.
// R13 is the row size, R9 three rows, R15 the prefetch pointer.
TEXT ·dotQ4_1AVX2(SB), NOSPLIT, $0-64
	MOVQ  w+0(FP), SI
	MOVQ  tab+40(FP), R8
	MOVQ  out+56(FP), AX
	MOVQ  nb+32(FP), R13
	IMULQ $20, R13
	LEAQ  (R13)(R13*2), R9
	QXCONST
	SUBQ  $4, rows+48(FP)
	JL    q41one

q41four:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   s+24(FP), R10
	MOVQ   nb+32(FP), CX
	VXORPS X13, X13, X13
	LEAQ   (SI)(R9*1), R15
	ADDQ   R13, R15

q41fourloop:
	MOVWLZX      (SI), DX
	MOVWLZX      (SI)(R13*1), R11
	MOVWLZX      (SI)(R13*2), R12
	MOVWLZX      (SI)(R9*1), R14
	VMOVSS       (R8)(DX*4), X8
	VINSERTPS    $0x10, (R8)(R11*4), X8, X8
	VINSERTPS    $0x20, (R8)(R12*4), X8, X8
	VINSERTPS    $0x30, (R8)(R14*4), X8, X8
	VBROADCASTSS (BX), X7
	VMULPS       X7, X8, X7
	VBROADCASTSS (R10), X6
	MOVWLZX      2(SI), DX
	MOVWLZX      2(SI)(R13*1), R11
	MOVWLZX      2(SI)(R13*2), R12
	MOVWLZX      2(SI)(R9*1), R14
	VMOVSS       (R8)(DX*4), X8
	VINSERTPS    $0x10, (R8)(R11*4), X8, X8
	VINSERTPS    $0x20, (R8)(R12*4), X8, X8
	VINSERTPS    $0x30, (R8)(R14*4), X8, X8
	PREFETCHT0   (R15)
	PREFETCHT0   64(R15)
	ADDQ         $80, R15
	QXNIB(4(SI), X5, X9)
	QXSUM(X5, X9, X0)
	QXNIB(4(SI)(R13*1), X5, X9)
	QXSUM(X5, X9, X2)
	QXNIB(4(SI)(R13*2), X5, X9)
	QXSUM(X5, X9, X10)
	QXNIB(4(SI)(R9*1), X5, X9)
	QXSUM(X5, X9, X12)
	QXT4
	VCVTDQ2PS    X0, X0
	VFMADD231PS  X7, X0, X13
	VFMADD231PS  X6, X8, X13
	ADDQ         $20, SI
	ADDQ         $32, DI
	ADDQ         $4, BX
	ADDQ         $4, R10
	DECQ         CX
	JNZ          q41fourloop

	VMOVUPS X13, (AX)
	ADDQ    $16, AX
	ADDQ    R9, SI
	SUBQ    $4, rows+48(FP)
	JGE     q41four

q41one:
	ADDQ $4, rows+48(FP)
	JZ   q41done

q41onerow:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   s+24(FP), R10
	MOVQ   nb+32(FP), CX
	VXORPS X13, X13, X13

q41oneloop:
	QXNIB(4(SI), X5, X9)
	QXSUM(X5, X9, X0)
	VPSHUFD     $0x4e, X0, X1
	VPADDD      X1, X0, X0
	VPSHUFD     $0xb1, X0, X1
	VPADDD      X1, X0, X0
	VCVTDQ2PS   X0, X0
	MOVWLZX     (SI), DX
	VMOVSS      (R8)(DX*4), X8
	VMULSS      (BX), X8, X7
	VMOVSS      (R10), X6
	MOVWLZX     2(SI), DX
	VMOVSS      (R8)(DX*4), X8
	VFMADD231SS X7, X0, X13
	VFMADD231SS X6, X8, X13
	ADDQ        $20, SI
	ADDQ        $32, DI
	ADDQ        $4, BX
	ADDQ        $4, R10
	DECQ        CX
	JNZ         q41oneloop

	VMOVSS X13, (AX)
	ADDQ   $4, AX
	DECQ   rows+48(FP)
	JNZ    q41onerow

q41done:
	VZEROUPPER
	RET

// func dot4Q4_1AVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
// rows consecutive weight rows against four activation rows: row r's
// output for activation row k goes to out[k*stride + r]. R9-R12 point to
// the activation quants, BX, DI, R13, R14 to their scales, the frame holds
// the pointers to their sums S, AX = 4*block index. X13 accumulates.
TEXT ·dot4Q4_1AVX2(SB), NOSPLIT, $32-72
	MOVQ w+0(FP), SI
	MOVQ s+24(FP), AX
	MOVQ 0(AX), DX
	MOVQ DX, s0-32(SP)
	MOVQ 8(AX), DX
	MOVQ DX, s1-24(SP)
	MOVQ 16(AX), DX
	MOVQ DX, s2-16(SP)
	MOVQ 24(AX), DX
	MOVQ DX, s3-8(SP)
	MOVQ qs+8(FP), AX
	MOVQ 0(AX), R9
	MOVQ 8(AX), R10
	MOVQ 16(AX), R11
	MOVQ 24(AX), R12
	MOVQ d+16(FP), AX
	MOVQ 0(AX), BX
	MOVQ 8(AX), DI
	MOVQ 16(AX), R13
	MOVQ 24(AX), R14
	MOVQ tab+40(FP), R8
	MOVQ stride+64(FP), R15
	SHLQ $2, R15
	QXCONST

q41x4row:
	MOVQ   nb+32(FP), CX
	XORQ   AX, AX
	VXORPS X13, X13, X13

q41x4loop:
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), X8
	VMOVSS       (BX)(AX*1), X7
	VINSERTPS    $0x10, (DI)(AX*1), X7, X7
	VINSERTPS    $0x20, (R13)(AX*1), X7, X7
	VINSERTPS    $0x30, (R14)(AX*1), X7, X7
	VMULPS       X8, X7, X7
	MOVQ         s0-32(SP), DX
	VMOVSS       (DX)(AX*1), X6
	MOVQ         s1-24(SP), DX
	VINSERTPS    $0x10, (DX)(AX*1), X6, X6
	MOVQ         s2-16(SP), DX
	VINSERTPS    $0x20, (DX)(AX*1), X6, X6
	MOVQ         s3-8(SP), DX
	VINSERTPS    $0x30, (DX)(AX*1), X6, X6
	MOVWLZX      2(SI), DX
	VBROADCASTSS (R8)(DX*4), X8
	QXNIB(4(SI), X5, X9)
	QXA((R9)(AX*8), 16(R9)(AX*8), X0, X1)
	QXA((R10)(AX*8), 16(R10)(AX*8), X2, X1)
	QXA((R11)(AX*8), 16(R11)(AX*8), X10, X1)
	QXA((R12)(AX*8), 16(R12)(AX*8), X12, X1)
	QXT4
	VCVTDQ2PS    X0, X0
	VFMADD231PS  X7, X0, X13
	VFMADD231PS  X6, X8, X13
	ADDQ         $20, SI
	ADDQ         $4, AX
	DECQ         CX
	JNZ          q41x4loop

	MOVQ       out+56(FP), DX
	VMOVSS     X13, (DX)
	VEXTRACTPS $1, X13, (DX)(R15*1)
	VEXTRACTPS $2, X13, (DX)(R15*2)
	LEAQ       (DX)(R15*2), DX
	VEXTRACTPS $3, X13, (DX)(R15*1)
	ADDQ       $4, out+56(FP)
	DECQ       rows+48(FP)
	JNZ        q41x4row
	VZEROUPPER
	RET

// func dotQ5_0AVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)
// rows consecutive weight rows against one activation row: four rows at
// a time (X13 accumulates their outputs), the last rows%4 one by one.
// R13 is the row size, R9 three rows, R15 the prefetch pointer.
TEXT ·dotQ5_0AVX2(SB), NOSPLIT, $0-64
	MOVQ  w+0(FP), SI
	MOVQ  tab+40(FP), R8
	MOVQ  out+56(FP), AX
	MOVQ  nb+32(FP), R13
	IMULQ $22, R13
	LEAQ  (R13)(R13*2), R9
	QXCONST
	MOVL  $0xc1800000, DX
	VMOVD DX, X4
	VBROADCASTSS X4, X4
	SUBQ  $4, rows+48(FP)
	JL    q50one

q50four:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   s+24(FP), R10
	MOVQ   nb+32(FP), CX
	VXORPS X13, X13, X13
	LEAQ   (SI)(R9*1), R15
	ADDQ   R13, R15

q50fourloop:
	MOVWLZX      (SI), DX
	MOVWLZX      (SI)(R13*1), R11
	MOVWLZX      (SI)(R13*2), R12
	MOVWLZX      (SI)(R9*1), R14
	VMOVSS       (R8)(DX*4), X8
	VINSERTPS    $0x10, (R8)(R11*4), X8, X8
	VINSERTPS    $0x20, (R8)(R12*4), X8, X8
	VINSERTPS    $0x30, (R8)(R14*4), X8, X8
	VBROADCASTSS (BX), X7
	VMULPS       X7, X8, X7
	VBROADCASTSS (R10), X6
	VMULPS       X4, X6, X6
	PREFETCHT0   (R15)
	PREFETCHT0   64(R15)
	ADDQ         $88, R15
	QXNIB(6(SI), X5, X9)
	QXFIFTH(2(SI), X5, X9, X1, X3)
	QXSUM(X5, X9, X0)
	QXNIB(6(SI)(R13*1), X5, X9)
	QXFIFTH(2(SI)(R13*1), X5, X9, X1, X3)
	QXSUM(X5, X9, X2)
	QXNIB(6(SI)(R13*2), X5, X9)
	QXFIFTH(2(SI)(R13*2), X5, X9, X1, X3)
	QXSUM(X5, X9, X10)
	QXNIB(6(SI)(R9*1), X5, X9)
	QXFIFTH(2(SI)(R9*1), X5, X9, X1, X3)
	QXSUM(X5, X9, X12)
	QXT4
	VCVTDQ2PS    X0, X0
	VFMADD231PS  X7, X0, X13
	VFMADD231PS  X6, X8, X13
	ADDQ         $22, SI
	ADDQ         $32, DI
	ADDQ         $4, BX
	ADDQ         $4, R10
	DECQ         CX
	JNZ          q50fourloop

	VMOVUPS X13, (AX)
	ADDQ    $16, AX
	ADDQ    R9, SI
	SUBQ    $4, rows+48(FP)
	JGE     q50four

q50one:
	ADDQ $4, rows+48(FP)
	JZ   q50done

q50onerow:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   s+24(FP), R10
	MOVQ   nb+32(FP), CX
	VXORPS X13, X13, X13

q50oneloop:
	QXNIB(6(SI), X5, X9)
	QXFIFTH(2(SI), X5, X9, X1, X3)
	QXSUM(X5, X9, X0)
	VPSHUFD     $0x4e, X0, X1
	VPADDD      X1, X0, X0
	VPSHUFD     $0xb1, X0, X1
	VPADDD      X1, X0, X0
	VCVTDQ2PS   X0, X0
	MOVWLZX     (SI), DX
	VMOVSS      (R8)(DX*4), X8
	VMULSS      (BX), X8, X7
	VMOVSS      (R10), X6
	VMULSS      X4, X6, X6
	VFMADD231SS X7, X0, X13
	VFMADD231SS X6, X8, X13
	ADDQ        $22, SI
	ADDQ        $32, DI
	ADDQ        $4, BX
	ADDQ        $4, R10
	DECQ        CX
	JNZ         q50oneloop

	VMOVSS X13, (AX)
	ADDQ   $4, AX
	DECQ   rows+48(FP)
	JNZ    q50onerow

q50done:
	VZEROUPPER
	RET

// func dot4Q5_0AVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
// rows consecutive weight rows against four activation rows: row r's
// output for activation row k goes to out[k*stride + r]. R9-R12 point to
// the activation quants, BX, DI, R13, R14 to their scales, the frame holds
// the pointers to their sums S, AX = 4*block index. X13 accumulates.
TEXT ·dot4Q5_0AVX2(SB), NOSPLIT, $32-72
	MOVQ w+0(FP), SI
	MOVQ s+24(FP), AX
	MOVQ 0(AX), DX
	MOVQ DX, s0-32(SP)
	MOVQ 8(AX), DX
	MOVQ DX, s1-24(SP)
	MOVQ 16(AX), DX
	MOVQ DX, s2-16(SP)
	MOVQ 24(AX), DX
	MOVQ DX, s3-8(SP)
	MOVQ qs+8(FP), AX
	MOVQ 0(AX), R9
	MOVQ 8(AX), R10
	MOVQ 16(AX), R11
	MOVQ 24(AX), R12
	MOVQ d+16(FP), AX
	MOVQ 0(AX), BX
	MOVQ 8(AX), DI
	MOVQ 16(AX), R13
	MOVQ 24(AX), R14
	MOVQ tab+40(FP), R8
	MOVQ stride+64(FP), R15
	SHLQ $2, R15
	QXCONST
	MOVL  $0xc1800000, DX
	VMOVD DX, X4
	VBROADCASTSS X4, X4

q50x4row:
	MOVQ   nb+32(FP), CX
	XORQ   AX, AX
	VXORPS X13, X13, X13

q50x4loop:
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), X8
	VMOVSS       (BX)(AX*1), X7
	VINSERTPS    $0x10, (DI)(AX*1), X7, X7
	VINSERTPS    $0x20, (R13)(AX*1), X7, X7
	VINSERTPS    $0x30, (R14)(AX*1), X7, X7
	VMULPS       X8, X7, X7
	MOVQ         s0-32(SP), DX
	VMOVSS       (DX)(AX*1), X6
	MOVQ         s1-24(SP), DX
	VINSERTPS    $0x10, (DX)(AX*1), X6, X6
	MOVQ         s2-16(SP), DX
	VINSERTPS    $0x20, (DX)(AX*1), X6, X6
	MOVQ         s3-8(SP), DX
	VINSERTPS    $0x30, (DX)(AX*1), X6, X6
	VMULPS       X4, X6, X6
	QXNIB(6(SI), X5, X9)
	QXFIFTH(2(SI), X5, X9, X1, X3)
	QXA((R9)(AX*8), 16(R9)(AX*8), X0, X1)
	QXA((R10)(AX*8), 16(R10)(AX*8), X2, X1)
	QXA((R11)(AX*8), 16(R11)(AX*8), X10, X1)
	QXA((R12)(AX*8), 16(R12)(AX*8), X12, X1)
	QXT4
	VCVTDQ2PS    X0, X0
	VFMADD231PS  X7, X0, X13
	VFMADD231PS  X6, X8, X13
	ADDQ         $22, SI
	ADDQ         $4, AX
	DECQ         CX
	JNZ          q50x4loop

	MOVQ       out+56(FP), DX
	VMOVSS     X13, (DX)
	VEXTRACTPS $1, X13, (DX)(R15*1)
	VEXTRACTPS $2, X13, (DX)(R15*2)
	LEAQ       (DX)(R15*2), DX
	VEXTRACTPS $3, X13, (DX)(R15*1)
	ADDQ       $4, out+56(FP)
	DECQ       rows+48(FP)
	JNZ        q50x4row
	VZEROUPPER
	RET

// func dotQ5_1AVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)
// rows consecutive weight rows against one activation row: four rows at
// a time (X13 accumulates their outputs), the last rows%4 one by one.
// R13 is the row size, R9 three rows, R15 the prefetch pointer.
TEXT ·dotQ5_1AVX2(SB), NOSPLIT, $0-64
	MOVQ  w+0(FP), SI
	MOVQ  tab+40(FP), R8
	MOVQ  out+56(FP), AX
	MOVQ  nb+32(FP), R13
	IMULQ $24, R13
	LEAQ  (R13)(R13*2), R9
	QXCONST
	SUBQ  $4, rows+48(FP)
	JL    q51one

q51four:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   s+24(FP), R10
	MOVQ   nb+32(FP), CX
	VXORPS X13, X13, X13
	LEAQ   (SI)(R9*1), R15
	ADDQ   R13, R15

q51fourloop:
	MOVWLZX      (SI), DX
	MOVWLZX      (SI)(R13*1), R11
	MOVWLZX      (SI)(R13*2), R12
	MOVWLZX      (SI)(R9*1), R14
	VMOVSS       (R8)(DX*4), X8
	VINSERTPS    $0x10, (R8)(R11*4), X8, X8
	VINSERTPS    $0x20, (R8)(R12*4), X8, X8
	VINSERTPS    $0x30, (R8)(R14*4), X8, X8
	VBROADCASTSS (BX), X7
	VMULPS       X7, X8, X7
	VBROADCASTSS (R10), X6
	MOVWLZX      2(SI), DX
	MOVWLZX      2(SI)(R13*1), R11
	MOVWLZX      2(SI)(R13*2), R12
	MOVWLZX      2(SI)(R9*1), R14
	VMOVSS       (R8)(DX*4), X8
	VINSERTPS    $0x10, (R8)(R11*4), X8, X8
	VINSERTPS    $0x20, (R8)(R12*4), X8, X8
	VINSERTPS    $0x30, (R8)(R14*4), X8, X8
	PREFETCHT0   (R15)
	PREFETCHT0   64(R15)
	ADDQ         $96, R15
	QXNIB(8(SI), X5, X9)
	QXFIFTH(4(SI), X5, X9, X1, X3)
	QXSUM(X5, X9, X0)
	QXNIB(8(SI)(R13*1), X5, X9)
	QXFIFTH(4(SI)(R13*1), X5, X9, X1, X3)
	QXSUM(X5, X9, X2)
	QXNIB(8(SI)(R13*2), X5, X9)
	QXFIFTH(4(SI)(R13*2), X5, X9, X1, X3)
	QXSUM(X5, X9, X10)
	QXNIB(8(SI)(R9*1), X5, X9)
	QXFIFTH(4(SI)(R9*1), X5, X9, X1, X3)
	QXSUM(X5, X9, X12)
	QXT4
	VCVTDQ2PS    X0, X0
	VFMADD231PS  X7, X0, X13
	VFMADD231PS  X6, X8, X13
	ADDQ         $24, SI
	ADDQ         $32, DI
	ADDQ         $4, BX
	ADDQ         $4, R10
	DECQ         CX
	JNZ          q51fourloop

	VMOVUPS X13, (AX)
	ADDQ    $16, AX
	ADDQ    R9, SI
	SUBQ    $4, rows+48(FP)
	JGE     q51four

q51one:
	ADDQ $4, rows+48(FP)
	JZ   q51done

q51onerow:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   s+24(FP), R10
	MOVQ   nb+32(FP), CX
	VXORPS X13, X13, X13

q51oneloop:
	QXNIB(8(SI), X5, X9)
	QXFIFTH(4(SI), X5, X9, X1, X3)
	QXSUM(X5, X9, X0)
	VPSHUFD     $0x4e, X0, X1
	VPADDD      X1, X0, X0
	VPSHUFD     $0xb1, X0, X1
	VPADDD      X1, X0, X0
	VCVTDQ2PS   X0, X0
	MOVWLZX     (SI), DX
	VMOVSS      (R8)(DX*4), X8
	VMULSS      (BX), X8, X7
	VMOVSS      (R10), X6
	MOVWLZX     2(SI), DX
	VMOVSS      (R8)(DX*4), X8
	VFMADD231SS X7, X0, X13
	VFMADD231SS X6, X8, X13
	ADDQ        $24, SI
	ADDQ        $32, DI
	ADDQ        $4, BX
	ADDQ        $4, R10
	DECQ        CX
	JNZ         q51oneloop

	VMOVSS X13, (AX)
	ADDQ   $4, AX
	DECQ   rows+48(FP)
	JNZ    q51onerow

q51done:
	VZEROUPPER
	RET

// func dot4Q5_1AVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
// rows consecutive weight rows against four activation rows: row r's
// output for activation row k goes to out[k*stride + r]. R9-R12 point to
// the activation quants, BX, DI, R13, R14 to their scales, the frame holds
// the pointers to their sums S, AX = 4*block index. X13 accumulates.
TEXT ·dot4Q5_1AVX2(SB), NOSPLIT, $32-72
	MOVQ w+0(FP), SI
	MOVQ s+24(FP), AX
	MOVQ 0(AX), DX
	MOVQ DX, s0-32(SP)
	MOVQ 8(AX), DX
	MOVQ DX, s1-24(SP)
	MOVQ 16(AX), DX
	MOVQ DX, s2-16(SP)
	MOVQ 24(AX), DX
	MOVQ DX, s3-8(SP)
	MOVQ qs+8(FP), AX
	MOVQ 0(AX), R9
	MOVQ 8(AX), R10
	MOVQ 16(AX), R11
	MOVQ 24(AX), R12
	MOVQ d+16(FP), AX
	MOVQ 0(AX), BX
	MOVQ 8(AX), DI
	MOVQ 16(AX), R13
	MOVQ 24(AX), R14
	MOVQ tab+40(FP), R8
	MOVQ stride+64(FP), R15
	SHLQ $2, R15
	QXCONST

q51x4row:
	MOVQ   nb+32(FP), CX
	XORQ   AX, AX
	VXORPS X13, X13, X13

q51x4loop:
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), X8
	VMOVSS       (BX)(AX*1), X7
	VINSERTPS    $0x10, (DI)(AX*1), X7, X7
	VINSERTPS    $0x20, (R13)(AX*1), X7, X7
	VINSERTPS    $0x30, (R14)(AX*1), X7, X7
	VMULPS       X8, X7, X7
	MOVQ         s0-32(SP), DX
	VMOVSS       (DX)(AX*1), X6
	MOVQ         s1-24(SP), DX
	VINSERTPS    $0x10, (DX)(AX*1), X6, X6
	MOVQ         s2-16(SP), DX
	VINSERTPS    $0x20, (DX)(AX*1), X6, X6
	MOVQ         s3-8(SP), DX
	VINSERTPS    $0x30, (DX)(AX*1), X6, X6
	MOVWLZX      2(SI), DX
	VBROADCASTSS (R8)(DX*4), X8
	QXNIB(8(SI), X5, X9)
	QXFIFTH(4(SI), X5, X9, X1, X3)
	QXA((R9)(AX*8), 16(R9)(AX*8), X0, X1)
	QXA((R10)(AX*8), 16(R10)(AX*8), X2, X1)
	QXA((R11)(AX*8), 16(R11)(AX*8), X10, X1)
	QXA((R12)(AX*8), 16(R12)(AX*8), X12, X1)
	QXT4
	VCVTDQ2PS    X0, X0
	VFMADD231PS  X7, X0, X13
	VFMADD231PS  X6, X8, X13
	ADDQ         $24, SI
	ADDQ         $4, AX
	DECQ         CX
	JNZ          q51x4loop

	MOVQ       out+56(FP), DX
	VMOVSS     X13, (DX)
	VEXTRACTPS $1, X13, (DX)(R15*1)
	VEXTRACTPS $2, X13, (DX)(R15*2)
	LEAQ       (DX)(R15*2), DX
	VEXTRACTPS $3, X13, (DX)(R15*1)
	ADDQ       $4, out+56(FP)
	DECQ       rows+48(FP)
	JNZ        q51x4row
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
