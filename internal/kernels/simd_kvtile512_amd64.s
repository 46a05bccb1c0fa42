//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 KV tile decoders (kvtile.go has the contracts and the Go
// decoders, whose bits these give: decoding is exact). KTile's decode 16
// keys × 16 values into Z0-Z15 (a key a register), transpose them in
// registers and store 16 rows of 16 keys.

// TSTORE4(a, b, c, d): the last round of TRANSPOSE_STORE for four
// columns: the even and odd 128-bit lanes of a, b and of c, d, stored at
// R11, R11+R9, R11+2*R9, R11+R15 (Z0-Z3 clobbered).
#define TSTORE4(a, b, c, d) \
	VSHUFF32X4 $0x88, b, a, Z0; \
	VMOVUPS    Z0, (R11);       \
	VSHUFF32X4 $0x88, d, c, Z1; \
	VMOVUPS    Z1, (R11)(R9*1); \
	VSHUFF32X4 $0xdd, b, a, Z2; \
	VMOVUPS    Z2, (R11)(R9*2); \
	VSHUFF32X4 $0xdd, d, c, Z3; \
	VMOVUPS    Z3, (R11)(R15*1)

// TRANSPOSE_STORE: Z0-Z15 hold rows r0..r15 of 16 floats; stores column c
// (r0[c] .. r15[c]) at R10 + c*R8 (R9 = 4*R8, R15 = 12*R8); clobbers
// Z0-Z31. Unpacks pair the rows (32-bit, then 64-bit elements), then two
// rounds of 128-bit lane shuffles.
#define TRANSPOSE_STORE \
	VUNPCKLPS Z1, Z0, Z16 \
	VUNPCKHPS Z1, Z0, Z17 \
	VUNPCKLPS Z3, Z2, Z18 \
	VUNPCKHPS Z3, Z2, Z19 \
	VUNPCKLPS Z5, Z4, Z20 \
	VUNPCKHPS Z5, Z4, Z21 \
	VUNPCKLPS Z7, Z6, Z22 \
	VUNPCKHPS Z7, Z6, Z23 \
	VUNPCKLPS Z9, Z8, Z24 \
	VUNPCKHPS Z9, Z8, Z25 \
	VUNPCKLPS Z11, Z10, Z26 \
	VUNPCKHPS Z11, Z10, Z27 \
	VUNPCKLPS Z13, Z12, Z28 \
	VUNPCKHPS Z13, Z12, Z29 \
	VUNPCKLPS Z15, Z14, Z30 \
	VUNPCKHPS Z15, Z14, Z31 \
	VUNPCKLPD Z18, Z16, Z0 \
	VUNPCKHPD Z18, Z16, Z1 \
	VUNPCKLPD Z19, Z17, Z2 \
	VUNPCKHPD Z19, Z17, Z3 \
	VUNPCKLPD Z22, Z20, Z4 \
	VUNPCKHPD Z22, Z20, Z5 \
	VUNPCKLPD Z23, Z21, Z6 \
	VUNPCKHPD Z23, Z21, Z7 \
	VUNPCKLPD Z26, Z24, Z8 \
	VUNPCKHPD Z26, Z24, Z9 \
	VUNPCKLPD Z27, Z25, Z10 \
	VUNPCKHPD Z27, Z25, Z11 \
	VUNPCKLPD Z30, Z28, Z12 \
	VUNPCKHPD Z30, Z28, Z13 \
	VUNPCKLPD Z31, Z29, Z14 \
	VUNPCKHPD Z31, Z29, Z15 \
	VSHUFF32X4 $0x88, Z4, Z0, Z16 \
	VSHUFF32X4 $0xdd, Z4, Z0, Z17 \
	VSHUFF32X4 $0x88, Z12, Z8, Z18 \
	VSHUFF32X4 $0xdd, Z12, Z8, Z19 \
	VSHUFF32X4 $0x88, Z5, Z1, Z20 \
	VSHUFF32X4 $0xdd, Z5, Z1, Z21 \
	VSHUFF32X4 $0x88, Z13, Z9, Z22 \
	VSHUFF32X4 $0xdd, Z13, Z9, Z23 \
	VSHUFF32X4 $0x88, Z6, Z2, Z24 \
	VSHUFF32X4 $0xdd, Z6, Z2, Z25 \
	VSHUFF32X4 $0x88, Z14, Z10, Z26 \
	VSHUFF32X4 $0xdd, Z14, Z10, Z27 \
	VSHUFF32X4 $0x88, Z7, Z3, Z28 \
	VSHUFF32X4 $0xdd, Z7, Z3, Z29 \
	VSHUFF32X4 $0x88, Z15, Z11, Z30 \
	VSHUFF32X4 $0xdd, Z15, Z11, Z31 \
	MOVQ R10, R11 \
	TSTORE4(Z16, Z18, Z17, Z19) \
	ADDQ R8, R11 \
	TSTORE4(Z20, Z22, Z21, Z23) \
	ADDQ R8, R11 \
	TSTORE4(Z24, Z26, Z25, Z27) \
	ADDQ R8, R11 \
	TSTORE4(Z28, Z30, Z29, Z31)

// LOADF32: Z0-Z15 = 16 rows from AX on, R13 bytes apart (AX moves on).
#define LOADF32 \
	VMOVUPS (AX), Z0 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z1 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z2 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z3 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z4 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z5 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z6 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z7 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z8 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z9 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z10 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z11 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z12 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z13 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z14 \
	ADDQ R13, AX \
	VMOVUPS (AX), Z15 \
	ADDQ R13, AX

// LOADF16: Z0-Z15 = 16 rows from AX on, R13 bytes apart (AX moves on).
#define LOADF16 \
	VCVTPH2PS (AX), Z0 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z1 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z2 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z3 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z4 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z5 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z6 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z7 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z8 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z9 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z10 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z11 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z12 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z13 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z14 \
	ADDQ R13, AX \
	VCVTPH2PS (AX), Z15 \
	ADDQ R13, AX

// LOADQ8: Z0-Z15 = 16 rows from AX on, R13 bytes apart (AX moves on).
#define LOADQ8 \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z0 \
	VCVTDQ2PS Z0, Z0 \
	VMULPS Z16, Z0, Z0 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z1 \
	VCVTDQ2PS Z1, Z1 \
	VMULPS Z16, Z1, Z1 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z2 \
	VCVTDQ2PS Z2, Z2 \
	VMULPS Z16, Z2, Z2 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z3 \
	VCVTDQ2PS Z3, Z3 \
	VMULPS Z16, Z3, Z3 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z4 \
	VCVTDQ2PS Z4, Z4 \
	VMULPS Z16, Z4, Z4 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z5 \
	VCVTDQ2PS Z5, Z5 \
	VMULPS Z16, Z5, Z5 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z6 \
	VCVTDQ2PS Z6, Z6 \
	VMULPS Z16, Z6, Z6 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z7 \
	VCVTDQ2PS Z7, Z7 \
	VMULPS Z16, Z7, Z7 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z8 \
	VCVTDQ2PS Z8, Z8 \
	VMULPS Z16, Z8, Z8 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z9 \
	VCVTDQ2PS Z9, Z9 \
	VMULPS Z16, Z9, Z9 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z10 \
	VCVTDQ2PS Z10, Z10 \
	VMULPS Z16, Z10, Z10 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z11 \
	VCVTDQ2PS Z11, Z11 \
	VMULPS Z16, Z11, Z11 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z12 \
	VCVTDQ2PS Z12, Z12 \
	VMULPS Z16, Z12, Z12 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z13 \
	VCVTDQ2PS Z13, Z13 \
	VMULPS Z16, Z13, Z13 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z14 \
	VCVTDQ2PS Z14, Z14 \
	VMULPS Z16, Z14, Z14 \
	ADDQ R13, AX \
	VPBROADCASTW (AX), Y16 \
	VCVTPH2PS Y16, Z16 \
	VPMOVSXBD (AX)(R14*1), Z15 \
	VCVTDQ2PS Z15, Z15 \
	VMULPS Z16, Z15, Z15 \
	ADDQ R13, AX

// PF2(r), PF4(r): prefetch the first two (four) cache lines of the head
// in the row at r; PFNEXT(PF) prefetches the 16 rows after the group's
// (SI on), which a row-at-a-time walk of strided rows would otherwise
// fetch one miss at a time behind the transposition's shuffles.
#define PF2(r) PREFETCHT0 (r); PREFETCHT0 64(r)
#define PF4(r) PREFETCHT0 (r); PREFETCHT0 64(r); PREFETCHT0 128(r); PREFETCHT0 192(r)
#define PFNEXT(PF) \
	MOVQ R13, AX; \
	SHLQ $4, AX; \
	ADDQ SI, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX; \
	PF(AX); \
	ADDQ R13, AX

// KTILE(LOAD, BLOCK, PF) is the body of
// func kTileXAVX512(dst *float32, ld int, src *T, stride, w, cnt int):
// dst[d*ld+j] = value d of key j for d < w, j < cnt (both multiples of
// 16); src is the head's first element (block) of key 0, stride the
// bytes from a key to the next. BLOCK sets AX to the start of the 16
// values d0 = DX/4.. of the first key (SI) of the group, and R14 for Q8.
#define KTILE(LOAD, BLOCK, PF) \
	MOVQ dst+0(FP), DI; \
	MOVQ ld+8(FP), R8; \
	SHLQ $2, R8; \
	MOVQ R8, R9; \
	SHLQ $2, R9; \
	LEAQ (R9)(R9*2), R15; \
	MOVQ src+16(FP), SI; \
	MOVQ stride+24(FP), R13; \
	MOVQ w+32(FP), R12; \
	MOVQ cnt+40(FP), BX; \
	SHRQ $4, BX; \
	JZ   kdone; \
kgroup: \
	PFNEXT(PF); \
	XORQ DX, DX; \
	MOVQ DI, CX; \
kblock: \
	BLOCK; \
	LOAD; \
	MOVQ CX, R10; \
	TRANSPOSE_STORE; \
	LEAQ (CX)(R9*4), CX; \
	ADDQ $64, DX; \
	MOVQ R12, AX; \
	SHLQ $2, AX; \
	CMPQ DX, AX; \
	JL   kblock; \
	MOVQ R13, AX; \
	SHLQ $4, AX; \
	ADDQ AX, SI; \
	ADDQ $64, DI; \
	DECQ BX; \
	JNZ  kgroup; \
kdone: \
	VZEROUPPER; \
	RET

// The BLOCKs: F32 at SI + d0*4, F16 at SI + d0*2, Q8_0 at block d0/32
// (34 bytes each) with the int8s at 2 + 16·(d0/16 % 2).
#define BLOCKF32 LEAQ (SI)(DX*1), AX
#define BLOCKF16 MOVQ DX, AX; SHRQ $1, AX; ADDQ SI, AX
#define BLOCKQ8 \
	MOVQ DX, AX; \
	SHRQ $7, AX; \
	IMULQ $34, AX; \
	ADDQ SI, AX; \
	MOVQ DX, R14; \
	ANDQ $64, R14; \
	SHRQ $2, R14; \
	ADDQ $2, R14

// func kTileF32AVX512(dst *float32, ld int, src *float32, stride, w, cnt int)
TEXT ·kTileF32AVX512(SB), NOSPLIT, $0-48
	KTILE(LOADF32, BLOCKF32, PF4)

// func kTileF16AVX512(dst *float32, ld int, src *uint16, stride, w, cnt int)
TEXT ·kTileF16AVX512(SB), NOSPLIT, $0-48
	KTILE(LOADF16, BLOCKF16, PF2)

// func kTileQ8_0AVX512(dst *float32, ld int, src *uint16, stride, w, cnt int)
TEXT ·kTileQ8_0AVX512(SB), NOSPLIT, $0-48
	KTILE(LOADQ8, BLOCKQ8, PF2)

// func vTileQ8_0AVX512(dst *float32, ld int, src *uint16, stride, w, cnt int)
// VTile of Q8_0: dst[j*ld+d] = value d of row j, for d < w (a multiple of
// 32), j < cnt: per block, its scale times its int8s.
TEXT ·vTileQ8_0AVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ld+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ stride+24(FP), R13
	MOVQ w+32(FP), R12
	SHRQ $5, R12
	MOVQ cnt+40(FP), BX
	TESTQ BX, BX
	JZ   vdone

vrow:
	LEAQ       (SI)(R13*8), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	MOVQ       SI, AX
	MOVQ DI, R10
	MOVQ R12, CX

vblock:
	VPBROADCASTW (AX), Y16
	VCVTPH2PS    Y16, Z16
	VPMOVSXBD    2(AX), Z0
	VPMOVSXBD    18(AX), Z1
	VCVTDQ2PS    Z0, Z0
	VCVTDQ2PS    Z1, Z1
	VMULPS       Z16, Z0, Z0
	VMULPS       Z16, Z1, Z1
	VMOVUPS      Z0, (R10)
	VMOVUPS      Z1, 64(R10)
	ADDQ         $34, AX
	ADDQ         $128, R10
	DECQ         CX
	JNZ          vblock
	ADDQ R13, SI
	ADDQ R8, DI
	DECQ BX
	JNZ  vrow

vdone:
	VZEROUPPER
	RET

// VTILE16(LOAD16, E16, PF) is the body of
// func vTileXAVX512(dst *float32, ld int, src *T, stride, w, cnt int):
// dst[j*ld+d] = value d of row j for d < w (a multiple of 16), j < cnt;
// stride in bytes, E16 the bytes of 16 stored values.
#define VTILE16(LOAD16, E16, PF) \
	MOVQ  dst+0(FP), DI; \
	MOVQ  ld+8(FP), R8; \
	SHLQ  $2, R8; \
	MOVQ  src+16(FP), SI; \
	MOVQ  stride+24(FP), R13; \
	MOVQ  w+32(FP), R12; \
	SHRQ  $4, R12; \
	MOVQ  cnt+40(FP), BX; \
	TESTQ BX, BX; \
	JZ    v16done; \
v16row: \
	LEAQ (SI)(R13*8), AX; \
	PF(AX); \
	MOVQ SI, AX; \
	MOVQ DI, R10; \
	MOVQ R12, CX; \
v16blk: \
	LOAD16; \
	VMOVUPS Z0, (R10); \
	ADDQ    $E16, AX; \
	ADDQ    $64, R10; \
	DECQ    CX; \
	JNZ     v16blk; \
	ADDQ R13, SI; \
	ADDQ R8, DI; \
	DECQ BX; \
	JNZ  v16row; \
v16done: \
	VZEROUPPER; \
	RET

#define LOADV32 VMOVUPS (AX), Z0
#define LOADV16 VCVTPH2PS (AX), Z0

// func vTileF32AVX512(dst *float32, ld int, src *float32, stride, w, cnt int)
TEXT ·vTileF32AVX512(SB), NOSPLIT, $0-48
	VTILE16(LOADV32, 64, PF4)

// func vTileF16AVX512(dst *float32, ld int, src *uint16, stride, w, cnt int)
TEXT ·vTileF16AVX512(SB), NOSPLIT, $0-48
	VTILE16(LOADV16, 32, PF2)
