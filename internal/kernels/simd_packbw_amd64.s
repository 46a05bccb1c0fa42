//go:build amd64 && !purego

#include "textflag.h"

// The packed kernels for AVX-512 CPUs without VNNI (Skylake-SP/X): each
// VPDPBUSD becomes a broadcast of the 4 activation bytes, VPMADDUBSW
// (pairs of products summed as int16) and VPMADDWD by ones (the pairs of
// pairs as int32), then an add: the same exact integer sums, as long as a
// pair of products fits in int16, which holds for quants up to 63 (Q4_x,
// Q5_x, Q6_K: 2*63*127 < 32768) but not for Q8_0's w+128 (that type keeps
// the AVX2 kernels on this path). Same layouts, same bits as the VNNI
// kernels. Z15 is free in every kernel of simd_pack_amd64.h.
#define PMAC(m, w, y) \
	VPBROADCASTD m, Z15; \
	VPMADDUBSW   Z15, w, Z15; \
	VPMADDWD     pkones<>(SB), Z15, Z15; \
	VPADDD       Z15, y, y

#include "simd_pack_amd64.h"

DATA pkones<>+0(SB)/8, $0x0001000100010001
DATA pkones<>+8(SB)/8, $0x0001000100010001
DATA pkones<>+16(SB)/8, $0x0001000100010001
DATA pkones<>+24(SB)/8, $0x0001000100010001
DATA pkones<>+32(SB)/8, $0x0001000100010001
DATA pkones<>+40(SB)/8, $0x0001000100010001
DATA pkones<>+48(SB)/8, $0x0001000100010001
DATA pkones<>+56(SB)/8, $0x0001000100010001
GLOBL pkones<>(SB), RODATA|NOPTR, $64

// The kernels, declared in pack_amd64.go as
// func(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
// (gemm4<type> for four tokens, gemm1<type> for one: GEMM4<type> and
// GEMM1<type> in simd_pack_amd64.h).

TEXT ·gemm4Q4_0BW(SB), NOSPLIT, $0-88
	GEMM4Q4_0

TEXT ·gemm1Q4_0BW(SB), NOSPLIT, $0-88
	GEMM1Q4_0

TEXT ·gemm4Q4_1BW(SB), NOSPLIT, $0-88
	GEMM4Q4_1

TEXT ·gemm1Q4_1BW(SB), NOSPLIT, $0-88
	GEMM1Q4_1

TEXT ·gemm4Q5_0BW(SB), NOSPLIT, $0-88
	GEMM4Q5_0

TEXT ·gemm1Q5_0BW(SB), NOSPLIT, $0-88
	GEMM1Q5_0

TEXT ·gemm4Q5_1BW(SB), NOSPLIT, $0-88
	GEMM4Q5_1

TEXT ·gemm1Q5_1BW(SB), NOSPLIT, $0-88
	GEMM1Q5_1

TEXT ·gemm4Q4_KBW(SB), NOSPLIT, $0-88
	GEMM4Q4_K

TEXT ·gemm1Q4_KBW(SB), NOSPLIT, $0-88
	GEMM1Q4_K

TEXT ·gemm4Q5_KBW(SB), NOSPLIT, $0-88
	GEMM4Q5_K

TEXT ·gemm1Q5_KBW(SB), NOSPLIT, $0-88
	GEMM1Q5_K

TEXT ·gemm4Q6_KBW(SB), NOSPLIT, $0-88
	GEMM4Q6_K

TEXT ·gemm1Q6_KBW(SB), NOSPLIT, $0-88
	GEMM1Q6_K

// func int8MulPeakBW(n int)
// n rounds of 8 independent VPMADDUBSW and 8 VPMADDWD on 512-bit
// registers: 64 multiply-adds per pair, the rate of PMAC above.
TEXT ·int8MulPeakBW(SB), NOSPLIT, $0-8
	MOVQ   n+0(FP), CX
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VMOVDQU32 pkones<>(SB), Z10

bwloop:
	VPMADDUBSW Z8, Z9, Z0
	VPMADDUBSW Z8, Z9, Z1
	VPMADDUBSW Z8, Z9, Z2
	VPMADDUBSW Z8, Z9, Z3
	VPMADDUBSW Z8, Z9, Z4
	VPMADDUBSW Z8, Z9, Z5
	VPMADDUBSW Z8, Z9, Z6
	VPMADDUBSW Z8, Z9, Z7
	VPMADDWD   Z10, Z0, Z0
	VPMADDWD   Z10, Z1, Z1
	VPMADDWD   Z10, Z2, Z2
	VPMADDWD   Z10, Z3, Z3
	VPMADDWD   Z10, Z4, Z4
	VPMADDWD   Z10, Z5, Z5
	VPMADDWD   Z10, Z6, Z6
	VPMADDWD   Z10, Z7, Z7
	DECQ       CX
	JNZ        bwloop
	VZEROUPPER
	RET
