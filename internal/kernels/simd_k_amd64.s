//go:build amd64 && !purego

#include "textflag.h"

// PFD is how far ahead of the weights the matrix-vector kernels prefetch
// (one stream; the hardware prefetcher alone leaves part of the memory
// bandwidth unused on Zen 1).
#define PFD 1024

// K-quants: super-blocks of 256 weights against 8 activation blocks of 32.
// Each activation block has its own scale, so every sub-block's integer sum
// is scaled in float; the sums of a super-block are gathered into one vector
// of 8 int32 (VPHADDD) so that one conversion and one FMA serve all of them.
// As in the Q4_0 kernel the quants are unpacked in 128-bit halves, summed as
// int16 per sub-block, and widened by VPMADDWD with ones.

// ONES16 sets Y15 to int16 ones.
#define ONES16 \
	VPCMPEQW Y15, Y15, Y15; \
	VPSRLW   $15, Y15, Y15

// MASK0F sets Y14 to 0x0f bytes.
#define MASK0F \
	MOVL         $0x0f0f0f0f, DX; \
	VMOVD        DX, X14; \
	VPBROADCASTD X14, Y14

// Q4KPAIR sets yl to the int32 sums [4 of the low nibbles | 4 of the high
// nibbles] times the activations of the 32 Q4_K quant bytes at q0p (bytes
// 0-15) and q1p (16-31); a0p-a3p are the four 16-byte activation pieces.
#define Q4KPAIR(q0p, q1p, a0p, a1p, a2p, a3p, xl, yl) \
	VMOVDQU     q0p, X5; \
	VMOVDQU     q1p, X6; \
	VPAND       X14, X5, xl; \
	VPAND       X14, X6, X11; \
	VPMADDUBSW  a0p, xl, xl; \
	VPMADDUBSW  a1p, X11, X11; \
	VPADDW      X11, xl, xl; \
	VPSRLW      $4, X5, X5; \
	VPSRLW      $4, X6, X6; \
	VPAND       X14, X5, X5; \
	VPAND       X14, X6, X6; \
	VPMADDUBSW  a2p, X5, X5; \
	VPMADDUBSW  a3p, X6, X6; \
	VPADDW      X6, X5, X5; \
	VINSERTI128 $1, X5, yl, yl; \
	VPMADDWD    Y15, yl, yl

// Q4KPAIR2 is Q4KPAIR with the two sub-blocks' int32 sums in xa and xb
// (for the KT2/KT4 transposition).
#define Q4KPAIR2(q0p, q1p, a0p, a1p, a2p, a3p, xa, xb) \
	VMOVDQU    q0p, X5; \
	VMOVDQU    q1p, X6; \
	VPAND      X14, X5, xa; \
	VPAND      X14, X6, X11; \
	VPMADDUBSW a0p, xa, xa; \
	VPMADDUBSW a1p, X11, X11; \
	VPADDW     X11, xa, xa; \
	VPSRLW     $4, X5, X5; \
	VPSRLW     $4, X6, X6; \
	VPAND      X14, X5, X5; \
	VPAND      X14, X6, X6; \
	VPMADDUBSW a2p, X5, X5; \
	VPMADDUBSW a3p, X6, X6; \
	VPADDW     X6, X5, xb; \
	VPMADDWD   X15, xa, xa; \
	VPMADDWD   X15, xb, xb

// SUMS8 turns the four pair vectors of a super-block (Y7-Y10, sub-blocks
// [0|1], [2|3], [4|5], [6|7]) into Y7 = the 8 sub-block sums in order, as
// floats. The VPHADDD tree leaves them as [0 2 4 6 | 1 3 5 7]; Y13 holds
// the VPERMD indices that put them back.
#define SUMS8 \
	VPHADDD   Y8, Y7, Y7; \
	VPHADDD   Y10, Y9, Y9; \
	VPHADDD   Y9, Y7, Y7; \
	VPERMD    Y7, Y13, Y7; \
	VCVTDQ2PS Y7, Y7

// Q6DOT: P = the int32 sums [4 of elements 0-15 times their scale | 4 of
// 16-31 times theirs] of one Q6_K block of 32: quants (0..63) in yq,
// activations at ap, scales as int16 in ysc ([sc0-7 | sc0-7] or
// [sc8-15 | sc8-15]) of which mp's VPSHUFB picks the block's pair.
// (q-32)*a pairs are q*a pairs less 32*a pairs (both within int16).
#define Q6DOT(yq, ap, mp, ysc, P) \
	VPMADDUBSW ap, yq, Y7; \
	VMOVDQU    q6m32<>(SB), Y6; \
	VPMADDUBSW ap, Y6, Y6; \
	VPSUBW     Y6, Y7, Y7; \
	VPSHUFB    mp, ysc, Y8; \
	VPMADDWD   Y8, Y7, P

// Q6HALF: the four blocks of one half (128 weights) of a Q6_K super-block,
// ql at qlp, qh at qhp, activations at a0p..a3p, scales in ysc; leaves the
// 4 block sums split over the lanes of B (VPHADDD tree: lane 0 has the
// elements 0-15 parts, lane 1 the 16-31 parts).
#define Q6HALF(qlp, ql1p, qhp, a0p, a1p, a2p, a3p, ysc, B) \
	VMOVDQU qhp, Y2; \
	VMOVDQU qlp, Y3; \
	VMOVDQU ql1p, Y4; \
	VPSLLW  $4, Y2, Y5; \
	VPAND   q6m30<>(SB), Y5, Y5; \
	VPAND   Y14, Y3, Y6; \
	VPOR    Y6, Y5, Y5; \
	Q6DOT(Y5, a0p, q6shuf<>+0(SB), ysc, Y9); \
	VPSLLW  $2, Y2, Y5; \
	VPAND   q6m30<>(SB), Y5, Y5; \
	VPAND   Y14, Y4, Y6; \
	VPOR    Y6, Y5, Y5; \
	Q6DOT(Y5, a1p, q6shuf<>+32(SB), ysc, Y1); \
	VPHADDD Y1, Y9, Y9; \
	VPAND   q6m30<>(SB), Y2, Y5; \
	VPSRLW  $4, Y3, Y6; \
	VPAND   Y14, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	Q6DOT(Y5, a2p, q6shuf<>+64(SB), ysc, Y12); \
	VPSRLW  $2, Y2, Y5; \
	VPAND   q6m30<>(SB), Y5, Y5; \
	VPSRLW  $4, Y4, Y6; \
	VPAND   Y14, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	Q6DOT(Y5, a3p, q6shuf<>+96(SB), ysc, Y1); \
	VPHADDD Y1, Y12, Y12; \
	VPHADDD Y12, Y9, B

// KT2(a, b, t): a = [a0+a2, b0+b2, a1+a3, b1+b3] (per 128-bit lane), and
// KT4(a, b, t), on KT2 results a (of vectors i, i+1) and b (i+2, i+3):
// a = the four vectors' lane sums in order. A transposition of single
// micro-ops on Zen 1, where VPHADDD ymm and the lane-crossing permutes are
// several; the sums are exact integers, so their order does not matter.
#define KT2(a, b, t) \
	VPUNPCKLDQ b, a, t; \
	VPUNPCKHDQ b, a, a; \
	VPADDD     t, a, a

#define KT4(a, b, t) \
	VPUNPCKLQDQ b, a, t; \
	VPUNPCKHQDQ b, a, a; \
	VPADDD      t, a, a

// KSCALES decodes the 6-bit scales and mins of the 8 sub-blocks of the
// Q4_K/Q5_K super-block at SI (ggml's get_scale_min_k4 on 32-bit words):
// R11 = the 8 scale bytes, R12 = the 8 min bytes. BX, DX, R13 clobbered.
#define KSCALES \
	MOVL 4(SI), R11; \
	MOVL 8(SI), BX; \
	MOVL 12(SI), DX; \
	MOVL R11, R12; \
	SHRL $6, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	ANDL $0x3f3f3f3f, R11; \
	MOVL DX, R13; \
	ANDL $0x0f0f0f0f, R13; \
	ORL  R13, R12; \
	SHLQ $32, R12; \
	ORQ  R12, R11; \
	MOVL BX, R12; \
	ANDL $0x3f3f3f3f, R12; \
	SHRL $6, BX; \
	ANDL $0x03030303, BX; \
	SHLL $4, BX; \
	SHRL $4, DX; \
	ANDL $0x0f0f0f0f, DX; \
	ORL  DX, BX; \
	SHLQ $32, BX; \
	ORQ  BX, R12

// func dotQ4_KAVX2(w *byte, qs *int8, d, s *float32, nsb int, tab *float32, rows int, out *float32)
// rows consecutive weight rows, as dotQ4_0AVX2.
// Y0 accumulates d*sc*d_a*Σq*a - dmin*m*S, super-block by super-block.
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $0-64
	MOVQ    w+0(FP), SI
	MOVQ    tab+40(FP), R8
	MOVQ    out+56(FP), AX
	ONES16
	MASK0F
	VMOVDQU permsums<>(SB), Y13

q4krow:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), R9
	MOVQ   s+24(FP), R10
	MOVQ   nsb+32(FP), CX
	VXORPS Y0, Y0, Y0

q4kloop:
	PREFETCHT0 PFD(SI)
	PREFETCHT0 PFD+64(SI)
	PREFETCHT0 PFD+128(SI)
	KSCALES // R11 = scales, R12 = mins

	// Y2 = d*sc*d_a per sub-block, Y1 = dmin*m*S: the operations (and
	// their order) of dot4Q4_KAVX2, so that the two agree bit for bit.
	VMOVQ        R11, X2
	VPMOVZXBD    X2, Y2
	VCVTDQ2PS    Y2, Y2
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), Y3
	VMULPS       Y3, Y2, Y2
	VMULPS       (R9), Y2, Y2
	VMOVQ        R12, X1
	VPMOVZXBD    X1, Y1
	VCVTDQ2PS    Y1, Y1
	MOVWLZX      2(SI), DX
	VBROADCASTSS (R8)(DX*4), Y4
	VMULPS       Y4, Y1, Y1
	VMULPS       (R10), Y1, Y1

	Q4KPAIR2(16(SI), 32(SI), (DI), 16(DI), 32(DI), 48(DI), X7, X8)
	KT2(X7, X8, X3)
	Q4KPAIR2(48(SI), 64(SI), 64(DI), 80(DI), 96(DI), 112(DI), X8, X9)
	KT2(X8, X9, X3)
	KT4(X7, X8, X3)
	Q4KPAIR2(80(SI), 96(SI), 128(DI), 144(DI), 160(DI), 176(DI), X8, X9)
	KT2(X8, X9, X3)
	Q4KPAIR2(112(SI), 128(SI), 192(DI), 208(DI), 224(DI), 240(DI), X9, X10)
	KT2(X9, X10, X3)
	KT4(X8, X9, X3)
	VINSERTI128 $1, X8, Y7, Y7
	VCVTDQ2PS   Y7, Y7
	VFMADD231PS Y7, Y2, Y0
	VSUBPS      Y1, Y0, Y0

	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  q4kloop

	// The lane sums in dot4's order (its HSUM): pairs, pairs of pairs,
	// then the two halves.
	VHADDPS      Y0, Y0, Y0
	VHADDPS      Y0, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	MOVSS        X0, (AX)
	ADDQ         $4, AX
	DECQ         rows+48(FP)
	JNZ          q4krow
	VZEROUPPER
	RET

// Q5_K: as Q4_K with a fifth bit per quant from qh (32 bytes before qs).

// func dotQ5_KAVX2(w *byte, qs *int8, d, s *float32, nsb int, tab *float32, rows int, out *float32)
// rows consecutive weight rows, as dotQ4_0AVX2.
// Y0 accumulates d*sc*d_a*Σq*a - dmin*m*S, super-block by super-block.
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $0-64
	MOVQ    w+0(FP), SI
	MOVQ    tab+40(FP), R8
	MOVQ    out+56(FP), AX
	ONES16
	MASK0F

q5krow:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), R9
	MOVQ   s+24(FP), R10
	MOVQ   nsb+32(FP), CX
	VXORPS Y0, Y0, Y0

q5kloop:
	PREFETCHT0 PFD(SI)
	PREFETCHT0 PFD+64(SI)
	PREFETCHT0 PFD+128(SI)
	KSCALES // R11 = scales, R12 = mins

	// Y2 = d*sc*d_a per sub-block, Y1 = dmin*m*S: the operations (and
	// their order) of dot4Q5_KAVX2, so that the two agree bit for bit.
	VMOVQ        R11, X2
	VPMOVZXBD    X2, Y2
	VCVTDQ2PS    Y2, Y2
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), Y3
	VMULPS       Y3, Y2, Y2
	VMULPS       (R9), Y2, Y2
	VMOVQ        R12, X1
	VPMOVZXBD    X1, Y1
	VCVTDQ2PS    Y1, Y1
	MOVWLZX      2(SI), DX
	VBROADCASTSS (R8)(DX*4), Y4
	VMULPS       Y4, Y1, Y1
	VMULPS       (R10), Y1, Y1

	// The fifth bits: X3 = qh[0:16], X4 = qh[16:32]; bit 2j (2j+1) of
	// qh[l] belongs to element l of sub-block 2j (2j+1), moved to 0x10.
	VMOVDQU 16(SI), X3
	VMOVDQU 32(SI), X4
	VMOVDQU 48(SI), X5
	VMOVDQU 64(SI), X6
	VPAND X14, X5, X7
	VPAND X14, X6, X11
	VPSLLW $4, X3, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X7, X7
	VPSLLW $4, X4, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X11, X11
	VPMADDUBSW 0(DI), X7, X7
	VPMADDUBSW 16(DI), X11, X11
	VPADDW X11, X7, X7
	VPSRLW $4, X5, X5
	VPSRLW $4, X6, X6
	VPAND X14, X5, X5
	VPAND X14, X6, X6
	VPSLLW $3, X3, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X5, X5
	VPSLLW $3, X4, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X6, X6
	VPMADDUBSW 32(DI), X5, X5
	VPMADDUBSW 48(DI), X6, X6
	VPADDW X6, X5, X5
	VPMADDWD X15, X7, X7
	VPMADDWD X15, X5, X5
	KT2(X7, X5, X6)
	VMOVDQU 80(SI), X5
	VMOVDQU 96(SI), X6
	VPAND X14, X5, X8
	VPAND X14, X6, X11
	VPSLLW $2, X3, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X8, X8
	VPSLLW $2, X4, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X11, X11
	VPMADDUBSW 64(DI), X8, X8
	VPMADDUBSW 80(DI), X11, X11
	VPADDW X11, X8, X8
	VPSRLW $4, X5, X5
	VPSRLW $4, X6, X6
	VPAND X14, X5, X5
	VPAND X14, X6, X6
	VPSLLW $1, X3, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X5, X5
	VPSLLW $1, X4, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X6, X6
	VPMADDUBSW 96(DI), X5, X5
	VPMADDUBSW 112(DI), X6, X6
	VPADDW X6, X5, X5
	VPMADDWD X15, X8, X8
	VPMADDWD X15, X5, X5
	KT2(X8, X5, X6)
	KT4(X7, X8, X6)
	VMOVDQU 112(SI), X5
	VMOVDQU 128(SI), X6
	VPAND X14, X5, X9
	VPAND X14, X6, X11
	VPAND q5kx10<>(SB), X3, X12
	VPOR X12, X9, X9
	VPAND q5kx10<>(SB), X4, X12
	VPOR X12, X11, X11
	VPMADDUBSW 128(DI), X9, X9
	VPMADDUBSW 144(DI), X11, X11
	VPADDW X11, X9, X9
	VPSRLW $4, X5, X5
	VPSRLW $4, X6, X6
	VPAND X14, X5, X5
	VPAND X14, X6, X6
	VPSRLW $1, X3, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X5, X5
	VPSRLW $1, X4, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X6, X6
	VPMADDUBSW 160(DI), X5, X5
	VPMADDUBSW 176(DI), X6, X6
	VPADDW X6, X5, X5
	VPMADDWD X15, X9, X9
	VPMADDWD X15, X5, X5
	KT2(X9, X5, X6)
	VMOVDQU 144(SI), X5
	VMOVDQU 160(SI), X6
	VPAND X14, X5, X10
	VPAND X14, X6, X11
	VPSRLW $2, X3, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X10, X10
	VPSRLW $2, X4, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X11, X11
	VPMADDUBSW 192(DI), X10, X10
	VPMADDUBSW 208(DI), X11, X11
	VPADDW X11, X10, X10
	VPSRLW $4, X5, X5
	VPSRLW $4, X6, X6
	VPAND X14, X5, X5
	VPAND X14, X6, X6
	VPSRLW $3, X3, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X5, X5
	VPSRLW $3, X4, X12
	VPAND q5kx10<>(SB), X12, X12
	VPOR X12, X6, X6
	VPMADDUBSW 224(DI), X5, X5
	VPMADDUBSW 240(DI), X6, X6
	VPADDW X6, X5, X5
	VPMADDWD X15, X10, X10
	VPMADDWD X15, X5, X5
	KT2(X10, X5, X6)
	KT4(X9, X10, X6)
	VINSERTI128 $1, X9, Y7, Y7
	VCVTDQ2PS   Y7, Y7
	VFMADD231PS Y7, Y2, Y0
	VSUBPS      Y1, Y0, Y0

	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  q5kloop

	// The lane sums in dot4's order (its HSUM).
	VHADDPS      Y0, Y0, Y0
	VHADDPS      Y0, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	MOVSS        X0, (AX)
	ADDQ         $4, AX
	DECQ         rows+48(FP)
	JNZ          q5krow
	VZEROUPPER
	RET

// func dot4Q4_KAVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)
// The super-block is unpacked once into q-256(SP) (one nibble a byte, in
// element order) and its scales into Y10 (d*sc) and Y11 (dmin*m); then each
// row runs the Q4_K sums against it. Y0-Y3 accumulate the rows, AX is
// 32*super-block index (offset into d and s; 8*AX into qs).
// rows consecutive weight rows: row r's output for activation row k goes
// to out[k*stride + r] (R15 = stride in bytes).
TEXT ·dot4Q4_KAVX2(SB), NOSPLIT, $256-72
	MOVQ    w+0(FP), SI
	MOVQ    tab+40(FP), R8
	MOVQ    stride+64(FP), R15
	SHLQ    $2, R15
	ONES16
	MASK0F

q4kx4row:
	MOVQ   nsb+32(FP), CX
	XORQ   AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

q4kx4loop:
	KSCALES
	VMOVQ        R11, X10
	VPMOVZXBD    X10, Y10
	VCVTDQ2PS    Y10, Y10
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), Y12
	VMULPS       Y12, Y10, Y10
	VMOVQ        R12, X11
	VPMOVZXBD    X11, Y11
	VCVTDQ2PS    Y11, Y11
	MOVWLZX      2(SI), DX
	VBROADCASTSS (R8)(DX*4), Y12
	VMULPS       Y12, Y11, Y11

	VMOVDQU      16(SI), X4
	VMOVDQU      32(SI), X5
	VPAND        X14, X4, X6
	VPAND        X14, X5, X7
	VMOVDQU      X6, q-256(SP)
	VMOVDQU      X7, q-240(SP)
	VPSRLW       $4, X4, X4
	VPSRLW       $4, X5, X5
	VPAND        X14, X4, X4
	VPAND        X14, X5, X5
	VMOVDQU      X4, q-224(SP)
	VMOVDQU      X5, q-208(SP)
	VMOVDQU      48(SI), X4
	VMOVDQU      64(SI), X5
	VPAND        X14, X4, X6
	VPAND        X14, X5, X7
	VMOVDQU      X6, q-192(SP)
	VMOVDQU      X7, q-176(SP)
	VPSRLW       $4, X4, X4
	VPSRLW       $4, X5, X5
	VPAND        X14, X4, X4
	VPAND        X14, X5, X5
	VMOVDQU      X4, q-160(SP)
	VMOVDQU      X5, q-144(SP)
	VMOVDQU      80(SI), X4
	VMOVDQU      96(SI), X5
	VPAND        X14, X4, X6
	VPAND        X14, X5, X7
	VMOVDQU      X6, q-128(SP)
	VMOVDQU      X7, q-112(SP)
	VPSRLW       $4, X4, X4
	VPSRLW       $4, X5, X5
	VPAND        X14, X4, X4
	VPAND        X14, X5, X5
	VMOVDQU      X4, q-96(SP)
	VMOVDQU      X5, q-80(SP)
	VMOVDQU      112(SI), X4
	VMOVDQU      128(SI), X5
	VPAND        X14, X4, X6
	VPAND        X14, X5, X7
	VMOVDQU      X6, q-64(SP)
	VMOVDQU      X7, q-48(SP)
	VPSRLW       $4, X4, X4
	VPSRLW       $4, X5, X5
	VPAND        X14, X4, X4
	VPAND        X14, X5, X5
	VMOVDQU      X4, q-32(SP)
	VMOVDQU      X5, q-16(SP)

	// row 0
	MOVQ         qs+8(FP), R9
	MOVQ         0(R9), R9
	LEAQ         (R9)(AX*8), R9
	MOVQ         d+16(FP), R10
	MOVQ         0(R10), R10
	MOVQ         s+24(FP), R12
	MOVQ         0(R12), R12
	VMOVDQU      q-256(SP), X4
	VPMADDUBSW   0(R9), X4, X4
	VMOVDQU      q-240(SP), X5
	VPMADDUBSW   16(R9), X5, X5
	VPADDW       X5, X4, X6
	VPMADDWD     X15, X6, X6
	VMOVDQU      q-224(SP), X5
	VPMADDUBSW   32(R9), X5, X5
	VMOVDQU      q-208(SP), X12
	VPMADDUBSW   48(R9), X12, X12
	VPADDW       X12, X5, X7
	VPMADDWD     X15, X7, X7
	KT2(X6, X7, X8)
	VMOVDQU      q-192(SP), X4
	VPMADDUBSW   64(R9), X4, X4
	VMOVDQU      q-176(SP), X5
	VPMADDUBSW   80(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-160(SP), X5
	VPMADDUBSW   96(R9), X5, X5
	VMOVDQU      q-144(SP), X12
	VPMADDUBSW   112(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	KT4(X6, X7, X8)
	VMOVDQU      q-128(SP), X4
	VPMADDUBSW   128(R9), X4, X4
	VMOVDQU      q-112(SP), X5
	VPMADDUBSW   144(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-96(SP), X5
	VPMADDUBSW   160(R9), X5, X5
	VMOVDQU      q-80(SP), X12
	VPMADDUBSW   176(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	VMOVDQU      q-64(SP), X4
	VPMADDUBSW   192(R9), X4, X4
	VMOVDQU      q-48(SP), X5
	VPMADDUBSW   208(R9), X5, X5
	VPADDW       X5, X4, X8
	VPMADDWD     X15, X8, X8
	VMOVDQU      q-32(SP), X5
	VPMADDUBSW   224(R9), X5, X5
	VMOVDQU      q-16(SP), X12
	VPMADDUBSW   240(R9), X12, X12
	VPADDW       X12, X5, X9
	VPMADDWD     X15, X9, X9
	KT2(X8, X9, X4)
	KT4(X7, X8, X9)
	VINSERTI128  $1, X7, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VMULPS       (R10)(AX*1), Y10, Y12
	VFMADD231PS  Y6, Y12, Y0
	VMULPS       (R12)(AX*1), Y11, Y12
	VSUBPS       Y12, Y0, Y0

	// row 1
	MOVQ         qs+8(FP), R9
	MOVQ         8(R9), R9
	LEAQ         (R9)(AX*8), R9
	MOVQ         d+16(FP), R10
	MOVQ         8(R10), R10
	MOVQ         s+24(FP), R12
	MOVQ         8(R12), R12
	VMOVDQU      q-256(SP), X4
	VPMADDUBSW   0(R9), X4, X4
	VMOVDQU      q-240(SP), X5
	VPMADDUBSW   16(R9), X5, X5
	VPADDW       X5, X4, X6
	VPMADDWD     X15, X6, X6
	VMOVDQU      q-224(SP), X5
	VPMADDUBSW   32(R9), X5, X5
	VMOVDQU      q-208(SP), X12
	VPMADDUBSW   48(R9), X12, X12
	VPADDW       X12, X5, X7
	VPMADDWD     X15, X7, X7
	KT2(X6, X7, X8)
	VMOVDQU      q-192(SP), X4
	VPMADDUBSW   64(R9), X4, X4
	VMOVDQU      q-176(SP), X5
	VPMADDUBSW   80(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-160(SP), X5
	VPMADDUBSW   96(R9), X5, X5
	VMOVDQU      q-144(SP), X12
	VPMADDUBSW   112(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	KT4(X6, X7, X8)
	VMOVDQU      q-128(SP), X4
	VPMADDUBSW   128(R9), X4, X4
	VMOVDQU      q-112(SP), X5
	VPMADDUBSW   144(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-96(SP), X5
	VPMADDUBSW   160(R9), X5, X5
	VMOVDQU      q-80(SP), X12
	VPMADDUBSW   176(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	VMOVDQU      q-64(SP), X4
	VPMADDUBSW   192(R9), X4, X4
	VMOVDQU      q-48(SP), X5
	VPMADDUBSW   208(R9), X5, X5
	VPADDW       X5, X4, X8
	VPMADDWD     X15, X8, X8
	VMOVDQU      q-32(SP), X5
	VPMADDUBSW   224(R9), X5, X5
	VMOVDQU      q-16(SP), X12
	VPMADDUBSW   240(R9), X12, X12
	VPADDW       X12, X5, X9
	VPMADDWD     X15, X9, X9
	KT2(X8, X9, X4)
	KT4(X7, X8, X9)
	VINSERTI128  $1, X7, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VMULPS       (R10)(AX*1), Y10, Y12
	VFMADD231PS  Y6, Y12, Y1
	VMULPS       (R12)(AX*1), Y11, Y12
	VSUBPS       Y12, Y1, Y1

	// row 2
	MOVQ         qs+8(FP), R9
	MOVQ         16(R9), R9
	LEAQ         (R9)(AX*8), R9
	MOVQ         d+16(FP), R10
	MOVQ         16(R10), R10
	MOVQ         s+24(FP), R12
	MOVQ         16(R12), R12
	VMOVDQU      q-256(SP), X4
	VPMADDUBSW   0(R9), X4, X4
	VMOVDQU      q-240(SP), X5
	VPMADDUBSW   16(R9), X5, X5
	VPADDW       X5, X4, X6
	VPMADDWD     X15, X6, X6
	VMOVDQU      q-224(SP), X5
	VPMADDUBSW   32(R9), X5, X5
	VMOVDQU      q-208(SP), X12
	VPMADDUBSW   48(R9), X12, X12
	VPADDW       X12, X5, X7
	VPMADDWD     X15, X7, X7
	KT2(X6, X7, X8)
	VMOVDQU      q-192(SP), X4
	VPMADDUBSW   64(R9), X4, X4
	VMOVDQU      q-176(SP), X5
	VPMADDUBSW   80(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-160(SP), X5
	VPMADDUBSW   96(R9), X5, X5
	VMOVDQU      q-144(SP), X12
	VPMADDUBSW   112(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	KT4(X6, X7, X8)
	VMOVDQU      q-128(SP), X4
	VPMADDUBSW   128(R9), X4, X4
	VMOVDQU      q-112(SP), X5
	VPMADDUBSW   144(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-96(SP), X5
	VPMADDUBSW   160(R9), X5, X5
	VMOVDQU      q-80(SP), X12
	VPMADDUBSW   176(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	VMOVDQU      q-64(SP), X4
	VPMADDUBSW   192(R9), X4, X4
	VMOVDQU      q-48(SP), X5
	VPMADDUBSW   208(R9), X5, X5
	VPADDW       X5, X4, X8
	VPMADDWD     X15, X8, X8
	VMOVDQU      q-32(SP), X5
	VPMADDUBSW   224(R9), X5, X5
	VMOVDQU      q-16(SP), X12
	VPMADDUBSW   240(R9), X12, X12
	VPADDW       X12, X5, X9
	VPMADDWD     X15, X9, X9
	KT2(X8, X9, X4)
	KT4(X7, X8, X9)
	VINSERTI128  $1, X7, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VMULPS       (R10)(AX*1), Y10, Y12
	VFMADD231PS  Y6, Y12, Y2
	VMULPS       (R12)(AX*1), Y11, Y12
	VSUBPS       Y12, Y2, Y2

	// row 3
	MOVQ         qs+8(FP), R9
	MOVQ         24(R9), R9
	LEAQ         (R9)(AX*8), R9
	MOVQ         d+16(FP), R10
	MOVQ         24(R10), R10
	MOVQ         s+24(FP), R12
	MOVQ         24(R12), R12
	VMOVDQU      q-256(SP), X4
	VPMADDUBSW   0(R9), X4, X4
	VMOVDQU      q-240(SP), X5
	VPMADDUBSW   16(R9), X5, X5
	VPADDW       X5, X4, X6
	VPMADDWD     X15, X6, X6
	VMOVDQU      q-224(SP), X5
	VPMADDUBSW   32(R9), X5, X5
	VMOVDQU      q-208(SP), X12
	VPMADDUBSW   48(R9), X12, X12
	VPADDW       X12, X5, X7
	VPMADDWD     X15, X7, X7
	KT2(X6, X7, X8)
	VMOVDQU      q-192(SP), X4
	VPMADDUBSW   64(R9), X4, X4
	VMOVDQU      q-176(SP), X5
	VPMADDUBSW   80(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-160(SP), X5
	VPMADDUBSW   96(R9), X5, X5
	VMOVDQU      q-144(SP), X12
	VPMADDUBSW   112(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	KT4(X6, X7, X8)
	VMOVDQU      q-128(SP), X4
	VPMADDUBSW   128(R9), X4, X4
	VMOVDQU      q-112(SP), X5
	VPMADDUBSW   144(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-96(SP), X5
	VPMADDUBSW   160(R9), X5, X5
	VMOVDQU      q-80(SP), X12
	VPMADDUBSW   176(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	VMOVDQU      q-64(SP), X4
	VPMADDUBSW   192(R9), X4, X4
	VMOVDQU      q-48(SP), X5
	VPMADDUBSW   208(R9), X5, X5
	VPADDW       X5, X4, X8
	VPMADDWD     X15, X8, X8
	VMOVDQU      q-32(SP), X5
	VPMADDUBSW   224(R9), X5, X5
	VMOVDQU      q-16(SP), X12
	VPMADDUBSW   240(R9), X12, X12
	VPADDW       X12, X5, X9
	VPMADDWD     X15, X9, X9
	KT2(X8, X9, X4)
	KT4(X7, X8, X9)
	VINSERTI128  $1, X7, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VMULPS       (R10)(AX*1), Y10, Y12
	VFMADD231PS  Y6, Y12, Y3
	VMULPS       (R12)(AX*1), Y11, Y12
	VSUBPS       Y12, Y3, Y3

	ADDQ $144, SI
	ADDQ $32, AX
	DECQ CX
	JNZ  q4kx4loop

	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	MOVQ         out+56(FP), DX
	VMOVSS       X0, (DX)
	VEXTRACTPS   $1, X0, (DX)(R15*1)
	VEXTRACTPS   $2, X0, (DX)(R15*2)
	LEAQ         (DX)(R15*2), DX
	VEXTRACTPS   $3, X0, (DX)(R15*1)
	ADDQ         $4, out+56(FP)
	DECQ         rows+48(FP)
	JNZ          q4kx4row
	VZEROUPPER
	RET

// func dot4Q5_KAVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)
// As dot4Q4_KAVX2 with Q5_K's fifth bits: the super-block is unpacked
// once into q-256(SP) (one quant, 0..31, a byte, in element order) and its
// scales into Y10 (d*sc) and Y11 (dmin*m); then each row runs the Q4_K
// sums against it (pairs of quants times activations within int16:
// 2*2*31*127). Y0-Y3 accumulate the rows, AX is
// 32*super-block index (offset into d and s; 8*AX into qs).
// rows consecutive weight rows: row r's output for activation row k goes
// to out[k*stride + r] (R15 = stride in bytes).
TEXT ·dot4Q5_KAVX2(SB), NOSPLIT, $256-72
	MOVQ    w+0(FP), SI
	MOVQ    tab+40(FP), R8
	MOVQ    stride+64(FP), R15
	SHLQ    $2, R15
	ONES16
	MASK0F

q5kx4row:
	MOVQ   nsb+32(FP), CX
	XORQ   AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

q5kx4loop:
	KSCALES
	VMOVQ        R11, X10
	VPMOVZXBD    X10, Y10
	VCVTDQ2PS    Y10, Y10
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), Y12
	VMULPS       Y12, Y10, Y10
	VMOVQ        R12, X11
	VPMOVZXBD    X11, Y11
	VCVTDQ2PS    Y11, Y11
	MOVWLZX      2(SI), DX
	VBROADCASTSS (R8)(DX*4), Y12
	VMULPS       Y12, Y11, Y11

	// The fifth bits: X9 = qh[0:16], X13 = qh[16:32]; bit 2j (2j+1) of
	// qh[l] belongs to element l of sub-block 2j (2j+1), moved to 0x10.
	VMOVDQU      16(SI), X9
	VMOVDQU      32(SI), X13
	VMOVDQU      48(SI), X5
	VMOVDQU      64(SI), X6
	VPAND        X14, X5, X7
	VPAND        X14, X6, X8
	VPSLLW       $4, X9, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X7, X7
	VPSLLW       $4, X13, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X8, X8
	VMOVDQU      X7, q-256(SP)
	VMOVDQU      X8, q-240(SP)
	VPSRLW       $4, X5, X5
	VPSRLW       $4, X6, X6
	VPAND        X14, X5, X5
	VPAND        X14, X6, X6
	VPSLLW       $3, X9, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X5, X5
	VPSLLW       $3, X13, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X6, X6
	VMOVDQU      X5, q-224(SP)
	VMOVDQU      X6, q-208(SP)
	VMOVDQU      80(SI), X5
	VMOVDQU      96(SI), X6
	VPAND        X14, X5, X7
	VPAND        X14, X6, X8
	VPSLLW       $2, X9, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X7, X7
	VPSLLW       $2, X13, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X8, X8
	VMOVDQU      X7, q-192(SP)
	VMOVDQU      X8, q-176(SP)
	VPSRLW       $4, X5, X5
	VPSRLW       $4, X6, X6
	VPAND        X14, X5, X5
	VPAND        X14, X6, X6
	VPSLLW       $1, X9, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X5, X5
	VPSLLW       $1, X13, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X6, X6
	VMOVDQU      X5, q-160(SP)
	VMOVDQU      X6, q-144(SP)
	VMOVDQU      112(SI), X5
	VMOVDQU      128(SI), X6
	VPAND        X14, X5, X7
	VPAND        X14, X6, X8
	VMOVDQA      X9, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X7, X7
	VMOVDQA      X13, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X8, X8
	VMOVDQU      X7, q-128(SP)
	VMOVDQU      X8, q-112(SP)
	VPSRLW       $4, X5, X5
	VPSRLW       $4, X6, X6
	VPAND        X14, X5, X5
	VPAND        X14, X6, X6
	VPSRLW       $1, X9, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X5, X5
	VPSRLW       $1, X13, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X6, X6
	VMOVDQU      X5, q-96(SP)
	VMOVDQU      X6, q-80(SP)
	VMOVDQU      144(SI), X5
	VMOVDQU      160(SI), X6
	VPAND        X14, X5, X7
	VPAND        X14, X6, X8
	VPSRLW       $2, X9, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X7, X7
	VPSRLW       $2, X13, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X8, X8
	VMOVDQU      X7, q-64(SP)
	VMOVDQU      X8, q-48(SP)
	VPSRLW       $4, X5, X5
	VPSRLW       $4, X6, X6
	VPAND        X14, X5, X5
	VPAND        X14, X6, X6
	VPSRLW       $3, X9, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X5, X5
	VPSRLW       $3, X13, X12
	VPAND        q5kx10<>(SB), X12, X12
	VPOR         X12, X6, X6
	VMOVDQU      X5, q-32(SP)
	VMOVDQU      X6, q-16(SP)

	// row 0
	MOVQ         qs+8(FP), R9
	MOVQ         0(R9), R9
	LEAQ         (R9)(AX*8), R9
	MOVQ         d+16(FP), R10
	MOVQ         0(R10), R10
	MOVQ         s+24(FP), R12
	MOVQ         0(R12), R12
	VMOVDQU      q-256(SP), X4
	VPMADDUBSW   0(R9), X4, X4
	VMOVDQU      q-240(SP), X5
	VPMADDUBSW   16(R9), X5, X5
	VPADDW       X5, X4, X6
	VPMADDWD     X15, X6, X6
	VMOVDQU      q-224(SP), X5
	VPMADDUBSW   32(R9), X5, X5
	VMOVDQU      q-208(SP), X12
	VPMADDUBSW   48(R9), X12, X12
	VPADDW       X12, X5, X7
	VPMADDWD     X15, X7, X7
	KT2(X6, X7, X8)
	VMOVDQU      q-192(SP), X4
	VPMADDUBSW   64(R9), X4, X4
	VMOVDQU      q-176(SP), X5
	VPMADDUBSW   80(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-160(SP), X5
	VPMADDUBSW   96(R9), X5, X5
	VMOVDQU      q-144(SP), X12
	VPMADDUBSW   112(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	KT4(X6, X7, X8)
	VMOVDQU      q-128(SP), X4
	VPMADDUBSW   128(R9), X4, X4
	VMOVDQU      q-112(SP), X5
	VPMADDUBSW   144(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-96(SP), X5
	VPMADDUBSW   160(R9), X5, X5
	VMOVDQU      q-80(SP), X12
	VPMADDUBSW   176(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	VMOVDQU      q-64(SP), X4
	VPMADDUBSW   192(R9), X4, X4
	VMOVDQU      q-48(SP), X5
	VPMADDUBSW   208(R9), X5, X5
	VPADDW       X5, X4, X8
	VPMADDWD     X15, X8, X8
	VMOVDQU      q-32(SP), X5
	VPMADDUBSW   224(R9), X5, X5
	VMOVDQU      q-16(SP), X12
	VPMADDUBSW   240(R9), X12, X12
	VPADDW       X12, X5, X9
	VPMADDWD     X15, X9, X9
	KT2(X8, X9, X4)
	KT4(X7, X8, X9)
	VINSERTI128  $1, X7, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VMULPS       (R10)(AX*1), Y10, Y12
	VFMADD231PS  Y6, Y12, Y0
	VMULPS       (R12)(AX*1), Y11, Y12
	VSUBPS       Y12, Y0, Y0

	// row 1
	MOVQ         qs+8(FP), R9
	MOVQ         8(R9), R9
	LEAQ         (R9)(AX*8), R9
	MOVQ         d+16(FP), R10
	MOVQ         8(R10), R10
	MOVQ         s+24(FP), R12
	MOVQ         8(R12), R12
	VMOVDQU      q-256(SP), X4
	VPMADDUBSW   0(R9), X4, X4
	VMOVDQU      q-240(SP), X5
	VPMADDUBSW   16(R9), X5, X5
	VPADDW       X5, X4, X6
	VPMADDWD     X15, X6, X6
	VMOVDQU      q-224(SP), X5
	VPMADDUBSW   32(R9), X5, X5
	VMOVDQU      q-208(SP), X12
	VPMADDUBSW   48(R9), X12, X12
	VPADDW       X12, X5, X7
	VPMADDWD     X15, X7, X7
	KT2(X6, X7, X8)
	VMOVDQU      q-192(SP), X4
	VPMADDUBSW   64(R9), X4, X4
	VMOVDQU      q-176(SP), X5
	VPMADDUBSW   80(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-160(SP), X5
	VPMADDUBSW   96(R9), X5, X5
	VMOVDQU      q-144(SP), X12
	VPMADDUBSW   112(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	KT4(X6, X7, X8)
	VMOVDQU      q-128(SP), X4
	VPMADDUBSW   128(R9), X4, X4
	VMOVDQU      q-112(SP), X5
	VPMADDUBSW   144(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-96(SP), X5
	VPMADDUBSW   160(R9), X5, X5
	VMOVDQU      q-80(SP), X12
	VPMADDUBSW   176(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	VMOVDQU      q-64(SP), X4
	VPMADDUBSW   192(R9), X4, X4
	VMOVDQU      q-48(SP), X5
	VPMADDUBSW   208(R9), X5, X5
	VPADDW       X5, X4, X8
	VPMADDWD     X15, X8, X8
	VMOVDQU      q-32(SP), X5
	VPMADDUBSW   224(R9), X5, X5
	VMOVDQU      q-16(SP), X12
	VPMADDUBSW   240(R9), X12, X12
	VPADDW       X12, X5, X9
	VPMADDWD     X15, X9, X9
	KT2(X8, X9, X4)
	KT4(X7, X8, X9)
	VINSERTI128  $1, X7, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VMULPS       (R10)(AX*1), Y10, Y12
	VFMADD231PS  Y6, Y12, Y1
	VMULPS       (R12)(AX*1), Y11, Y12
	VSUBPS       Y12, Y1, Y1

	// row 2
	MOVQ         qs+8(FP), R9
	MOVQ         16(R9), R9
	LEAQ         (R9)(AX*8), R9
	MOVQ         d+16(FP), R10
	MOVQ         16(R10), R10
	MOVQ         s+24(FP), R12
	MOVQ         16(R12), R12
	VMOVDQU      q-256(SP), X4
	VPMADDUBSW   0(R9), X4, X4
	VMOVDQU      q-240(SP), X5
	VPMADDUBSW   16(R9), X5, X5
	VPADDW       X5, X4, X6
	VPMADDWD     X15, X6, X6
	VMOVDQU      q-224(SP), X5
	VPMADDUBSW   32(R9), X5, X5
	VMOVDQU      q-208(SP), X12
	VPMADDUBSW   48(R9), X12, X12
	VPADDW       X12, X5, X7
	VPMADDWD     X15, X7, X7
	KT2(X6, X7, X8)
	VMOVDQU      q-192(SP), X4
	VPMADDUBSW   64(R9), X4, X4
	VMOVDQU      q-176(SP), X5
	VPMADDUBSW   80(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-160(SP), X5
	VPMADDUBSW   96(R9), X5, X5
	VMOVDQU      q-144(SP), X12
	VPMADDUBSW   112(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	KT4(X6, X7, X8)
	VMOVDQU      q-128(SP), X4
	VPMADDUBSW   128(R9), X4, X4
	VMOVDQU      q-112(SP), X5
	VPMADDUBSW   144(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-96(SP), X5
	VPMADDUBSW   160(R9), X5, X5
	VMOVDQU      q-80(SP), X12
	VPMADDUBSW   176(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	VMOVDQU      q-64(SP), X4
	VPMADDUBSW   192(R9), X4, X4
	VMOVDQU      q-48(SP), X5
	VPMADDUBSW   208(R9), X5, X5
	VPADDW       X5, X4, X8
	VPMADDWD     X15, X8, X8
	VMOVDQU      q-32(SP), X5
	VPMADDUBSW   224(R9), X5, X5
	VMOVDQU      q-16(SP), X12
	VPMADDUBSW   240(R9), X12, X12
	VPADDW       X12, X5, X9
	VPMADDWD     X15, X9, X9
	KT2(X8, X9, X4)
	KT4(X7, X8, X9)
	VINSERTI128  $1, X7, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VMULPS       (R10)(AX*1), Y10, Y12
	VFMADD231PS  Y6, Y12, Y2
	VMULPS       (R12)(AX*1), Y11, Y12
	VSUBPS       Y12, Y2, Y2

	// row 3
	MOVQ         qs+8(FP), R9
	MOVQ         24(R9), R9
	LEAQ         (R9)(AX*8), R9
	MOVQ         d+16(FP), R10
	MOVQ         24(R10), R10
	MOVQ         s+24(FP), R12
	MOVQ         24(R12), R12
	VMOVDQU      q-256(SP), X4
	VPMADDUBSW   0(R9), X4, X4
	VMOVDQU      q-240(SP), X5
	VPMADDUBSW   16(R9), X5, X5
	VPADDW       X5, X4, X6
	VPMADDWD     X15, X6, X6
	VMOVDQU      q-224(SP), X5
	VPMADDUBSW   32(R9), X5, X5
	VMOVDQU      q-208(SP), X12
	VPMADDUBSW   48(R9), X12, X12
	VPADDW       X12, X5, X7
	VPMADDWD     X15, X7, X7
	KT2(X6, X7, X8)
	VMOVDQU      q-192(SP), X4
	VPMADDUBSW   64(R9), X4, X4
	VMOVDQU      q-176(SP), X5
	VPMADDUBSW   80(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-160(SP), X5
	VPMADDUBSW   96(R9), X5, X5
	VMOVDQU      q-144(SP), X12
	VPMADDUBSW   112(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	KT4(X6, X7, X8)
	VMOVDQU      q-128(SP), X4
	VPMADDUBSW   128(R9), X4, X4
	VMOVDQU      q-112(SP), X5
	VPMADDUBSW   144(R9), X5, X5
	VPADDW       X5, X4, X7
	VPMADDWD     X15, X7, X7
	VMOVDQU      q-96(SP), X5
	VPMADDUBSW   160(R9), X5, X5
	VMOVDQU      q-80(SP), X12
	VPMADDUBSW   176(R9), X12, X12
	VPADDW       X12, X5, X8
	VPMADDWD     X15, X8, X8
	KT2(X7, X8, X9)
	VMOVDQU      q-64(SP), X4
	VPMADDUBSW   192(R9), X4, X4
	VMOVDQU      q-48(SP), X5
	VPMADDUBSW   208(R9), X5, X5
	VPADDW       X5, X4, X8
	VPMADDWD     X15, X8, X8
	VMOVDQU      q-32(SP), X5
	VPMADDUBSW   224(R9), X5, X5
	VMOVDQU      q-16(SP), X12
	VPMADDUBSW   240(R9), X12, X12
	VPADDW       X12, X5, X9
	VPMADDWD     X15, X9, X9
	KT2(X8, X9, X4)
	KT4(X7, X8, X9)
	VINSERTI128  $1, X7, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	VMULPS       (R10)(AX*1), Y10, Y12
	VFMADD231PS  Y6, Y12, Y3
	VMULPS       (R12)(AX*1), Y11, Y12
	VSUBPS       Y12, Y3, Y3

	ADDQ $176, SI
	ADDQ $32, AX
	DECQ CX
	JNZ  q5kx4loop

	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	MOVQ         out+56(FP), DX
	VMOVSS       X0, (DX)
	VEXTRACTPS   $1, X0, (DX)(R15*1)
	VEXTRACTPS   $2, X0, (DX)(R15*2)
	LEAQ         (DX)(R15*2), DX
	VEXTRACTPS   $3, X0, (DX)(R15*1)
	ADDQ         $4, out+56(FP)
	DECQ         rows+48(FP)
	JNZ          q5kx4row
	VZEROUPPER
	RET

// The four-input Q6_K kernel's per-block products P (8 int32 of one block
// of 32: its two halves' sums times their scales) are reduced to one sum per
// block by transposition (VPUNPCK*, single micro-ops on Zen 1, where
// VPHADDD ymm and VPERM2I128 are several): the integer sums are exact, so
// the order does not change the result.
//
// Q6T2(a, b, t): a = per 128-bit lane [a0+a2, b0+b2, a1+a3, b1+b3].
#define Q6T2(a, b, t) \
	VPUNPCKLDQ b, a, t; \
	VPUNPCKHDQ b, a, a; \
	VPADDD     t, a, a

// Q6T4(a, b, t): from Q6T2 results a (blocks i, i+1) and b (i+2, i+3),
// a = per lane the four blocks' lane sums in order.
#define Q6T4(a, b, t) \
	VPUNPCKLQDQ b, a, t; \
	VPUNPCKHQDQ b, a, a; \
	VPADDD      t, a, a

// Q6T8: from Q6T4 results Y4 (blocks 0-3) and Y5 (4-7), Y4 = the 8 block
// sums (the two lanes added); X6, X7 are clobbered.
#define Q6T8 \
	VEXTRACTI128 $1, Y4, X6; \
	VEXTRACTI128 $1, Y5, X7; \
	VPADDD       X6, X4, X4; \
	VPADDD       X7, X5, X5; \
	VINSERTI128  $1, X5, Y4, Y4

// Q6P(i, p): p = block i's products against the activation row at R9 with
// the unpacked weights (0..63, the unsigned operand) and scales.
#define Q6P(i, p) \
	VMOVDQU    q-256+(i*32)(SP), p; \
	VPMADDUBSW (i*32)(R9), p, p; \
	VPMADDWD   sc-512+(i*32)(SP), p, p

// Q6ROW(k, acc): acc += d*d_a*(block sums) for activation row k/8 (its
// pointers in the arrays at R12, R13, R14), whose sums of 16 quants (at
// R11) take out the 32 the unpacked weights are short of:
// Σ sc*(q-32)*a = Σ sc*q*a - 32*Σ sc*Σa.
#define Q6ROW(k, acc) \
	MOVQ        k(R12), R9; \
	LEAQ        (R9)(AX*8), R9; \
	MOVQ        k(R13), R10; \
	MOVQ        k(R14), R11; \
	Q6P(0, Y4); \
	Q6P(1, Y5); \
	Q6T2(Y4, Y5, Y6); \
	Q6P(2, Y5); \
	Q6P(3, Y6); \
	Q6T2(Y5, Y6, Y7); \
	Q6T4(Y4, Y5, Y6); \
	Q6P(4, Y5); \
	Q6P(5, Y6); \
	Q6T2(Y5, Y6, Y7); \
	Q6P(6, Y6); \
	Q6P(7, Y7); \
	Q6T2(Y6, Y7, Y8); \
	Q6T4(Y5, Y6, Y7); \
	Q6T8; \
	VPMADDWD    (R11)(AX*1), Y13, Y5; \
	VPSLLD      $5, Y5, Y5; \
	VPSUBD      Y5, Y4, Y4; \
	VCVTDQ2PS   Y4, Y4; \
	VMULPS      (R10)(AX*1), Y12, Y5; \
	VFMADD231PS Y4, Y5, acc

// func dot4Q6_KAVX2(w *byte, qs *[4]*int8, d *[4]*float32, b *[4]*int16, nsb int, tab *float32, rows int, out *float32, stride int)
// As dot4Q4_K: the super-block's quants (0..63, element order) go to
// q-256(SP) once, its scales, spread to the int16 pairs of each block of
// 32, to sc-512(SP) (32 bytes a block), all 16 to Y13 and d to Y12; then
// each row. Y0-Y3 accumulate the rows, AX = 32*super-block index (offset
// into d and b, 8*AX into qs). Row r's output for activation row k goes to
// out[k*stride + r] (R15 = stride in bytes).
TEXT ·dot4Q6_KAVX2(SB), NOSPLIT, $512-72
	MOVQ         w+0(FP), SI
	MOVQ         qs+8(FP), R12
	MOVQ         d+16(FP), R13
	MOVQ         b+24(FP), R14
	MOVQ         tab+40(FP), R8
	MOVQ         stride+64(FP), R15
	SHLQ         $2, R15

q6kx4row:
	MOVQ   nsb+32(FP), CX
	XORQ   AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

q6kx4loop:
	VPMOVSXBW    192(SI), Y13
	VPERM2I128   $0x11, Y13, Y13, Y11
	VINSERTI128  $1, X13, Y13, Y10
	MOVWLZX      208(SI), DX
	VBROADCASTSS (R8)(DX*4), Y12

	VMOVDQU      128(SI), Y4
	VMOVDQU      0(SI), Y5
	VMOVDQU      32(SI), Y6
	VPSLLW       $4, Y4, Y7
	VPAND        q6m30<>(SB), Y7, Y7
	VPAND        q6m0f<>(SB), Y5, Y8
	VPOR         Y8, Y7, Y7
	VMOVDQU      Y7, q-256(SP)
	VPSLLW       $2, Y4, Y7
	VPAND        q6m30<>(SB), Y7, Y7
	VPAND        q6m0f<>(SB), Y6, Y8
	VPOR         Y8, Y7, Y7
	VMOVDQU      Y7, q-224(SP)
	VPAND        q6m30<>(SB), Y4, Y7
	VPSRLW       $4, Y5, Y8
	VPAND        q6m0f<>(SB), Y8, Y8
	VPOR         Y8, Y7, Y7
	VMOVDQU      Y7, q-192(SP)
	VPSRLW       $2, Y4, Y7
	VPAND        q6m30<>(SB), Y7, Y7
	VPSRLW       $4, Y6, Y8
	VPAND        q6m0f<>(SB), Y8, Y8
	VPOR         Y8, Y7, Y7
	VMOVDQU      Y7, q-160(SP)
	VMOVDQU      160(SI), Y4
	VMOVDQU      64(SI), Y5
	VMOVDQU      96(SI), Y6
	VPSLLW       $4, Y4, Y7
	VPAND        q6m30<>(SB), Y7, Y7
	VPAND        q6m0f<>(SB), Y5, Y8
	VPOR         Y8, Y7, Y7
	VMOVDQU      Y7, q-128(SP)
	VPSLLW       $2, Y4, Y7
	VPAND        q6m30<>(SB), Y7, Y7
	VPAND        q6m0f<>(SB), Y6, Y8
	VPOR         Y8, Y7, Y7
	VMOVDQU      Y7, q-96(SP)
	VPAND        q6m30<>(SB), Y4, Y7
	VPSRLW       $4, Y5, Y8
	VPAND        q6m0f<>(SB), Y8, Y8
	VPOR         Y8, Y7, Y7
	VMOVDQU      Y7, q-64(SP)
	VPSRLW       $2, Y4, Y7
	VPAND        q6m30<>(SB), Y7, Y7
	VPSRLW       $4, Y6, Y8
	VPAND        q6m0f<>(SB), Y8, Y8
	VPOR         Y8, Y7, Y7
	VMOVDQU      Y7, q-32(SP)

	// The scales of each block in int16 pairs, once for the four rows.
	VPSHUFB      q6shuf<>+0(SB), Y10, Y7
	VMOVDQU      Y7, sc-512(SP)
	VPSHUFB      q6shuf<>+32(SB), Y10, Y7
	VMOVDQU      Y7, sc-480(SP)
	VPSHUFB      q6shuf<>+64(SB), Y10, Y7
	VMOVDQU      Y7, sc-448(SP)
	VPSHUFB      q6shuf<>+96(SB), Y10, Y7
	VMOVDQU      Y7, sc-416(SP)
	VPSHUFB      q6shuf<>+0(SB), Y11, Y7
	VMOVDQU      Y7, sc-384(SP)
	VPSHUFB      q6shuf<>+32(SB), Y11, Y7
	VMOVDQU      Y7, sc-352(SP)
	VPSHUFB      q6shuf<>+64(SB), Y11, Y7
	VMOVDQU      Y7, sc-320(SP)
	VPSHUFB      q6shuf<>+96(SB), Y11, Y7
	VMOVDQU      Y7, sc-288(SP)

	Q6ROW(0, Y0)
	Q6ROW(8, Y1)
	Q6ROW(16, Y2)
	Q6ROW(24, Y3)

	ADDQ $210, SI
	ADDQ $32, AX
	DECQ CX
	JNZ  q6kx4loop

	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	MOVQ         out+56(FP), DX
	VMOVSS       X0, (DX)
	VEXTRACTPS   $1, X0, (DX)(R15*1)
	VEXTRACTPS   $2, X0, (DX)(R15*2)
	LEAQ         (DX)(R15*2), DX
	VEXTRACTPS   $3, X0, (DX)(R15*1)
	ADDQ         $4, out+56(FP)
	DECQ         rows+48(FP)
	JNZ          q6kx4row
	VZEROUPPER
	RET

DATA permsums<>+0(SB)/4, $0
DATA permsums<>+4(SB)/4, $4
DATA permsums<>+8(SB)/4, $1
DATA permsums<>+12(SB)/4, $5
DATA permsums<>+16(SB)/4, $2
DATA permsums<>+20(SB)/4, $6
DATA permsums<>+24(SB)/4, $3
DATA permsums<>+28(SB)/4, $7
GLOBL permsums<>(SB), RODATA|NOPTR, $32

// func dotQ6_KAVX2(w *byte, qs *int8, d *float32, b *int16, nsb int, tab *float32, rows int, out *float32)
// rows consecutive weight rows, as dotQ4_0AVX2, with the quants (0..63)
// as the unsigned operand and the activations' sums of 16 quants (b)
// taking out the 32, as dot4Q6_KAVX2. Y0 accumulates; Y10/Y11 hold the
// scales of the two halves, Y13 all 16.
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $0-64
	MOVQ   w+0(FP), SI
	MOVQ   tab+40(FP), R8
	MOVQ   out+56(FP), AX
	MASK0F

q6krow:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), R9
	MOVQ   b+24(FP), R10
	MOVQ   nsb+32(FP), CX
	VXORPS Y0, Y0, Y0

q6kloop:
	PREFETCHT0 PFD(SI)
	PREFETCHT0 PFD+64(SI)
	PREFETCHT0 PFD+128(SI)
	PREFETCHT0 PFD+192(SI)
	VPMOVSXBW   192(SI), Y13
	VPERM2I128  $0x11, Y13, Y13, Y11
	VINSERTI128 $1, X13, Y13, Y10
	VMOVDQU      128(SI), Y2
	VMOVDQU      0(SI), Y3
	VMOVDQU      32(SI), Y4
	VPSLLW       $4, Y2, Y5
	VPAND        q6m30<>(SB), Y5, Y5
	VPAND        Y14, Y3, Y6
	VPOR         Y6, Y5, Y5
	VPMADDUBSW   0(DI), Y5, Y5
	VPSHUFB      q6shuf<>+0(SB), Y10, Y6
	VPMADDWD     Y6, Y5, Y7
	VPSLLW       $2, Y2, Y5
	VPAND        q6m30<>(SB), Y5, Y5
	VPAND        Y14, Y4, Y6
	VPOR         Y6, Y5, Y5
	VPMADDUBSW   32(DI), Y5, Y5
	VPSHUFB      q6shuf<>+32(SB), Y10, Y6
	VPMADDWD     Y6, Y5, Y8
	KT2(Y7, Y8, Y6)
	VPAND        q6m30<>(SB), Y2, Y5
	VPSRLW       $4, Y3, Y6
	VPAND        Y14, Y6, Y6
	VPOR         Y6, Y5, Y5
	VPMADDUBSW   64(DI), Y5, Y5
	VPSHUFB      q6shuf<>+64(SB), Y10, Y6
	VPMADDWD     Y6, Y5, Y8
	VPSRLW       $2, Y2, Y5
	VPAND        q6m30<>(SB), Y5, Y5
	VPSRLW       $4, Y4, Y6
	VPAND        Y14, Y6, Y6
	VPOR         Y6, Y5, Y5
	VPMADDUBSW   96(DI), Y5, Y5
	VPSHUFB      q6shuf<>+96(SB), Y10, Y6
	VPMADDWD     Y6, Y5, Y9
	KT2(Y8, Y9, Y6)
	KT4(Y7, Y8, Y6)
	VMOVDQA      Y7, Y1
	VMOVDQU      160(SI), Y2
	VMOVDQU      64(SI), Y3
	VMOVDQU      96(SI), Y4
	VPSLLW       $4, Y2, Y5
	VPAND        q6m30<>(SB), Y5, Y5
	VPAND        Y14, Y3, Y6
	VPOR         Y6, Y5, Y5
	VPMADDUBSW   128(DI), Y5, Y5
	VPSHUFB      q6shuf<>+0(SB), Y11, Y6
	VPMADDWD     Y6, Y5, Y7
	VPSLLW       $2, Y2, Y5
	VPAND        q6m30<>(SB), Y5, Y5
	VPAND        Y14, Y4, Y6
	VPOR         Y6, Y5, Y5
	VPMADDUBSW   160(DI), Y5, Y5
	VPSHUFB      q6shuf<>+32(SB), Y11, Y6
	VPMADDWD     Y6, Y5, Y8
	KT2(Y7, Y8, Y6)
	VPAND        q6m30<>(SB), Y2, Y5
	VPSRLW       $4, Y3, Y6
	VPAND        Y14, Y6, Y6
	VPOR         Y6, Y5, Y5
	VPMADDUBSW   192(DI), Y5, Y5
	VPSHUFB      q6shuf<>+64(SB), Y11, Y6
	VPMADDWD     Y6, Y5, Y8
	VPSRLW       $2, Y2, Y5
	VPAND        q6m30<>(SB), Y5, Y5
	VPSRLW       $4, Y4, Y6
	VPAND        Y14, Y6, Y6
	VPOR         Y6, Y5, Y5
	VPMADDUBSW   224(DI), Y5, Y5
	VPSHUFB      q6shuf<>+96(SB), Y11, Y6
	VPMADDWD     Y6, Y5, Y9
	KT2(Y8, Y9, Y6)
	KT4(Y7, Y8, Y6)

	// The two lanes added: the 8 block sums in order, less 32*Σ sc*Σa.
	VEXTRACTI128 $1, Y1, X6
	VEXTRACTI128 $1, Y7, X8
	VPADDD       X6, X1, X1
	VPADDD       X8, X7, X7
	VINSERTI128  $1, X7, Y1, Y1
	VPMADDWD     (R10), Y13, Y5
	VPSLLD       $5, Y5, Y5
	VPSUBD       Y5, Y1, Y1
	VCVTDQ2PS    Y1, Y1
	MOVWLZX      208(SI), DX
	VBROADCASTSS (R8)(DX*4), Y2
	VMULPS       (R9), Y2, Y2
	VFMADD231PS  Y1, Y2, Y0

	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  q6kloop

	// The lane sums in dot4's order (see dotQ4_KAVX2).
	VHADDPS      Y0, Y0, Y0
	VHADDPS      Y0, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	MOVSS        X0, (AX)
	ADDQ         $4, AX
	DECQ         rows+48(FP)
	JNZ          q6krow
	VZEROUPPER
	RET

DATA q6m30<>+0(SB)/8, $0x3030303030303030
DATA q6m30<>+8(SB)/8, $0x3030303030303030
DATA q6m30<>+16(SB)/8, $0x3030303030303030
DATA q6m30<>+24(SB)/8, $0x3030303030303030
GLOBL q6m30<>(SB), RODATA|NOPTR, $32

DATA q6m32<>+0(SB)/8, $0x2020202020202020
DATA q6m32<>+8(SB)/8, $0x2020202020202020
DATA q6m32<>+16(SB)/8, $0x2020202020202020
DATA q6m32<>+24(SB)/8, $0x2020202020202020
GLOBL q6m32<>(SB), RODATA|NOPTR, $32

// VPSHUFB masks for block t of a half: lane 0 repeats int16 word 2t, lane 1
// word 2t+1.
DATA q6shuf<>+0(SB)/8, $0x0100010001000100
DATA q6shuf<>+8(SB)/8, $0x0100010001000100
DATA q6shuf<>+16(SB)/8, $0x0302030203020302
DATA q6shuf<>+24(SB)/8, $0x0302030203020302
DATA q6shuf<>+32(SB)/8, $0x0504050405040504
DATA q6shuf<>+40(SB)/8, $0x0504050405040504
DATA q6shuf<>+48(SB)/8, $0x0706070607060706
DATA q6shuf<>+56(SB)/8, $0x0706070607060706
DATA q6shuf<>+64(SB)/8, $0x0908090809080908
DATA q6shuf<>+72(SB)/8, $0x0908090809080908
DATA q6shuf<>+80(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q6shuf<>+88(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q6shuf<>+96(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q6shuf<>+104(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q6shuf<>+112(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q6shuf<>+120(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL q6shuf<>(SB), RODATA|NOPTR, $128

DATA q5kx10<>+0(SB)/8, $0x1010101010101010
DATA q5kx10<>+8(SB)/8, $0x1010101010101010
GLOBL q5kx10<>(SB), RODATA|NOPTR, $16

DATA q6m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q6m0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q6m0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q6m0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q6m0f<>(SB), RODATA|NOPTR, $32
