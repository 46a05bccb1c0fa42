//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"
#include "simd_exp_amd64.h"

// Flash attention's kernels on the avx2 path (flash.go has the contracts
// and the Go oracles; every output is the oracle's bits).
//
// FlashScores and FlashAccum are one tile product, C += A·B for M rows of
// A (K wide, rows lda apart) against B (K rows of N, ldb apart), C's rows
// ldc apart: FlashScores is C = q·kt (then times scale), FlashAccum o +=
// p·v. Every C element is one chain of fused multiply-adds over k in
// order, whatever the blocking: four rows of A at a time (the last M%4 one
// by one) against 16 columns of B (two registers) at a time, so each B
// load serves four rows and eight FMA chains run at once.
//
// Registers: DI = C, R8 = ldc, SI = A, R9 = lda, DX = B, R10 = ldb (all
// strides in bytes), R11 = M, R12 = K, R13 = N in bytes; BX the column
// offset (bytes), R14 walks B's column block, AX and R15 A's rows, CX k.
// Y0-Y7 accumulate (two a row), Y8-Y9 hold B's 16 values, Y10 a broadcast
// A value, Y15 scale.

// TFMA(a, c0, c1): c0, c1 += the A value at a times Y8, Y9.
#define TFMA(a, c0, c1) \
	VBROADCASTSS a, Y10; \
	VFMADD231PS  Y8, Y10, c0; \
	VFMADD231PS  Y9, Y10, c1

// TFMA4: the four rows' chains (A at AX, AX+R9, R15, R15+R9) on Y8, Y9,
// then A's next value.
#define TFMA4 \
	TFMA((AX), Y0, Y1);       \
	TFMA((AX)(R9*1), Y2, Y3); \
	TFMA((R15), Y4, Y5);      \
	TFMA((R15)(R9*1), Y6, Y7); \
	ADDQ $4, AX;              \
	ADDQ $4, R15

// TLOAD and TSTORE move the 16 C values of a row (at p, an address
// without displacement) from or to c0, c1.
#define TLOAD(p, c0, c1) VMOVUPS p, c0; VMOVUPS 32 p, c1
#define TSTORE(p, c0, c1) VMOVUPS c0, p; VMOVUPS c1, 32 p

// The four rows' C values at column BX: TROWS4(OP) applies OP(p, c0, c1)
// to each (AX clobbered).
#define TROWS4(OP) \
	LEAQ (DI)(BX*1), AX; \
	OP((AX), Y0, Y1); \
	OP((AX)(R8*1), Y2, Y3); \
	LEAQ (AX)(R8*2), AX; \
	OP((AX), Y4, Y5); \
	OP((AX)(R8*1), Y6, Y7)

#define TROW1(OP) OP((DI)(BX*1), Y0, Y1)

// How a tile starts and ends: FlashScores' C starts at 0 and ends times
// scale; FlashAccum's starts as it is.
#define ZERO4 VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1; VXORPS Y2, Y2, Y2; VXORPS Y3, Y3, Y3; VXORPS Y4, Y4, Y4; VXORPS Y5, Y5, Y5; VXORPS Y6, Y6, Y6; VXORPS Y7, Y7, Y7
#define ZERO1 VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1
#define SCALE4 VMULPS Y15, Y0, Y0; VMULPS Y15, Y1, Y1; VMULPS Y15, Y2, Y2; VMULPS Y15, Y3, Y3; VMULPS Y15, Y4, Y4; VMULPS Y15, Y5, Y5; VMULPS Y15, Y6, Y6; VMULPS Y15, Y7, Y7
#define SCALE1 VMULPS Y15, Y0, Y0; VMULPS Y15, Y1, Y1
#define LOAD4 TROWS4(TLOAD)
#define LOAD1 TROW1(TLOAD)
#define NOTHING

// TILEB(BADDR, BLOAD, INIT4, END4, INIT1, END1) is the body of the
// kernels, after their arguments are in the registers above: BADDR points
// R14 at B's column block BX of row 0, BLOAD loads its 16 values into
// Y8-Y9 (float32 B: TILE; halves: the kernels over cache rows in place).
#define TILEB(BADDR, BLOAD, INIT4, END4, INIT1, END1) \
quad: \
	SUBQ $4, R11; \
	JL   single; \
	XORQ BX, BX; \
quadcol: \
	INIT4; \
	BADDR; \
	MOVQ SI, AX; \
	LEAQ (SI)(R9*2), R15; \
	MOVQ R12, CX; \
quadk: \
	BLOAD; \
	TFMA4; \
	ADDQ R10, R14; \
	DECQ CX; \
	JNZ  quadk; \
	END4; \
	TROWS4(TSTORE); \
	ADDQ $64, BX; \
	CMPQ BX, R13; \
	JL   quadcol; \
	LEAQ (SI)(R9*4), SI; \
	LEAQ (DI)(R8*4), DI; \
	JMP  quad; \
single: \
	ADDQ $4, R11; \
	JZ   done; \
one: \
	XORQ BX, BX; \
onecol: \
	INIT1; \
	BADDR; \
	MOVQ SI, AX; \
	MOVQ R12, CX; \
onek: \
	BLOAD; \
	TFMA((AX), Y0, Y1); \
	ADDQ $4, AX; \
	ADDQ R10, R14; \
	DECQ CX; \
	JNZ  onek; \
	END1; \
	TROW1(TSTORE); \
	ADDQ $64, BX; \
	CMPQ BX, R13; \
	JL   onecol; \
	ADDQ R9, SI; \
	ADDQ R8, DI; \
	DECQ R11; \
	JNZ  one; \
done: \
	VZEROUPPER; \
	RET

// BADDR32 / BLOAD32: float32 B (16 values are 64 bytes, as C's).
#define BADDR32 LEAQ (DX)(BX*1), R14
#define BLOAD32 VMOVUPS (R14), Y8; VMOVUPS 32(R14), Y9

// BADDR16 / BLOAD16: B of halves (C's column offset halved), converted.
#define BADDR16 MOVQ BX, R14; SHRQ $1, R14; ADDQ DX, R14
#define BLOAD16 VCVTPH2PS (R14), Y8; VCVTPH2PS 16(R14), Y9

#define TILE(INIT4, END4, INIT1, END1) TILEB(BADDR32, BLOAD32, INIT4, END4, INIT1, END1)

// ACCUMKVARGS(r): the FlashAccumKV kernels' arguments: DI = o, R8 = ldo
// and R9 = ldp in bytes, SI = p, DX = v, R10 = stride, R11 = nq, R12 = nk,
// r = vd in bytes.
#define ACCUMKVARGS(r) \
	MOVQ o+0(FP), DI;       \
	MOVQ ldo+8(FP), R8;     \
	SHLQ $2, R8;            \
	MOVQ p+16(FP), SI;      \
	MOVQ ldp+24(FP), R9;    \
	SHLQ $2, R9;            \
	MOVQ v+32(FP), DX;      \
	MOVQ stride+40(FP), R10; \
	MOVQ nq+48(FP), R11;    \
	MOVQ nk+56(FP), R12;    \
	MOVQ vd+64(FP), r;      \
	SHLQ $2, r

// SCORESARGS: the FlashScores kernels' arguments s, q, ldq, hd and
// scale: DI = s, SI = q, R9 = ldq in bytes, R12 = hd, Y15 = scale;
// COLARGS adds those of the kernels over keys stored by column: DX = k,
// R10 = kstride, R11 = nq, R8 = the bytes of a row of FlashTile's s.
#define SCORESARGS \
	MOVQ         s+0(FP), DI;    \
	MOVQ         q+8(FP), SI;    \
	MOVQ         ldq+16(FP), R9; \
	SHLQ         $2, R9;         \
	MOVQ         hd+48(FP), R12; \
	VBROADCASTSS scale+56(FP), Y15
#define COLARGS \
	SCORESARGS;                  \
	MOVQ k+24(FP), DX;           \
	MOVQ kstride+32(FP), R10;    \
	MOVQ nq+40(FP), R11;         \
	MOVQ $256, R8

// NEXTQUAD(lim, col, quad): the next 16 columns of the four rows while
// BX is below lim (bytes), then the next four rows while there are any.
#define NEXTQUAD(lim, col, quad) \
	ADDQ $64, BX;          \
	CMPQ BX, lim;          \
	JL   col;              \
	LEAQ (SI)(R9*4), SI;   \
	LEAQ (DI)(R8*4), DI;   \
	SUBQ $4, R11;          \
	JG   quad;             \
	VZEROUPPER;            \
	RET

// func flashScoresAVX2(s, q *float32, ldq int, kt *float32, nq, nk, hd int, scale float32)
TEXT ·flashScoresAVX2(SB), NOSPLIT, $0-60
	SCORESARGS
	MOVQ kt+24(FP), DX
	MOVQ nq+32(FP), R11
	MOVQ nk+40(FP), R13
	SHLQ $2, R13
	MOVQ R13, R8
	MOVQ R13, R10
	TILE(ZERO4, SCALE4, ZERO1, SCALE1)

// func flashAccumAVX2(o *float32, ldo int, p, v *float32, nq, nk, vd int)
TEXT ·flashAccumAVX2(SB), NOSPLIT, $0-56
	MOVQ o+0(FP), DI
	MOVQ ldo+8(FP), R8
	SHLQ $2, R8
	MOVQ p+16(FP), SI
	MOVQ v+24(FP), DX
	MOVQ nq+32(FP), R11
	MOVQ nk+40(FP), R12
	MOVQ R12, R9
	SHLQ $2, R9
	MOVQ vd+48(FP), R13
	SHLQ $2, R13
	MOVQ R13, R10
	TILE(LOAD4, NOTHING, LOAD1, NOTHING)

// func flashScoresColF16AVX2(s, q *float32, ldq int, k *uint16, kstride, nq, hd int, scale float32)
// FlashScores of 32 keys stored by column as halves (value d of key j at
// byte d*kstride+2j of k) into the first 32 columns of s's rows of
// FlashTile: the bits of KTile then flashScoresAVX2.
TEXT ·flashScoresColF16AVX2(SB), NOSPLIT, $0-60
	COLARGS
	MOVQ $128, R13
	TILEB(BADDR16, BLOAD16, ZERO4, SCALE4, ZERO1, SCALE1)

// func accumKVF16AVX2(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)
// FlashAccumKV of f16 rows (stride bytes apart): flashAccumAVX2 with the
// values converted as loaded, the bits of VTile then flashAccumAVX2.
TEXT ·accumKVF16AVX2(SB), NOSPLIT, $0-72
	ACCUMKVARGS(R13)
	TILEB(BADDR16, BLOAD16, LOAD4, NOTHING, LOAD1, NOTHING)

// The q8_0 kernels of the avx2 path's FlashTileKV and FlashAccumKV: each
// code times its block's half scale as loaded (VTile's and KTile's exact
// decode), then the tile product's fused multiply-adds in the same order.
// Four rows of A at a time only (nq a multiple of 4, as FlashAccumKV and
// FlashTileKV take them).

// Q8F(s0, s1): Y8, Y9 = the int32 codes in them as floats, times the
// scales s0 and s1 (one rounding each: the decoders' bits); Q8B first
// takes the codes from the words' high bytes (where VPMOVSXWD leaves an
// odd code of its own word, or an even one from the word a byte before).
#define Q8F(s0, s1) \
	VCVTDQ2PS Y8, Y8;       \
	VCVTDQ2PS Y9, Y9;       \
	VMULPS    s0, Y8, Y8;   \
	VMULPS    s1, Y9, Y9
#define Q8B(s0, s1) \
	VPSRAD    $8, Y8, Y8;   \
	VPSRAD    $8, Y9, Y9;   \
	Q8F(s0, s1)

// func flashScoresColQ8AVX2(s, q *float32, ldq int, k *uint16, kstride, nq, hd int, scale float32)
// FlashScores of 32 q8_0 keys stored by column (word c of key j at byte
// c*kstride+2j of k: a block's scale column, then its 16 columns of code
// pairs, the low byte the even value) into the first 32 columns of s's
// rows of FlashTile: the bits of KTile then flashScoresAVX2.
TEXT ·flashScoresColQ8AVX2(SB), NOSPLIT, $0-60
	COLARGS
	SHRQ $5, R12

sq8quad:
	XORQ BX, BX

sq8col:
	ZERO4
	MOVQ BX, R14
	SHRQ $1, R14
	ADDQ DX, R14
	MOVQ SI, AX
	LEAQ (SI)(R9*2), R15
	MOVQ R12, R13

sq8blk:
	VCVTPH2PS (R14), Y11
	VCVTPH2PS 16(R14), Y12
	ADDQ      R10, R14
	MOVQ      $16, CX

sq8pair:
	VPMOVSXWD -1(R14), Y8
	VPMOVSXWD 15(R14), Y9
	Q8B(Y11, Y12)
	TFMA4
	VPMOVSXWD (R14), Y8
	VPMOVSXWD 16(R14), Y9
	Q8B(Y11, Y12)
	TFMA4
	ADDQ      R10, R14
	DECQ      CX
	JNZ       sq8pair
	DECQ      R13
	JNZ       sq8blk
	SCALE4
	TROWS4(TSTORE)
	NEXTQUAD($128, sq8col, sq8quad)

// func accumKVQ8AVX2(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)
// FlashAccumKV of q8_0 rows (stride bytes apart): flashAccumAVX2 with the
// values decoded as loaded, the bits of VTile then flashAccumAVX2. 16
// columns at a time: R14 walks their block's scales down the rows, R13
// holds their codes' offset from it (2, or 18 for a block's second half),
// X14 the bytes of C's columns.
TEXT ·accumKVQ8AVX2(SB), NOSPLIT, $0-72
	ACCUMKVARGS(AX)
	MOVQ AX, X14

aq8quad:
	XORQ BX, BX

aq8col:
	LOAD4
	MOVQ   BX, R14
	SHRQ   $7, R14
	IMUL3Q $34, R14, R14
	ADDQ   DX, R14
	MOVQ   BX, R13
	ANDQ   $64, R13
	SHRQ   $2, R13
	ADDQ   $2, R13
	MOVQ   SI, AX
	LEAQ   (SI)(R9*2), R15
	MOVQ   R12, CX

aq8k:
	VPBROADCASTW (R14), X11
	VCVTPH2PS    X11, Y11
	VPMOVSXBD    (R14)(R13*1), Y8
	VPMOVSXBD    8(R14)(R13*1), Y9
	Q8F(Y11, Y11)
	TFMA4
	ADDQ         R10, R14
	DECQ         CX
	JNZ          aq8k
	TROWS4(TSTORE)
	MOVQ         X14, AX
	NEXTQUAD(AX, aq8col, aq8quad)

// func kTileQ8ColAVX2(dst *float32, ld int, src *uint16, stride, blocks, cnt int)
// KTILEQ8COL 8 rows at a time: the codes of a column's pairs at -1 and
// 0 from a word are its low and high bytes (Q8B).
#define KQ8SCALE VCVTPH2PS (R10), Y11
#define KQ8PAIR \
	VPMOVSXWD -1(R14), Y8; \
	VPMOVSXWD (R14), Y9;   \
	Q8B(Y11, Y11);         \
	VMOVUPS   Y8, (BX);    \
	VMOVUPS   Y9, (BX)(R8*1)

TEXT ·kTileQ8ColAVX2(SB), NOSPLIT, $0-48
	KTILEQ8COL(3, KQ8SCALE, KQ8PAIR, 16)

// FEXP8(x, r, k, y): y = exp(x) for the 8 floats of x (kept), flashExp's
// fused multiply-adds; r, k are clobbered. The clamps keep a NaN (it is
// their second operand). Constants in registers: Y4 LO, Y5 HI, Y6
// 1.5·2^23, Y7 log2 e, Y8 1, Y9 C1, Y10 C2, Y11 P0, Y12 127 (int32).
#define FEXP8(x, r, k, y) \
	VMAXPS       x, Y4, r;   \
	VMINPS       r, Y5, r;   \
	VMOVAPS      Y6, k;      \
	VFMADD231PS  Y7, r, k;   \
	VSUBPS       Y6, k, k;   \
	VFNMADD231PS Y9, k, r;   \
	VFNMADD231PS Y10, k, r;  \
	VMOVAPS      Y11, y;     \
	VFMADD213PS  P1, r, y;   \
	VFMADD213PS  P2, r, y;   \
	VFMADD213PS  P3, r, y;   \
	VFMADD213PS  P4, r, y;   \
	VFMADD213PS  P5, r, y;   \
	VFMADD213PS  Y8, r, y;   \
	VFMADD213PS  Y8, r, y;   \
	VCVTPS2DQ    k, k;       \
	VPADDD       Y12, k, k;  \
	VPSLLD       $23, k, k;  \
	VMULPS       k, y, y;    \
	VCMPPS       $1, Y4, x, k; \
	VANDNPS      y, k, y;    \
	VCMPPS       $14, Y5, x, k; \
	VBLENDVPS    k, INF, y, y

// FEXP8CONSTS loads FEXP8's constants into Y4-Y12.
#define FEXP8CONSTS \
	VMOVUPS LO, Y4;              \
	VMOVUPS HI, Y5;              \
	VMOVUPS ·expc+448(SB), Y6;   \
	VMOVUPS LOG2E, Y7;           \
	VMOVUPS ONE, Y8;             \
	VMOVUPS C1, Y9;              \
	VMOVUPS C2, Y10;             \
	VMOVUPS P0, Y11;             \
	VMOVUPS BIAS, Y12

// FOLD16Y: the sixteen lane sums Y13 (j%16 < 8) and Y14 (the rest)
// folded in halves as ExpSum's oracle does (l += l+8, +4, +2, +1), into
// the low lane of X13 (Y14 clobbered).
#define FOLD16Y \
	VADDPS       Y14, Y13, Y13; \
	VEXTRACTF128 $1, Y13, X14;  \
	VADDPS       X14, X13, X13; \
	VMOVHLPS     X13, X13, X14; \
	VADDPS       X14, X13, X13; \
	VMOVSHDUP    X13, X14;      \
	VADDSS       X14, X13, X13

// EXPSUB8(off, acc): the 8 values at off(DI) = exp(value - m), added to acc.
#define EXPSUB8(off, acc) \
	VMOVUPS off(DI), Y0; \
	VSUBPS  Y15, Y0, Y0; \
	FEXP8(Y0, Y1, Y2, Y3); \
	VMOVUPS Y3, off(DI); \
	VADDPS  Y3, acc, acc

// func expSumAVX2(x *float32, n int, m float32) float32
// x[j] = exp(x[j]-m) (FEXP8: the oracle's bits), summed into sixteen lanes
// (Y13: j%16 < 8, Y14 the rest) in order of j, then the lanes folded in
// halves (l += l+8, +4, +2, +1) as the oracle does; n is a multiple of 16.
TEXT ·expSumAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y15
	VXORPS       Y13, Y13, Y13
	VXORPS       Y14, Y14, Y14
	FEXP8CONSTS
	SHRQ         $4, CX

exploop:
	EXPSUB8(0, Y13)
	EXPSUB8(32, Y14)
	ADDQ         $64, DI
	DECQ         CX
	JNZ          exploop
	FOLD16Y
	VMOVSS       X13, ret+24(FP)
	VZEROUPPER
	RET

// func flashSoftmaxAVX2(s *float32, nq int, m, l, o *float32, ldo, vd int)
// FlashSoftmax: per row of 64 scores, its maximum; when it is above m, l
// and the vd values of the row of o are multiplied by exp(m - max)
// (FEXP8 on the difference in every lane; not when m is -Inf) and m
// becomes it; then the weights and their sum as expSumAVX2 makes them,
// the sum added to l. vd is a multiple of 16 (8 would do); ldo in floats.
TEXT ·flashSoftmaxAVX2(SB), NOSPLIT, $0-56
	SOFTMAXARGS(3)
	FEXP8CONSTS

srow:
	VMOVUPS      (SI), Y0
	VMOVUPS      32(SI), Y1
	VMAXPS       64(SI), Y0, Y0
	VMAXPS       96(SI), Y1, Y1
	VMAXPS       128(SI), Y0, Y0
	VMAXPS       160(SI), Y1, Y1
	VMAXPS       192(SI), Y0, Y0
	VMAXPS       224(SI), Y1, Y1
	VMAXPS       Y1, Y0, Y0
	HMAX8(Y0, X0, X1)
	VMOVSS       (R8), X1
	VUCOMISS     X1, X0
	JLS          sweights        // not above m (or NaN)
	MOVL         (R8), AX
	VMOVSS       X0, (R8)
	CMPL         AX, $0xff800000 // m was -Inf: nothing to rescale
	JEQ          sweights
	VSUBSS       X0, X1, X1
	VBROADCASTSS X1, Y1
	FEXP8(Y1, Y2, Y3, Y0)
	VMOVSS       (R9), X2
	VMULSS       X0, X2, X2
	VMOVSS       X2, (R9)
	MOVQ         R10, DI
	MOVQ         R12, BX
	TESTQ        BX, BX
	JZ           sweights

sscale:
	VMULPS  (DI), Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, DI
	DECQ    BX
	JNZ     sscale

sweights:
	VBROADCASTSS (R8), Y15
	VXORPS       Y13, Y13, Y13
	VXORPS       Y14, Y14, Y14
	MOVQ         SI, DI
	EXPSUB8(0, Y13)
	EXPSUB8(32, Y14)
	EXPSUB8(64, Y13)
	EXPSUB8(96, Y14)
	EXPSUB8(128, Y13)
	EXPSUB8(160, Y14)
	EXPSUB8(192, Y13)
	EXPSUB8(224, Y14)
	FOLD16Y
	VMOVSS       (R9), X0
	VADDSS       X13, X0, X0
	VMOVSS       X0, (R9)
	ADDQ         $256, SI
	ADDQ         $4, R8
	ADDQ         $4, R9
	ADDQ         R11, R10
	DECQ         CX
	JNZ          srow
	VZEROUPPER
	RET
