//go:build amd64 && !purego

#include "textflag.h"

#define HSUM0 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VHADDPS      X0, X0, X0; \
	VHADDPS      X0, X0, X0

#define HSUM4 \
	VHADDPS      Y1, Y0, Y0; \
	VHADDPS      Y3, Y2, Y2; \
	VHADDPS      Y2, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0

// ONES16 sets Y15 to int16 ones.
#define ONES16 \
	VPCMPEQW Y15, Y15, Y15; \
	VPSRLW   $15, Y15, Y15

// SCALE1 sets ys to the broadcast product of the half at hp and the float
// at dp (xs is ys's low half).
#define SCALE1(hp, dp, xs, ys) \
	MOVWLZX      hp, DX; \
	VMOVD        DX, xs; \
	VCVTPH2PS    xs, xs; \
	VMULSS       dp, xs, xs; \
	VBROADCASTSS xs, ys

// HALF sets ys to the broadcast half at hp.
#define HALF(hp, xs, ys) \
	MOVWLZX      hp, DX; \
	VMOVD        DX, xs; \
	VCVTPH2PS    xs, xs; \
	VBROADCASTSS xs, ys

// DOTBLK: acc += scale * Σ w*a, w signed bytes in yw (clobbered), a at ap.
#define DOTBLK(yw, ap, ya, ysc, acc) \
	VMOVDQU     ap, ya; \
	VPSIGNB     yw, ya, ya; \
	VPSIGNB     yw, yw, yw; \
	VPMADDUBSW  ya, yw, ya; \
	VPMADDWD    Y15, ya, ya; \
	VCVTDQ2PS   ya, ya; \
	VFMADD231PS ya, ysc, acc

// DOTABS: like DOTBLK with |w| in yabs and w in yw kept.
#define DOTABS(yw, yabs, ap, ya, dp, ysc, yt, acc) \
	VMOVDQU      ap, ya; \
	VPSIGNB      yw, ya, ya; \
	VPMADDUBSW   ya, yabs, ya; \
	VPMADDWD     Y15, ya, ya; \
	VCVTDQ2PS    ya, ya; \
	VBROADCASTSS dp, yt; \
	VMULPS       yt, ysc, yt; \
	VFMADD231PS  ya, yt, acc

// Four activation rows: R8-R11 their quants, BX, DI, R12, R13 their scales,
// AX = 4*block index (so quants are at 8*AX).
#define LOAD4ARGS \
	MOVQ w+0(FP), SI; \
	MOVQ qs+8(FP), AX; \
	MOVQ 0(AX), R8; \
	MOVQ 8(AX), R9; \
	MOVQ 16(AX), R10; \
	MOVQ 24(AX), R11; \
	MOVQ d+16(FP), AX; \
	MOVQ 0(AX), BX; \
	MOVQ 8(AX), DI; \
	MOVQ 16(AX), R12; \
	MOVQ 24(AX), R13; \
	MOVQ nb+24(FP), CX; \
	XORQ AX, AX; \
	ONES16; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3

// BLOCK4 runs one weight block (signed bytes in Y5, its scale in Y4) against
// the four rows.
#define BLOCK4 \
	VPSIGNB Y5, Y5, Y6; \
	DOTABS(Y5, Y6, (R8)(AX*8), Y7, (BX)(AX*1), Y4, Y8, Y0); \
	DOTABS(Y5, Y6, (R9)(AX*8), Y9, (DI)(AX*1), Y4, Y10, Y1); \
	DOTABS(Y5, Y6, (R10)(AX*8), Y11, (R12)(AX*1), Y4, Y12, Y2); \
	DOTABS(Y5, Y6, (R11)(AX*8), Y13, (R13)(AX*1), Y4, Y14, Y3)

#define STORE4 \
	HSUM4; \
	MOVQ    out+32(FP), AX; \
	VMOVUPS X0, (AX); \
	VZEROUPPER

// Q4_0: a block is a half scale and 16 bytes, low nibbles are elements
// 0-15, high nibbles 16-31, value nibble-8. Y14 holds 0x0f bytes, Y13 8s.
#define Q4CONST \
	MOVL         $0x0f0f0f0f, DX; \
	VMOVD        DX, X14; \
	VPBROADCASTD X14, Y14; \
	MOVL         $0x08080808, DX; \
	VMOVD        DX, X13; \
	VPBROADCASTD X13, Y13

// Q4UNPACK sets yw to the 32 signed weights of the block's bytes at qp.
#define Q4UNPACK(qp, xw, yw, xt) \
	VMOVDQU     qp, xw; \
	VPSRLW      $4, xw, xt; \
	VINSERTI128 $1, xt, yw, yw; \
	VPAND       Y14, yw, yw; \
	VPSUBB      Y13, yw, yw

// Blocks of 32 weights against blocks of 32 int8 activations. The int8
// products use VPMADDUBSW, which wants one unsigned operand: the weights are
// made non-negative (VPSIGNB w, w) and their signs moved onto the
// activations (VPSIGNB a, w). Pair sums (int16, no overflow for |q| <= 127)
// are widened by VPMADDWD with ones, converted to float and accumulated with
// the block's scale d_w * d_a.

// func dotQ8_0AVX2(w *byte, qs *int8, d *float32, nb int) float32
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-36
	MOVQ   w+0(FP), SI
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   nb+24(FP), CX
	ONES16
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	SUBQ   $2, CX
	JL     q8tail

q8loop:
	SCALE1((SI), (BX), X4, Y4)
	SCALE1(34(SI), 4(BX), X9, Y9)
	VMOVDQU 2(SI), Y5
	VMOVDQU 36(SI), Y10
	DOTBLK(Y5, (DI), Y6, Y4, Y0)
	DOTBLK(Y10, 32(DI), Y11, Y9, Y1)
	ADDQ    $68, SI
	ADDQ    $64, DI
	ADDQ    $8, BX
	SUBQ    $2, CX
	JGE     q8loop

q8tail:
	ADDQ $2, CX
	JZ   q8done
	SCALE1((SI), (BX), X4, Y4)
	VMOVDQU 2(SI), Y5
	DOTBLK(Y5, (DI), Y6, Y4, Y0)

q8done:
	VADDPS Y1, Y0, Y0
	HSUM0
	VZEROUPPER
	MOVSS  X0, ret+32(FP)
	RET

// func dot4Q8_0AVX2(w *byte, qs *[4]*int8, d *[4]*float32, nb int, out *[4]float32)
TEXT ·dot4Q8_0AVX2(SB), NOSPLIT, $0-40
	LOAD4ARGS

q8x4loop:
	HALF((SI), X4, Y4)
	VMOVDQU 2(SI), Y5
	BLOCK4
	ADDQ    $34, SI
	ADDQ    $4, AX
	DECQ    CX
	JNZ     q8x4loop
	STORE4
	RET

// func dotQ4_0AVX2(w *byte, qs *int8, d *float32, nb int) float32
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-36
	MOVQ   w+0(FP), SI
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), BX
	MOVQ   nb+24(FP), CX
	ONES16
	Q4CONST
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	SUBQ   $2, CX
	JL     q4tail

q4loop:
	SCALE1((SI), (BX), X4, Y4)
	SCALE1(18(SI), 4(BX), X9, Y9)
	Q4UNPACK(2(SI), X5, Y5, X6)
	Q4UNPACK(20(SI), X10, Y10, X11)
	DOTBLK(Y5, (DI), Y6, Y4, Y0)
	DOTBLK(Y10, 32(DI), Y11, Y9, Y1)
	ADDQ $36, SI
	ADDQ $64, DI
	ADDQ $8, BX
	SUBQ $2, CX
	JGE  q4loop

q4tail:
	ADDQ $2, CX
	JZ   q4done
	SCALE1((SI), (BX), X4, Y4)
	Q4UNPACK(2(SI), X5, Y5, X6)
	DOTBLK(Y5, (DI), Y6, Y4, Y0)

q4done:
	VADDPS Y1, Y0, Y0
	HSUM0
	VZEROUPPER
	MOVSS  X0, ret+32(FP)
	RET

// func dot4Q4_0AVX2(w *byte, qs *[4]*int8, d *[4]*float32, nb int, out *[4]float32)
// BLOCK4 uses Y4-Y14, so the Q4 constants live in memory here.
TEXT ·dot4Q4_0AVX2(SB), NOSPLIT, $0-40
	LOAD4ARGS

q4x4loop:
	HALF((SI), X4, Y4)
	VMOVDQU      2(SI), X5
	VPSRLW       $4, X5, X6
	VINSERTI128  $1, X6, Y5, Y5
	VPAND        nib0f<>(SB), Y5, Y5
	VPSUBB       eights<>(SB), Y5, Y5
	BLOCK4
	ADDQ         $18, SI
	ADDQ         $4, AX
	DECQ         CX
	JNZ          q4x4loop
	STORE4
	RET

DATA nib0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nib0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nib0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nib0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nib0f<>(SB), RODATA|NOPTR, $32

DATA eights<>+0(SB)/8, $0x0808080808080808
DATA eights<>+8(SB)/8, $0x0808080808080808
DATA eights<>+16(SB)/8, $0x0808080808080808
DATA eights<>+24(SB)/8, $0x0808080808080808
GLOBL eights<>(SB), RODATA|NOPTR, $32
