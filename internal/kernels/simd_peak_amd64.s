//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"

// func int8MulPeakAVX2(n int)
// n rounds of 8 independent VPMADDUBSW and 8 VPMADDWD on 128-bit registers:
// the int8 multiply-add rate this core can sustain at best (16 multiply-adds
// per instruction pair). The quantized kernels need both instructions for
// every 16 products, so BenchmarkInt8MulCeiling is their arithmetic ceiling.
TEXT ·int8MulPeakAVX2(SB), NOSPLIT, $0-8
	MOVQ     n+0(FP), CX
	VPCMPEQW X15, X15, X15
	VPSRLW   $15, X15, X15
	VPXOR    X14, X14, X14

peakloop:
	VPMADDUBSW X14, X15, X0
	VPMADDUBSW X14, X15, X1
	VPMADDUBSW X14, X15, X2
	VPMADDUBSW X14, X15, X3
	VPMADDUBSW X14, X15, X4
	VPMADDUBSW X14, X15, X5
	VPMADDUBSW X14, X15, X6
	VPMADDUBSW X14, X15, X7
	VPMADDWD   X15, X0, X8
	VPMADDWD   X15, X1, X9
	VPMADDWD   X15, X2, X10
	VPMADDWD   X15, X3, X11
	VPMADDWD   X15, X4, X12
	VPMADDWD   X15, X5, X13
	VPMADDWD   X15, X6, X0
	VPMADDWD   X15, X7, X1
	DECQ       CX
	JNZ        peakloop
	RET

// func fmaPeakAVX2(n int)
// n rounds of 8 independent VFMADD231PS on 256-bit registers (64 float
// multiply-adds): the ceiling of the float kernels on the avx2 path.
TEXT ·fmaPeakAVX2(SB), NOSPLIT, $0-8
	MOVQ   n+0(FP), CX
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9

fmaloop:
	VFMADD231PS Y8, Y9, Y0
	VFMADD231PS Y8, Y9, Y1
	VFMADD231PS Y8, Y9, Y2
	VFMADD231PS Y8, Y9, Y3
	VFMADD231PS Y8, Y9, Y4
	VFMADD231PS Y8, Y9, Y5
	VFMADD231PS Y8, Y9, Y6
	VFMADD231PS Y8, Y9, Y7
	DECQ        CX
	JNZ         fmaloop
	VZEROUPPER
	RET

// func fmaPeakAVX512(n int)
// The same on 512-bit registers (128 multiply-adds a round): the avx512
// paths' float kernels (packed F16/BF16, attention).
TEXT ·fmaPeakAVX512(SB), NOSPLIT, $0-8
	MOVQ   n+0(FP), CX
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9

fma512loop:
	VFMADD231PS Z8, Z9, Z0
	VFMADD231PS Z8, Z9, Z1
	VFMADD231PS Z8, Z9, Z2
	VFMADD231PS Z8, Z9, Z3
	VFMADD231PS Z8, Z9, Z4
	VFMADD231PS Z8, Z9, Z5
	VFMADD231PS Z8, Z9, Z6
	VFMADD231PS Z8, Z9, Z7
	DECQ        CX
	JNZ         fma512loop
	VZEROUPPER
	RET
