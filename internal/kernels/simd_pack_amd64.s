//go:build amd64 && !purego

#include "textflag.h"

// PMAC: one VPDPBUSD with the activation bytes broadcast from memory.
#define PMAC(m, w, y) VPDPBUSD.BCST m, w, y

#include "simd_pack_amd64.h"

// The gemm42 kernels are the gemm4 ones on two groups at a time (an even
// number of them): each chunk of group A (Z0) and of group B (Z1, gbytes
// = R14 further) times the four tokens' activation dwords broadcast once
// into Z2-Z5, so 8 VPDPBUSD need 6 loads where gemm4 has 4 for 5 (gemm4
// is bound by its loads: Q8_0 at 52-64% of the VNNI ceiling on one Zen 5
// core, gemm42 at 71%). A block is walked chunk by chunk, each
// unpacked once per group. Every output gets gemm4's operations in the
// same order: the same bits. Q6_K has none (its two sub-block sums per
// token would need 16 registers).
//
// Registers: Z0/Z1 the chunks of A and B, Z2-Z5 the tokens' dwords, Z6/Z7
// scratch, Z8/Z9 the rows' scales of A and B, Z10/Z11 their offset or
// minimum terms, Z12 a temporary, Z13 = 0x0f bytes, Z14 = 0x10 bytes,
// Z15 = -8.0 or -16.0, Z16-Z19 the outputs of A (four tokens), Z20-Z23
// those of B, Z24-Z27 and Z28-Z31 their integer sums.

// PPD(m): the chunks' products with the activation dwords at m.
#define PPD(m) \
	VPBROADCASTD m(DI), Z2; \
	VPBROADCASTD m(DI)(R8*1), Z3; \
	VPBROADCASTD m(DI)(R8*2), Z4; \
	VPBROADCASTD m(DI)(R9*1), Z5; \
	VPDPBUSD     Z2, Z0, Z24; \
	VPDPBUSD     Z3, Z0, Z25; \
	VPDPBUSD     Z4, Z0, Z26; \
	VPDPBUSD     Z5, Z0, Z27; \
	VPDPBUSD     Z2, Z1, Z28; \
	VPDPBUSD     Z3, Z1, Z29; \
	VPDPBUSD     Z4, Z1, Z30; \
	VPDPBUSD     Z5, Z1, Z31

// The chunks at o of both groups: as stored (PW8), low nibbles (PWL),
// high nibbles (PWH); PF5(o, SH) merges fifth bits at o moved by SH to
// bit 4, PNO5 is the 4-bit types' nothing.
#define PW8(o) VMOVDQU32 o(SI), Z0; VMOVDQU32 o(SI)(R14*1), Z1
#define PWL(o) VPANDD o(SI), Z13, Z0; VPANDD o(SI)(R14*1), Z13, Z1

#define PWH(o) \
	VPSRLW $4, o(SI), Z0; \
	VPSRLW $4, o(SI)(R14*1), Z1; \
	VPANDD Z13, Z0, Z0; \
	VPANDD Z13, Z1, Z1

#define PF5(o, SH) \
	VMOVDQU32  o(SI), Z6; \
	VMOVDQU32  o(SI)(R14*1), Z7; \
	SH(Z6); \
	SH(Z7); \
	VPTERNLOGD $0xf8, Z14, Z6, Z0; \
	VPTERNLOGD $0xf8, Z14, Z7, Z1

#define PNO5(o, SH)

#define PZ \
	VPXORD Z24, Z24, Z24; \
	VPXORD Z25, Z25, Z25; \
	VPXORD Z26, Z26, Z26; \
	VPXORD Z27, Z27, Z27; \
	VPXORD Z28, Z28, Z28; \
	VPXORD Z29, Z29, Z29; \
	VPXORD Z30, Z30, Z30; \
	VPXORD Z31, Z31, Z31

// Blocks of 32: Q8_0's, and Q4_0's layout with fifth bits F.
#define PQ8B(F) \
	PW8(0); PPD(0); \
	PW8(64); PPD(4); \
	PW8(128); PPD(8); \
	PW8(192); PPD(12); \
	PW8(256); PPD(16); \
	PW8(320); PPD(20); \
	PW8(384); PPD(24); \
	PW8(448); PPD(28)

#define PQ4B(F) \
	PWL(0); F(256, SLL4); PPD(0); \
	PWL(64); F(256, SLL3); PPD(4); \
	PWL(128); F(256, SLL2); PPD(8); \
	PWL(192); F(256, SLL1); PPD(12); \
	PWH(0); F(256, NOSH); PPD(16); \
	PWH(64); F(256, SRL1); PPD(20); \
	PWH(128); F(256, SRL2); PPD(24); \
	PWH(192); F(256, SRL3); PPD(28)

// The rows' scales: Z8/Z9 = d, Z10/Z11 = -8*d or -16*d (Z15) or the
// minimums; PKSC(j) d*sc_j and dmin*m_j of sub-block j.
#define PSC8 VCVTPH2PS (R12), Z8; VCVTPH2PS (R12)(R14*1), Z9
#define POFF PSC8; VMULPS Z15, Z8, Z10; VMULPS Z15, Z9, Z11
#define PMIN PSC8; VCVTPH2PS 32(R12), Z10; VCVTPH2PS 32(R12)(R14*1), Z11

#define PKSC(j) \
	VPMOVZXBD (16*j)(R12), Z8; \
	VPMOVZXBD (16*j)(R12)(R14*1), Z9; \
	VPMOVZXBD (128+16*j)(R12), Z10; \
	VPMOVZXBD (128+16*j)(R12)(R14*1), Z11; \
	VCVTDQ2PS Z8, Z8; \
	VCVTDQ2PS Z9, Z9; \
	VCVTDQ2PS Z10, Z10; \
	VCVTDQ2PS Z11, Z11; \
	VCVTPH2PS 256(R12), Z12; \
	VMULPS    Z12, Z8, Z8; \
	VCVTPH2PS 256(R12)(R14*1), Z12; \
	VMULPS    Z12, Z9, Z9; \
	VCVTPH2PS 288(R12), Z12; \
	VMULPS    Z12, Z10, Z10; \
	VCVTPH2PS 288(R12)(R14*1), Z12; \
	VMULPS    Z12, Z11, Z11

// The float steps of one token and group (gemm4's Q8TOKW, Q4TOKW and
// KTOKW after the integer sum), and PF4 running one on the eight.
#define PQ8F(j, sc, off, dd, ss, y, acc) \
	VPSUBD.BCST ss, y, y; \
	VCVTDQ2PS   y, y; \
	VMULPS.BCST dd, sc, Z12; \
	VFMADD231PS Z12, y, acc

#define PQ4F(j, sc, off, dd, ss, y, acc) \
	VCVTDQ2PS        y, y; \
	VMULPS.BCST      dd, sc, Z12; \
	VFMADD231PS      Z12, y, acc; \
	VFMADD231PS.BCST ss, off, acc

#define PKF(j, sc, off, dd, ss, y, acc) \
	VCVTDQ2PS         y, y; \
	VMULPS.BCST       (4*j) dd, sc, Z12; \
	VFMADD231PS       Z12, y, acc; \
	VFNMADD231PS.BCST (4*j) ss, off, acc

#define PF4(F, j) \
	F(j, Z8, Z10, (BX), (DX), Z24, Z16); \
	F(j, Z8, Z10, (BX)(R10*1), (DX)(R10*1), Z25, Z17); \
	F(j, Z8, Z10, (BX)(R10*2), (DX)(R10*2), Z26, Z18); \
	F(j, Z8, Z10, (BX)(R11*1), (DX)(R11*1), Z27, Z19); \
	F(j, Z9, Z11, (BX), (DX), Z28, Z20); \
	F(j, Z9, Z11, (BX)(R10*1), (DX)(R10*1), Z29, Z21); \
	F(j, Z9, Z11, (BX)(R10*2), (DX)(R10*2), Z30, Z22); \
	F(j, Z9, Z11, (BX)(R11*1), (DX)(R11*1), Z31, Z23)

// PBQ: a block of 32 (scales SC, chunks B with fifth bits F, float step
// TF). PKSUB: sub-block j of a K-quant super-block (piece c's nibbles by
// W, fifth bits F shifted by SH); PBK(F) the super-block.
#define PBQ(SC, B, F, TF) SC; PZ; B(F); PF4(TF, 0)

#define PKSUB(j, c, W, F, SH) \
	PKSC(j); \
	PZ; \
	W((512*c)); F(2048, SH); PPD((32*j)); \
	W((512*c+64)); F((2048+64), SH); PPD((32*j+4)); \
	W((512*c+128)); F((2048+128), SH); PPD((32*j+8)); \
	W((512*c+192)); F((2048+192), SH); PPD((32*j+12)); \
	W((512*c+256)); F((2048+256), SH); PPD((32*j+16)); \
	W((512*c+320)); F((2048+320), SH); PPD((32*j+20)); \
	W((512*c+384)); F((2048+384), SH); PPD((32*j+24)); \
	W((512*c+448)); F((2048+448), SH); PPD((32*j+28)); \
	PF4(PKF, j)

#define PBK(F) \
	PKSUB(0, 0, PWL, F, SLL4); \
	PKSUB(1, 0, PWH, F, SLL3); \
	PKSUB(2, 1, PWL, F, SLL2); \
	PKSUB(3, 1, PWH, F, SLL1); \
	PKSUB(4, 2, PWL, F, NOSH); \
	PKSUB(5, 2, PWH, F, SRL1); \
	PKSUB(6, 3, PWL, F, SRL2); \
	PKSUB(7, 3, PWH, F, SRL3)

#define P42Q8_0 PBQ(PSC8, PQ8B, PNO5, PQ8F)
#define P42Q4_0 PBQ(POFF, PQ4B, PNO5, PQ4F)
#define P42Q4_1 PBQ(PMIN, PQ4B, PNO5, PQ4F)
#define P42Q5_0 PBQ(POFF, PQ4B, PF5, PQ4F)
#define P42Q5_1 PBQ(PMIN, PQ4B, PF5, PQ4F)
#define P42Q4_K PBK(PNO5)
#define P42Q5_K PBK(PF5)

// PKPAIR(BODY, ...): the pair and block loops (PKRUN4's arguments), the
// outputs of B under the caller's mask on the last pair; c the -8.0 or
// -16.0 of Z15.
#define PKPAIR(BODY, c, qbytes, sbytes, asub, abytes) PKPAIRL(PKGROUP, PKNEXT, PKEND, BODY, c, qbytes, sbytes, asub, abytes)

// PKPAIRL: PKPAIR over the layout of GRP, NXT and END (PKRUN4L).
#define PKPAIRL(GRP, NXT, END, BODY, c, qbytes, sbytes, asub, abytes) \
	PKARGS; \
	CONST32(0x0f0f0f0f, Z13); \
	CONST32(0x10101010, Z14); \
	CONST32(c, Z15); \
	MOVQ    nb+8(FP), R14; \
	IMULQ   $(qbytes+sbytes), R14; \
pair: \
	GRP(qbytes); \
	VPXORD  Z16, Z16, Z16; \
	VPXORD  Z17, Z17, Z17; \
	VPXORD  Z18, Z18, Z18; \
	VPXORD  Z19, Z19, Z19; \
	VPXORD  Z20, Z20, Z20; \
	VPXORD  Z21, Z21, Z21; \
	VPXORD  Z22, Z22, Z22; \
	VPXORD  Z23, Z23, Z23; \
ploop: \
	BODY; \
	NXT(qbytes, sbytes, asub, abytes, ploop); \
	END; \
	ADDQ    R14, SI; \
	LEAQ    (R13)(R13*2), CX; \
	VMOVUPS Z16, (AX); \
	VMOVUPS Z17, (AX)(R13*1); \
	VMOVUPS Z18, (AX)(R13*2); \
	VMOVUPS Z19, (AX)(CX*1); \
	CMPQ    R15, $2; \
	JNE     pfull; \
	MOVQ    mask+80(FP), DX; \
	KMOVW   DX, K1; \
pfull: \
	VMOVUPS Z20, K1, 64(AX); \
	VMOVUPS Z21, K1, 64(AX)(R13*1); \
	VMOVUPS Z22, K1, 64(AX)(R13*2); \
	VMOVUPS Z23, K1, 64(AX)(CX*1); \
	ADDQ    $128, AX; \
	SUBQ    $2, R15; \
	JNZ     pair; \
	VZEROUPPER; \
	RET

// The kernels, declared in pack_amd64.go as
// func(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
// (gemm4<type> for four tokens, gemm1<type> for one: GEMM4<type> and
// GEMM1<type> in simd_pack_amd64.h).

// EVEX38(pp, op, dst, src1, src2): EVEX.512.pp.0F38.W0 op /r on zmm
// registers (numbers 0-31: dst in ModRM.reg, src1 in vvvv, src2 in
// ModRM.rm), written as bytes: Go's assembler has no AVX512-BF16.
#define EVEX38(pp, op, dst, src1, src2) \
	BYTE $0x62; \
	BYTE $(0x02 | ((((dst)>>3)&1)^1)<<7 | ((((src2)>>4)&1)^1)<<6 | ((((src2)>>3)&1)^1)<<5 | ((((dst)>>4)&1)^1)<<4); \
	BYTE $((((15-((src1)&15))&15)<<3) | 4 | (pp)); \
	BYTE $(0x40 | ((((src1)>>4)&1)^1)<<3); \
	BYTE $(op); \
	BYTE $(0xc0 | (((dst)&7)<<3) | ((src2)&7))

// VDPBF16PS Zsrc2, Zsrc1, Zdst (F3 52): each lane of dst += the products of
// its two bfloat16 pairs. VCVTNEPS2BF16 Zsrc, Ydst (F3 72): 16 floats to
// bfloat16, rounded to nearest even (denormals to zero).
#define VDPBF16PS_Z(src2, src1, dst) EVEX38(2, 0x52, dst, src1, src2)
#define VCVTNEPS2BF16_Z(src, dst) EVEX38(2, 0x72, dst, 0, src)

// BF16 weights against bfloat16 activations (the avx512 path where the CPU
// has AVX512-BF16): the packed BF16 layout (16 rows' values column by
// column), columns c and c+1 interleaved per row by one VPERMW (Z29 the
// index), so that VDPBF16PS multiplies each row's pair with the token's
// pair (a dword broadcast from its bfloat16 activations) into the row's
// lane: 32 multiply-adds per instruction where FMA does 16, and no
// conversion of the weights. Every output keeps two partial sums (columns
// c%4 < 2 and the others) added at the end: the same operations for one
// token or four. The activations are rounded to bfloat16 (as llama.cpp's
// BF16 kernels do): the results agree with the float32 ones within that
// rounding, not bit for bit.
#define BDTOK(q, a, b) \
	VPBROADCASTD 0 q, Z2; \
	VDPBF16PS_Z(2, 0, a); \
	VPBROADCASTD 4 q, Z3; \
	VDPBF16PS_Z(3, 1, b)

#define BDTOK4 \
	BDTOK((DI), 16, 17); \
	BDTOK((DI)(R8*1), 18, 19); \
	BDTOK((DI)(R8*2), 20, 21); \
	BDTOK((DI)(R9*1), 22, 23)

#define BDTOK1 PREFETCHT0 (PKPFD)(SI); PREFETCHT0 (PKPFD+64)(SI); BDTOK((DI), 16, 17)

#define BDZERO4 FZERO(Z16, Z17, Z18, Z19); FZERO(Z20, Z21, Z22, Z23)
#define BDZERO1 VPXORD Z16, Z16, Z16; VPXORD Z17, Z17, Z17

#define BDSUM4 \
	VADDPS Z17, Z16, Z16; \
	VADDPS Z19, Z18, Z18; \
	VADDPS Z21, Z20, Z20; \
	VADDPS Z23, Z22, Z22

#define BDSUM1 VADDPS Z17, Z16, Z16

#define BDSTORE4 \
	VMOVUPS Z16, K1, (AX); \
	VMOVUPS Z18, K1, (AX)(R13*1); \
	VMOVUPS Z20, K1, (AX)(R13*2); \
	VMOVUPS Z22, K1, (AX)(R14*1)

// BDLOAD: 4 columns of 16 rows as two registers of row pairs (Z29 the
// index).
#define BDLOAD VPERMW 0(SI), Z29, Z0; VPERMW 64(SI), Z29, Z1

// bdperm<>: word 2r is r (column c, row r), word 2r+1 is 16+r (column c+1).
DATA bdperm<>+0(SB)/8, $0x0011000100100000
DATA bdperm<>+8(SB)/8, $0x0013000300120002
DATA bdperm<>+16(SB)/8, $0x0015000500140004
DATA bdperm<>+24(SB)/8, $0x0017000700160006
DATA bdperm<>+32(SB)/8, $0x0019000900180008
DATA bdperm<>+40(SB)/8, $0x001b000b001a000a
DATA bdperm<>+48(SB)/8, $0x001d000d001c000c
DATA bdperm<>+56(SB)/8, $0x001f000f001e000e
GLOBL bdperm<>(SB), RODATA|NOPTR, $64


TEXT ·gemm4Q4_0VNNI(SB), NOSPLIT, $0-88
	GEMM4Q4_0

TEXT ·gemm1Q4_0VNNI(SB), NOSPLIT, $0-88
	GEMM1Q4_0

TEXT ·gemm4Q4_1VNNI(SB), NOSPLIT, $0-88
	GEMM4Q4_1

TEXT ·gemm1Q4_1VNNI(SB), NOSPLIT, $0-88
	GEMM1Q4_1

TEXT ·gemm4Q5_0VNNI(SB), NOSPLIT, $0-88
	GEMM4Q5_0

TEXT ·gemm1Q5_0VNNI(SB), NOSPLIT, $0-88
	GEMM1Q5_0

TEXT ·gemm4Q5_1VNNI(SB), NOSPLIT, $0-88
	GEMM4Q5_1

TEXT ·gemm1Q5_1VNNI(SB), NOSPLIT, $0-88
	GEMM1Q5_1

TEXT ·gemm4Q8_0VNNI(SB), NOSPLIT, $0-88
	GEMM4Q8_0

TEXT ·gemm1Q8_0VNNI(SB), NOSPLIT, $0-88
	GEMM1Q8_0

TEXT ·gemm4Q4_KVNNI(SB), NOSPLIT, $0-88
	GEMM4Q4_K

TEXT ·gemm1Q4_KVNNI(SB), NOSPLIT, $0-88
	GEMM1Q4_K

TEXT ·gemm4Q5_KVNNI(SB), NOSPLIT, $0-88
	GEMM4Q5_K

TEXT ·gemm1Q5_KVNNI(SB), NOSPLIT, $0-88
	GEMM1Q5_K

TEXT ·gemm4Q6_KVNNI(SB), NOSPLIT, $0-88
	GEMM4Q6_K

TEXT ·gemm1Q6_KVNNI(SB), NOSPLIT, $0-88
	GEMM1Q6_K

TEXT ·gemm4F16AVX512(SB), NOSPLIT, $0-88
	GEMM4F16

TEXT ·gemm1F16AVX512(SB), NOSPLIT, $0-88
	GEMM1F16

TEXT ·gemm4BF16AVX512(SB), NOSPLIT, $0-88
	GEMM4BF16

TEXT ·gemm1BF16AVX512(SB), NOSPLIT, $0-88
	GEMM1BF16

// func int8MulPeakVNNI(n int)
// n rounds of 8 independent VPDPBUSD on 512-bit registers (64
// multiply-adds each): the int8 multiply-add rate of the packed kernels'
// instruction.
TEXT ·int8MulPeakVNNI(SB), NOSPLIT, $0-8
	MOVQ   n+0(FP), CX
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9

vnniloop:
	VPDPBUSD Z8, Z9, Z0
	VPDPBUSD Z8, Z9, Z1
	VPDPBUSD Z8, Z9, Z2
	VPDPBUSD Z8, Z9, Z3
	VPDPBUSD Z8, Z9, Z4
	VPDPBUSD Z8, Z9, Z5
	VPDPBUSD Z8, Z9, Z6
	VPDPBUSD Z8, Z9, Z7
	DECQ     CX
	JNZ      vnniloop
	VZEROUPPER
	RET

// func actSumsAVX2(qs *int8, out *int32, n, per, mul int)
// out[g] = mul * Σ qs[per*g:per*(g+1)] for g < n, per a multiple of 16:
// the bytes flipped to unsigned (x^0x80 = x+128) and summed by VPSADBW
// against zero 16 at a time, minus 128*per.
TEXT ·actSumsAVX2(SB), NOSPLIT, $0-40
	MOVQ         qs+0(FP), SI
	MOVQ         out+8(FP), DI
	MOVQ         n+16(FP), CX
	MOVQ         per+24(FP), R9
	MOVQ         mul+32(FP), R8
	MOVQ         R9, R10
	SHLQ         $7, R10
	SHRQ         $4, R9
	MOVL         $0x80808080, AX
	MOVD         AX, X15
	VPBROADCASTD X15, X15
	VPXOR        X14, X14, X14
	TESTQ        CX, CX
	JZ           sumsdone

sumsloop:
	VPXOR   X0, X0, X0
	MOVQ    R9, DX

sumspiece:
	VPXOR   (SI), X15, X1
	VPSADBW X14, X1, X1
	VPADDQ  X1, X0, X0
	ADDQ    $16, SI
	DECQ    DX
	JNZ     sumspiece

	VPSHUFD $0x4e, X0, X1
	VPADDQ  X1, X0, X0
	VMOVQ   X0, AX
	SUBQ    R10, AX
	IMULQ   R8, AX
	MOVL    AX, (DI)
	ADDQ    $4, DI
	DECQ    CX
	JNZ     sumsloop

sumsdone:
	VZEROUPPER
	RET

TEXT ·gemm42Q8_0VNNI(SB), NOSPLIT, $0-88
	PKPAIR(P42Q8_0, 0, 512, 32, 1, 4)

TEXT ·gemm42Q4_0VNNI(SB), NOSPLIT, $0-88
	PKPAIR(P42Q4_0, 0xc1000000, 256, 32, 1, 4)

TEXT ·gemm42Q4_1VNNI(SB), NOSPLIT, $0-88
	PKPAIR(P42Q4_1, 0, 256, 64, 1, 4)

TEXT ·gemm42Q5_0VNNI(SB), NOSPLIT, $0-88
	PKPAIR(P42Q5_0, 0xc1800000, 320, 32, 1, 4)

TEXT ·gemm42Q5_1VNNI(SB), NOSPLIT, $0-88
	PKPAIR(P42Q5_1, 0, 320, 64, 1, 4)

TEXT ·gemm42Q4_KVNNI(SB), NOSPLIT, $0-88
	PKPAIR(P42Q4_K, 0, 2048, 320, 8, 32)

TEXT ·gemm42Q5_KVNNI(SB), NOSPLIT, $0-88
	PKPAIR(P42Q5_K, 0, 2560, 320, 8, 32)

TEXT ·gemm4BF16DP(SB), NOSPLIT, $0-88
	PKARGS
	VMOVDQU64 bdperm<>(SB), Z29
	FGROUP(BDLOAD, 8, BDTOK4, BDZERO4, BDSUM4, BDSTORE4)

TEXT ·gemm1BF16DP(SB), NOSPLIT, $0-88
	PKARGS
	VMOVDQU64 bdperm<>(SB), Z29
	FGROUP(BDLOAD, 8, BDTOK1, BDZERO1, BDSUM1, FSTORE1)

// func f32ToBF16AVX512(dst *uint16, src *float32, n int)
// dst[i] = src[i] rounded to bfloat16 (VCVTNEPS2BF16) for i < n&^15.
TEXT ·f32ToBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   bfdone

bfloop:
	VMOVUPS (SI), Z0
	VCVTNEPS2BF16_Z(0, 1)
	VMOVDQU Y1, (DI)
	ADDQ    $64, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     bfloop

bfdone:
	VZEROUPPER
	RET

// The small-batch Q8_0 kernels gemmT<k>Q8_0 (k = 2..8 tokens, a
// speculative verification's k+1 rows): each chunk of a group is loaded
// once and multiplied with the k tokens' activation dwords (broadcast
// from memory), so the weights stream once for all k tokens where gemm4
// and gemm1 passes read them once per pass. The activations are
// interleaved by block (actInterleave: block b of token t's quants at
// 32*(k*b+t), its scale and negated sum at 4*(k*b+t)), so that every token is a
// constant displacement from one pointer. Every output gets gemm4's
// integer sum and float steps (Q8TOKW) in the same order: the same bits
// as one token alone.
//
// Registers: as PKGP, Z0 the chunk, Z8 the rows' scales, Z9 a temporary,
// Z16-Z23 the tokens' integer sums, Z24-Z31 their outputs; CX the output
// pointer of tokens 4-7 at the stores.

// TK<k>(M, a): M(a, t, sum, output, store address) for each token t < k.
#define TK2(M, a) M(a, 0, Z16, Z24, (AX)); M(a, 1, Z17, Z25, (AX)(R13*1))
#define TK3(M, a) TK2(M, a); M(a, 2, Z18, Z26, (AX)(R13*2))
#define TK4(M, a) TK3(M, a); M(a, 3, Z19, Z27, (AX)(R14*1))
#define TK5(M, a) TK4(M, a); M(a, 4, Z20, Z28, (CX))
#define TK6(M, a) TK5(M, a); M(a, 5, Z21, Z29, (CX)(R13*1))
#define TK7(M, a) TK6(M, a); M(a, 6, Z22, Z30, (CX)(R13*2))
#define TK8(M, a) TK7(M, a); M(a, 7, Z23, Z31, (CX)(R14*1))

#define TKZACC(a, t, y, acc, o) VPXORD acc, acc, acc
// TKZSUM starts token t's sum at -128*Σa (the interleaved sums are
// negated): the integer Q8TOKW reaches by subtracting it at the end, with
// a load where that took two instructions.
#define TKZSUM(a, t, y, acc, o) VPBROADCASTD (4*t)(DX), y
// TKMAC: chunk a (Z0) times token t's dword a.
#define TKMAC(a, t, y, acc, o) VPDPBUSD.BCST (32*t+4*a)(DI), Z0, y
// TKFIN: Q8TOKW's float steps for token t.
#define TKFIN(a, t, y, acc, o) \
	VCVTDQ2PS   y, y; \
	VMULPS.BCST (4*t)(BX), Z8, Z9; \
	VFMADD231PS Z9, y, acc
#define TKST(a, t, y, acc, o) VMOVUPS acc, K1, o

#define TKCHUNK(TK, c) VMOVDQU32 (64*c)(SI), Z0; TK(TKMAC, c)

// TKBLOCK(TK): one block for the tokens of TK.
#define TKBLOCK(TK) \
	PFQ8I; \
	VCVTPH2PS (R12), Z8; \
	TK(TKZSUM, 0); \
	TKCHUNK(TK, 0); \
	TKCHUNK(TK, 1); \
	TKCHUNK(TK, 2); \
	TKCHUNK(TK, 3); \
	TKCHUNK(TK, 4); \
	TKCHUNK(TK, 5); \
	TKCHUNK(TK, 6); \
	TKCHUNK(TK, 7); \
	TK(TKFIN, 0)

// GEMMTQ8(TK, k): the group and block loops for k tokens (the
// interleaved layout, as the avx512 path's other Q8_0 kernels).
#define GEMMTQ8(TK, k) \
	PKARGS; \
group: \
	PKGROUPI(512); \
	TK(TKZACC, 0); \
loop: \
	TKBLOCK(TK); \
	PKNEXTI(512, 32, k, (4*k), loop); \
	PKMASK(store); \
	LEAQ (AX)(R13*4), CX; \
	TK(TKST, 0); \
	ADDQ $64, AX; \
	DECQ R15; \
	JNZ  group; \
	VZEROUPPER; \
	RET

TEXT ·gemmT2Q8_0VNNI(SB), NOSPLIT, $0-88
	GEMMTQ8(TK2, 2)

TEXT ·gemmT3Q8_0VNNI(SB), NOSPLIT, $0-88
	GEMMTQ8(TK3, 3)

TEXT ·gemmT4Q8_0VNNI(SB), NOSPLIT, $0-88
	GEMMTQ8(TK4, 4)

TEXT ·gemmT5Q8_0VNNI(SB), NOSPLIT, $0-88
	GEMMTQ8(TK5, 5)

TEXT ·gemmT6Q8_0VNNI(SB), NOSPLIT, $0-88
	GEMMTQ8(TK6, 6)

TEXT ·gemmT7Q8_0VNNI(SB), NOSPLIT, $0-88
	GEMMTQ8(TK7, 7)

TEXT ·gemmT8Q8_0VNNI(SB), NOSPLIT, $0-88
	GEMMTQ8(TK8, 8)

// The one-token Q4_K kernel (decode): each 64-byte chunk of a piece is
// loaded once for both its sub-blocks (gemm4's macros load it twice, once
// per nibble), the high nibbles kept in place (q&0xf0 = 16q: one AND
// where a shift and an AND were), with four integer chains. The float
// steps are KTOKW's, in the same order, so the bits stay gemm4's: the
// high sub-block's sum is 16S, and its factor (d/16)*sc*d_a is
// d*sc*d_a/16 exactly (scaling by a power of two; d_a would have to be
// below 2^-100 for a subnormal to round differently), so fma(16S, that,
// acc) is fma(S, d*sc*d_a, acc).
//
// Registers: Z0 the chunk, Z1/Z2 its low and high nibbles, Z3 a factor,
// Z8/Z9 and Z10/Z11 the two sub-blocks' scale and minimum terms, Z16 the
// output, Z20-Z23 the integer sums (low even/odd, high even/odd chunks),
// Z26 = 1/16, Z27 = d/16, Z28 = d, Z29 = dmin, Z30 = 0xf0, Z31 = 0x0f.
#define K1CH(c, k, lo, hi) \
	VMOVDQU32     (512*c+64*k)(SI), Z0; \
	VPANDD        Z31, Z0, Z1; \
	VPANDD        Z30, Z0, Z2; \
	VPDPBUSD.BCST (64*c+4*k)(DI), Z1, lo; \
	VPDPBUSD.BCST (64*c+32+4*k)(DI), Z2, hi

// K1SC(j, d, s, m): s = d*sc_j, m = dmin*m_j of the 16 rows.
#define K1SC(j, d, s, m) \
	VPMOVZXBD (16*j)(R12), s; \
	VPMOVZXBD (128+16*j)(R12), m; \
	VCVTDQ2PS s, s; \
	VCVTDQ2PS m, m; \
	VMULPS    d, s, s; \
	VMULPS    Z29, m, m

// K1F(j, y, s, m): KTOKW's float steps for sub-block j's sum y.
#define K1F(j, y, s, m) \
	VCVTDQ2PS         y, y; \
	VMULPS.BCST       (4*j)(BX), s, Z3; \
	VFMADD231PS       Z3, y, Z16; \
	VFNMADD231PS.BCST (4*j)(DX), m, Z16

#define K1PIECE(c) \
	PFJQ4_K((2*c)); \
	PFJQ4_K((2*c+1)); \
	VPXORD  Z20, Z20, Z20; \
	VPXORD  Z21, Z21, Z21; \
	VPXORD  Z22, Z22, Z22; \
	VPXORD  Z23, Z23, Z23; \
	K1CH(c, 0, Z20, Z22); \
	K1CH(c, 1, Z21, Z23); \
	K1CH(c, 2, Z20, Z22); \
	K1CH(c, 3, Z21, Z23); \
	K1CH(c, 4, Z20, Z22); \
	K1CH(c, 5, Z21, Z23); \
	K1CH(c, 6, Z20, Z22); \
	K1CH(c, 7, Z21, Z23); \
	VPADDD  Z21, Z20, Z20; \
	VPADDD  Z23, Z22, Z22; \
	K1SC((2*c), Z28, Z8, Z9); \
	K1SC((2*c+1), Z27, Z10, Z11); \
	K1F((2*c), Z20, Z8, Z9); \
	K1F((2*c+1), Z22, Z10, Z11)

#define Q4K1SB(T) \
	VCVTPH2PS 256(R12), Z28; \
	VCVTPH2PS 288(R12), Z29; \
	VMULPS    Z26, Z28, Z27; \
	K1PIECE(0); \
	K1PIECE(1); \
	K1PIECE(2); \
	K1PIECE(3)

// The avx512 path's Q8_0, Q4_K and Q6_K kernels read the interleaved
// layout (PKGROUPI): gemm4 and gemm42 are the generated table's with its
// addressing (the same bits), gemm1 Q8_0's too, and for Q4_K and Q6_K the
// one-token kernels above and below.
TEXT ·gemm1Q4_KInter(SB), NOSPLIT, $0-88
	PKARGS
	KCONST
	CONST32(0xf0f0f0f0, Z30)
	CONST32(0x3d800000, Z26)
	PKRUN1L(PKGROUPI, PKNEXTI, PKENDI, KBODY, Q4K1SB, NONE, PKNOPF, 2048, 320, 8, 32)

TEXT ·gemm4Q4_KInter(SB), NOSPLIT, $0-88
	PKARGS
	KCONST
	PKRUN4L(PKGROUPI, PKNEXTI, PKENDI, KBODY, Q4KSB, KTOK4, 2048, 320, 8, 32)

TEXT ·gemm42Q4_KInter(SB), NOSPLIT, $0-88
	PKPAIRL(PKGROUPI, PKNEXTI, PKENDI, P42Q4_K, 0, 2048, 320, 8, 32)

TEXT ·gemm1Q8_0Inter(SB), NOSPLIT, $0-88
	PKARGS
	PKRUN1L(PKGROUPI, PKNEXTI, PKENDI, QBODY1, Q8W, Q8TOK1, PFQ8I, 512, 32, 1, 4)

TEXT ·gemm4Q8_0Inter(SB), NOSPLIT, $0-88
	PKARGS
	PKRUN4L(PKGROUPI, PKNEXTI, PKENDI, QBODY4, Q8W, Q8TOK, 512, 32, 1, 4)

TEXT ·gemm42Q8_0Inter(SB), NOSPLIT, $0-88
	PKPAIRL(PKGROUPI, PKNEXTI, PKENDI, P42Q8_0, 0, 512, 32, 1, 4)

TEXT ·gemm4Q6_KInter(SB), NOSPLIT, $0-88
	PKARGS
	KCONST6
	PKRUN4L(PKGROUPI, PKNEXTI, PKENDI, KBODY, Q6KSB, Q6TOK4, 3072, 288, 8, 64)

// The one-token Q6_K kernel (decode): the chunks of one half (blocks
// 4h..4h+3) are read once, two of low-nibble bytes (pieces 2h, 2h+1: their
// low nibbles blocks 4h and 4h+1, high nibbles 4h+2 and 4h+3) and one of
// high bits (piece h), and make chunk k of the four blocks, where gemm4's
// Q6U reads two chunks per block's chunk. Each block keeps its two
// sub-block sums (eight chains), then Q6TOK's integer and float steps in
// block order: the same bits.
//
// Registers: Z0/Z1 the low-nibble chunks, Z2 the high bits, Z3-Z7
// temporaries, Z8/Z9 a block's sub-block scales, Z16 the output, Z20-Z27
// the four blocks' sums (first and second sub-block), Z28 = d, Z30 =
// 0x30, Z31 = 0x0f.

// Q61SEL(lo, hb, z): z = the low nibbles of lo | the 0x30 bits of hb.
#define Q61SEL(lo, hb, z) \
	VPANDD     Z30, hb, z; \
	VPTERNLOGD $0xd8, Z31, lo, z

// Q61CH(h, k, y0, y1, y2, y3): chunk k of blocks 4h..4h+3 into their sums.
#define Q61CH(h, k, y0, y1, y2, y3) \
	VMOVDQU32     (1024*h+64*k)(SI), Z0; \
	VMOVDQU32     (1024*h+512+64*k)(SI), Z1; \
	VMOVDQU32     (2048+512*h+64*k)(SI), Z2; \
	VPSLLW        $4, Z2, Z3; \
	Q61SEL(Z0, Z3, Z4); \
	VPDPBUSD.BCST (128*h+4*k)(DI), Z4, y0; \
	VPSLLW        $2, Z2, Z3; \
	Q61SEL(Z1, Z3, Z5); \
	VPDPBUSD.BCST (128*h+32+4*k)(DI), Z5, y1; \
	VPSRLW        $4, Z0, Z0; \
	Q61SEL(Z0, Z2, Z6); \
	VPDPBUSD.BCST (128*h+64+4*k)(DI), Z6, y2; \
	VPSRLW        $4, Z1, Z1; \
	VPSRLW        $2, Z2, Z3; \
	Q61SEL(Z1, Z3, Z7); \
	VPDPBUSD.BCST (128*h+96+4*k)(DI), Z7, y3

// Q61F(j, y, z): Q6TOK's steps after the sums, block j.
#define Q61F(j, y, z) \
	VPMOVSXBD   (32*j)(R12), Z8; \
	VPMOVSXBD   (32*j+16)(R12), Z9; \
	VPSUBD.BCST (8*j)(DX), y, y; \
	VPSUBD.BCST (8*j+4)(DX), z, z; \
	VPMULLD     Z8, y, y; \
	VPMULLD     Z9, z, z; \
	VPADDD      z, y, y; \
	VCVTDQ2PS   y, y; \
	VMULPS.BCST (4*j)(BX), Z28, Z3; \
	VFMADD231PS Z3, y, Z16

// Q61HALF(h): blocks 4h..4h+3, each block's eighth of the prefetch with
// two of its chunks.
#define Q61HALF(h) \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23; \
	VPXORD Z24, Z24, Z24; \
	VPXORD Z25, Z25, Z25; \
	VPXORD Z26, Z26, Z26; \
	VPXORD Z27, Z27, Z27; \
	PFJQ6_K((4*h)); \
	Q61CH(h, 0, Z20, Z21, Z22, Z23); \
	Q61CH(h, 1, Z20, Z21, Z22, Z23); \
	PFJQ6_K((4*h+1)); \
	Q61CH(h, 2, Z20, Z21, Z22, Z23); \
	Q61CH(h, 3, Z20, Z21, Z22, Z23); \
	PFJQ6_K((4*h+2)); \
	Q61CH(h, 4, Z24, Z25, Z26, Z27); \
	Q61CH(h, 5, Z24, Z25, Z26, Z27); \
	PFJQ6_K((4*h+3)); \
	Q61CH(h, 6, Z24, Z25, Z26, Z27); \
	Q61CH(h, 7, Z24, Z25, Z26, Z27); \
	Q61F((4*h), Z20, Z24); \
	Q61F((4*h+1), Z21, Z25); \
	Q61F((4*h+2), Z22, Z26); \
	Q61F((4*h+3), Z23, Z27)

#define Q6K1SB(T) \
	VCVTPH2PS 256(R12), Z28; \
	Q61HALF(0); \
	Q61HALF(1)

TEXT ·gemm1Q6_KInter(SB), NOSPLIT, $0-88
	PKARGS
	KCONST6
	PKRUN1L(PKGROUPI, PKNEXTI, PKENDI, KBODY, Q6K1SB, NONE, PKNOPF, 3072, 288, 8, 64)

