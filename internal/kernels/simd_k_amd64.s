//go:build amd64 && !purego

#include "textflag.h"

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

// func dotQ4_KAVX2(w *byte, qs *int8, d, s *float32, nsb int, tab *float32) float32
// Y0 accumulates d*sc*d_a*Σq*a, Y1 dmin*m*S.
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $0-52
	MOVQ    w+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), R9
	MOVQ    s+24(FP), R10
	MOVQ    nsb+32(FP), CX
	MOVQ    tab+40(FP), R8
	ONES16
	MASK0F
	VMOVDQU permsums<>(SB), Y13
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1

q4kloop:
	// The 6-bit scales and mins of the 8 sub-blocks (ggml's
	// get_scale_min_k4, done on 32-bit words): R11 = scales, R12 = mins.
	MOVL  4(SI), AX
	MOVL  8(SI), BX
	MOVL  12(SI), DX
	MOVL  AX, R11
	ANDL  $0x3f3f3f3f, R11
	MOVL  AX, R12
	SHRL  $6, R12
	ANDL  $0x03030303, R12
	SHLL  $4, R12
	MOVL  DX, R13
	ANDL  $0x0f0f0f0f, R13
	ORL   R13, R12
	SHLQ  $32, R12
	ORQ   R12, R11
	MOVL  BX, R12
	ANDL  $0x3f3f3f3f, R12
	SHRL  $6, BX
	ANDL  $0x03030303, BX
	SHLL  $4, BX
	SHRL  $4, DX
	ANDL  $0x0f0f0f0f, DX
	ORL   DX, BX
	SHLQ  $32, BX
	ORQ   BX, R12

	// Y2 = d*sc*d_a per sub-block; Y1 += dmin*m*S.
	VMOVQ        R11, X2
	VPMOVZXBD    X2, Y2
	VCVTDQ2PS    Y2, Y2
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), Y3
	VMULPS       Y3, Y2, Y2
	VMULPS       (R9), Y2, Y2
	VMOVQ        R12, X3
	VPMOVZXBD    X3, Y3
	VCVTDQ2PS    Y3, Y3
	VMULPS       (R10), Y3, Y3
	MOVWLZX      2(SI), DX
	VBROADCASTSS (R8)(DX*4), Y4
	VFMADD231PS  Y3, Y4, Y1

	Q4KPAIR(16(SI), 32(SI), (DI), 16(DI), 32(DI), 48(DI), X7, Y7)
	Q4KPAIR(48(SI), 64(SI), 64(DI), 80(DI), 96(DI), 112(DI), X8, Y8)
	Q4KPAIR(80(SI), 96(SI), 128(DI), 144(DI), 160(DI), 176(DI), X9, Y9)
	Q4KPAIR(112(SI), 128(SI), 192(DI), 208(DI), 224(DI), 240(DI), X10, Y10)
	SUMS8
	VFMADD231PS Y7, Y2, Y0

	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  q4kloop

	VSUBPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+48(FP)
	RET

// Q5_K: as Q4_K with a fifth bit per quant from qh (32 bytes before qs).

// func dotQ5_KAVX2(w *byte, qs *int8, d, s *float32, nsb int, tab *float32) float32
// Y0 accumulates d*sc*d_a*Σq*a, Y1 dmin*m*S.
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $0-52
	MOVQ    w+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), R9
	MOVQ    s+24(FP), R10
	MOVQ    nsb+32(FP), CX
	MOVQ    tab+40(FP), R8
	ONES16
	MASK0F
	VMOVDQU permsums<>(SB), Y13
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1

q5kloop:
	// The 6-bit scales and mins of the 8 sub-blocks (ggml's
	// get_scale_min_k4, done on 32-bit words): R11 = scales, R12 = mins.
	MOVL  4(SI), AX
	MOVL  8(SI), BX
	MOVL  12(SI), DX
	MOVL  AX, R11
	ANDL  $0x3f3f3f3f, R11
	MOVL  AX, R12
	SHRL  $6, R12
	ANDL  $0x03030303, R12
	SHLL  $4, R12
	MOVL  DX, R13
	ANDL  $0x0f0f0f0f, R13
	ORL   R13, R12
	SHLQ  $32, R12
	ORQ   R12, R11
	MOVL  BX, R12
	ANDL  $0x3f3f3f3f, R12
	SHRL  $6, BX
	ANDL  $0x03030303, BX
	SHLL  $4, BX
	SHRL  $4, DX
	ANDL  $0x0f0f0f0f, DX
	ORL   DX, BX
	SHLQ  $32, BX
	ORQ   BX, R12

	// Y2 = d*sc*d_a per sub-block; Y1 += dmin*m*S.
	VMOVQ        R11, X2
	VPMOVZXBD    X2, Y2
	VCVTDQ2PS    Y2, Y2
	MOVWLZX      (SI), DX
	VBROADCASTSS (R8)(DX*4), Y3
	VMULPS       Y3, Y2, Y2
	VMULPS       (R9), Y2, Y2
	VMOVQ        R12, X3
	VPMOVZXBD    X3, Y3
	VCVTDQ2PS    Y3, Y3
	VMULPS       (R10), Y3, Y3
	MOVWLZX      2(SI), DX
	VBROADCASTSS (R8)(DX*4), Y4
	VFMADD231PS  Y3, Y4, Y1

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
	VINSERTI128 $1, X5, Y7, Y7
	VPMADDWD Y15, Y7, Y7
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
	VINSERTI128 $1, X5, Y8, Y8
	VPMADDWD Y15, Y8, Y8
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
	VINSERTI128 $1, X5, Y9, Y9
	VPMADDWD Y15, Y9, Y9
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
	VINSERTI128 $1, X5, Y10, Y10
	VPMADDWD Y15, Y10, Y10
	SUMS8
	VFMADD231PS Y7, Y2, Y0

	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  q5kloop

	VSUBPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+48(FP)
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

// func dotQ6_KAVX2(w *byte, qs *int8, d *float32, nsb int, tab *float32) float32
// Y0 accumulates; Y10/Y11 hold the scales of the two halves, Y13 the first
// half's sums.
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $0-44
	MOVQ   w+0(FP), SI
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), R9
	MOVQ   nsb+24(FP), CX
	MOVQ   tab+32(FP), R8
	MASK0F
	VXORPS Y0, Y0, Y0

q6kloop:
	VPMOVSXBW   192(SI), Y10
	VPERM2I128  $0x11, Y10, Y10, Y11
	VINSERTI128 $1, X10, Y10, Y10
	Q6HALF(0(SI), 32(SI), 128(SI), (DI), 32(DI), 64(DI), 96(DI), Y10, Y13)
	Q6HALF(64(SI), 96(SI), 160(SI), 128(DI), 160(DI), 192(DI), 224(DI), Y11, Y9)

	// [B0.lo | B1.lo] + [B0.hi | B1.hi] = the 8 block sums in order.
	VINSERTI128  $1, X9, Y13, Y1
	VPERM2I128   $0x31, Y9, Y13, Y2
	VPADDD       Y2, Y1, Y1
	VCVTDQ2PS    Y1, Y1
	MOVWLZX      208(SI), DX
	VBROADCASTSS (R8)(DX*4), Y2
	VMULPS       (R9), Y2, Y2
	VFMADD231PS  Y1, Y2, Y0

	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $32, R9
	DECQ CX
	JNZ  q6kloop

	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+40(FP)
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
