//go:build amd64 && !purego

#include "textflag.h"

#include "simd_amd64.h"

// The avx2 path's Q4_K kernels over the packed layout (the file order's,
// packed.inter false): simd_packy_amd64.h's skeleton, the AVX-VNNI
// kernels' steps with VPMADDUBSW and VPMADDWD by ones (Y15) for VPDPBUSD:
// a pair of products (a nibble times a signed byte) fits int16, so the
// sums, and the results, are the AVX-VNNI kernels'. Each chunk half's 8
// lanes are 8 rows: no horizontal reductions, where the kernels over the
// file's rows spend a third of their time in them (Zen 3: BenchmarkMatMul64
// Q4_K 71-78 GMAC/s against 39-42 in one run).

// YMAC(r): r += the products of the chunk in Y0 with the activation bytes
// broadcast in Y1 (Y1 clobbered).
#define YMAC(r) \
	VPMADDUBSW Y1, Y0, Y1; \
	VPMADDWD   Y15, Y1, Y1; \
	VPADDD     Y1, r, r

// Products of the chunk in Y0 with the activation dword at displacement m
// of each token's quants: YD4 four tokens into Y4-Y7, YD1 one into r.
#define YD4(m) \
	VPBROADCASTD m(DI), Y1; \
	YMAC(Y4); \
	VPBROADCASTD m(DI)(R8*1), Y1; \
	YMAC(Y5); \
	VPBROADCASTD m(DI)(R8*2), Y1; \
	YMAC(Y6); \
	VPBROADCASTD m(DI)(R9*1), Y1; \
	YMAC(Y7)

#define YD1(m, r) VPBROADCASTD m(DI), Y1; YMAC(r)

// The even and odd chunks' products (simd_packy_amd64.s's).
#define YDA4(m) YD4(m)
#define YDE1(m) YD1(m, Y4)
#define YDO1(m) YD1(m, Y5)

// Y15SET: Y15 = int16 ones.
#define Y15SET VPCMPEQW Y15, Y15, Y15; VPSRLW $15, Y15, Y15

#include "simd_packy_amd64.h"

TEXT ·gemm4Q4_KAVX2P(SB), NOSPLIT, $0-88
	YRUN(Y4Q4_K, YST4, NOPF, NOPF, NOSET, 2048, 320, 8, 32)

TEXT ·gemm1Q4_KAVX2P(SB), NOSPLIT, $0-88
	YRUN(Y1Q4_K, YST1, PFQ4_K, PNQ4_K, GSET, 2048, 320, 8, 32)
