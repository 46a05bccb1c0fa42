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
