//go:build amd64 && !purego

#include "textflag.h"

#include "simd_amd64.h"
#include "simd_data.h"

// The avx2 path's kernels over packed weights of every quantized type but
// Q8_0 (simd_packa_amd64.s): simd_packy_amd64.h's skeleton (groups,
// halves, stores, unpacking) with their own integer steps. Each chunk
// half's 8 lanes are 8 rows: no horizontal reductions, where the kernels
// over the file's rows spend a third of their time in them. A quant of at
// most 6 bits times an activation byte leaves room in an int16 lane for
// the sum of several chunks' pairs of products, so each type sums as many
// chunks as fit with VPADDW and widens them with one VPMADDWD (by the
// scales, or by ones), where the AVX-VNNI kernels' steps with VPMADDWD by
// ones took one per chunk.
//
// Q4_K (the file order's groups, packed.inter false): a sub-block's
// products are summed in int16 lanes (VPMADDUBSW, then VPADDW over its 8
// chunks: at most 8*2*15*128 = 30720, no saturation) and multiplied by the rows' scales once, by VPMADDWD with each row's
// scale in both words of its dword: one multiply per 32 products where
// the AVX-VNNI kernels' steps with VPMADDWD by ones took two, and one
// more per sub-block. The float steps, per sub-block j and row r:
//
//	acc = fma(float(sc_j*S), d*d_a, acc); acc = fnmadd(s_a, dmin*m_j, acc)
//
// (d_a the activation block's scale, s_a its scaled sum), the same in
// both kernels, so a token's outputs are its bits alone or in a batch.
// The one-token kernel unpacks each chunk once for both its sub-blocks
// and both halves (K1RUN, below).
//
// Registers: Y0 a chunk, Y1 and Y12 temporaries, Y2 the rows' scales
// (doubled words), Y3 dmin*m_j, Y4-Y7 the tokens' integer sums, Y8-Y11
// their outputs, Y13 = d, Y14 = 0x0f bytes, Y15 = dmin.

// The skeleton's constant hook: Y15 holds no constant here (dmin per
// super-block, or a temporary).
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
	AKDUP(j, h); \
	VPMOVZXBD    (128+16*j+8*h)(R12), Y3; \
	VCVTDQ2PS    Y3, Y3; \
	VMULPS       DM, Y3, Y3

// AKDUP(j, h): Y2 alone.
#define AKDUP(j, h) \
	VPBROADCASTQ (16*j+8*h)(R12), Y2; \
	VPSHUFB      akdup<>(SB), Y2, Y2

// AKF(j, dd, ss, y, acc): the float steps of sub-block j for a token's
// integer sum y (int16 pairs), activation scales at dd and sums at ss.
#define AKF(j, dd, ss, y, acc) AKFD(j, dd, ss, y, acc, Y13)
#define AKFD(j, dd, ss, y, acc, D) \
	VPMADDWD Y2, y, y; \
	YKFM(j, dd, ss, y, acc, D)

// AMADD(q, r): r += the int16 pair products of the chunk in Y0 with the
// activation dword at q, broadcast; AMSET(q, r): r = them.
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

// Q5_K: Q4_K's layout with the fifth bits as one more piece (at 2048 of a
// super-block: chunk k's at 64k, sub-block j's in bit j). A quant is
// 0..31, so four chunks' pairs fit int16 (4*2*31*128 = 31744): each half
// of a sub-block (four chunks) is scaled by VPMADDWD and goes to the
// float steps, acc = fma(float(sc*S_0), d*d_a, acc), the same with S_1,
// then the minimum term, in both kernels (a token's bits alone or in a
// batch).

// A5T(o, SH, t): Y0 |= the fifth bits at o(SI), moved by SH to bit 4 (t
// a temporary); A5 with Y12.
#define A5T(o, SH, t) \
	VMOVDQU o(SI), t; \
	SH(t); \
	VPAND   ycon<>+32(SB), t, t; \
	VPOR    t, Y0, Y0

#define A5(o, SH) A5T(o, SH, Y12)

// AKF5(j, dd, ss, y, acc): AKF without the minimum term (a sub-block's
// first half), AKF5D with d in D.
#define AKF5(j, dd, ss, y, acc) AKF5D(j, dd, ss, y, acc, Y13)
#define AKF5D(j, dd, ss, y, acc, D) \
	VPMADDWD Y2, y, y; \
	YKFS(j, dd, y, acc, D)

// A5Q(j, c, U, SH, h, AD, T, k0, F): chunks k0..k0+3 of sub-block j of
// half h (piece c's nibbles by U, the fifth bits by SH), the tokens'
// products by AD and float steps F by T (AD4 and YT4, or AD1 and YT1).
// A piece's sub-blocks go half by half (A5PIECE), the order of the
// one-token kernel's float steps.
#define A5Q(j, c, U, SH, h, AD, T, k0, F) \
	AKSC(j, h); \
	U(c, k0, h); A5((2048+64*k0+32*h), SH); AD(AMSET, (32*j+4*k0)); \
	U(c, (k0+1), h); A5((2048+64*k0+64+32*h), SH); AD(AMADD, (32*j+4*k0+4)); \
	U(c, (k0+2), h); A5((2048+64*k0+128+32*h), SH); AD(AMADD, (32*j+4*k0+8)); \
	U(c, (k0+3), h); A5((2048+64*k0+192+32*h), SH); AD(AMADD, (32*j+4*k0+12)); \
	T(F, j)

#define A5PIECE(c, SHL, SHH, h, AD, T) \
	A5Q((2*c), c, YKL, SHL, h, AD, T, 0, AKF5); \
	A5Q((2*c+1), c, YKH, SHH, h, AD, T, 0, AKF5); \
	A5Q((2*c), c, YKL, SHL, h, AD, T, 4, AKF); \
	A5Q((2*c+1), c, YKH, SHH, h, AD, T, 4, AKF)

#define A4Q5_K(h) \
	AKSB(h); \
	A5PIECE(0, SLL4, SLL3, h, AD4, YT4); \
	A5PIECE(1, SLL2, SLL1, h, AD4, YT4); \
	A5PIECE(2, NOSH, SRL1, h, AD4, YT4); \
	A5PIECE(3, SRL2, SRL3, h, AD4, YT4)

#define AD1(M, m) M(m(DI), Y4)

// Q4_0 and Q4_1 (the Q4_0 layout: a block of 32 is 4 chunks of low
// nibbles, then the same bytes' high ones): a block's 8 chunks' products
// summed in int16 (8*2*15*128 = 30720), then VPMADDWD by ones: the
// avxvnni kernels' integer sums and float steps (YQ4F), so their bits,
// which are the file kernels' (packExact).

// aones<>: int16 ones.
SPLAT32(aones<>, 0x0001000100010001)

#define AMD4(m) AD4(AMADD, m)
#define AMD1E(m) AMADD(m(DI), Y4)
#define AMD1O(m) AMADD(m(DI), Y5)
#define AW4 \
	VPMADDWD aones<>(SB), Y4, Y4; \
	VPMADDWD aones<>(SB), Y5, Y5; \
	VPMADDWD aones<>(SB), Y6, Y6; \
	VPMADDWD aones<>(SB), Y7, Y7
#define AW1 VPADDW Y5, Y4, Y4; VPMADDWD aones<>(SB), Y4, Y4

#define A4Q4(h, SC) SC(h); YZ4; YQ4B(h, YNO5, AMD4, AMD4); AW4; YT4(YQ4F, 0)
#define A1Q4(h, SC) SC(h); YZ1; YQ4B(h, YNO5, AMD1E, AMD1O); AW1; YT1(YQ4F, 0)
#define A4Q4_0(h) A4Q4(h, YOFF8)
#define A1Q4_0(h) A1Q4(h, YOFF8)
#define A4Q4_1(h) A4Q4(h, YMIN)
#define A1Q4_1(h) A1Q4(h, YMIN)

// Q5_0 and Q5_1: the fifth bits (A5) make a quant 0..31, so four chunks'
// pairs fit int16 (4*2*31*128 = 31744): a block's low-nibble chunks and
// its high-nibble ones are summed apart, each then by VPMADDWD by ones,
// and added: the same integer sums, the same float steps (YQ4F).
#define AD4H(M, m) \
	M(m(DI), Y2); \
	M(m(DI)(R8*1), Y3); \
	M(m(DI)(R8*2), Y13); \
	M(m(DI)(R9*1), Y15)

#define AQ5LO(h, AD) \
	YKL(0, 0, h); A5((256+32*h), SLL4); AD(AMSET, 0); \
	YKL(0, 1, h); A5((256+32*h), SLL3); AD(AMADD, 4); \
	YKL(0, 2, h); A5((256+32*h), SLL2); AD(AMADD, 8); \
	YKL(0, 3, h); A5((256+32*h), SLL1); AD(AMADD, 12)

#define AQ5HI(h, AD) \
	YKH(0, 0, h); A5((256+32*h), NOSH); AD(AMSET, 16); \
	YKH(0, 1, h); A5((256+32*h), SRL1); AD(AMADD, 20); \
	YKH(0, 2, h); A5((256+32*h), SRL2); AD(AMADD, 24); \
	YKH(0, 3, h); A5((256+32*h), SRL3); AD(AMADD, 28)

// AWADD(s, y): y += s's int16 pairs summed (s clobbered).
#define AWADD(s, y) VPMADDWD aones<>(SB), s, s; VPADDD s, y, y

#define A4Q5(h, SC) \
	AQ5LO(h, AD4); \
	AW4; \
	AQ5HI(h, AD4H); \
	AWADD(Y2, Y4); \
	AWADD(Y3, Y5); \
	AWADD(Y13, Y6); \
	AWADD(Y15, Y7); \
	SC(h); \
	YT4(YQ4F, 0)

#define AD1H(M, m) M(m(DI), Y5)

#define A1Q5(h, SC) \
	AQ5LO(h, AD1); \
	AQ5HI(h, AD1H); \
	VPMADDWD aones<>(SB), Y4, Y4; \
	AWADD(Y5, Y4); \
	SC(h); \
	YT1(YQ4F, 0)

#define A4Q5_0(h) A4Q5(h, YOFF16)
#define A1Q5_0(h) A1Q5(h, YOFF16)
#define A4Q5_1(h) A4Q5(h, YMIN)
#define A1Q5_1(h) A1Q5(h, YMIN)

#include "simd_packy_amd64.h"

TEXT ·gemm4Q4_0AVX2P(SB), NOSPLIT, $0-88
	YRUN(A4Q4_0, YST4, NOPF, NOPF, NOSET, 256, 32, 1, 4)

TEXT ·gemm1Q4_0AVX2P(SB), NOSPLIT, $0-88
	YRUN(A1Q4_0, YST1, PFQ4_0, PNQ4, GSET, 256, 32, 1, 4)

TEXT ·gemm4Q4_1AVX2P(SB), NOSPLIT, $0-88
	YRUN(A4Q4_1, YST4, NOPF, NOPF, NOSET, 256, 64, 1, 4)

TEXT ·gemm1Q4_1AVX2P(SB), NOSPLIT, $0-88
	YRUN(A1Q4_1, YST1, PFQ4_0, PNQ4, GSET, 256, 64, 1, 4)

TEXT ·gemm4Q5_0AVX2P(SB), NOSPLIT, $0-88
	YRUN(A4Q5_0, YST4, NOPF, NOPF, NOSET, 320, 32, 1, 4)

TEXT ·gemm1Q5_0AVX2P(SB), NOSPLIT, $0-88
	YRUN(A1Q5_0, YST1, PFQ5, PNQ5, GSET, 320, 32, 1, 4)

TEXT ·gemm4Q5_1AVX2P(SB), NOSPLIT, $0-88
	YRUN(A4Q5_1, YST4, NOPF, NOPF, NOSET, 320, 64, 1, 4)

TEXT ·gemm1Q5_1AVX2P(SB), NOSPLIT, $0-88
	YRUN(A1Q5_1, YST1, PFQ5, PNQ5, GSET, 320, 64, 1, 4)

TEXT ·gemm4Q4_KAVX2P(SB), NOSPLIT, $0-88
	YRUN(A4Q4_K, YST4, NOPF, NOPF, NOSET, 2048, 320, 8, 32)

TEXT ·gemm4Q5_KAVX2P(SB), NOSPLIT, $0-88
	YRUN(A4Q5_K, YST4, NOPF, NOPF, NOSET, 2560, 320, 8, 32)

// One pass: both halves of each chunk. CCH(F, S1, S2, c, k, SHL, SHH):
// chunk k of piece c, both halves, both nibbles, F merging a fifth bit
// (C5, shifted by SHL and SHH for the low and high sub-blocks) or not
// (NOC5); S1/S2 the low and high nibbles' products (set or add).
#define CCH(F, S1, S2, c, k, SHL, SHH) \
	VPBROADCASTD (64*c+4*k)(DI), Y1; \
	VPBROADCASTD (64*c+32+4*k)(DI), Y2; \
	VMOVDQU (512*c+64*k)(SI), Y12; \
	VPAND   Y14, Y12, Y0; \
	F((2048+64*k), SHL); \
	S1(Y4); \
	VPSRLW  $4, Y12, Y12; \
	VPAND   Y14, Y12, Y0; \
	F((2048+64*k), SHH); \
	S2(Y5); \
	VMOVDQU (512*c+64*k+32)(SI), Y12; \
	VPAND   Y14, Y12, Y0; \
	F((2048+64*k+32), SHL); \
	S1(Y6); \
	VPSRLW  $4, Y12, Y12; \
	VPAND   Y14, Y12, Y0; \
	F((2048+64*k+32), SHH); \
	S2(Y7)

#define NOC5(o, SH)
#define B1CH(S1, S2, c, k) CCH(NOC5, S1, S2, c, k, NOSH, NOSH)

// C1FIN(c, F): piece c's four sums (two sub-blocks, two halves) through
// F (AKF5D or AKFD).
#define C1FIN(c, F) \
	AKSCM((2*c), 0, Y15); \
	F((2*c), (BX), (DX), Y4, Y8, Y13); \
	AKSCM((2*c+1), 0, Y15); \
	F((2*c+1), (BX), (DX), Y5, Y8, Y13); \
	AKSCM((2*c), 1, Y11); \
	F((2*c), (BX), (DX), Y6, Y9, Y10); \
	AKSCM((2*c+1), 1, Y11); \
	F((2*c+1), (BX), (DX), Y7, Y9, Y10)

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
	C1FIN(c, AKFD)

#define YST1H(h) VMASKMOVPS Y9, Y0, 32(AX)

// K1RUN(SET, G, N, END, BODY, qbytes, sbytes, abytes): a one-pass
// one-token kernel: per group both halves' outputs in Y8 and Y9, BODY
// per super-block, over the layout of G, N and END (YRUNL's).
#define K1RUN(SET, G, N, END, BODY, qbytes, sbytes, abytes) \
	PKGP; \
	SET(qbytes, sbytes); \
	VMOVDQU ycon<>+0(SB), Y14; \
group: \
	G(qbytes); \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
loop: \
	BODY; \
	N(qbytes, sbytes, 8, abytes, loop); \
	YSTORE(0, YST1, full0); \
	YSTORE(1, YST1H, full1); \
	YGROUPS(END)

// K1KD: the super-block's d and dmin of both halves (Y13/Y15, Y10/Y11).
#define K1KD \
	VCVTPH2PS 256(R12), Y13; \
	VCVTPH2PS 288(R12), Y15; \
	VCVTPH2PS 272(R12), Y10; \
	VCVTPH2PS 304(R12), Y11

#define K1Q4_K K1KD; B1PIECE(0); B1PIECE(1); B1PIECE(2); B1PIECE(3)

TEXT ·gemm1Q4_KAVX2P(SB), NOSPLIT, $0-88
	K1RUN(NOSET, PKGROUP, PKNEXT, PKEND, K1Q4_K, 2048, 320, 32)

// Q6_K over the AVX-512 kernels' packed layout (simd_pack_amd64.h's Q6_K:
// per super-block 4 pieces of low nibbles, 2 of high bits, then 16 rows'
// int8 scales of each sub-block of 16 and d), a chunk half's 8 lanes 8
// rows as above. A quant is 0..63 (q+32), so a pair of products fits
// int16 and two chunks' pairs do too (4*63*128 = 32256): two chunks' sums
// (VPADDW) are multiplied by the sub-block's scales in both words of each
// row's dword (VPMADDWD), the block's four such products added, and 32*Σa
// times each sub-block's scale taken out (the activation sums of 16 times
// 32, Act.I; VPMULLD): the AVX-512 kernels' integer per block and row,
// sc_a*(S_a-32Σa_a) + sc_b*(S_b-32Σa_b), and their float steps, acc =
// fma(float(that), d*d_a, acc): the avx512 path's bits, alone or batched.
//
// Registers: Y0/Y1 a pair of chunks, Y2/Y3 temporaries (the activation
// dwords), Y12 a sub-block's doubled scales (then d), Y13 = 0x30 bytes,
// Y14 = 0x0f bytes; four tokens: Y4-Y7 their block sums, Y8-Y11 their
// outputs.

// Q6YU(loff, hoff, LSH, HSH, o, dst, tmp): dst = the 8 rows' 6-bit quants
// of the chunk half at o: LSH(a, dst) the low nibbles of the piece at
// loff, shifted or not (Q6L0, Q6L4), HSH(a, tmp) the high bits of the
// piece at hoff moved to bits 4-5 (Q6H0, Q6HL2, Q6HL4, Q6HR2).
#define Q6YU(loff, hoff, LSH, HSH, o, dst, tmp) \
	LSH((loff+o)(SI), dst); \
	HSH((hoff+o)(SI), tmp); \
	VPOR tmp, dst, dst

#define Q6L0(a, y) VPAND a, Y14, y
#define Q6L4(a, y) VMOVDQU a, y; VPSRLW $4, y, y; VPAND Y14, y, y
#define Q6H0(a, y) VPAND a, Y13, y
#define Q6HL2(a, y) VMOVDQU a, y; VPSLLW $2, y, y; VPAND Y13, y, y
#define Q6HL4(a, y) VMOVDQU a, y; VPSLLW $4, y, y; VPAND Y13, y, y
#define Q6HR2(a, y) VMOVDQU a, y; VPSRLW $2, y, y; VPAND Y13, y, y

// Q6SCD(o, y, t): y = the 8 rows' int8 scales at o(R12), each in both
// words of its dword (sign-extended).
#define Q6SCD(o, y, t) \
	VPMOVSXBD o(R12), y; \
	VPSLLD    $16, y, t; \
	VPBLENDW  $0xaa, t, y, y

// Q6PT(q, o, s, M, b): token b's block sum (M: set or add) += the pair of
// chunks in Y0/Y1 times its activation dwords at o and o+4 of q, scaled by
// s.
#define Q6PT(q, o, s, M, b) \
	VPBROADCASTD o q, Y2; \
	VPMADDUBSW   Y2, Y0, Y2; \
	VPBROADCASTD (o+4) q, Y3; \
	VPMADDUBSW   Y3, Y1, Y3; \
	VPADDW       Y3, Y2, Y2; \
	M(s, Y2, b)

#define Q6SET(s, p, b) VPMADDWD s, p, b
#define Q6ADD(s, p, b) VPMADDWD s, p, p; VPADDD p, b, b

// Q6P4(j, loff, hoff, LSH, HSH, k, h, M): chunks k and k+1 of block j,
// half h, for the four tokens.
#define Q6P4(j, loff, hoff, LSH, HSH, k, h, M) \
	Q6YU(loff, hoff, LSH, HSH, (64*k+32*h), Y0, Y2); \
	Q6YU(loff, hoff, LSH, HSH, (64*k+64+32*h), Y1, Y2); \
	Q6PT((DI), (32*j+4*k), Y12, M, Y4); \
	Q6PT((DI)(R8*1), (32*j+4*k), Y12, M, Y5); \
	Q6PT((DI)(R8*2), (32*j+4*k), Y12, M, Y6); \
	Q6PT((DI)(R9*1), (32*j+4*k), Y12, M, Y7)

// Q6FIN(j, dd, ss, b, acc): a token's block sum b less 32Σa times the
// sub-blocks' scales (Y0, Y1), into its output with d (Y12) times d_a;
// Q6FIND with d in d.
#define Q6FIN(j, dd, ss, b, acc) Q6FIND(j, dd, ss, b, acc, Y12)
#define Q6FIND(j, dd, ss, b, acc, d) \
	VPBROADCASTD (8*j) ss, Y2; \
	VPMULLD      Y0, Y2, Y2; \
	VPSUBD       Y2, b, b; \
	VPBROADCASTD (8*j+4) ss, Y2; \
	VPMULLD      Y1, Y2, Y2; \
	VPSUBD       Y2, b, b; \
	VCVTDQ2PS    b, b; \
	VBROADCASTSS (4*j) dd, Y2; \
	VMULPS       d, Y2, Y2; \
	VFMADD231PS  Y2, b, acc

// Q6PRE(j, h): Y0/Y1 = the int32 scales of block j's sub-blocks, Y12 = d.
#define Q6PRE(j, h) \
	VPMOVSXBD (32*j+8*h)(R12), Y0; \
	VPMOVSXBD (32*j+16+8*h)(R12), Y1; \
	VCVTPH2PS (256+16*h)(R12), Y12

// The activation sums are per 16: their token stride is twice R10.
#define Q6FIN4(j) \
	Q6FIN(j, (BX), (DX), Y4, Y8); \
	Q6FIN(j, (BX)(R10*1), (DX)(R10*2), Y5, Y9); \
	Q6FIN(j, (BX)(R10*2), (DX)(R10*4), Y6, Y10); \
	Q6FIN(j, (BX)(R11*1), (DX)(R11*2), Y7, Y11)

#define Q6B4(j, loff, hoff, LSH, HSH, h) \
	Q6SCD((32*j+8*h), Y12, Y0); \
	Q6P4(j, loff, hoff, LSH, HSH, 0, h, Q6SET); \
	Q6P4(j, loff, hoff, LSH, HSH, 2, h, Q6ADD); \
	Q6SCD((32*j+16+8*h), Y12, Y0); \
	Q6P4(j, loff, hoff, LSH, HSH, 4, h, Q6ADD); \
	Q6P4(j, loff, hoff, LSH, HSH, 6, h, Q6ADD); \
	Q6PRE(j, h); \
	Q6FIN4(j)

// A super-block's eight blocks (simd_pack_amd64.h's Q6KSB).
#define Q6SBY(B, h) \
	B(0, 0, 2048, Q6L0, Q6HL4, h); \
	B(1, 512, 2048, Q6L0, Q6HL2, h); \
	B(2, 0, 2048, Q6L4, Q6H0, h); \
	B(3, 512, 2048, Q6L4, Q6HR2, h); \
	B(4, 1024, 2560, Q6L0, Q6HL4, h); \
	B(5, 1536, 2560, Q6L0, Q6HL2, h); \
	B(6, 1024, 2560, Q6L4, Q6H0, h); \
	B(7, 1536, 2560, Q6L4, Q6HR2, h)

#define A4Q6_K(h) Q6SBY(Q6B4, h)

// Q6C30: Y13 = 0x30 bytes (CX free).
#define Q6C30(qbytes, sbytes) \
	MOVL         $0x30303030, CX; \
	VMOVD        CX, X13; \
	VPBROADCASTD X13, Y13

TEXT ·gemm4Q6_KAVX2P(SB), NOSPLIT, $0-88
	YRUNL(PKGROUPI, PKNEXTI, 3360, PKENDI, A4Q6_K, YST4, NOPF, NOPF, Q6C30, 3072, 288, 8, 64)

// The one-token kernel: both halves in one pass, as Q4_K's. Y2/Y3 the
// activation dwords, Y4 a temporary, Y5/Y6 the halves' block sums, Y7/Y15
// their d, Y8/Y9 their outputs, Y10/Y11 their doubled scales.
#define Q61H(loff, hoff, LSH, HSH, k, h, s, M, b) \
	Q6YU(loff, hoff, LSH, HSH, (64*k+32*h), Y0, Y4); \
	Q6YU(loff, hoff, LSH, HSH, (64*k+64+32*h), Y1, Y4); \
	VPMADDUBSW Y2, Y0, Y0; \
	VPMADDUBSW Y3, Y1, Y1; \
	VPADDW     Y1, Y0, Y0; \
	M(s, Y0, b)

#define Q61P(j, loff, hoff, LSH, HSH, k, M) \
	VPBROADCASTD (32*j+4*k)(DI), Y2; \
	VPBROADCASTD (32*j+4*k+4)(DI), Y3; \
	Q61H(loff, hoff, LSH, HSH, k, 0, Y10, M, Y5); \
	Q61H(loff, hoff, LSH, HSH, k, 1, Y11, M, Y6)

// Q61FIN(j, h, d, b, acc): Q6FIN for half h (d its d).
#define Q61FIN(j, h, d, b, acc) \
	VPMOVSXBD (32*j+8*h)(R12), Y0; \
	VPMOVSXBD (32*j+16+8*h)(R12), Y1; \
	Q6FIND(j, (BX), (DX), b, acc, d)

#define Q6B1(j, loff, hoff, LSH, HSH, h) \
	PFJQ6_K(j); \
	Q6SCD((32*j), Y10, Y4); \
	Q6SCD((32*j+8), Y11, Y4); \
	Q61P(j, loff, hoff, LSH, HSH, 0, Q6SET); \
	Q61P(j, loff, hoff, LSH, HSH, 2, Q6ADD); \
	Q6SCD((32*j+16), Y10, Y4); \
	Q6SCD((32*j+24), Y11, Y4); \
	Q61P(j, loff, hoff, LSH, HSH, 4, Q6ADD); \
	Q61P(j, loff, hoff, LSH, HSH, 6, Q6ADD); \
	Q61FIN(j, 0, Y7, Y5, Y8); \
	Q61FIN(j, 1, Y15, Y6, Y9)

#define K1Q6_K \
	VCVTPH2PS 256(R12), Y7; \
	VCVTPH2PS 272(R12), Y15; \
	Q6SBY(Q6B1, 0)

TEXT ·gemm1Q6_KAVX2P(SB), NOSPLIT, $0-88
	K1RUN(Q6C30, PKGROUPI, PKNEXTI, PKENDI, K1Q6_K, 3072, 288, 64)

// The one-token Q5_K kernel: Q4_K's one pass (both halves of each chunk,
// both nibbles) with the fifth bits (C5), each sub-block's int16 sums
// taken to the float steps after four chunks (AKF5) and after eight
// (AKF), in A5PIECE's order.
#define C5(o, SH) A5T(o, SH, Y3)

#define C1CH(S1, S2, c, k, SHL, SHH) CCH(C5, S1, S2, c, k, SHL, SHH)

#define C1PIECE(c, SHL, SHH) \
	PFJQ4_K((2*c)); \
	PFJQ4_K((2*c+1)); \
	C1CH(BSET, BSET2, c, 0, SHL, SHH); \
	C1CH(BADD, BADD2, c, 1, SHL, SHH); \
	C1CH(BADD, BADD2, c, 2, SHL, SHH); \
	C1CH(BADD, BADD2, c, 3, SHL, SHH); \
	C1FIN(c, AKF5D); \
	C1CH(BSET, BSET2, c, 4, SHL, SHH); \
	C1CH(BADD, BADD2, c, 5, SHL, SHH); \
	C1CH(BADD, BADD2, c, 6, SHL, SHH); \
	C1CH(BADD, BADD2, c, 7, SHL, SHH); \
	C1FIN(c, AKFD)

#define K1Q5_K \
	K1KD; \
	C1PIECE(0, SLL4, SLL3); \
	C1PIECE(1, SLL2, SLL1); \
	C1PIECE(2, NOSH, SRL1); \
	C1PIECE(3, SRL2, SRL3)

TEXT ·gemm1Q5_KAVX2P(SB), NOSPLIT, $0-88
	K1RUN(NOSET, PKGROUP, PKNEXT, PKEND, K1Q5_K, 2560, 320, 32)
