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

DATA permsums<>+0(SB)/4, $0
DATA permsums<>+4(SB)/4, $4
DATA permsums<>+8(SB)/4, $1
DATA permsums<>+12(SB)/4, $5
DATA permsums<>+16(SB)/4, $2
DATA permsums<>+20(SB)/4, $6
DATA permsums<>+24(SB)/4, $3
DATA permsums<>+28(SB)/4, $7
GLOBL permsums<>(SB), RODATA|NOPTR, $32
