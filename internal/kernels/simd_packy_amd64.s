//go:build amd64 && !purego

#include "textflag.h"

// AVX-VNNI kernels over the packed layout (simd_packy_amd64.h says how):
// VPDPBUSD multiplies, Y15 = 0x10 bytes (Q5's fifth bits).

// VNNI(a, w, d): Yd += the 8 lanes' 4-byte products of the unsigned bytes
// of Yw with the signed bytes of Ya (VEX.256.66.0F38.W0 50 /r, VPDPBUSD
// ymm_d, ymm_w, ymm_a, written as bytes: Go's assembler knows only the
// EVEX form, which needs AVX-512). a, w and d are register numbers.
#define VNNI(a, w, d) \
	BYTE $0xc4; \
	BYTE $(0xe2 ^ (((d)>>3)<<7) ^ (((a)>>3)<<5)); \
	BYTE $((((15-(w))&15)<<3) | 5); \
	BYTE $0x50; \
	BYTE $(0xc0 | (((d)&7)<<3) | ((a)&7))

// Products of the chunk in Y0 with the activation dword at displacement m
// of each token's quants: YD4 four tokens into Yr0-Yr3, YD1 one into Yr.
#define YD4(m, r0, r1, r2, r3) \
	VPBROADCASTD m(DI), Y1; \
	VNNI(1, 0, r0); \
	VPBROADCASTD m(DI)(R8*1), Y1; \
	VNNI(1, 0, r1); \
	VPBROADCASTD m(DI)(R8*2), Y1; \
	VNNI(1, 0, r2); \
	VPBROADCASTD m(DI)(R9*1), Y1; \
	VNNI(1, 0, r3)

#define YD1(m, r) VPBROADCASTD m(DI), Y1; VNNI(1, 0, r)

// The even and odd chunks' products: four tokens into Y4-Y7, one token in
// two chains (Y4 and Y5) added by YFIN1 (the same integer sums).
#define YDA4(m) YD4(m, 4, 5, 6, 7)
#define YDE1(m) YD1(m, 4)
#define YDO1(m) YD1(m, 5)

#define Y15SET VMOVDQU ycon<>+32(SB), Y15

#include "simd_packy_amd64.h"

// The kernels, declared in pack_amd64.go (the AVX-512 kernels' arguments).

TEXT ·gemm4Q8_0AVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y4Q8_0, YST4, NOPF, NOPF, NOSET, 512, 32, 1, 4)

TEXT ·gemm1Q8_0AVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y1Q8_0, YST1, PFQ8_0, PNQ8, GSET, 512, 32, 1, 4)

TEXT ·gemm4Q4_0AVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y4Q4_0, YST4, NOPF, NOPF, NOSET, 256, 32, 1, 4)

TEXT ·gemm1Q4_0AVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y1Q4_0, YST1, PFQ4_0, PNQ4, GSET, 256, 32, 1, 4)

TEXT ·gemm4Q4_1AVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y4Q4_1, YST4, NOPF, NOPF, NOSET, 256, 64, 1, 4)

TEXT ·gemm1Q4_1AVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y1Q4_1, YST1, PFQ4_0, PNQ4, GSET, 256, 64, 1, 4)

TEXT ·gemm4Q5_0AVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y4Q5_0, YST4, NOPF, NOPF, NOSET, 320, 32, 1, 4)

TEXT ·gemm1Q5_0AVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y1Q5_0, YST1, PFQ5, PNQ5, GSET, 320, 32, 1, 4)

TEXT ·gemm4Q5_1AVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y4Q5_1, YST4, NOPF, NOPF, NOSET, 320, 64, 1, 4)

TEXT ·gemm1Q5_1AVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y1Q5_1, YST1, PFQ5, PNQ5, GSET, 320, 64, 1, 4)

TEXT ·gemm4Q4_KAVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y4Q4_K, YST4, NOPF, NOPF, NOSET, 2048, 320, 8, 32)

TEXT ·gemm1Q4_KAVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y1Q4_K, YST1, PFQ4_K, PNQ4_K, GSET, 2048, 320, 8, 32)

TEXT ·gemm4Q5_KAVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y4Q5_K, YST4, NOPF, NOPF, NOSET, 2560, 320, 8, 32)

TEXT ·gemm1Q5_KAVXVNNI(SB), NOSPLIT, $0-88
	YRUN(Y1Q5_K, YST1, PFQ5_K, PNQ5_K, GSET, 2560, 320, 8, 32)

// func int8MulPeakAVXVNNI(n int)
// n rounds of 8 independent VEX VPDPBUSD on 256-bit registers (32
// multiply-adds each).
TEXT ·int8MulPeakAVXVNNI(SB), NOSPLIT, $0-8
	MOVQ  n+0(FP), CX
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9

yvnniloop:
	VNNI(8, 9, 0)
	VNNI(8, 9, 1)
	VNNI(8, 9, 2)
	VNNI(8, 9, 3)
	VNNI(8, 9, 4)
	VNNI(8, 9, 5)
	VNNI(8, 9, 6)
	VNNI(8, 9, 7)
	DECQ  CX
	JNZ   yvnniloop
	VZEROUPPER
	RET
