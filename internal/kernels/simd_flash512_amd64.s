//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"
#include "simd_flash512_amd64.h"
#include "simd_data.h"

// AVX-512 flash attention kernels (flash.go has the contracts and the Go
// oracles, whose bits these give): fused multiply-adds in the oracles'
// order, four query rows at a time in sixteen accumulators (an outer
// product of four rows by 64 keys or 64 value columns per step).

// ZERO16 clears Z0-Z15.
#define ZERO16 \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	VPXORD Z4, Z4, Z4 \
	VPXORD Z5, Z5, Z5 \
	VPXORD Z6, Z6, Z6 \
	VPXORD Z7, Z7, Z7 \
	VPXORD Z8, Z8, Z8 \
	VPXORD Z9, Z9, Z9 \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11 \
	VPXORD Z12, Z12, Z12 \
	VPXORD Z13, Z13, Z13 \
	VPXORD Z14, Z14, Z14 \
	VPXORD Z15, Z15, Z15

// QUADSTEP: Z0-Z15 += value d of four query rows at AX (R8 bytes apart,
// R9 = 3*R8) times value d of 64 keys in Z16-Z19; AX steps to d+1.
#define QUADSTEP \
	VBROADCASTSS (AX), Z20 \
	VBROADCASTSS (AX)(R8*1), Z21 \
	VBROADCASTSS (AX)(R8*2), Z22 \
	VBROADCASTSS (AX)(R9*1), Z23 \
	FMA4x4(Z20, Z21, Z22, Z23) \
	ADDQ $4, AX

// SCOREQUAD(LOADK, NEXTK, loop): Z0-Z15 = four query rows at AX (R8
// bytes apart, R9 = 3*R8) against 64 keys, over CX values of the head:
// LOADK puts value d of the keys into Z16-Z19, NEXTK steps to d+1; one
// fused multiply-add per term, d in order, from zero (the oracle's chain).
#define SCOREQUAD(LOADK, NEXTK, loop) \
	ZERO16 \
loop: \
	LOADK \
	QUADSTEP \
	NEXTK \
	DECQ CX \
	JNZ  loop

// LOADKT / NEXTKT: the keys of a transposed tile at DI (rows of 64).
#define LOADKT \
	VMOVUPS 0(DI), Z16 \
	VMOVUPS 64(DI), Z17 \
	VMOVUPS 128(DI), Z18 \
	VMOVUPS 192(DI), Z19

#define NEXTKT ADDQ $256, DI

// SCALESTORE16: the 4 × 64 scores of Z0-Z15 times Z31, stored at DX.
#define SCALESTORE16 \
	VMULPS  Z31, Z0, Z0 \
	VMULPS  Z31, Z1, Z1 \
	VMULPS  Z31, Z2, Z2 \
	VMULPS  Z31, Z3, Z3 \
	VMULPS  Z31, Z4, Z4 \
	VMULPS  Z31, Z5, Z5 \
	VMULPS  Z31, Z6, Z6 \
	VMULPS  Z31, Z7, Z7 \
	VMULPS  Z31, Z8, Z8 \
	VMULPS  Z31, Z9, Z9 \
	VMULPS  Z31, Z10, Z10 \
	VMULPS  Z31, Z11, Z11 \
	VMULPS  Z31, Z12, Z12 \
	VMULPS  Z31, Z13, Z13 \
	VMULPS  Z31, Z14, Z14 \
	VMULPS  Z31, Z15, Z15 \
	VMOVUPS Z0, 0(DX) \
	VMOVUPS Z1, 64(DX) \
	VMOVUPS Z2, 128(DX) \
	VMOVUPS Z3, 192(DX) \
	VMOVUPS Z4, 256(DX) \
	VMOVUPS Z5, 320(DX) \
	VMOVUPS Z6, 384(DX) \
	VMOVUPS Z7, 448(DX) \
	VMOVUPS Z8, 512(DX) \
	VMOVUPS Z9, 576(DX) \
	VMOVUPS Z10, 640(DX) \
	VMOVUPS Z11, 704(DX) \
	VMOVUPS Z12, 768(DX) \
	VMOVUPS Z13, 832(DX) \
	VMOVUPS Z14, 896(DX) \
	VMOVUPS Z15, 960(DX)

// TILEKV(SCORE, DECV) is the body of
// func flashTile<K><V>AVX512(s, q *float32, ldq int, k0, k1 *uint16, kstride int, v0, v1 *uint16, vstride int, m, l, o *float32, ldo int, scale float32, pk0, pk1, pv0, pv1 *uint16):
// FlashTileKV: four query rows of a head of 64 against a tile of 64 keys
// stored by column and 64 value rows, each in two runs of 32:
// flashScores64AVX512's quad on the keys decoded as loaded (SCORE), the
// scores stored at s, FSOFTROWS on them, then ACCUMKV's rows on the values
// (DECV); the bits of KTile, FlashScores, FlashSoftmax and FlashAccumKV.
// The next tile's keys and values (pk0, pk1, pv0, pv1: the same strides)
// are asked for a line at a time along the way.
#define TILEKV(SCORE, DECV) \
	MOVQ         pk0+112(FP), R10 \
	MOVQ         pk1+120(FP), R11 \
	MOVQ         q+8(FP), AX \
	ROWS3(ldq+16(FP), R8, R9) \
	MOVQ         k0+24(FP), DI \
	MOVQ         k1+32(FP), SI \
	MOVQ         kstride+40(FP), R13 \
	VBROADCASTSS scale+104(FP), Z31 \
	SCORE \
	MOVQ         s+0(FP), DX \
	SCALESTORE16 \
	MOVQ         s+0(FP), SI \
	MOVQ         $4, CX \
	MOVQ         m+72(FP), R8 \
	MOVQ         l+80(FP), R9 \
	MOVQ         o+88(FP), R10 \
	MOVQ         ldo+96(FP), R11 \
	SHLQ         $2, R11 \
	MOVQ         $4, R12 \
	FEXPCONSTS \
	FSOFTROWS \
	MOVQ         o+88(FP), R10 \
	ROWS3(ldo+96(FP), R8, R9) \
	LOAD16x4 \
	MOVQ         s+0(FP), R15 \
	MOVQ         $256, R13 \
	MOVQ         $768, R14 \
	MOVQ         vstride+64(FP), R12 \
	MOVQ         pv0+128(FP), BX \
	MOVQ         v0+48(FP), AX \
	MOVQ         $32, R11 \
	ACCROWS(DECV, tv0) \
	MOVQ         pv1+136(FP), BX \
	MOVQ         v1+56(FP), AX \
	MOVQ         $32, R11 \
	ACCROWS(DECV, tv1) \
	STORE16x4 \
	VZEROUPPER \
	RET

// func flashScores64AVX512(s, q *float32, ldq int, kt *float32, nq, hd int, scale float32)
// FlashScores with nk = 64: rows four at a time (Z0-Z15: row i's keys
// 16c..16c+15 in Z(4i+c)), then one at a time (Z0-Z3).
TEXT ·flashScores64AVX512(SB), NOSPLIT, $0-52
	MOVQ         s+0(FP), DX
	MOVQ         q+8(FP), SI
	ROWS3(ldq+16(FP), R8, R9)
	MOVQ         kt+24(FP), R11
	MOVQ         nq+32(FP), BX
	MOVQ         hd+40(FP), R12
	VBROADCASTSS scale+48(FP), Z31

squad:
	CMPQ BX, $4
	JL   sone
	MOVQ R11, DI
	MOVQ SI, AX
	MOVQ R12, CX
	SCOREQUAD(LOADKT, NEXTKT, squadd)
	SCALESTORE16
	ADDQ $1024, DX
	LEAQ (SI)(R8*4), SI
	SUBQ $4, BX
	JMP  squad

sone:
	TESTQ BX, BX
	JZ    sdone
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ  R11, DI
	MOVQ  SI, AX
	MOVQ  R12, CX

soned:
	VBROADCASTSS (AX), Z20
	VFMADD231PS  0(DI), Z20, Z0
	VFMADD231PS  64(DI), Z20, Z1
	VFMADD231PS  128(DI), Z20, Z2
	VFMADD231PS  192(DI), Z20, Z3
	ADDQ         $4, AX
	ADDQ         $256, DI
	DECQ         CX
	JNZ          soned
	VMULPS       Z31, Z0, Z0
	VMULPS       Z31, Z1, Z1
	VMULPS       Z31, Z2, Z2
	VMULPS       Z31, Z3, Z3
	VMOVUPS      Z0, 0(DX)
	VMOVUPS      Z1, 64(DX)
	VMOVUPS      Z2, 128(DX)
	VMOVUPS      Z3, 192(DX)
	ADDQ         $256, DX
	ADDQ         R8, SI
	DECQ         BX
	JMP          sone

sdone:
	VZEROUPPER
	RET

// ACOLS(LOAD): flashAccumAVX512's columns at DX (bytes): R10 = their
// row 0 of o, LOAD its rows into the accumulators, AX = their row 0 of
// v, R15 = the rows' p, CX = nk.
#define ACOLS(LOAD) \
	LEAQ (DI)(DX*1), R10;  \
	LOAD;                  \
	LEAQ (R11)(DX*1), AX;  \
	MOVQ SI, R15;          \
	MOVQ R13, CX;          \
	SHRQ $2, CX

// LOAD4x1: 16 columns of four rows of o at R10 into Z0, Z4, Z8, Z12;
// LOAD1x1: of one row into Z0.
#define LOAD4x1 \
	VMOVUPS (R10), Z0;       \
	VMOVUPS (R10)(R8*1), Z4; \
	VMOVUPS (R10)(R8*2), Z8; \
	VMOVUPS (R10)(R9*1), Z12

#define LOAD1x1 VMOVUPS (R10), Z0

// func flashAccumAVX512(o *float32, ldo int, p, v *float32, nq, nk, vd int)
// FlashAccum for vd a multiple of 16: rows four at a time, their columns
// 64 at a time (Z(4i+c): row i's columns 16c..16c+15) then 16 at a time;
// then the rows left one at a time, columns 16 at a time. Each o element
// gets p[i][j]·v[j][d] added for j in order (the oracle's fused chain).
TEXT ·flashAccumAVX512(SB), NOSPLIT, $0-56
	MOVQ o+0(FP), DI
	ROWS3(ldo+8(FP), R8, R9)
	MOVQ p+16(FP), SI
	MOVQ v+24(FP), R11
	MOVQ nq+32(FP), BX
	ROWS3(nk+40(FP), R13, R14)
	MOVQ vd+48(FP), R12
	SHLQ $2, R12

aquad:
	CMPQ BX, $4
	JL   aone
	XORQ DX, DX             // column offset in bytes

aquad64:
	LEAQ 256(DX), R15
	CMPQ R15, R12
	JG   aquad16
	ACOLS(LOAD16x4)

aquad64j:
	VMOVUPS      0(AX), Z16
	VMOVUPS      64(AX), Z17
	VMOVUPS      128(AX), Z18
	VMOVUPS      192(AX), Z19
	VBROADCASTSS (R15), Z20
	VBROADCASTSS (R15)(R13*1), Z21
	VBROADCASTSS (R15)(R13*2), Z22
	VBROADCASTSS (R15)(R14*1), Z23
	FMA4x4(Z20, Z21, Z22, Z23)
	ADDQ         $4, R15
	ADDQ         R12, AX
	DECQ         CX
	JNZ          aquad64j
	STORE16x4
	ADDQ $256, DX
	JMP  aquad64

aquad16:
	CMPQ DX, R12
	JGE  aquadnext
	ACOLS(LOAD4x1)

aquad16j:
	VMOVUPS      (AX), Z16
	VBROADCASTSS (R15), Z20
	VBROADCASTSS (R15)(R13*1), Z21
	VBROADCASTSS (R15)(R13*2), Z22
	VBROADCASTSS (R15)(R14*1), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z16, Z23, Z12
	ADDQ         $4, R15
	ADDQ         R12, AX
	DECQ         CX
	JNZ          aquad16j
	VMOVUPS Z0, (R10)
	VMOVUPS Z4, (R10)(R8*1)
	VMOVUPS Z8, (R10)(R8*2)
	VMOVUPS Z12, (R10)(R9*1)
	ADDQ $64, DX
	JMP  aquad16

aquadnext:
	LEAQ (DI)(R8*4), DI
	LEAQ (SI)(R13*4), SI
	SUBQ $4, BX
	JMP  aquad

aone:
	TESTQ BX, BX
	JZ    adone
	XORQ  DX, DX

aone16:
	CMPQ DX, R12
	JGE  aonenext
	ACOLS(LOAD1x1)

aone16j:
	VBROADCASTSS (R15), Z20
	VFMADD231PS  (AX), Z20, Z0
	ADDQ         $4, R15
	ADDQ         R12, AX
	DECQ         CX
	JNZ          aone16j
	VMOVUPS Z0, (R10)
	ADDQ $64, DX
	JMP  aone16

aonenext:
	ADDQ R8, DI
	ADDQ R13, SI
	DECQ BX
	JMP  aone

adone:
	VZEROUPPER
	RET

// Flash's exp constants (simd_data.h's EXPCONSTS, in its order), one
// each: ExpSum broadcasts them into registers.
#define FEXPC4(i, v) DATA fexpc<>+(4*i)(SB)/4, $v

EXPCONSTS(FEXPC4)
GLOBL fexpc<>(SB), RODATA|NOPTR, $60

// FEXPCONSTS broadcasts the exp constants into Z16-Z30 (AX clobbered):
// Z16 log2 e, Z17 C1, Z18 C2, Z19-Z24 P0-P5, Z25 1, Z26 HI, Z27 LO, Z28
// +Inf, Z30 1.5·2^23.
#define FEXPCONSTS \
	LEAQ         fexpc<>(SB), AX; \
	VBROADCASTSS 0(AX), Z16;      \
	VBROADCASTSS 4(AX), Z17;      \
	VBROADCASTSS 8(AX), Z18;      \
	VBROADCASTSS 12(AX), Z19;     \
	VBROADCASTSS 16(AX), Z20;     \
	VBROADCASTSS 20(AX), Z21;     \
	VBROADCASTSS 24(AX), Z22;     \
	VBROADCASTSS 28(AX), Z23;     \
	VBROADCASTSS 32(AX), Z24;     \
	VBROADCASTSS 36(AX), Z25;     \
	VBROADCASTSS 40(AX), Z26;     \
	VBROADCASTSS 44(AX), Z27;     \
	VBROADCASTSS 48(AX), Z28;     \
	VBROADCASTSS 56(AX), Z30

// FEXP16(x, r, k, y): y = exp(x) for the 16 floats of x (kept), flashExp's
// fused multiply-adds; r, k, K1 and K2 are clobbered. The clamps keep a
// NaN (it is their second operand), and VSCALEFPS multiplies by 2^k in one
// rounding, as flashExp does; below LO the lane is zeroed (-Inf: 0),
// above HI it is +Inf.
#define FEXP16(x, r, k, y) \
	VMAXPS       x, Z27, r;      \
	VMINPS       r, Z26, r;      \
	VMOVAPS      Z30, k;         \
	VFMADD231PS  Z16, r, k;      \
	VSUBPS       Z30, k, k;      \
	VFNMADD231PS Z17, k, r;      \
	VFNMADD231PS Z18, k, r;      \
	VMOVAPS      Z19, y;         \
	VFMADD213PS  Z20, r, y;      \
	VFMADD213PS  Z21, r, y;      \
	VFMADD213PS  Z22, r, y;      \
	VFMADD213PS  Z23, r, y;      \
	VFMADD213PS  Z24, r, y;      \
	VFMADD213PS  Z25, r, y;      \
	VFMADD213PS  Z25, r, y;      \
	VCMPPS       $5, Z27, x, K1; \
	VSCALEFPS.Z  k, y, K1, y;    \
	VCMPPS       $14, Z26, x, K2; \
	VMOVAPS      Z28, K2, y

// FOLD16(z, y, x, t): the 16 lanes of z (Y and X its halves) added
// pairwise, l += l+8, +4, +2, +1, into the low lane of x (t scratch).
#define FOLD16(z, y, x, ty, tx) \
	VEXTRACTF64X4 $1, z, ty;  \
	VADDPS        ty, y, y;   \
	VEXTRACTF128  $1, y, tx;  \
	VADDPS        tx, x, x;   \
	VMOVHLPS      x, x, tx;   \
	VADDPS        tx, x, x;   \
	VMOVSHDUP     x, tx;      \
	VADDSS        tx, x, x

// HMAX16(z, y, x, ty, tx): every lane of x (z's low quarter; y its low
// half) is the largest of z's 16 floats (ty/tx scratch).
#define HMAX16(z, y, x, ty, tx) \
	VEXTRACTF64X4 $1, z, ty; \
	VMAXPS        ty, y, y;  \
	HMAX8(y, x, tx)

// func expSumAVX512(x *float32, n int, m float32) float32
// ExpSum for n a multiple of 16 (> 0): FEXP16 on 16 lanes, lane l summing
// x[j] for j%16 == l, then the lanes folded.
TEXT ·expSumAVX512(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	SHRQ         $4, CX
	VBROADCASTSS m+16(FP), Z15
	VPXORD       Z14, Z14, Z14
	FEXPCONSTS

eloop:
	VMOVUPS (DI), Z0
	VSUBPS  Z15, Z0, Z0
	FEXP16(Z0, Z1, Z2, Z3)
	VMOVUPS Z3, (DI)
	VADDPS  Z3, Z14, Z14
	ADDQ    $64, DI
	DECQ    CX
	JNZ     eloop

	FOLD16(Z14, Y14, X14, Y1, X1)
	VMOVSS X14, ret+24(FP)
	VZEROUPPER
	RET

// FSOFTROWS: FlashSoftmax's rows: CX rows of 64 scores at SI (then
// weights), m at R8, l at R9, o at R10 (rows R11 bytes apart, R12 = vd/16
// vectors), the exp constants in Z16-Z30 (FEXPCONSTS); AX, BX, DI,
// Z0-Z15, K1 and K2 clobbered. A row whose maximum is not above m (or is
// NaN) skips the rescale, as does one whose m was -Inf.
#define FSOFTROWS \
srow: \
	VMOVUPS       (SI), Z4 \
	VMOVUPS       64(SI), Z5 \
	VMOVUPS       128(SI), Z6 \
	VMOVUPS       192(SI), Z7 \
	VMAXPS        Z5, Z4, Z8 \
	VMAXPS        Z7, Z6, Z9 \
	VMAXPS        Z9, Z8, Z8 \
	HMAX16(Z8, Y8, X8, Y9, X9) \
	VMOVSS        (R8), X10 \
	VUCOMISS      X10, X8 \
	JLS           sweights \
	MOVL          (R8), AX \
	VMOVSS        X8, (R8) \
	CMPL          AX, $0xff800000 \
	JEQ           sweights \
	VSUBSS        X8, X10, X11 \
	VBROADCASTSS  X11, Z11 \
	FEXP16(Z11, Z0, Z1, Z12) \
	VMOVSS        (R9), X13 \
	VMULSS        X12, X13, X13 \
	VMOVSS        X13, (R9) \
	MOVQ          R10, DI \
	MOVQ          R12, BX \
	TESTQ         BX, BX \
	JZ            sweights \
sscale: \
	VMULPS  (DI), Z12, Z13 \
	VMOVUPS Z13, (DI) \
	ADDQ    $64, DI \
	DECQ    BX \
	JNZ     sscale \
sweights: \
	VBROADCASTSS (R8), Z15 \
	VSUBPS       Z15, Z4, Z4 \
	VSUBPS       Z15, Z5, Z5 \
	VSUBPS       Z15, Z6, Z6 \
	VSUBPS       Z15, Z7, Z7 \
	FEXP16(Z4, Z0, Z1, Z8) \
	FEXP16(Z5, Z0, Z1, Z9) \
	FEXP16(Z6, Z0, Z1, Z10) \
	FEXP16(Z7, Z0, Z1, Z11) \
	VMOVUPS      Z8, (SI) \
	VMOVUPS      Z9, 64(SI) \
	VMOVUPS      Z10, 128(SI) \
	VMOVUPS      Z11, 192(SI) \
	VPXORD       Z14, Z14, Z14 \
	VADDPS       Z8, Z14, Z14 \
	VADDPS       Z9, Z14, Z14 \
	VADDPS       Z10, Z14, Z14 \
	VADDPS       Z11, Z14, Z14 \
	FOLD16(Z14, Y14, X14, Y1, X1) \
	VMOVSS       (R9), X13 \
	VADDSS       X14, X13, X13 \
	VMOVSS       X13, (R9) \
	ADDQ         $256, SI \
	ADDQ         $4, R8 \
	ADDQ         $4, R9 \
	ADDQ         R11, R10 \
	DECQ         CX \
	JNZ          srow

// func flashSoftmaxAVX512(s *float32, nq int, m, l, o *float32, ldo, vd int)
// FlashSoftmax: per row of 64 scores (Z4-Z7), its maximum; when it is
// above m, l and the vd values of the row of o are multiplied by
// exp(m - max) (FEXP16 on the difference in every lane; not when m is
// -Inf) and m becomes it; then the weights as expSumAVX512 makes them,
// their sum added to l. vd is a multiple of 16; ldo in floats.
TEXT ·flashSoftmaxAVX512(SB), NOSPLIT, $0-56
	SOFTMAXARGS(4)
	FEXPCONSTS

	FSOFTROWS
	VZEROUPPER
	RET

// func rowMaxAVX512(x *float32, n int) float32
// RowMax for n a multiple of 16 (> 0).
TEXT ·rowMaxAVX512(SB), NOSPLIT, $0-20
	MOVQ    x+0(FP), DI
	MOVQ    n+8(FP), CX
	SHRQ    $4, CX
	VMOVUPS (DI), Z0
	ADDQ    $64, DI
	DECQ    CX
	JZ      mdone

mloop:
	VMAXPS (DI), Z0, Z0
	ADDQ   $64, DI
	DECQ   CX
	JNZ    mloop

mdone:
	HMAX16(Z0, Y0, X0, Y1, X1)
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// LOADKC / NEXTKC: value d of a tile's keys stored by column in two runs
// of 32 halves, at DI and SI (R13 bytes from one value to the next);
// NEXTKC also asks for the line of value d of the next keys' runs (R10,
// R11) into L2.
#define LOADKC \
	VCVTPH2PS 0(DI), Z16 \
	VCVTPH2PS 32(DI), Z17 \
	VCVTPH2PS 0(SI), Z18 \
	VCVTPH2PS 32(SI), Z19

#define NEXTKC \
	PREFETCHT1 (R10) \
	PREFETCHT1 (R11) \
	ADDQ       R13, DI \
	ADDQ       R13, SI \
	ADDQ       R13, R10 \
	ADDQ       R13, R11

// DECF16P: DECF16, asking for the 128 bytes of the next values' row at
// BX (then R12 bytes on) into L2.
#define DECF16P \
	DECF16 \
	PREFETCHT1 (BX) \
	PREFETCHT1 64(BX) \
	ADDQ       R12, BX

// SCOREF16: SCOREQUAD on 64 f16 keys by column (LOADKC, NEXTKC).
#define SCOREF16 \
	MOVQ $64, CX \
	SCOREQUAD(LOADKC, NEXTKC, tscore)

// Q8SCALE: Z16-Z19, codes as int32, times their blocks' scales Z24-Z27
// (one rounding: the decoded values).
#define Q8SCALE \
	VCVTDQ2PS Z16, Z16 \
	VCVTDQ2PS Z17, Z17 \
	VCVTDQ2PS Z18, Z18 \
	VCVTDQ2PS Z19, Z19 \
	VMULPS    Z24, Z16, Z16 \
	VMULPS    Z25, Z17, Z17 \
	VMULPS    Z26, Z18, Z18 \
	VMULPS    Z27, Z19, Z19

// LOADQ8(a, b): Z16-Z19 = value 2p (a = -1, b = 31) or 2p+1 (a = 0,
// b = 32) of 64 q8_0 keys by column in two runs at DI and SI: the low
// (high) bytes of their column of code pairs, decoded. A low byte is read
// as the high byte of the word a byte before (the byte under it is the
// row before's, or the column before's), so that one arithmetic shift
// sign-extends either.
#define LOADQ8(a, b) \
	VPMOVSXWD a(DI), Z16 \
	VPMOVSXWD b(DI), Z17 \
	VPMOVSXWD a(SI), Z18 \
	VPMOVSXWD b(SI), Z19 \
	VPSRAD    $8, Z16, Z16 \
	VPSRAD    $8, Z17, Z17 \
	VPSRAD    $8, Z18, Z18 \
	VPSRAD    $8, Z19, Z19 \
	Q8SCALE

// SCOREQ8: SCOREQUAD on 64 q8_0 keys by column (two blocks of 32
// values: a scale column into Z24-Z27, then 16 columns of code pairs,
// each two values), the line of each column of the next keys asked for
// as NEXTKC does.
#define SCOREQ8 \
	MOVQ      $2, CX \
	ZERO16 \
tblk: \
	VCVTPH2PS 0(DI), Z24 \
	VCVTPH2PS 32(DI), Z25 \
	VCVTPH2PS 0(SI), Z26 \
	VCVTPH2PS 32(SI), Z27 \
	NEXTKC \
	MOVQ      $16, DX \
tpair: \
	LOADQ8(-1, 31) \
	QUADSTEP \
	LOADQ8(0, 32) \
	QUADSTEP \
	NEXTKC \
	DECQ      DX \
	JNZ       tpair \
	DECQ      CX \
	JNZ       tblk

// DECQ8P: DECQ8, asking for the 68 bytes of the next values' row at BX
// (then R12 bytes on) into L2.
#define DECQ8P \
	DECQ8 \
	PREFETCHT1 (BX) \
	PREFETCHT1 67(BX) \
	ADDQ       R12, BX

TEXT ·flashTileF16F16AVX512(SB), NOSPLIT, $0-144
	TILEKV(SCOREF16, DECF16P)

TEXT ·flashTileF16Q8AVX512(SB), NOSPLIT, $0-144
	TILEKV(SCOREF16, DECQ8P)

TEXT ·flashTileQ8F16AVX512(SB), NOSPLIT, $0-144
	TILEKV(SCOREQ8, DECF16P)

TEXT ·flashTileQ8Q8AVX512(SB), NOSPLIT, $0-144
	TILEKV(SCOREQ8, DECQ8P)

// func kTileQ8ColAVX512(dst *float32, ld int, src *uint16, stride, blocks, cnt int)
// KTILEQ8COL 16 rows at a time: a column's word shifted left by 24 then
// right (arithmetic) is its low code, the word shifted right by 8 its
// high one.
#define KQ8SCALE VCVTPH2PS (R10), Z24
#define KQ8PAIR \
	VPMOVSXWD (R14), Z16;     \
	VPSLLD    $24, Z16, Z17;  \
	VPSRAD    $24, Z17, Z17;  \
	VPSRAD    $8, Z16, Z16;   \
	VCVTDQ2PS Z17, Z17;       \
	VCVTDQ2PS Z16, Z16;       \
	VMULPS    Z24, Z17, Z17;  \
	VMULPS    Z24, Z16, Z16;  \
	VMOVUPS   Z17, (BX);      \
	VMOVUPS   Z16, (BX)(R8*1)

TEXT ·kTileQ8ColAVX512(SB), NOSPLIT, $0-48
	KTILEQ8COL(4, KQ8SCALE, KQ8PAIR, 32)
