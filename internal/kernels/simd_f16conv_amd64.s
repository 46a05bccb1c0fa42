//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"

// Bulk half <-> float conversion for the F16 KV cache (F16C): n is a
// multiple of 8; the callers convert the rest in Go.

// CONV8(CVT, sstep, dstep) is the body of the bulk conversions: n/8 times
// CVT (8 values from (SI) to (DI)), the pointers moved on by sstep and
// dstep bytes.
#define CONV8(CVT, sstep, dstep) \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ n+16(FP), CX; \
	SHRQ $3, CX; \
	JZ   done; \
loop: \
	CVT; \
	ADDQ $sstep, SI; \
	ADDQ $dstep, DI; \
	DECQ CX; \
	JNZ  loop; \
done: \
	VZEROUPPER; \
	RET

#define H2F VCVTPH2PS (SI), Y0; VMOVUPS Y0, (DI)

// Round to nearest even (VCVTPS2PH $0), as FP32ToFP16.
#define F2H VMOVUPS (SI), Y0; VCVTPS2PH $0, Y0, (DI)

// func f16ToF32AVX2(dst *float32, src *uint16, n int)
TEXT ·f16ToF32AVX2(SB), NOSPLIT, $0-24
	CONV8(H2F, 16, 32)

// func f32ToF16AVX2(dst *uint16, src *float32, n int)
TEXT ·f32ToF16AVX2(SB), NOSPLIT, $0-24
	CONV8(F2H, 32, 16)

// func f16RowsToF32AVX2(dst *float32, src *uint16, stride, w, rows int)
// Row j's w halves at src[j*stride:] to dst[j*w:]; w is a multiple of 8.
TEXT ·f16RowsToF32AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), R8
	SHLQ $1, R8
	MOVQ R8, R12
	SHLQ $4, R12
	MOVQ w+24(FP), R9
	SHRQ $3, R9
	MOVQ rows+32(FP), DX
	TESTQ R9, R9
	JZ   rowsdone
	TESTQ DX, DX
	JZ   rowsdone

rowsloop:
	// Rows a KV row apart do not look like a stream to the hardware
	// prefetcher: fetch the row sixteen ahead (up to 256 bytes of it).
	PREFETCHT0 (SI)(R12*1)
	PREFETCHT0 64(SI)(R12*1)
	PREFETCHT0 128(SI)(R12*1)
	PREFETCHT0 192(SI)(R12*1)
	MOVQ SI, R10
	MOVQ R9, CX

rowloop:
	VCVTPH2PS (R10), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, R10
	ADDQ      $32, DI
	DECQ      CX
	JNZ       rowloop

	ADDQ R8, SI
	DECQ DX
	JNZ  rowsloop

rowsdone:
	VZEROUPPER
	RET
