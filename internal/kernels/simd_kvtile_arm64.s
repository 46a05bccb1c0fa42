//go:build arm64 && !purego

#include "textflag.h"
#include "simd_neon_arm64.h"

// The neon path's KV tile decoders, as the avx2 path's
// (simd_kvtile_amd64.s): one skeleton per direction, one line of macros
// per type: its block's bytes and values, and GROUPS(G), which applies
// G(DEC, off) to each group of 4 values of a block, DEC(p, off, f, v, n)
// decoding that group of the block at p into register n (named f as a
// scalar, v as a vector; V8 scratch, V9 = 0x0f bytes, V10 = 8 as int32,
// V11-V20 F8E4M3's).
//
// func kTileXNEON(dst *float32, ld int, src *byte, stride, w, cnt int)
// func vTileXNEON(dst *float32, ld int, src *byte, stride, w, cnt int)

#define NF32(p, off, f, v, n) VLD1 (p), [v.S4]
#define NF16(p, off, f, v, n) FMOVD (p), f; FCVTL_4S(n, n)
#define NBF16(p, off, f, v, n) FMOVD (p), f; SHLL_4S(n, n)

// NSCALE(p, n): Vn = float(Vn) times the block's half scale at p; NHSCALE
// without the conversion.
#define NSCALE(p, n) SCVTF_4S(n, n); NHSCALE(p, n)
#define NHSCALE(p, n) \
	VLD1R (p), [V8.H8];   \
	FCVTL_4S(8, 8);       \
	FMUL_4S(n, n, 8)

// Q8_0: the int8 quants at off; Q4_0: the low (NQ4LO) or high (NQ4HI)
// nibbles of the 4 bytes at off, less 8.
#define NQ8_0(p, off, f, v, n) \
	FMOVS off(p), f; \
	SXTL_8H(n, n);   \
	SXTL_4S(n, n);   \
	NSCALE(p, n)

#define NQ4(n) \
	UXTL_8H(n, n);    \
	UXTL_4S(n, n);    \
	SUB_4S(n, n, 10)

#define NQ4LO(p, off, f, v, n) FMOVS off(p), f; VAND V9.B16, v.B16, v.B16; NQ4(n); NSCALE(p, n)
#define NQ4HI(p, off, f, v, n) FMOVS off(p), f; USHR4_8B(n, n); NQ4(n); NSCALE(p, n)

// F8E4M3: the codes at off as E4M3ToFP32 reads them: a = code&0x7f, a<<20
// + 120<<23 for the normal ones, a·2^-9 below 8 (subnormal), 448 for 0x7f,
// and the code's sign (V11 0x7f, V12 120<<23, V13 2^-9, V14 8, V15 448,
// V16 0x80; V17-V20 scratch).
#define NF8E4M3(p, off, f, v, n) \
	FMOVS off(p), f;                 \
	UXTL_8H(n, n);                   \
	UXTL_4S(n, n);                   \
	VAND  V11.B16, v.B16, V17.B16;   \
	VAND  V16.B16, v.B16, V18.B16;   \
	SHL24_4S(18, 18);                \
	SHL20_4S(n, 17);                 \
	ADD_4S(n, n, 12);                \
	SCVTF_4S(19, 17);                \
	FMUL_4S(19, 19, 13);             \
	CMHI_4S(20, 14, 17);             \
	BIT_16B(n, 19, 20);              \
	CMEQ_4S(20, 17, 11);             \
	BIT_16B(n, 15, 20);              \
	VORR  V18.B16, v.B16, v.B16;     \
	NHSCALE(p, n)

#define F32GROUPS(G) G(NF32, 0)
#define F16GROUPS(G) G(NF16, 0)
#define BF16GROUPS(G) G(NBF16, 0)
#define Q8_0GROUPS(G) G(NQ8_0, 2); G(NQ8_0, 6); G(NQ8_0, 10); G(NQ8_0, 14); G(NQ8_0, 18); G(NQ8_0, 22); G(NQ8_0, 26); G(NQ8_0, 30)
#define Q4_0GROUPS(G) G(NQ4LO, 2); G(NQ4LO, 6); G(NQ4LO, 10); G(NQ4LO, 14); G(NQ4HI, 2); G(NQ4HI, 6); G(NQ4HI, 10); G(NQ4HI, 14)
#define F8E4M3GROUPS(G) G(NF8E4M3, 2); G(NF8E4M3, 6); G(NF8E4M3, 10); G(NF8E4M3, 14); G(NF8E4M3, 18); G(NF8E4M3, 22); G(NF8E4M3, 26); G(NF8E4M3, 30)

// NCONST(v, c): the int32 c in the four lanes of v (R11 clobbered).
#define NCONST(v, c) MOVD $c, R11; VDUP R11, v.S4

// TILEARGS: R0 = dst, R1 = ld in bytes, R2 = src, R3 = stride, R5 = cnt;
// V9-V16 the constants.
#define TILEARGS \
	NCONST(V11, 0x7f);     \
	NCONST(V12, 0x3c000000); \
	NCONST(V13, 0x3b000000); \
	NCONST(V14, 8);        \
	NCONST(V15, 0x43e00000); \
	NCONST(V16, 0x80);     \
	MOVD dst+0(FP), R0;    \
	MOVD ld+8(FP), R1;     \
	LSL  $2, R1, R1;       \
	MOVD src+16(FP), R2;   \
	MOVD stride+24(FP), R3; \
	MOVD cnt+40(FP), R5;   \
	VMOVI $15, V9.B16;     \
	NCONST(V10, 8)

// KTILE: 4 rows at a time (at R6-R9), a group of 4 values of each
// (KGROUP) transposed in registers and stored as 4 rows of 4 keys from
// R10 (R1 apart; R12 clobbered).
#define KGROUP(DEC, off) \
	DEC(R6, off, F0, V0, 0); \
	DEC(R7, off, F1, V1, 1); \
	DEC(R8, off, F2, V2, 2); \
	DEC(R9, off, F3, V3, 3); \
	TRN1_4S(4, 0, 1);        \
	TRN2_4S(5, 0, 1);        \
	TRN1_4S(6, 2, 3);        \
	TRN2_4S(7, 2, 3);        \
	TRN1_2D(0, 4, 6);        \
	TRN1_2D(1, 5, 7);        \
	TRN2_2D(2, 4, 6);        \
	TRN2_2D(3, 5, 7);        \
	VST1 [V0.S4], (R10);     \
	ADD  R1, R10, R12;       \
	VST1 [V1.S4], (R12);     \
	ADD  R1, R12, R12;       \
	VST1 [V2.S4], (R12);     \
	ADD  R1, R12, R12;       \
	VST1 [V3.S4], (R12);     \
	ADD  R1<<2, R10, R10

// KTILE(GROUPS, bb, bv): blocks of bb bytes and bv values.
#define KTILE(GROUPS, bb, bv) \
	TILEARGS;              \
	LSR  $2, R5, R5;       \
rows4:                         \
	MOVD R2, R6;           \
	ADD  R3, R6, R7;       \
	ADD  R3, R7, R8;       \
	ADD  R3, R8, R9;       \
	MOVD R0, R10;          \
	MOVD w+32(FP), R11;    \
blk:                           \
	GROUPS(KGROUP);        \
	ADD  $bb, R6, R6;      \
	ADD  $bb, R7, R7;      \
	ADD  $bb, R8, R8;      \
	ADD  $bb, R9, R9;      \
	SUBS $bv, R11, R11;    \
	BNE  blk;              \
	ADD  $16, R0, R0;      \
	ADD  R3<<2, R2, R2;    \
	SUBS $1, R5, R5;       \
	BNE  rows4;            \
	RET

// VGROUP decodes a group of the row at R6 to R10, moving R10 on.
#define VGROUP(DEC, off) \
	DEC(R6, off, F0, V0, 0); \
	VST1.P [V0.S4], 16(R10)

// VTILE(GROUPS, bb, bv): a row at a time.
#define VTILE(GROUPS, bb, bv) \
	TILEARGS;              \
row:                           \
	MOVD R2, R6;           \
	MOVD R0, R10;          \
	MOVD w+32(FP), R11;    \
vblk:                          \
	GROUPS(VGROUP);        \
	ADD  $bb, R6, R6;      \
	SUBS $bv, R11, R11;    \
	BNE  vblk;             \
	ADD  R1, R0, R0;       \
	ADD  R3, R2, R2;       \
	SUBS $1, R5, R5;       \
	BNE  row;              \
	RET

// KVTILES(k, v, GROUPS, bb, bv): a type's two decoders.
#define KVTILES(k, v, GROUPS, bb, bv) \
	TEXT k(SB), NOSPLIT, $0-48; KTILE(GROUPS, bb, bv); \
	TEXT v(SB), NOSPLIT, $0-48; VTILE(GROUPS, bb, bv)

KVTILES(·kTileF32NEON, ·vTileF32NEON, F32GROUPS, 16, 4)
KVTILES(·kTileF16NEON, ·vTileF16NEON, F16GROUPS, 8, 4)
KVTILES(·kTileBF16NEON, ·vTileBF16NEON, BF16GROUPS, 8, 4)
KVTILES(·kTileQ8_0NEON, ·vTileQ8_0NEON, Q8_0GROUPS, 34, 32)
KVTILES(·kTileQ4_0NEON, ·vTileQ4_0NEON, Q4_0GROUPS, 18, 32)
KVTILES(·kTileF8E4M3NEON, ·vTileF8E4M3NEON, F8E4M3GROUPS, 34, 32)
