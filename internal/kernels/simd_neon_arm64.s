//go:build arm64 && !purego

#include "textflag.h"

// Advanced SIMD dot kernels of arm64: the neon path (NEON*, every ARMv8-A
// CPU) and the dotprod path (SDOT*, ARMv8.2-A with the dot product
// instructions; the other types keep their NEON kernels there). They take
// the arguments of the AVX2 kernels (see gen_neon_arm64.go); tab is the
// f16 -> f32 table, read for the weights' scalar scales, and the F16
// weights are widened with FCVTL.
//
// Every output, whichever kernel computes it, is the same sequence of float
// operations: per (super-)block exact integer sums, converted and scaled in
// a fixed order, then accumulated into one float in block order from 0.
// The one-input kernels and the four-input ones run the same macros per
// activation row, so a row gives the same bits alone or in a batch of any
// size (MatMul mixes dotRows and dot4Rows by shape). The two paths differ
// only in how they form the integer sums (the I32/I16 macro a kernel body
// is given), which are exact either way: they give the same bits too.
//
// Integer products without SDOT: SMULL multiplies the low eight int8 lanes
// into int16, SMLAL2 adds the high eight's products, so each int16 lane
// holds two products (at most 2*128*127 = 32512: no overflow, activations
// are in [-127, 127]); SADDLP/SADALP widen pairs into int32. SDOT adds
// four products into each int32 lane directly.
//
// Go's assembler lacks these instructions (and the float vector ones), so
// they are written as WORDs below: d, n, m are register numbers (V0-V31),
// placed at bits 0, 5 and 16 as in every three-register SIMD encoding.
//
// The kernel bodies are macros over registers (the TEXT prologues load
// the arguments), so that one body serves both paths; their labels are
// local to the TEXT they are expanded in.

#define SMULL_8H(d, n, m)  WORD $(0x0e20c000 | ((m)<<16) | ((n)<<5) | (d)) // Vd.8H = Vn.8B * Vm.8B
#define SMLAL_8H(d, n, m)  WORD $(0x0e208000 | ((m)<<16) | ((n)<<5) | (d)) // Vd.8H += Vn.8B * Vm.8B
#define SMLAL2_8H(d, n, m) WORD $(0x4e208000 | ((m)<<16) | ((n)<<5) | (d)) // Vd.8H += Vn.16B[8:] * Vm.16B[8:]
#define SADDLP_4S(d, n)    WORD $(0x4e602800 | ((n)<<5) | (d))             // Vd.4S = pairwise sums of Vn.8H
#define SADALP_4S(d, n)    WORD $(0x4e606800 | ((n)<<5) | (d))             // Vd.4S += pairwise sums of Vn.8H
#define SDOT_4S(d, n, m)   WORD $(0x4e809400 | ((m)<<16) | ((n)<<5) | (d)) // Vd.4S[i] += Σ_j<4 Vn.16B[4i+j] * Vm.16B[4i+j]
#define ZERO_2D(d)         WORD $(0x6f00e400 | (d))                        // Vd = 0 (MOVI Vd.2D, #0)
#define MUL_4S(d, n, m)    WORD $(0x4ea09c00 | ((m)<<16) | ((n)<<5) | (d)) // Vd.4S = Vn.4S * Vm.4S
#define SXTL_8H(d, n)      WORD $(0x0f08a400 | ((n)<<5) | (d))             // Vd.8H = int16(Vn.8B)
#define SXTL2_8H(d, n)     WORD $(0x4f08a400 | ((n)<<5) | (d))             // Vd.8H = int16(Vn.16B[8:])
#define SXTL_4S(d, n)      WORD $(0x0f10a400 | ((n)<<5) | (d))             // Vd.4S = int32(Vn.4H)
#define SXTL2_4S(d, n)     WORD $(0x4f10a400 | ((n)<<5) | (d))             // Vd.4S = int32(Vn.8H[4:])
#define SCVTF_4S(d, n)     WORD $(0x4e21d800 | ((n)<<5) | (d))             // Vd.4S = float32(int32 Vn.4S)
#define UCVTF_4S(d, n)     WORD $(0x6e21d800 | ((n)<<5) | (d))             // Vd.4S = float32(uint32 Vn.4S)
#define FMUL_4S(d, n, m)   WORD $(0x6e20dc00 | ((m)<<16) | ((n)<<5) | (d)) // Vd.4S = Vn.4S * Vm.4S
#define FADD_4S(d, n, m)   WORD $(0x4e20d400 | ((m)<<16) | ((n)<<5) | (d)) // Vd.4S = Vn.4S + Vm.4S
#define FADDP_4S(d, n, m)  WORD $(0x6e20d400 | ((m)<<16) | ((n)<<5) | (d)) // Vd.4S = [n0+n1, n2+n3, m0+m1, m2+m3]
#define FADDP_S(d, n)      WORD $(0x7e30d800 | ((n)<<5) | (d))             // Sd = Vn.S[0] + Vn.S[1]
#define FCVTL_4S(d, n)     WORD $(0x0e217800 | ((n)<<5) | (d))             // Vd.4S = float32(Vn.4H)
#define FCVTL2_4S(d, n)    WORD $(0x4e217800 | ((n)<<5) | (d))             // Vd.4S = float32(Vn.8H[4:])

// I32N / I32D(x, a0, b0, a1, b1, t0, t1): Vx.4S = int32 partial sums of
// the 32 products a0·b0, a1·b1 (int8 x 16 each), whose total is the exact
// sum; I32N clobbers Vt0, Vt1 (NEON), I32D does not need them (SDOT).
#define I32N(x, a0, b0, a1, b1, t0, t1) \
	SMULL_8H(t0, a0, b0);  \
	SMLAL2_8H(t0, a0, b0); \
	SMULL_8H(t1, a1, b1);  \
	SMLAL2_8H(t1, a1, b1); \
	SADDLP_4S(x, t0);      \
	SADALP_4S(x, t1)

#define I32D(x, a0, b0, a1, b1, t0, t1) \
	ZERO_2D(x);        \
	SDOT_4S(x, a0, b0); \
	SDOT_4S(x, a1, b1)

// I16N / I16D(x, a, b, t): Vx.4S = int32 partial sums of the 16 products
// a·b; I16N clobbers Vt.
#define I16N(x, a, b, t) \
	SMULL_8H(t, a, b);  \
	SMLAL2_8H(t, a, b); \
	SADDLP_4S(x, t)

#define I16D(x, a, b, t) \
	ZERO_2D(x); \
	SDOT_4S(x, a, b)

// HSUM4(v): Sv = (v0+v1) + (v2+v3), the one horizontal order of every
// float kernel here.
#define HSUM4(v) \
	FADDP_4S(v, v, v); \
	FADDP_S(v, v)

// STORE4(acc0, acc1, acc2, acc3): the four outputs of a row of a dot4
// kernel to R6, R6+R9, R6+2*R9, R6+3*R9; R6 moves on to the next row's.
#define STORE4(acc0, acc1, acc2, acc3) \
	MOVD  R6, R7;      \
	FMOVS acc0, (R7);  \
	ADD   R9, R7, R7;  \
	FMOVS acc1, (R7);  \
	ADD   R9, R7, R7;  \
	FMOVS acc2, (R7);  \
	ADD   R9, R7, R7;  \
	FMOVS acc3, (R7);  \
	ADD   $4, R6, R6

// Register use of the quantized kernels, loaded by the TEXT prologues:
// R0 the weights (moved along), R4 tab, R5 the rows left, R6 out, R9 the
// output stride in bytes (dot4), R19 qs (dot4: the array of four), R20 d,
// R21 s, R22 nb or nsb. R3 counts blocks, R7 is scratch.

// ---------------------------------------------------------------- Q8_0

// Q8W loads a weight block at R0 (moved on by 34): quants in V0, V1 and
// the scale d_w in F16 (through the table at R4).
#define Q8W \
	MOVHU.P 2(R0), R7;                \
	VLD1.P  32(R0), [V0.B16, V1.B16]; \
	FMOVS   (R4)(R7<<2), F16

// Q8A(I32, qs, d, acc): one activation block (quants at qs, scale at d,
// both moved on) against the block of Q8W: acc = fma(float(S), d_w*d_a,
// acc) with S the exact sum of the 32 products, as the AVX2 kernels do.
#define Q8A(I32, qs, d, acc) \
	VLD1.P  32(qs), [V2.B16, V3.B16]; \
	FMOVS.P 4(d), F17;                \
	I32(6, 0, 2, 1, 3, 4, 5);         \
	VADDV   V6.S4, V6;                \
	SCVTF_4S(6, 6);                   \
	FMULS   F17, F16, F18;            \
	FMADDS  F18, acc, F6, acc

#define DOTQ8_0(I32) \
q8row:                                   \
	MOVD R19, R1;                    \
	MOVD R20, R2;                    \
	MOVD R22, R3;                    \
	VEOR V20.B16, V20.B16, V20.B16;  \
q8blk:                                   \
	Q8W;                             \
	Q8A(I32, R1, R2, F20);           \
	SUBS $1, R3, R3;                 \
	BNE  q8blk;                      \
	FMOVS.P F20, 4(R6);              \
	SUBS $1, R5, R5;                 \
	BNE  q8row;                      \
	RET

// Each weight block is loaded once for the four activation rows.
#define DOT4Q8_0(I32) \
q8row4:                                  \
	MOVD 0(R19), R1;                 \
	MOVD 8(R19), R13;                \
	MOVD 16(R19), R14;               \
	MOVD 24(R19), R15;               \
	MOVD 0(R20), R2;                 \
	MOVD 8(R20), R10;                \
	MOVD 16(R20), R11;               \
	MOVD 24(R20), R12;               \
	MOVD R22, R3;                    \
	VEOR V20.B16, V20.B16, V20.B16;  \
	VEOR V21.B16, V21.B16, V21.B16;  \
	VEOR V22.B16, V22.B16, V22.B16;  \
	VEOR V23.B16, V23.B16, V23.B16;  \
q8blk4:                                  \
	Q8W;                             \
	Q8A(I32, R1, R2, F20);           \
	Q8A(I32, R13, R10, F21);         \
	Q8A(I32, R14, R11, F22);         \
	Q8A(I32, R15, R12, F23);         \
	SUBS $1, R3, R3;                 \
	BNE  q8blk4;                     \
	STORE4(F20, F21, F22, F23);      \
	SUBS $1, R5, R5;                 \
	BNE  q8row4;                     \
	RET

// func dotQ8_0NEON(w *byte, qs *int8, d *float32, nb int, tab *float32, rows int, out *float32)
TEXT ·dotQ8_0NEON(SB), NOSPLIT, $0-56
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD nb+24(FP), R22
	MOVD tab+32(FP), R4
	MOVD rows+40(FP), R5
	MOVD out+48(FP), R6
	DOTQ8_0(I32N)

// func dotQ8_0SDOT(w *byte, qs *int8, d *float32, nb int, tab *float32, rows int, out *float32)
TEXT ·dotQ8_0SDOT(SB), NOSPLIT, $0-56
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD nb+24(FP), R22
	MOVD tab+32(FP), R4
	MOVD rows+40(FP), R5
	MOVD out+48(FP), R6
	DOTQ8_0(I32D)

// func dot4Q8_0NEON(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
TEXT ·dot4Q8_0NEON(SB), NOSPLIT, $0-64
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD nb+24(FP), R22
	MOVD tab+32(FP), R4
	MOVD rows+40(FP), R5
	MOVD out+48(FP), R6
	MOVD stride+56(FP), R9
	LSL  $2, R9, R9
	DOT4Q8_0(I32N)

// func dot4Q8_0SDOT(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
TEXT ·dot4Q8_0SDOT(SB), NOSPLIT, $0-64
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD nb+24(FP), R22
	MOVD tab+32(FP), R4
	MOVD rows+40(FP), R5
	MOVD out+48(FP), R6
	MOVD stride+56(FP), R9
	LSL  $2, R9, R9
	DOT4Q8_0(I32D)

// ---------------------------------------------------------------- Q4_0

// Q4W loads a weight block at R0 (moved on by 18): low nibbles (elements
// 0-15) in V0, high nibbles (16-31) in V1, the scale d_w in F16. V31 holds
// 0x0f bytes.
#define Q4W \
	MOVHU.P 2(R0), R7;               \
	VLD1.P  16(R0), [V1.B16];        \
	FMOVS   (R4)(R7<<2), F16;        \
	VAND    V31.B16, V1.B16, V0.B16; \
	VUSHR   $4, V1.B16, V1.B16

// Q4A(I32, qs, d, s, acc): one activation block against Q4W's: with S the
// exact sum of nibble times quant, acc += d_w * (d_a*S - 8*s_a) (the
// nibbles are q+8; s_a = d_a*Σa, so 8*s_a is exact). F30 holds 8.
#define Q4A(I32, qs, d, s, acc) \
	VLD1.P  32(qs), [V2.B16, V3.B16]; \
	FMOVS.P 4(d), F17;                \
	FMOVS.P 4(s), F19;                \
	I32(6, 0, 2, 1, 3, 4, 5);         \
	VADDV   V6.S4, V6;                \
	SCVTF_4S(6, 6);                   \
	FMULS   F6, F17, F18;             \
	FMSUBS  F19, F18, F30, F18;       \
	FMADDS  F18, acc, F16, acc

#define Q4CONST \
	VMOVI $15, V31.B16; \
	FMOVS $8.0, F30

#define DOTQ4_0(I32) \
	Q4CONST;                         \
q4row:                                   \
	MOVD R19, R1;                    \
	MOVD R20, R2;                    \
	MOVD R21, R8;                    \
	MOVD R22, R3;                    \
	VEOR V20.B16, V20.B16, V20.B16;  \
q4blk:                                   \
	Q4W;                             \
	Q4A(I32, R1, R2, R8, F20);       \
	SUBS $1, R3, R3;                 \
	BNE  q4blk;                      \
	FMOVS.P F20, 4(R6);              \
	SUBS $1, R5, R5;                 \
	BNE  q4row;                      \
	RET

#define DOT4Q4_0(I32) \
	Q4CONST;                         \
q4row4:                                  \
	MOVD 0(R19), R1;                 \
	MOVD 8(R19), R13;                \
	MOVD 16(R19), R14;               \
	MOVD 24(R19), R15;               \
	MOVD 0(R20), R2;                 \
	MOVD 8(R20), R10;                \
	MOVD 16(R20), R11;               \
	MOVD 24(R20), R12;               \
	MOVD 0(R21), R8;                 \
	MOVD 8(R21), R16;                \
	MOVD 16(R21), R17;               \
	MOVD 24(R21), R23;               \
	MOVD R22, R3;                    \
	VEOR V20.B16, V20.B16, V20.B16;  \
	VEOR V21.B16, V21.B16, V21.B16;  \
	VEOR V22.B16, V22.B16, V22.B16;  \
	VEOR V23.B16, V23.B16, V23.B16;  \
q4blk4:                                  \
	Q4W;                             \
	Q4A(I32, R1, R2, R8, F20);       \
	Q4A(I32, R13, R10, R16, F21);    \
	Q4A(I32, R14, R11, R17, F22);    \
	Q4A(I32, R15, R12, R23, F23);    \
	SUBS $1, R3, R3;                 \
	BNE  q4blk4;                     \
	STORE4(F20, F21, F22, F23);      \
	SUBS $1, R5, R5;                 \
	BNE  q4row4;                     \
	RET

// func dotQ4_0NEON(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)
TEXT ·dotQ4_0NEON(SB), NOSPLIT, $0-64
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD s+24(FP), R21
	MOVD nb+32(FP), R22
	MOVD tab+40(FP), R4
	MOVD rows+48(FP), R5
	MOVD out+56(FP), R6
	DOTQ4_0(I32N)

// func dotQ4_0SDOT(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)
TEXT ·dotQ4_0SDOT(SB), NOSPLIT, $0-64
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD s+24(FP), R21
	MOVD nb+32(FP), R22
	MOVD tab+40(FP), R4
	MOVD rows+48(FP), R5
	MOVD out+56(FP), R6
	DOTQ4_0(I32D)

// func dot4Q4_0NEON(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
TEXT ·dot4Q4_0NEON(SB), NOSPLIT, $0-72
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD s+24(FP), R21
	MOVD nb+32(FP), R22
	MOVD tab+40(FP), R4
	MOVD rows+48(FP), R5
	MOVD out+56(FP), R6
	MOVD stride+64(FP), R9
	LSL  $2, R9, R9
	DOT4Q4_0(I32N)

// func dot4Q4_0SDOT(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
TEXT ·dot4Q4_0SDOT(SB), NOSPLIT, $0-72
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD s+24(FP), R21
	MOVD nb+32(FP), R22
	MOVD tab+40(FP), R4
	MOVD rows+48(FP), R5
	MOVD out+56(FP), R6
	MOVD stride+64(FP), R9
	LSL  $2, R9, R9
	DOT4Q4_0(I32D)

// ---------------------------------------------------------------- Q4_K

// Q4KC(I32, x0, x1): one 32-byte chunk of nibbles at R0 (moved on by 32)
// against the activations at R1 (moved on by 64): Vx0 = the int32 partial
// sums of the low nibbles (sub-block 2c) with the first 32 quants, Vx1 of
// the high nibbles (sub-block 2c+1) with the next 32. V0-V9 are clobbered.
#define Q4KC(I32, x0, x1) \
	VLD1.P 32(R0), [V0.B16, V1.B16];                 \
	VAND   V31.B16, V0.B16, V2.B16;                  \
	VAND   V31.B16, V1.B16, V3.B16;                  \
	VUSHR  $4, V0.B16, V0.B16;                       \
	VUSHR  $4, V1.B16, V1.B16;                       \
	VLD1.P 64(R1), [V4.B16, V5.B16, V6.B16, V7.B16]; \
	I32(x0, 2, 4, 3, 5, 8, 9);                       \
	I32(x1, 0, 6, 1, 7, 8, 9)

// Q4KSB(I32): one super-block at R0 (moved on by 144) against one
// activation row (quants R1, scales R2, sums R8, moved on by 256, 8, 8):
//   acc += d * Σ_j D_j*float(sc_j*S_j) - dmin * Σ_j s_j*mn_j
// (F30) with S_j the exact integer sum of sub-block j. The eight 6-bit
// scales and minimums are unpacked in general registers, four bytes at a
// time (R7, R10-R15 are clobbered), then widened in vectors: V26, V27 the
// scales as int32, V28, V29 the minimums as float32. V31 holds 0x0f bytes.
#define Q4KSB(I32) \
	MOVHU  (R0), R7;                 \
	FMOVS  (R4)(R7<<2), F14;         \
	MOVHU  2(R0), R7;                \
	FMOVS  (R4)(R7<<2), F15;         \
	MOVWU  4(R0), R10;               \
	MOVWU  8(R0), R11;               \
	MOVWU  12(R0), R12;              \
	ANDW   $0x3f3f3f3f, R10, R13;    \
	ANDW   $0x3f3f3f3f, R11, R14;    \
	LSRW   $6, R10, R10;             \
	ANDW   $0x03030303, R10, R10;    \
	ANDW   $0x0f0f0f0f, R12, R15;    \
	ORRW   R10<<4, R15, R15;         \
	LSRW   $6, R11, R11;             \
	ANDW   $0x03030303, R11, R11;    \
	LSRW   $4, R12, R12;             \
	ANDW   $0x0f0f0f0f, R12, R12;    \
	ORRW   R11<<4, R12, R12;         \
	ORR    R15<<32, R13, R13;        \
	ORR    R12<<32, R14, R14;        \
	VMOV   R13, V24.D[0];            \
	VMOV   R14, V25.D[0];            \
	VUXTL  V24.B8, V24.H8;           \
	VUXTL  V24.H4, V26.S4;           \
	VUXTL2 V24.H8, V27.S4;           \
	VUXTL  V25.B8, V25.H8;           \
	VUXTL  V25.H4, V28.S4;           \
	VUXTL2 V25.H8, V29.S4;           \
	UCVTF_4S(28, 28);                \
	UCVTF_4S(29, 29);                \
	ADD    $16, R0, R0;              \
	Q4KC(I32, 16, 17);               \
	Q4KC(I32, 18, 19);               \
	Q4KC(I32, 20, 21);               \
	Q4KC(I32, 22, 23);               \
	VADDP  V17.S4, V16.S4, V16.S4;   \
	VADDP  V19.S4, V18.S4, V18.S4;   \
	VADDP  V18.S4, V16.S4, V16.S4;   \
	VADDP  V21.S4, V20.S4, V20.S4;   \
	VADDP  V23.S4, V22.S4, V22.S4;   \
	VADDP  V22.S4, V20.S4, V20.S4;   \
	MUL_4S(16, 16, 26);              \
	MUL_4S(20, 20, 27);              \
	SCVTF_4S(16, 16);                \
	SCVTF_4S(20, 20);                \
	VLD1.P 32(R2), [V10.S4, V11.S4]; \
	VLD1.P 32(R8), [V12.S4, V13.S4]; \
	FMUL_4S(16, 16, 10);             \
	VFMLA  V11.S4, V20.S4, V16.S4;   \
	FMUL_4S(12, 12, 28);             \
	VFMLA  V13.S4, V29.S4, V12.S4;   \
	HSUM4(16);                       \
	HSUM4(12);                       \
	FMADDS F16, F30, F14, F30;       \
	FMSUBS F12, F30, F15, F30

#define DOTQ4_K(I32) \
	VMOVI $15, V31.B16;              \
q4krow:                                  \
	MOVD R19, R1;                    \
	MOVD R20, R2;                    \
	MOVD R21, R8;                    \
	MOVD R22, R3;                    \
	VEOR V30.B16, V30.B16, V30.B16;  \
q4ksb:                                   \
	Q4KSB(I32);                      \
	SUBS $1, R3, R3;                 \
	BNE  q4ksb;                      \
	FMOVS.P F30, 4(R6);              \
	SUBS $1, R5, R5;                 \
	BNE  q4krow;                     \
	RET

// Each row runs Q4KSB for the four activation rows in turn: the row is
// read from memory once and from the L1 cache the other three times (the
// unpacking is redone; it is small next to the products). R16 counts the
// activation rows, R17 is the output of the current one, R23 the row's
// start.
#define DOT4Q4_K(I32) \
	VMOVI $15, V31.B16;              \
q4krow4:                                 \
	MOVD R0, R23;                    \
	MOVD R6, R17;                    \
	MOVD $0, R16;                    \
q4kact4:                                 \
	MOVD R23, R0;                    \
	MOVD (R19)(R16<<3), R1;          \
	MOVD (R20)(R16<<3), R2;          \
	MOVD (R21)(R16<<3), R8;          \
	MOVD R22, R3;                    \
	VEOR V30.B16, V30.B16, V30.B16;  \
q4ksb4:                                  \
	Q4KSB(I32);                      \
	SUBS $1, R3, R3;                 \
	BNE  q4ksb4;                     \
	FMOVS F30, (R17);                \
	ADD   R9, R17, R17;              \
	ADD   $1, R16, R16;              \
	CMP   $4, R16;                   \
	BNE   q4kact4;                   \
	ADD   $4, R6, R6;                \
	SUBS  $1, R5, R5;                \
	BNE   q4krow4;                   \
	RET

// func dotQ4_KNEON(w *byte, qs *int8, d, s *float32, nsb int, tab *float32, rows int, out *float32)
TEXT ·dotQ4_KNEON(SB), NOSPLIT, $0-64
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD s+24(FP), R21
	MOVD nsb+32(FP), R22
	MOVD tab+40(FP), R4
	MOVD rows+48(FP), R5
	MOVD out+56(FP), R6
	DOTQ4_K(I32N)

// func dotQ4_KSDOT(w *byte, qs *int8, d, s *float32, nsb int, tab *float32, rows int, out *float32)
TEXT ·dotQ4_KSDOT(SB), NOSPLIT, $0-64
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD s+24(FP), R21
	MOVD nsb+32(FP), R22
	MOVD tab+40(FP), R4
	MOVD rows+48(FP), R5
	MOVD out+56(FP), R6
	DOTQ4_K(I32D)

// func dot4Q4_KNEON(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)
TEXT ·dot4Q4_KNEON(SB), NOSPLIT, $0-72
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD s+24(FP), R21
	MOVD nsb+32(FP), R22
	MOVD tab+40(FP), R4
	MOVD rows+48(FP), R5
	MOVD out+56(FP), R6
	MOVD stride+64(FP), R9
	LSL  $2, R9, R9
	DOT4Q4_K(I32N)

// func dot4Q4_KSDOT(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)
TEXT ·dot4Q4_KSDOT(SB), NOSPLIT, $0-72
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD s+24(FP), R21
	MOVD nsb+32(FP), R22
	MOVD tab+40(FP), R4
	MOVD rows+48(FP), R5
	MOVD out+56(FP), R6
	MOVD stride+64(FP), R9
	LSL  $2, R9, R9
	DOT4Q4_K(I32D)

// ---------------------------------------------------------------- Q6_K

// Q6G(I16, p): the 32 6-bit quants of one group (+32, in V6, V7) against
// the next 32 activation quants at R1 (moved on by 32): p (a V register)
// = [the two int32 partial sums of the first 16 products, those of the
// last 16] (each 16 has its own scale). The quants are made signed first,
// so the products need no activation sums (b is not read). V8-V11, V24,
// V25 are clobbered.
#define Q6G(I16, p) \
	VSUB   V28.B16, V6.B16, V6.B16;  \
	VSUB   V28.B16, V7.B16, V7.B16;  \
	VLD1.P 32(R1), [V8.B16, V9.B16]; \
	I16(24, 6, 8, 10);               \
	I16(25, 7, 9, 11);               \
	VADDP  V25.S4, V24.S4, p.S4

// Q6H(I16, s0, s1, qh): one half of a super-block: its 64 bytes of low
// nibbles at R0 (moved on by 64; its 32 bytes of high bits at R0+qh)
// against 128 activation quants. s0, s1 = the exact sums of its eight
// groups of 16, in order. For position l of group k (0-3), the low four
// bits are nibble k>>1 of byte l + 32*(k&1), the high two bits bits 2k,
// 2k+1 of qh[l]. V29 holds 0x30 bytes, V31 0x0f bytes.
#define Q6H(I16, s0, s1, qh) \
	ADD    $qh, R0, R7;                              \
	VLD1   (R7), [V4.B16, V5.B16];                   \
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]; \
	VSHL   $4, V4.B16, V24.B16;                      \
	VSHL   $4, V5.B16, V25.B16;                      \
	VAND   V29.B16, V24.B16, V24.B16;                \
	VAND   V29.B16, V25.B16, V25.B16;                \
	VAND   V31.B16, V0.B16, V6.B16;                  \
	VAND   V31.B16, V1.B16, V7.B16;                  \
	VORR   V24.B16, V6.B16, V6.B16;                  \
	VORR   V25.B16, V7.B16, V7.B16;                  \
	Q6G(I16, V12);                                   \
	VSHL   $2, V4.B16, V24.B16;                      \
	VSHL   $2, V5.B16, V25.B16;                      \
	VAND   V29.B16, V24.B16, V24.B16;                \
	VAND   V29.B16, V25.B16, V25.B16;                \
	VAND   V31.B16, V2.B16, V6.B16;                  \
	VAND   V31.B16, V3.B16, V7.B16;                  \
	VORR   V24.B16, V6.B16, V6.B16;                  \
	VORR   V25.B16, V7.B16, V7.B16;                  \
	Q6G(I16, V13);                                   \
	VAND   V29.B16, V4.B16, V24.B16;                 \
	VAND   V29.B16, V5.B16, V25.B16;                 \
	VUSHR  $4, V0.B16, V6.B16;                       \
	VUSHR  $4, V1.B16, V7.B16;                       \
	VORR   V24.B16, V6.B16, V6.B16;                  \
	VORR   V25.B16, V7.B16, V7.B16;                  \
	Q6G(I16, V14);                                   \
	VUSHR  $2, V4.B16, V24.B16;                      \
	VUSHR  $2, V5.B16, V25.B16;                      \
	VAND   V29.B16, V24.B16, V24.B16;                \
	VAND   V29.B16, V25.B16, V25.B16;                \
	VUSHR  $4, V2.B16, V6.B16;                       \
	VUSHR  $4, V3.B16, V7.B16;                       \
	VORR   V24.B16, V6.B16, V6.B16;                  \
	VORR   V25.B16, V7.B16, V7.B16;                  \
	Q6G(I16, V15);                                   \
	VADDP  V13.S4, V12.S4, s0.S4;                    \
	VADDP  V15.S4, V14.S4, s1.S4

// Q6KSB(I16): one super-block at R0 (moved on by 210) against one
// activation row (quants R1, block scales R2, moved on by 256 and 8):
//   acc += d * Σ_j D_j * float(Σ_{g in j} sc_g*S_g)
// (F30) with S_g the exact sum of group g of 16 and sc_g its int8 scale.
// V20-V23 hold the sixteen scales as int32, V28 32 bytes.
#define Q6KSB(I16) \
	MOVHU  208(R0), R7;              \
	FMOVS  (R4)(R7<<2), F26;         \
	ADD    $192, R0, R7;             \
	VLD1   (R7), [V24.B16];          \
	SXTL_8H(25, 24);                 \
	SXTL2_8H(24, 24);                \
	SXTL_4S(20, 25);                 \
	SXTL2_4S(21, 25);                \
	SXTL_4S(22, 24);                 \
	SXTL2_4S(23, 24);                \
	Q6H(I16, V16, V17, 128);         \
	Q6H(I16, V18, V19, 96);          \
	ADD    $82, R0, R0;              \
	MUL_4S(16, 16, 20);              \
	MUL_4S(17, 17, 21);              \
	MUL_4S(18, 18, 22);              \
	MUL_4S(19, 19, 23);              \
	VADDP  V17.S4, V16.S4, V16.S4;   \
	VADDP  V19.S4, V18.S4, V18.S4;   \
	SCVTF_4S(16, 16);                \
	SCVTF_4S(18, 18);                \
	VLD1.P 32(R2), [V10.S4, V11.S4]; \
	FMUL_4S(16, 16, 10);             \
	VFMLA  V11.S4, V18.S4, V16.S4;   \
	HSUM4(16);                       \
	FMADDS F16, F30, F26, F30

// Q6KCONST sets V31 = 0x0f, V29 = 0x30, V28 = 32 (bytes).
#define Q6KCONST \
	VMOVI $15, V31.B16; \
	VMOVI $48, V29.B16; \
	VMOVI $32, V28.B16

#define DOTQ6_K(I16) \
	Q6KCONST;                        \
q6krow:                                  \
	MOVD R19, R1;                    \
	MOVD R20, R2;                    \
	MOVD R22, R3;                    \
	VEOR V30.B16, V30.B16, V30.B16;  \
q6ksb:                                   \
	Q6KSB(I16);                      \
	SUBS $1, R3, R3;                 \
	BNE  q6ksb;                      \
	FMOVS.P F30, 4(R6);              \
	SUBS $1, R5, R5;                 \
	BNE  q6krow;                     \
	RET

// As DOT4Q4_K: Q6KSB for the four activation rows in turn, the row from
// the L1 cache after the first.
#define DOT4Q6_K(I16) \
	Q6KCONST;                        \
q6krow4:                                 \
	MOVD R0, R23;                    \
	MOVD R6, R17;                    \
	MOVD $0, R16;                    \
q6kact4:                                 \
	MOVD R23, R0;                    \
	MOVD (R19)(R16<<3), R1;          \
	MOVD (R20)(R16<<3), R2;          \
	MOVD R22, R3;                    \
	VEOR V30.B16, V30.B16, V30.B16;  \
q6ksb4:                                  \
	Q6KSB(I16);                      \
	SUBS $1, R3, R3;                 \
	BNE  q6ksb4;                     \
	FMOVS F30, (R17);                \
	ADD   R9, R17, R17;              \
	ADD   $1, R16, R16;              \
	CMP   $4, R16;                   \
	BNE   q6kact4;                   \
	ADD   $4, R6, R6;                \
	SUBS  $1, R5, R5;                \
	BNE   q6krow4;                   \
	RET

// func dotQ6_KNEON(w *byte, qs *int8, d *float32, b *int16, nsb int, tab *float32, rows int, out *float32)
TEXT ·dotQ6_KNEON(SB), NOSPLIT, $0-64
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD nsb+32(FP), R22
	MOVD tab+40(FP), R4
	MOVD rows+48(FP), R5
	MOVD out+56(FP), R6
	DOTQ6_K(I16N)

// func dotQ6_KSDOT(w *byte, qs *int8, d *float32, b *int16, nsb int, tab *float32, rows int, out *float32)
TEXT ·dotQ6_KSDOT(SB), NOSPLIT, $0-64
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD nsb+32(FP), R22
	MOVD tab+40(FP), R4
	MOVD rows+48(FP), R5
	MOVD out+56(FP), R6
	DOTQ6_K(I16D)

// func dot4Q6_KNEON(w *byte, qs *[4]*int8, d *[4]*float32, b *[4]*int16, nsb int, tab *float32, rows int, out *float32, stride int)
TEXT ·dot4Q6_KNEON(SB), NOSPLIT, $0-72
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD nsb+32(FP), R22
	MOVD tab+40(FP), R4
	MOVD rows+48(FP), R5
	MOVD out+56(FP), R6
	MOVD stride+64(FP), R9
	LSL  $2, R9, R9
	DOT4Q6_K(I16N)

// func dot4Q6_KSDOT(w *byte, qs *[4]*int8, d *[4]*float32, b *[4]*int16, nsb int, tab *float32, rows int, out *float32, stride int)
TEXT ·dot4Q6_KSDOT(SB), NOSPLIT, $0-72
	MOVD w+0(FP), R0
	MOVD qs+8(FP), R19
	MOVD d+16(FP), R20
	MOVD nsb+32(FP), R22
	MOVD tab+40(FP), R4
	MOVD rows+48(FP), R5
	MOVD out+56(FP), R6
	MOVD stride+64(FP), R9
	LSL  $2, R9, R9
	DOT4Q6_K(I16D)

// ---------------------------------------------------------------- F16

// F16X(x, a0, a1, t0, t1): eight activations at x (moved on by 32) times
// the eight widened weights in V1, V2: a0 += lo*x[0:4], a1 += hi*x[4:8]
// (a0, a1, t0, t1 are V registers).
#define F16X(x, a0, a1, t0, t1) \
	VLD1.P 32(x), [t0.S4, t1.S4]; \
	VFMLA  V1.S4, t0.S4, a0.S4;   \
	VFMLA  V2.S4, t1.S4, a1.S4

// F16W: eight halves at R0 (moved on by 16), widened into V1, V2.
#define F16W \
	VLD1.P 16(R0), [V0.H8]; \
	FCVTL_4S(1, 0);         \
	FCVTL2_4S(2, 0)

// F16SUM(a0, a1): Sa0 = HSUM4(Va0 + Va1).
#define F16SUM(a0, a1) \
	FADD_4S(a0, a0, a1); \
	HSUM4(a0)

// func dotF16NEON(w *byte, x *float32, n, rows int, out *float32)
// n is a multiple of 8.
TEXT ·dotF16NEON(SB), NOSPLIT, $0-40
	MOVD w+0(FP), R0
	MOVD rows+24(FP), R5
	MOVD out+32(FP), R6

f16row:
	MOVD x+8(FP), R1
	MOVD n+16(FP), R3
	LSR  $3, R3, R3
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16

f16loop:
	F16W
	F16X(R1, V16, V17, V3, V4)
	SUBS $1, R3, R3
	BNE  f16loop
	F16SUM(16, 17)
	FMOVS.P F16, 4(R6)
	SUBS $1, R5, R5
	BNE  f16row
	RET

// func dot4F16NEON(w *byte, x *[4]*float32, n, rows int, out *float32, stride int)
// Eight halves are widened once for the four activation rows.
TEXT ·dot4F16NEON(SB), NOSPLIT, $0-48
	MOVD w+0(FP), R0
	MOVD rows+24(FP), R5
	MOVD out+32(FP), R6
	MOVD stride+40(FP), R9
	LSL  $2, R9, R9

f16row4:
	MOVD x+8(FP), R7
	MOVD 0(R7), R1
	MOVD 8(R7), R13
	MOVD 16(R7), R14
	MOVD 24(R7), R15
	MOVD n+16(FP), R3
	LSR  $3, R3, R3
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	VEOR V20.B16, V20.B16, V20.B16
	VEOR V21.B16, V21.B16, V21.B16
	VEOR V22.B16, V22.B16, V22.B16
	VEOR V23.B16, V23.B16, V23.B16

f16loop4:
	F16W
	F16X(R1, V16, V17, V3, V4)
	F16X(R13, V18, V19, V5, V6)
	F16X(R14, V20, V21, V7, V8)
	F16X(R15, V22, V23, V9, V10)
	SUBS $1, R3, R3
	BNE  f16loop4
	F16SUM(16, 17)
	F16SUM(18, 19)
	F16SUM(20, 21)
	F16SUM(22, 23)
	STORE4(F16, F18, F20, F22)
	SUBS $1, R5, R5
	BNE  f16row4
	RET

// ---------------------------------------------------------------- ceilings

// func int8MulPeakNEON(n int)
// n rounds of 8 SMLAL + 8 SMLAL2 (128 int8 multiply-adds) into sixteen
// independent accumulators, so that only the multiply pipes limit it.
TEXT ·int8MulPeakNEON(SB), NOSPLIT, $0-8
	MOVD  n+0(FP), R0
	CMP   $0, R0
	BLE   peakdone
	VMOVI $3, V0.B16
	VMOVI $5, V1.B16

peakloop:
	SMLAL_8H(16, 0, 1)
	SMLAL_8H(17, 0, 1)
	SMLAL_8H(18, 0, 1)
	SMLAL_8H(19, 0, 1)
	SMLAL_8H(20, 0, 1)
	SMLAL_8H(21, 0, 1)
	SMLAL_8H(22, 0, 1)
	SMLAL_8H(23, 0, 1)
	SMLAL2_8H(24, 0, 1)
	SMLAL2_8H(25, 0, 1)
	SMLAL2_8H(26, 0, 1)
	SMLAL2_8H(27, 0, 1)
	SMLAL2_8H(28, 0, 1)
	SMLAL2_8H(29, 0, 1)
	SMLAL2_8H(30, 0, 1)
	SMLAL2_8H(31, 0, 1)
	SUBS  $1, R0, R0
	BNE   peakloop

peakdone:
	RET

// func int8MulPeakSDOT(n int)
// n rounds of 16 SDOT (256 int8 multiply-adds) into sixteen independent
// accumulators.
TEXT ·int8MulPeakSDOT(SB), NOSPLIT, $0-8
	MOVD  n+0(FP), R0
	CMP   $0, R0
	BLE   sdotdone
	VMOVI $3, V0.B16
	VMOVI $5, V1.B16

sdotloop:
	SDOT_4S(16, 0, 1)
	SDOT_4S(17, 0, 1)
	SDOT_4S(18, 0, 1)
	SDOT_4S(19, 0, 1)
	SDOT_4S(20, 0, 1)
	SDOT_4S(21, 0, 1)
	SDOT_4S(22, 0, 1)
	SDOT_4S(23, 0, 1)
	SDOT_4S(24, 0, 1)
	SDOT_4S(25, 0, 1)
	SDOT_4S(26, 0, 1)
	SDOT_4S(27, 0, 1)
	SDOT_4S(28, 0, 1)
	SDOT_4S(29, 0, 1)
	SDOT_4S(30, 0, 1)
	SDOT_4S(31, 0, 1)
	SUBS  $1, R0, R0
	BNE   sdotloop

sdotdone:
	RET
