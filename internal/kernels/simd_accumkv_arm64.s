//go:build arm64 && !purego

#include "textflag.h"
#include "simd_neon_arm64.h"
#include "simd_flash_arm64.h"

// FlashAccumKV's kernels on the neon path (flash_accumkv.go has the
// contract): FlashAccum with the values decoded from the cache's rows in
// registers, four query rows at a time against 16 columns (V0-V15, four
// a row, as flashAccumNEON's tile), each o element getting p[i][j]·v[j][d]
// added for j in order, one fused multiply-add (FMLA) each: the bits of
// VTile then FlashAccum. The columns go by blocks of 32 values (one q8_0
// block; 64 bytes of f16), each in two halves of 16.
//
// Registers: R0 = o's four rows, R1 = ldo in bytes, R2 = p's four rows,
// R3 = ldp in bytes, R4 = v, R5 = stride, R6 = quads left, R7 = nk, R8 =
// blocks a row; R9 o's column in bytes, R10 the value row, R11-R14 p's
// rows, R15 rows left, R16 o's rows, R17 the block, R19 scratch, R20 the
// half's offset in its block, R21 blocks left, R22 halves left. V16-V19
// the 16 decoded values, V20 a broadcast weight (simd_flash_arm64.h's tile
// steps), V21-V23 scratch.

// The decoders: V16-V19 = the 16 values of the half at R20 in the block
// at R10. F16: 32 bytes of halves. Q8_0: 16 int8 quants times the
// block's half scale at its start, float32(q)·d as VTile has it.
#define AKVF16 \
	ADD  R20, R10, R19;                  \
	VLD1 (R19), [V21.B16, V22.B16];      \
	FCVTL_4S(16, 21);                    \
	FCVTL2_4S(17, 21);                   \
	FCVTL_4S(18, 22);                    \
	FCVTL2_4S(19, 22)

#define AKVQ8 \
	ADD   R20, R10, R19;  \
	VLD1  (R19), [V21.B16]; \
	VLD1R (R10), [V23.H8];  \
	FCVTL_4S(23, 23);     \
	SXTL_8H(22, 21);      \
	SXTL2_8H(21, 21);     \
	SXTL_4S(16, 22);      \
	SXTL2_4S(17, 22);     \
	SXTL_4S(18, 21);      \
	SXTL2_4S(19, 21);     \
	SCVTF_4S(16, 16);     \
	SCVTF_4S(17, 17);     \
	SCVTF_4S(18, 18);     \
	SCVTF_4S(19, 19);     \
	FMUL_4S(16, 16, 23);  \
	FMUL_4S(17, 17, 23);  \
	FMUL_4S(18, 18, 23);  \
	FMUL_4S(19, 19, 23)

// ACCUMKV(DEC, bb, off, step) is the body of
// func accumKVXNEON(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int):
// nq a multiple of 4, vd of 64; a block of bb bytes has its first half's
// values at off and its second's step bytes on.
#define ACCUMKV(DEC, bb, off, step) \
	MOVD o+0(FP), R0;         \
	MOVD ldo+8(FP), R1;       \
	LSL  $2, R1, R1;          \
	MOVD p+16(FP), R2;        \
	MOVD ldp+24(FP), R3;      \
	LSL  $2, R3, R3;          \
	MOVD v+32(FP), R4;        \
	MOVD stride+40(FP), R5;   \
	MOVD nq+48(FP), R6;       \
	LSR  $2, R6, R6;          \
	MOVD nk+56(FP), R7;       \
	MOVD vd+64(FP), R8;       \
	LSR  $5, R8, R8;          \
quad:                             \
	MOVD ZR, R9;              \
	MOVD R4, R17;             \
	MOVD R8, R21;             \
blk:                              \
	MOVD $off, R20;           \
	MOVD $2, R22;             \
half:                             \
	NROWS4(NLOAD);         \
	MOVD R2, R11;             \
	ADD  R3, R11, R12;        \
	ADD  R3, R12, R13;        \
	ADD  R3, R13, R14;        \
	MOVD R17, R10;            \
	MOVD R7, R15;             \
rows:                             \
	DEC;                      \
	ADD  R5, R10, R10;        \
	NFMA4;                    \
	SUBS $1, R15, R15;        \
	BNE  rows;                \
	NROWS4(NSTORE);        \
	ADD  $64, R9, R9;         \
	ADD  $step, R20, R20;     \
	SUBS $1, R22, R22;        \
	BNE  half;                \
	ADD  $bb, R17, R17;       \
	SUBS $1, R21, R21;        \
	BNE  blk;                 \
	ADD  R1<<2, R0, R0;       \
	ADD  R3<<2, R2, R2;       \
	SUBS $1, R6, R6;          \
	BNE  quad;                \
	RET

// func accumKVF16NEON(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)
TEXT ·accumKVF16NEON(SB), NOSPLIT, $0-72
	ACCUMKV(AKVF16, 64, 0, 32)

// func accumKVQ8NEON(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)
TEXT ·accumKVQ8NEON(SB), NOSPLIT, $0-72
	ACCUMKV(AKVQ8, 34, 2, 16)
