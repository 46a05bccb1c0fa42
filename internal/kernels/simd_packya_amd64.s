//go:build amd64 && !purego

#include "textflag.h"

#include "simd_amd64.h"

// The avx2 path's Q4_K kernels over the packed layout (the file order's,
// packed.inter false): simd_packy_amd64.h's skeleton (groups, halves,
// stores, unpacking) with their own integer steps. Each chunk half's 8
// lanes are 8 rows: no horizontal reductions, where the kernels over the
// file's rows spend a third of their time in them.
//
// A sub-block's products are summed in int16 lanes (VPMADDUBSW, then
// VPADDW over its 8 chunks: at most 8*2*15*128 = 30720, no saturation)
// and multiplied by the rows' scales once, by VPMADDWD with each row's
// scale in both words of its dword: one multiply per 32 products where
// the AVX-VNNI kernels' steps with VPMADDWD by ones took two, and one
// more per sub-block. The float steps, per sub-block j and row r:
//
//	acc = fma(float(sc_j*S), d*d_a, acc); acc = fnmadd(s_a, dmin*m_j, acc)
//
// (d_a the activation block's scale, s_a its scaled sum), the same in
// both kernels, so a token's outputs are its bits alone or in a batch.
// The one-token kernel unpacks each chunk once for both its sub-blocks.
//
// Registers: Y0 a chunk, Y1 and Y12 temporaries, Y2 the rows' scales
// (doubled words), Y3 dmin*m_j, Y4-Y7 the tokens' integer sums (the
// one-token kernel: Y4 the low sub-block's, Y5 the high one's), Y8-Y11
// their outputs, Y13 = d, Y14 = 0x0f bytes, Y15 = dmin.

// The skeleton's hooks this file does not use (YKSB's steps).
#define Y15SET

// akdup<>: VPSHUFB's mask from 8 scale bytes (broadcast) to each row's
// scale in both words of its dword, rows 0-3 in the low 128-bit lane and
// 4-7 in the high one.
DATA akdup<>+0(SB)/8, $0x8001800180008000
DATA akdup<>+8(SB)/8, $0x8003800380028002
DATA akdup<>+16(SB)/8, $0x8005800580048004
DATA akdup<>+24(SB)/8, $0x8007800780068006
GLOBL akdup<>(SB), RODATA|NOPTR, $32

// AKSB(h): a super-block's row factors of half h.
#define AKSB(h) \
	VCVTPH2PS (256+16*h)(R12), Y13; \
	VCVTPH2PS (288+16*h)(R12), Y15

// AKSC(j, h): Y2 = the scales of sub-block j (doubled words), Y3 =
// dmin*m_j, of half h's rows.
#define AKSC(j, h) AKSCM(j, h, Y15)
#define AKSCM(j, h, DM) \
	VPBROADCASTQ (16*j+8*h)(R12), Y2; \
	VPSHUFB      akdup<>(SB), Y2, Y2; \
	VPMOVZXBD    (128+16*j+8*h)(R12), Y3; \
	VCVTDQ2PS    Y3, Y3; \
	VMULPS       DM, Y3, Y3

// AKF(j, dd, ss, y, acc): the float steps of sub-block j for a token's
// integer sum y (int16 pairs), activation scales at dd and sums at ss.
#define AKF(j, dd, ss, y, acc) AKFD(j, dd, ss, y, acc, Y13)
#define AKFD(j, dd, ss, y, acc, D) \
	VPMADDWD      Y2, y, y; \
	VCVTDQ2PS     y, y; \
	VBROADCASTSS  (4*j) dd, Y12; \
	VMULPS        D, Y12, Y12; \
	VFMADD231PS   Y12, y, acc; \
	VBROADCASTSS  (4*j) ss, Y12; \
	VFNMADD231PS  Y12, Y3, acc

// AM(q, r, FIRST): r += (or, FIRST, =) the int16 pair products of the
// chunk in Y0 with the activation dword at q, broadcast.
#define AMADD(q, r) \
	VPBROADCASTD q, Y1; \
	VPMADDUBSW   Y1, Y0, Y1; \
	VPADDW       Y1, r, r

#define AMSET(q, r) \
	VPBROADCASTD q, Y1; \
	VPMADDUBSW   Y1, Y0, r

// AD4(M, m): the chunk in Y0 times the four tokens' dwords at m.
#define AD4(M, m) \
	M(m(DI), Y4); \
	M(m(DI)(R8*1), Y5); \
	M(m(DI)(R8*2), Y6); \
	M(m(DI)(R9*1), Y7)

// A4SUB(j, c, U, h): sub-block j (piece c's nibbles by U) of half h,
// four tokens.
#define A4SUB(j, c, U, h) \
	AKSC(j, h); \
	U(c, 0, h); AD4(AMSET, (32*j)); \
	U(c, 1, h); AD4(AMADD, (32*j+4)); \
	U(c, 2, h); AD4(AMADD, (32*j+8)); \
	U(c, 3, h); AD4(AMADD, (32*j+12)); \
	U(c, 4, h); AD4(AMADD, (32*j+16)); \
	U(c, 5, h); AD4(AMADD, (32*j+20)); \
	U(c, 6, h); AD4(AMADD, (32*j+24)); \
	U(c, 7, h); AD4(AMADD, (32*j+28)); \
	YT4(AKF, j)

#define A4Q4_K(h) \
	AKSB(h); \
	A4SUB(0, 0, YKL, h); \
	A4SUB(1, 0, YKH, h); \
	A4SUB(2, 1, YKL, h); \
	A4SUB(3, 1, YKH, h); \
	A4SUB(4, 2, YKL, h); \
	A4SUB(5, 2, YKH, h); \
	A4SUB(6, 3, YKL, h); \
	A4SUB(7, 3, YKH, h)

#include "simd_packy_amd64.h"

TEXT ·gemm4Q4_KAVX2P(SB), NOSPLIT, $0-88
	YRUN(A4Q4_K, YST4, NOPF, NOPF, NOSET, 2048, 320, 8, 32)


// One pass: both halves of each chunk.
#define B1CH(S1, S2, c, k) \
	VPBROADCASTD (64*c+4*k)(DI), Y1; \
	VPBROADCASTD (64*c+32+4*k)(DI), Y2; \
	VMOVDQU (512*c+64*k)(SI), Y12; \
	VPAND   Y14, Y12, Y0; \
	S1(Y4); \
	VPSRLW  $4, Y12, Y12; \
	VPAND   Y14, Y12, Y0; \
	S2(Y5); \
	VMOVDQU (512*c+64*k+32)(SI), Y12; \
	VPAND   Y14, Y12, Y0; \
	S1(Y6); \
	VPSRLW  $4, Y12, Y12; \
	VPAND   Y14, Y12, Y0; \
	S2(Y7)

#define BSET(r) VPMADDUBSW Y1, Y0, r
#define BADD(r) VPMADDUBSW Y1, Y0, Y3; VPADDW Y3, r, r
#define BSET2(r) VPMADDUBSW Y2, Y0, r
#define BADD2(r) VPMADDUBSW Y2, Y0, Y3; VPADDW Y3, r, r

#define B1PIECE(c) \
	PFJQ4_K((2*c)); \
	PFJQ4_K((2*c+1)); \
	B1CH(BSET, BSET2, c, 0); \
	B1CH(BADD, BADD2, c, 1); \
	B1CH(BADD, BADD2, c, 2); \
	B1CH(BADD, BADD2, c, 3); \
	B1CH(BADD, BADD2, c, 4); \
	B1CH(BADD, BADD2, c, 5); \
	B1CH(BADD, BADD2, c, 6); \
	B1CH(BADD, BADD2, c, 7); \
	AKSCM((2*c), 0, Y15); \
	AKFD((2*c), (BX), (DX), Y4, Y8, Y13); \
	AKSCM((2*c+1), 0, Y15); \
	AKFD((2*c+1), (BX), (DX), Y5, Y8, Y13); \
	AKSCM((2*c), 1, Y11); \
	AKFD((2*c), (BX), (DX), Y6, Y9, Y10); \
	AKSCM((2*c+1), 1, Y11); \
	AKFD((2*c+1), (BX), (DX), Y7, Y9, Y10)

#define YST1H(h) VMASKMOVPS Y9, Y0, 32(AX)

TEXT ·gemm1Q4_KAVX2P(SB), NOSPLIT, $0-88
	PKGP
	VMOVDQU ycon<>+0(SB), Y14
b1group:
	PKGROUP(2048)
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
b1loop:
	VCVTPH2PS 256(R12), Y13
	VCVTPH2PS 288(R12), Y15
	VCVTPH2PS 272(R12), Y10
	VCVTPH2PS 304(R12), Y11
	B1PIECE(0)
	B1PIECE(1)
	B1PIECE(2)
	B1PIECE(3)
	PKNEXT(2048, 320, 8, 32, b1loop)
	YSTORE(0, YST1, b1full0)
	YSTORE(1, YST1H, b1full1)
	MOVQ R12, SI
	ADDQ $64, AX
	DECQ R15
	JNZ  b1group
	VZEROUPPER
	RET
