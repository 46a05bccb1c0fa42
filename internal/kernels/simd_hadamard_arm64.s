//go:build arm64 && !purego

#include "textflag.h"
#include "simd_neon_arm64.h"

// Hadamard on the neon path (elem.go has the contract and the Go loop
// whose bits this gives), as hadamardAVX2: each block of 64 values in
// sixteen registers through stages h = 1 .. 32, the stages h >= 64 over
// memory, then the scale (in the registers when n is 64). Within a
// register a stage is a permutation plus one fused multiply-add by +-1,
// which rounds as the loop's a+b and a-b do (a·(±1) is exact, and a-b is
// a+(-b) in IEEE arithmetic, signed zeros included).

// V29 = [1, -1, 1, -1] (stage 1's signs), V30 = [1, 1, -1, -1] (stage 2's).
DATA hadsigns<>+0(SB)/4, $0x3f800000
DATA hadsigns<>+4(SB)/4, $0xbf800000
DATA hadsigns<>+8(SB)/4, $0x3f800000
DATA hadsigns<>+12(SB)/4, $0xbf800000
DATA hadsigns<>+16(SB)/4, $0x3f800000
DATA hadsigns<>+20(SB)/4, $0x3f800000
DATA hadsigns<>+24(SB)/4, $0xbf800000
DATA hadsigns<>+28(SB)/4, $0xbf800000
GLOBL hadsigns<>(SB), RODATA|NOPTR, $32

// HADIN(x): stages 1 and 2 on the four values of Vx (V16 scratch): V16 =
// its values pairwise swapped, plus Vx times V29; Vx = V16's halves
// swapped, plus V16 times V30.
#define HADIN(x) \
	REV64_4S(16, x);     \
	FMLA_4S(16, x, 29);  \
	EXT8_16B(x, 16, 16); \
	FMLA_4S(x, 16, 30)

// HADBF(a, b): (Va, Vb) = (Va+Vb, Va-Vb) (V16 scratch).
#define HADBF(a, b) FADD_4S(16, a, b); FSUB_4S(b, a, b); ORR_16B(a, 16, 16)

#define HADSCALE(a, b, c, d) FMUL_4S(a, a, 31); FMUL_4S(b, b, 31); FMUL_4S(c, c, 31); FMUL_4S(d, d, 31)

// func hadamardNEON(x *float32, runs, n int, scale float32)
// Hadamard over runs·n values, n a power of two >= 64. R0 the run, R1
// runs left, R2 n, R12 n in bytes; R4-R6 a block; R7 h in bytes, R8 the
// group, R9/R10 the pair's two halves, R11 what is left of them.
TEXT ·hadamardNEON(SB), NOSPLIT, $0-28
	MOVD  x+0(FP), R0
	MOVD  runs+8(FP), R1
	MOVD  n+16(FP), R2
	FMOVS scale+24(FP), F31
	VDUP  V31.S[0], V31.S4
	MOVD  $hadsigns<>(SB), R3
	VLD1  (R3), [V29.S4, V30.S4]
	LSL   $2, R2, R12

hrun:
	MOVD R0, R4
	LSR  $6, R2, R5

hblock:
	MOVD   R4, R6
	VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R6), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R6), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1   (R6), [V12.S4, V13.S4, V14.S4, V15.S4]
	HADIN(0); HADIN(1); HADIN(2); HADIN(3); HADIN(4); HADIN(5); HADIN(6); HADIN(7)
	HADIN(8); HADIN(9); HADIN(10); HADIN(11); HADIN(12); HADIN(13); HADIN(14); HADIN(15)
	HADBF(0, 1); HADBF(2, 3); HADBF(4, 5); HADBF(6, 7); HADBF(8, 9); HADBF(10, 11); HADBF(12, 13); HADBF(14, 15)
	HADBF(0, 2); HADBF(1, 3); HADBF(4, 6); HADBF(5, 7); HADBF(8, 10); HADBF(9, 11); HADBF(12, 14); HADBF(13, 15)
	HADBF(0, 4); HADBF(1, 5); HADBF(2, 6); HADBF(3, 7); HADBF(8, 12); HADBF(9, 13); HADBF(10, 14); HADBF(11, 15)
	HADBF(0, 8); HADBF(1, 9); HADBF(2, 10); HADBF(3, 11); HADBF(4, 12); HADBF(5, 13); HADBF(6, 14); HADBF(7, 15)
	CMP $64, R2
	BNE hstore
	HADSCALE(0, 1, 2, 3); HADSCALE(4, 5, 6, 7); HADSCALE(8, 9, 10, 11); HADSCALE(12, 13, 14, 15)

hstore:
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R4)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R4)
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R4)
	VST1.P [V12.S4, V13.S4, V14.S4, V15.S4], 64(R4)
	SUBS   $1, R5, R5
	BNE    hblock
	CMP    $64, R2
	BEQ    hnext

	// Stages h = 64 .. n/2: pairs (j, j+h) for j in [i, i+h), i a
	// multiple of 2h, 16 values at a time.
	MOVD $256, R7

hstage:
	MOVD ZR, R8

hgroup:
	ADD R8, R0, R9
	ADD R7, R9, R10
	LSR $6, R7, R11

hpair:
	VLD1   (R9), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1   (R10), [V4.S4, V5.S4, V6.S4, V7.S4]
	FADD_4S(16, 0, 4); FADD_4S(17, 1, 5); FADD_4S(18, 2, 6); FADD_4S(19, 3, 7)
	FSUB_4S(4, 0, 4); FSUB_4S(5, 1, 5); FSUB_4S(6, 2, 6); FSUB_4S(7, 3, 7)
	VST1.P [V16.S4, V17.S4, V18.S4, V19.S4], 64(R9)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R10)
	SUBS   $1, R11, R11
	BNE    hpair
	ADD    R7<<1, R8, R8
	CMP    R12, R8
	BLT    hgroup
	LSL    $1, R7, R7
	CMP    R12, R7
	BLT    hstage

	MOVD R0, R9
	LSR  $4, R2, R11

hscale:
	VLD1   (R9), [V0.S4, V1.S4, V2.S4, V3.S4]
	HADSCALE(0, 1, 2, 3)
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R9)
	SUBS   $1, R11, R11
	BNE    hscale

hnext:
	ADD  R12, R0, R0
	SUBS $1, R1, R1
	BNE  hrun
	RET
