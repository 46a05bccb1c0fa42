//go:build amd64 && !purego

#include "textflag.h"
#include "simd_data.h"

// The avx2 path's KV tile decoders (kvtile.go has the contracts and the Go
// decoders, whose bits these give: decoding is exact). One skeleton per
// direction (KTILE: keys transposed, VTILE: values row-major), one line of
// macros per type: its block's bytes and values, and GROUPS(G), which
// applies G(DEC, off, sh) to each group of 8 values of a block, DEC(p,
// off, sh, y) decoding that group of the block at p (an address without
// displacement) into y (Y8 a scratch register).
//
// func kTileXAVX2(dst *float32, ld int, src *byte, stride, w, cnt int)
// func vTileXAVX2(dst *float32, ld int, src *byte, stride, w, cnt int)
// src is the head's first byte in the first row, stride the bytes from a
// row to the next; w values a row (whole blocks), cnt rows (a multiple of
// 8).

#define DF32(p, off, sh, y) VMOVUPS p, y
#define DF16(p, off, sh, y) VCVTPH2PS p, y
#define DBF16(p, off, sh, y) VPMOVZXWD p, y; VPSLLD $16, y, y

// DSCALE(p, y): y = float(y) times the block's half scale at p; HSCALE
// without the conversion.
#define DSCALE(p, y) VCVTDQ2PS y, y; HSCALE(p, y)
#define HSCALE(p, y) \
	VPBROADCASTW p, X8; \
	VCVTPH2PS   X8, Y8; \
	VMULPS      Y8, y, y

// Q8_0: the int8 quants from off; Q4_0: the nibbles of the 8 bytes at
// off, shifted by sh (0: elements 0-15, 4: 16-31), less 8.
#define DQ8_0(p, off, sh, y) VPMOVSXBD off p, y; DSCALE(p, y)
#define DQ4_0(p, off, sh, y) \
	VPMOVZXBD off p, y; \
	VPSRLD    $sh, y, y; \
	VPAND     kvm0f<>(SB), y, y; \
	VPSUBD    kv8<>(SB), y, y; \
	DSCALE(p, y)

// F8E4M3: the codes at off as E4M3ToFP32 reads them, in arithmetic (the
// lookup by VGATHERDPS took 3.7-4 times as long): a = code&0x7f shifted
// left by 20 is a float32 with the code's exponent and mantissa fields
// and 2^-120 times its value (a subnormal code a denormal, which the
// multiply keeps exact), so times 2^120 it is the code's magnitude; the
// minimum with 448 reads the NaN code 0x7f (480 so) as 448, and the
// sign is the code's bit 7 moved to bit 31 (Y9 the codes).
#define DF8E4M3(p, off, sh, y) \
	VPMOVZXBD off p, Y9; \
	VPAND     kvm7f<>(SB), Y9, y; \
	VPSLLD    $20, y, y; \
	VMULPS    kvp120<>(SB), y, y; \
	VMINPS    kv448<>(SB), y, y; \
	VPSLLD    $24, Y9, Y9; \
	VPAND     kvsign<>(SB), Y9, Y9; \
	VPOR      Y9, y, y; \
	HSCALE(p, y)

#define F32GROUPS(G) G(DF32, 0, 0)
#define F16GROUPS(G) G(DF16, 0, 0)
#define BF16GROUPS(G) G(DBF16, 0, 0)
#define Q8_0GROUPS(G) G(DQ8_0, 2, 0); G(DQ8_0, 10, 0); G(DQ8_0, 18, 0); G(DQ8_0, 26, 0)
#define Q4_0GROUPS(G) G(DQ4_0, 2, 0); G(DQ4_0, 10, 0); G(DQ4_0, 2, 4); G(DQ4_0, 10, 4)
#define F8E4M3GROUPS(G) G(DF8E4M3, 2, 0); G(DF8E4M3, 10, 0); G(DF8E4M3, 18, 0); G(DF8E4M3, 26, 0)

SPLAT32(kvm0f<>, 0x0000000f0000000f)
SPLAT32(kv8<>, 0x0000000800000008)
SPLAT32(kvm7f<>, 0x0000007f0000007f)
SPLAT32(kvp120<>, 0x7b8000007b800000)
SPLAT32(kv448<>, 0x43e0000043e00000)
SPLAT32(kvsign<>, 0x8000000080000000)

// KTILE: 8 rows at a time (rows 0-3 at AX + r*DX, 4-7 at CX + r*DX; R10 =
// 3*DX), a group of 8 values of each (KGROUP) transposed in registers and
// stored as 8 rows of 8 keys at BX + i*R8 (and R13 = BX + 4*R8; R9 = 3*R8).

// TRANSPOSE8: Y8-Y15 = the columns of rows Y0-Y7 (Y0-Y7 clobbered).
#define TRANSPOSE8 \
	VUNPCKLPS  Y1, Y0, Y8; \
	VUNPCKHPS  Y1, Y0, Y9; \
	VUNPCKLPS  Y3, Y2, Y10; \
	VUNPCKHPS  Y3, Y2, Y11; \
	VUNPCKLPS  Y5, Y4, Y12; \
	VUNPCKHPS  Y5, Y4, Y13; \
	VUNPCKLPS  Y7, Y6, Y14; \
	VUNPCKHPS  Y7, Y6, Y15; \
	VSHUFPS    $0x44, Y10, Y8, Y0; \
	VSHUFPS    $0xee, Y10, Y8, Y1; \
	VSHUFPS    $0x44, Y11, Y9, Y2; \
	VSHUFPS    $0xee, Y11, Y9, Y3; \
	VSHUFPS    $0x44, Y14, Y12, Y4; \
	VSHUFPS    $0xee, Y14, Y12, Y5; \
	VSHUFPS    $0x44, Y15, Y13, Y6; \
	VSHUFPS    $0xee, Y15, Y13, Y7; \
	VPERM2F128 $0x20, Y4, Y0, Y8; \
	VPERM2F128 $0x20, Y5, Y1, Y9; \
	VPERM2F128 $0x20, Y6, Y2, Y10; \
	VPERM2F128 $0x20, Y7, Y3, Y11; \
	VPERM2F128 $0x31, Y4, Y0, Y12; \
	VPERM2F128 $0x31, Y5, Y1, Y13; \
	VPERM2F128 $0x31, Y6, Y2, Y14; \
	VPERM2F128 $0x31, Y7, Y3, Y15

// KROWS(DEC, off, sh): Y0-Y7 = the group of the 8 rows.
#define KROWS(DEC, off, sh) \
	DEC((AX), off, sh, Y0); \
	DEC((AX)(DX*1), off, sh, Y1); \
	DEC((AX)(DX*2), off, sh, Y2); \
	DEC((AX)(R10*1), off, sh, Y3); \
	DEC((CX), off, sh, Y4); \
	DEC((CX)(DX*1), off, sh, Y5); \
	DEC((CX)(DX*2), off, sh, Y6); \
	DEC((CX)(R10*1), off, sh, Y7)

// KSTORE8 stores Y8-Y15 as 8 rows of dst and moves BX, R13 on 8 rows.
#define KSTORE8 \
	VMOVUPS Y8, (BX); \
	VMOVUPS Y9, (BX)(R8*1); \
	VMOVUPS Y10, (BX)(R8*2); \
	VMOVUPS Y11, (BX)(R9*1); \
	VMOVUPS Y12, (R13); \
	VMOVUPS Y13, (R13)(R8*1); \
	VMOVUPS Y14, (R13)(R8*2); \
	VMOVUPS Y15, (R13)(R9*1); \
	LEAQ    (BX)(R8*8), BX; \
	LEAQ    (R13)(R8*8), R13

#define KGROUP(DEC, off, sh) KROWS(DEC, off, sh); TRANSPOSE8; KSTORE8

// TILEARGS loads the arguments: DI = dst, R8 = ld in bytes, SI = src, DX
// = stride, R12 = cnt.
#define TILEARGS \
	MOVQ dst+0(FP), DI; \
	MOVQ ld+8(FP), R8; \
	SHLQ $2, R8; \
	MOVQ src+16(FP), SI; \
	MOVQ stride+24(FP), DX; \
	MOVQ cnt+40(FP), R12

// KTILE(GROUPS, bb, bv): blocks of bb bytes and bv values.
#define KTILE(GROUPS, bb, bv) \
	TILEARGS; \
	LEAQ (R8)(R8*2), R9; \
	LEAQ (DX)(DX*2), R10; \
	SHRQ $3, R12; \
rows8: \
	MOVQ SI, AX; \
	LEAQ (SI)(DX*4), CX; \
	MOVQ DI, BX; \
	LEAQ (DI)(R8*4), R13; \
	MOVQ w+32(FP), R11; \
blk: \
	GROUPS(KGROUP); \
	ADDQ $bb, AX; \
	ADDQ $bb, CX; \
	SUBQ $bv, R11; \
	JNZ  blk; \
	ADDQ $32, DI; \
	LEAQ (SI)(DX*8), SI; \
	DECQ R12; \
	JNZ  rows8; \
	VZEROUPPER; \
	RET

// VGROUP decodes a group of the row at AX to BX, moving BX on.
#define VGROUP(DEC, off, sh) \
	DEC((AX), off, sh, Y0); \
	VMOVUPS Y0, (BX); \
	ADDQ    $32, BX

// VTILE(GROUPS, bb, bv): a row at a time.
#define VTILE(GROUPS, bb, bv) \
	TILEARGS; \
row: \
	MOVQ SI, AX; \
	MOVQ DI, BX; \
	MOVQ w+32(FP), R11; \
vblk: \
	GROUPS(VGROUP); \
	ADDQ $bb, AX; \
	SUBQ $bv, R11; \
	JNZ  vblk; \
	ADDQ R8, DI; \
	ADDQ DX, SI; \
	DECQ R12; \
	JNZ  row; \
	VZEROUPPER; \
	RET

// KVTILES(k, v, GROUPS, bb, bv): a type's two decoders.
#define KVTILES(k, v, GROUPS, bb, bv) \
	TEXT k(SB), NOSPLIT, $0-48; KTILE(GROUPS, bb, bv); \
	TEXT v(SB), NOSPLIT, $0-48; VTILE(GROUPS, bb, bv)

KVTILES(·kTileF32AVX2, ·vTileF32AVX2, F32GROUPS, 32, 8)
KVTILES(·kTileF16AVX2, ·vTileF16AVX2, F16GROUPS, 16, 8)
KVTILES(·kTileBF16AVX2, ·vTileBF16AVX2, BF16GROUPS, 16, 8)
KVTILES(·kTileQ8_0AVX2, ·vTileQ8_0AVX2, Q8_0GROUPS, 34, 32)
KVTILES(·kTileQ4_0AVX2, ·vTileQ4_0AVX2, Q4_0GROUPS, 18, 32)
KVTILES(·kTileF8E4M3AVX2, ·vTileF8E4M3AVX2, F8E4M3GROUPS, 34, 32)
