//go:build arm64 && !purego

#include "textflag.h"
#include "simd_neon_arm64.h"
#include "simd_data.h"
#include "simd_flash_arm64.h"

// Flash attention's kernels on the neon path (flash.go has the contracts
// and the Go oracles; every output is the oracle's bits), as the avx2
// path's (simd_flash_amd64.s): FlashScores and FlashAccum are one tile
// product C += A·B, four rows of A at a time (the last M%4 one by one)
// against 16 columns of B (four registers), each C element one chain of
// fused multiply-adds (FMLA) over k in order.
//
// Registers: R0 = C, R1 = ldc, R2 = A, R3 = lda, R4 = B, R5 = ldb (strides
// in bytes), R6 = M, R7 = K, R8 = N in bytes; R9 the column offset, R10
// walks B's column block, R11-R14 A's rows, R15 k, R16 C's rows. V0-V15
// accumulate (four a row), V16-V19 hold B's 16 values, V20 a broadcast A
// value, V24 scale.

#define NROW1(OP) \
	ADD R9, R0, R16; \
	OP(R16, V0, V1, V2, V3)

#define NZERO(v) VEOR v.B16, v.B16, v.B16
#define NZERO4 NZERO(V0); NZERO(V1); NZERO(V2); NZERO(V3)
#define NZERO16 NZERO4; NZERO(V4); NZERO(V5); NZERO(V6); NZERO(V7); NZERO(V8); NZERO(V9); NZERO(V10); NZERO(V11); NZERO(V12); NZERO(V13); NZERO(V14); NZERO(V15)
#define NSCALE(v) FMUL_4S(v, v, 24)
#define NSCALE4 NSCALE(0); NSCALE(1); NSCALE(2); NSCALE(3)
#define NSCALE16 NSCALE4; NSCALE(4); NSCALE(5); NSCALE(6); NSCALE(7); NSCALE(8); NSCALE(9); NSCALE(10); NSCALE(11); NSCALE(12); NSCALE(13); NSCALE(14); NSCALE(15)
#define NLOAD16 NROWS4(NLOAD)
#define NLOAD4 NROW1(NLOAD)
#define NOTHING

// NTILE(INIT16, END16, INIT4, END4) is the body of both kernels.
#define NTILE(INIT16, END16, INIT4, END4) \
quad:                               \
	SUBS $4, R6, R6;            \
	BLT  single;                \
	MOVD ZR, R9;                \
quadcol:                            \
	INIT16;                     \
	ADD  R9, R4, R10;           \
	MOVD R2, R11;               \
	ADD  R3, R11, R12;          \
	ADD  R3, R12, R13;          \
	ADD  R3, R13, R14;          \
	MOVD R7, R15;               \
quadk:                              \
	VLD1 (R10), [V16.S4, V17.S4, V18.S4, V19.S4]; \
	ADD  R5, R10, R10;          \
	NFMA4;                      \
	SUBS $1, R15, R15;          \
	BNE  quadk;                 \
	END16;                      \
	NROWS4(NSTORE);             \
	ADD  $64, R9, R9;           \
	CMP  R8, R9;                \
	BLT  quadcol;               \
	ADD  R3<<2, R2, R2;         \
	ADD  R1<<2, R0, R0;         \
	B    quad;                  \
single:                             \
	ADDS $4, R6, R6;            \
	BEQ  done;                  \
one:                                \
	MOVD ZR, R9;                \
onecol:                             \
	INIT4;                      \
	ADD  R9, R4, R10;           \
	MOVD R2, R11;               \
	MOVD R7, R15;               \
onek:                               \
	VLD1 (R10), [V16.S4, V17.S4, V18.S4, V19.S4]; \
	ADD  R5, R10, R10;          \
	NFMA(R11, V0, V1, V2, V3);  \
	SUBS $1, R15, R15;          \
	BNE  onek;                  \
	END4;                       \
	NROW1(NSTORE);              \
	ADD  $64, R9, R9;           \
	CMP  R8, R9;                \
	BLT  onecol;                \
	ADD  R3, R2, R2;            \
	ADD  R1, R0, R0;            \
	SUBS $1, R6, R6;            \
	BNE  one;                   \
done:                               \
	RET

// func flashScoresNEON(s, q *float32, ldq int, kt *float32, nq, nk, hd int, scale float32)
TEXT ·flashScoresNEON(SB), NOSPLIT, $0-60
	MOVD  s+0(FP), R0
	MOVD  q+8(FP), R2
	MOVD  ldq+16(FP), R3
	LSL   $2, R3, R3
	MOVD  kt+24(FP), R4
	MOVD  nq+32(FP), R6
	MOVD  nk+40(FP), R8
	LSL   $2, R8, R8
	MOVD  R8, R1
	MOVD  R8, R5
	MOVD  hd+48(FP), R7
	FMOVS scale+56(FP), F24
	VDUP  V24.S[0], V24.S4
	NTILE(NZERO16, NSCALE16, NZERO4, NSCALE4)

// func flashAccumNEON(o *float32, ldo int, p, v *float32, nq, nk, vd int)
TEXT ·flashAccumNEON(SB), NOSPLIT, $0-56
	MOVD o+0(FP), R0
	MOVD ldo+8(FP), R1
	LSL  $2, R1, R1
	MOVD p+16(FP), R2
	MOVD v+24(FP), R4
	MOVD nq+32(FP), R6
	MOVD nk+40(FP), R7
	LSL  $2, R7, R3
	MOVD vd+48(FP), R8
	LSL  $2, R8, R8
	MOVD R8, R5
	NTILE(NLOAD16, NOTHING, NLOAD4, NOTHING)

// ExpSum: flashExp's operations (fused multiply-adds) on four values a
// vector. The constants (simd_data.h's EXPCONSTS, in its order),
// each in a register: V16 log2 e, V17 C1, V18 C2, V19-V24 P0-P5, V25 1,
// V26 HI, V27 LO, V28 +Inf, V29 127 (int32), V30 1.5·2^23; V31 0.
#define EXPC4(i, v) DATA flashexpc<>+(4*i)(SB)/4, $v

EXPCONSTS(EXPC4)
GLOBL flashexpc<>(SB), RODATA|NOPTR, $60

#define EXPCONST(v) VLD1R.P 4(R9), [v.S4]

// NEXPFMA(d, y, r, c): Vd = c + y·r in one rounding (FMLA accumulates into
// its destination: c is copied there first).
#define NEXPFMA(d, y, r, c) \
	ORR_16B(d, c, c); \
	FMLA_4S(d, y, r)

// NEXP(x, r, k, y): y = exp(x) for the four values of x (kept); r, k and
// V4 are clobbered: flashExp's fused multiply-adds on x clamped to [LO,
// HI], then 0 below LO, +Inf above HI, x itself when NaN.
#define NEXP(x, r, k, y) \
	FMAX_4S(r, x, 27);     \
	FMIN_4S(r, r, 26);     \
	NEXPFMA(k, r, 16, 30);    \
	FSUB_4S(k, k, 30);     \
	FMLS_4S(r, k, 17);     \
	FMLS_4S(r, k, 18);     \
	NEXPFMA(y, 19, r, 20);    \
	NEXPFMA(4, y, r, 21);     \
	NEXPFMA(y, 4, r, 22);     \
	NEXPFMA(4, y, r, 23);     \
	NEXPFMA(y, 4, r, 24);     \
	NEXPFMA(4, y, r, 25);     \
	NEXPFMA(y, 4, r, 25);     \
	FCVTZS_4S(k, k);       \
	ADD_4S(k, k, 29);      \
	SHL23_4S(k, k);        \
	FMUL_4S(y, y, k);      \
	FCMGT_4S(k, 27, x);    \
	BIT_16B(y, 31, k);     \
	FCMGT_4S(k, x, 26);    \
	BIT_16B(y, 28, k);     \
	FCMEQ_4S(k, x, x);     \
	BIF_16B(y, x, k)

// NEXP4(off, acc): the four values at off(R0) = exp(value - m), added to
// acc (V1-V4 scratch, V0 = m).
#define NEXP4(off, acc) \
	FMOVQ off(R0), F5; \
	FSUB_4S(5, 5, 0);  \
	NEXP(5, 1, 2, 3);  \
	FMOVQ F3, off(R0); \
	FADD_4S(acc, acc, 3)

// func expSumNEON(x *float32, n int, m float32) float32
// Sixteen lane sums (V8: j%16 < 4, V9, V10, V11), folded in halves as the
// oracle does (l += l+8, +4, +2, +1); n is a multiple of 16.
TEXT ·expSumNEON(SB), NOSPLIT, $0-28
	MOVD  x+0(FP), R0
	MOVD  n+8(FP), R1
	LSR   $4, R1, R1
	FMOVS m+16(FP), F0
	VDUP  V0.S[0], V0.S4
	MOVD  $flashexpc<>(SB), R9
	EXPCONST(V16); EXPCONST(V17); EXPCONST(V18); EXPCONST(V19)
	EXPCONST(V20); EXPCONST(V21); EXPCONST(V22); EXPCONST(V23)
	EXPCONST(V24); EXPCONST(V25); EXPCONST(V26); EXPCONST(V27)
	EXPCONST(V28); EXPCONST(V29); EXPCONST(V30)
	NZERO(V31); NZERO(V8); NZERO(V9); NZERO(V10); NZERO(V11)

nexploop:
	NEXP4(0, 8)
	NEXP4(16, 9)
	NEXP4(32, 10)
	NEXP4(48, 11)
	ADD  $64, R0, R0
	SUBS $1, R1, R1
	BNE  nexploop
	FADD_4S(8, 8, 10)
	FADD_4S(9, 9, 11)
	FADD_4S(8, 8, 9)
	VEXT $8, V8.B16, V8.B16, V9.B16
	FADD_4S(8, 8, 9)
	FADDP_S(8, 8)
	FMOVS F8, ret+24(FP)
	RET

// func rowMaxNEON(x *float32, n int) float32
// The largest of x (four lanes in each of V0-V3, then across); n is a
// multiple of 16.
TEXT ·rowMaxNEON(SB), NOSPLIT, $0-20
	MOVD   x+0(FP), R0
	MOVD   n+8(FP), R1
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	SUBS   $16, R1, R1
	BEQ    maxdone

maxloop:
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMAX_4S(0, 0, 4)
	FMAX_4S(1, 1, 5)
	FMAX_4S(2, 2, 6)
	FMAX_4S(3, 3, 7)
	SUBS   $16, R1, R1
	BNE    maxloop

maxdone:
	FMAX_4S(0, 0, 1)
	FMAX_4S(2, 2, 3)
	FMAX_4S(0, 0, 2)
	FMAXV_S(0, 0)
	FMOVS  F0, ret+16(FP)
	RET
