//go:build amd64 && !purego

#include "textflag.h"

// Q4_0 kernels. The nibbles (0..15) are VPMADDUBSW's unsigned operand as
// they are, against the activations; the low and high halves of a block
// are summed as int16 (no overflow: |pair| <= 2*15*127) before one
// VPMADDWD, so a block costs 3 cycles of the pipe that runs both. The -8
// offset is applied as a float correction with S = d_a*Σa (part of the
// activations): per block, acc = fma(float(X), d_w*d_a, acc) then acc =
// fma(d_w, -8*S, acc) with X = Σ nibble*a. Every kernel does exactly this
// per output (the four-way ones in the lanes of one register after a
// transposition of four blocks' sums, as the Q8_0 kernels), so MatMul's
// results do not depend on the batch.

// Q4CONST sets X15 to int16 ones, X14 to 0x0f bytes and X4 to -8.0.
#define Q4CONST \
	VPCMPEQW     X15, X15, X15; \
	VPSRLW       $15, X15, X15; \
	MOVL         $0x0f0f0f0f, DX; \
	VMOVD        DX, X14; \
	VPBROADCASTD X14, X14; \
	MOVL         $0xc1000000, DX; \
	VMOVD        DX, X4; \
	VBROADCASTSS X4, X4

// Q4T4: X0 = [ΣX0, ΣX2, ΣX10, ΣX12] (lane sums); X1, X3 are clobbered.
#define Q4T4 \
	VPUNPCKLDQ  X2, X0, X1; \
	VPUNPCKHDQ  X2, X0, X0; \
	VPADDD      X1, X0, X0; \
	VPUNPCKLDQ  X12, X10, X3; \
	VPUNPCKHDQ  X12, X10, X10; \
	VPADDD      X3, X10, X10; \
	VPUNPCKLQDQ X10, X0, X1; \
	VPUNPCKHQDQ X10, X0, X0; \
	VPADDD      X1, X0, X0

// Q4W: the 4 int32 partial sums p of Σ nibble*a of one weight block
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

// func dotQ4_0AVX2(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)
// rows consecutive weight rows against one activation row (matrix-vector
// products loop here rather than in Go: a call costs about as much as a
// sixth of a 768-wide row): four rows at a time (X13 accumulates their
// outputs), the last rows%4 one by one. R13 is the row size, R9 three
// rows, R15 the prefetch pointer.
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-64
	MOVQ  w+0(FP), SI
	MOVQ  tab+40(FP), R8
	MOVQ  out+56(FP), AX
	MOVQ  nb+32(FP), R13
	IMULQ $18, R13
	LEAQ  (R13)(R13*2), R9
	Q4CONST
	SUBQ  $4, rows+48(FP)
	JL    q4one

q4four:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   s+24(FP), R10
	MOVQ   nb+32(FP), CX
	VXORPS X13, X13, X13
	LEAQ   (SI)(R9*1), R15
	ADDQ   R13, R15

q4fourloop:
	// X8 = the four rows' d_w, X7 = d_w*d_a, X6 = -8*S.
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

	// Four short rows at once do not look like a stream to the hardware
	// prefetcher: fetch the next four rows' 72 bytes a block ahead.
	PREFETCHT0   (R15)
	PREFETCHT0   64(R15)
	ADDQ         $72, R15

	Q4W(2(SI), X0, X1)
	Q4W(2(SI)(R13*1), X2, X1)
	Q4W(2(SI)(R13*2), X10, X1)
	Q4W(2(SI)(R9*1), X12, X1)
	Q4T4
	VCVTDQ2PS    X0, X0
	VFMADD231PS  X7, X0, X13
	VFMADD231PS  X6, X8, X13
	ADDQ         $18, SI
	ADDQ         $32, DI
	ADDQ         $4, BX
	ADDQ         $4, R10
	DECQ         CX
	JNZ          q4fourloop

	VMOVUPS X13, (AX)
	ADDQ    $16, AX
	ADDQ    R9, SI                  // SI is at the end of the first row
	SUBQ    $4, rows+48(FP)
	JGE     q4four

q4one:
	ADDQ $4, rows+48(FP)
	JZ   q4done

q4onerow:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   s+24(FP), R10
	MOVQ   nb+32(FP), CX
	VXORPS X13, X13, X13

q4oneloop:
	Q4W(2(SI), X0, X1)
	VPSHUFD     $0x4e, X0, X1
	VPADDD      X1, X0, X0
	VPSHUFD     $0xb1, X0, X1
	VPADDD      X1, X0, X0
	VCVTDQ2PS   X0, X0
	MOVWLZX     (SI), DX
	VMOVSS      (R8)(DX*4), X8
	VMULSS      (BX), X8, X7
	VMULSS      (R10), X4, X6
	VFMADD231SS X7, X0, X13
	VFMADD231SS X6, X8, X13
	ADDQ        $18, SI
	ADDQ        $32, DI
	ADDQ        $4, BX
	ADDQ        $4, R10
	DECQ        CX
	JNZ         q4oneloop

	VMOVSS X13, (AX)
	ADDQ   $4, AX
	DECQ   rows+48(FP)
	JNZ    q4onerow

q4done:
	VZEROUPPER
	RET

// Q4A: one activation row's block (quant halves at a0, a1) against the
// weight block's low nibbles in X5 and high nibbles in X9: p = partial
// sums, t is clobbered.
#define Q4A(a0, a1, p, t) \
	VPMADDUBSW a0, X5, p; \
	VPMADDUBSW a1, X9, t; \
	VPADDW     t, p, p; \
	VPMADDWD   X15, p, p

// Q4GATHER sets x to the four activation rows' sums S for block index
// AX/4 (pointers to their arrays in the frame, s0-s3).
#define Q4GATHER(x) \
	MOVQ      s0-32(SP), DX; \
	VMOVSS    (DX)(AX*1), x; \
	MOVQ      s1-24(SP), DX; \
	VINSERTPS $0x10, (DX)(AX*1), x, x; \
	MOVQ      s2-16(SP), DX; \
	VINSERTPS $0x20, (DX)(AX*1), x, x; \
	MOVQ      s3-8(SP), DX; \
	VINSERTPS $0x30, (DX)(AX*1), x, x

// func dot4Q4_0AVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
// rows consecutive weight rows against four activation rows: row r's
// output for activation row k goes to out[k*stride + r]. R9-R12 point to
// the activation quants, BX, DI, R13, R14 to their scales, the frame holds
// the pointers to their sums S; AX = 4*block index (quants at 8*AX, scales
// and sums at AX). X13 accumulates the four outputs.
TEXT ·dot4Q4_0AVX2(SB), NOSPLIT, $32-72
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
	Q4CONST

q4x4row:
	MOVQ   nb+32(FP), CX
	XORQ   AX, AX
	VXORPS X13, X13, X13

q4x4loop:
	// X8 = d_w, X7 = d_a*d_w (four rows), X6 = -8*S (four rows).
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), X8
	VMOVSS       (BX)(AX*1), X7
	VINSERTPS    $0x10, (DI)(AX*1), X7, X7
	VINSERTPS    $0x20, (R13)(AX*1), X7, X7
	VINSERTPS    $0x30, (R14)(AX*1), X7, X7
	VMULPS       X8, X7, X7
	Q4GATHER(X6)
	VMULPS       X4, X6, X6

	VMOVDQU      2(SI), X5
	VPSRLW       $4, X5, X9
	VPAND        X14, X5, X5
	VPAND        X14, X9, X9
	Q4A((R9)(AX*8), 16(R9)(AX*8), X0, X1)
	Q4A((R10)(AX*8), 16(R10)(AX*8), X2, X1)
	Q4A((R11)(AX*8), 16(R11)(AX*8), X10, X1)
	Q4A((R12)(AX*8), 16(R12)(AX*8), X12, X1)
	Q4T4
	VCVTDQ2PS    X0, X0
	VFMADD231PS  X7, X0, X13
	VFMADD231PS  X6, X8, X13
	ADDQ         $18, SI
	ADDQ         $4, AX
	DECQ         CX
	JNZ          q4x4loop

	MOVQ       out+56(FP), DX
	VMOVSS     X13, (DX)
	VEXTRACTPS $1, X13, (DX)(R15*1)
	VEXTRACTPS $2, X13, (DX)(R15*2)
	LEAQ       (DX)(R15*2), DX
	VEXTRACTPS $3, X13, (DX)(R15*1)
	ADDQ       $4, out+56(FP)
	DECQ       rows+48(FP)
	JNZ        q4x4row
	VZEROUPPER
	RET
