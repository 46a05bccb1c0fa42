//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"
#include "simd_flash512_amd64.h"

// FlashAccumKV's kernels (flash_accumkv.go): FlashAccum with the values
// decoded from the cache's rows in registers, for four query rows at a
// time and 64 columns at a time, each o element getting p[i][j]·v[j][d]
// added for j in order, one fused multiply-add each, as FlashAccum does
// over the decoded tile.

// ACCUMKV(DEC, B64) is the body of
// func accumKVXAVX512(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int):
// nq a multiple of 4, vd of 64; B64 the bytes of 64 stored values.
#define ACCUMKV(DEC, B64) \
	MOVQ o+0(FP), DI \
	ROWS3(ldo+8(FP), R8, R9) \
	MOVQ p+16(FP), SI \
	ROWS3(ldp+24(FP), R13, R14) \
	MOVQ stride+40(FP), R12 \
	MOVQ nq+48(FP), BX \
	SHRQ $2, BX \
	JZ   done \
quad: \
	MOVQ v+32(FP), DX \
	MOVQ vd+64(FP), CX \
	SHRQ $6, CX \
	MOVQ DI, R10 \
cols: \
	LOADQUAD \
	MOVQ DX, AX \
	MOVQ SI, R15 \
	MOVQ nk+56(FP), R11 \
	ACCROWS(DEC, rows) \
	STORE16x4 \
	ADDQ $256, R10 \
	ADDQ $B64, DX \
	DECQ CX \
	JNZ  cols \
	LEAQ (DI)(R8*4), DI \
	LEAQ (SI)(R13*4), SI \
	DECQ BX \
	JNZ  quad \
done: \
	VZEROUPPER \
	RET

#define LOADQUAD LOAD16x4

// func accumKVF16AVX512(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)
TEXT ·accumKVF16AVX512(SB), NOSPLIT, $0-72
	ACCUMKV(DECF16, 128)

// func accumKVQ8AVX512(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)
TEXT ·accumKVQ8AVX512(SB), NOSPLIT, $0-72
	ACCUMKV(DECQ8, 68)
