//go:build amd64 && !purego

#include "textflag.h"

// Bulk half <-> float conversion for the F16 KV cache (F16C): n is a
// multiple of 8; the callers convert the rest in Go.

// func f16ToF32AVX2(dst *float32, src *uint16, n int)
TEXT ·f16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   h2fdone

h2floop:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       h2floop

h2fdone:
	VZEROUPPER
	RET

// func f32ToF16AVX2(dst *uint16, src *float32, n int)
// Round to nearest even (VCVTPS2PH $0), as FP32ToFP16.
TEXT ·f32ToF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   f2hdone

f2hloop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       f2hloop

f2hdone:
	VZEROUPPER
	RET
