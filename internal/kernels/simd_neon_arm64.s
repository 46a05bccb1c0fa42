//go:build arm64 && !purego

#include "textflag.h"
#include "simd_neon_arm64.h"

// Advanced SIMD kernels of arm64 (simd_arm64.go): the dot kernels of every
// weight type for the neon path (*NEON, every ARMv8-A CPU), of the
// quantized types for the dotprod path (*SDOT, ARMv8.2-A's optional dot
// product instructions; the float types keep their NEON kernels there) and
// the four-input kernels of the quantized types for the i8mm path (*SMMLA,
// the Int8 matrix multiply instructions; the rest stays dotprod's),
// then activation quantization, fp16 conversions and axpy, which all paths
// use. The dot kernels take the arguments of the AVX2 ones (see
// gen_neon_arm64.go); tab is the f16 -> f32 table, read for the weights'
// scalar scales, while F16 weights are widened with FCVTL.
//
// Every output, whichever kernel computes it, is the same sequence of float
// operations: per (super-)block exact integer sums, converted and scaled in
// a fixed order, then accumulated into one float in block order from 0.
// The four-input kernels unpack each weight block once for the four
// activation rows and then run, per row, the one-input kernel's float
// operations in its order (the K-quant ones regroup the integer sums,
// which are exact), so a row gives the same bits alone or in a batch of
// any size (MatMul mixes dotRows and dot4Rows by shape). The neon and
// dotprod paths differ only in how they form the integer sums (the I32/I16
// macro a kernel body is given), the i8mm kernels also in running the
// float operations of four outputs in the lanes of a vector (see "pairs of
// rows"): all give the same bits.
//
// Integer products without SDOT: SMULL multiplies the low eight int8 lanes
// into int16, SMLAL2 adds the high eight's products, so each int16 lane
// holds two products (at most 2*128*127 = 32512: no overflow, activations
// are in [-127, 127]); SADDLP/SADALP widen pairs into int32. SDOT adds
// four products into each int32 lane directly, SMMLA eight (a 2×2 matrix
// of int32 lanes, each the dot product of 8 int8 of two rows).
//
// Go's assembler lacks these instructions (and the float vector ones), so
// they are written as WORDs below: d, n, m are register numbers (V0-V31),
// placed at bits 0, 5 and 16 as in every three-register SIMD encoding.
//
// The kernels are skeleton macros, each expanded in a TEXT of each path
// with the path's I32/I16 macro; a skeleton loads its arguments (the ARGS
// macros) and its labels are local to the TEXT it is expanded in.

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

// PTRS4(p, r0, r1, r2, r3) loads the four pointers of the array at p.
#define PTRS4(p, r0, r1, r2, r3) \
	MOVD 0(p), r0;  \
	MOVD 8(p), r1;  \
	MOVD 16(p), r2; \
	MOVD 24(p), r3

// ZERO4(v0, v1, v2, v3) clears four accumulators (V registers).
#define ZERO4(v0, v1, v2, v3) \
	VEOR v0.B16, v0.B16, v0.B16; \
	VEOR v1.B16, v1.B16, v1.B16; \
	VEOR v2.B16, v2.B16, v2.B16; \
	VEOR v3.B16, v3.B16, v3.B16

// LOOP(r, label): r counts down; back to label while it is not zero.
#define LOOP(r, label) \
	SUBS $1, r, r; \
	BNE  label

// HALF(addr, f): f = the fp16 at addr as float32 (through the table at R4);
// HALFP(f): the same for the fp16 at R0, moved on by 2. R7 is clobbered.
#define HALF(addr, f) \
	MOVHU addr, R7; \
	FMOVS (R4)(R7<<2), f

#define HALFP(f) \
	MOVHU.P 2(R0), R7; \
	FMOVS   (R4)(R7<<2), f

// ---------------------------------------------------------------- arguments

// Register use of the quantized kernels, loaded by the ARGS macros below:
// R0 the weights (moved along), R4 tab, R5 the rows left, R6 out, R9 the
// output stride in bytes (dot4), R19 qs (dot4: the array of four), R20 d,
// R21 s, R22 nb or nsb. R3 counts blocks, R7 is scratch.
//
// Each kernel skeleton below begins with its arguments' loads, so that a
// TEXT block is its skeleton's one line. vet's asmdecl checks the argument
// names of a line against the TEXT above it, so the macros that name
// arguments stand here, before the first TEXT (as the amd64 skeletons do);
// the tests run every kernel against the generic one.

// WARGS: w, qs, d (the first three arguments of every quantized kernel).
#define WARGS \
	MOVD w+0(FP), R0;   \
	MOVD qs+8(FP), R19; \
	MOVD d+16(FP), R20

// OARGS(off): tab, rows, out at off, off+8, off+16.
#define OARGS(off) \
	MOVD tab+off(FP), R4;    \
	MOVD rows+off+8(FP), R5; \
	MOVD out+off+16(FP), R6

// The arguments of Q8_0 (w, qs, d, nb, tab, rows, out), of the types with
// activation sums (w, qs, d, s, nb, ...), of Q4_K and Q5_K (w, qs, d, s,
// nsb, ...) and of Q6_K (w, qs, d, b, nsb, ...: b is not read).
#define Q8ARGS WARGS; MOVD nb+24(FP), R22; OARGS(32)
#define QSARGS WARGS; MOVD s+24(FP), R21; MOVD nb+32(FP), R22; OARGS(40)
#define KARGS  WARGS; MOVD s+24(FP), R21; MOVD nsb+32(FP), R22; OARGS(40)
#define Q6ARGS WARGS; MOVD nsb+32(FP), R22; OARGS(40)

// FARGS: the float kernels' w, x, n/8 (n is a multiple of 8), rows, out.
#define FARGS \
	MOVD w+0(FP), R0;     \
	MOVD x+8(FP), R19;    \
	MOVD n+16(FP), R22;   \
	LSR  $3, R22, R22;    \
	MOVD rows+24(FP), R5; \
	MOVD out+32(FP), R6

// STRIDE(off): a dot4 kernel's output stride (at off) in bytes, in R9.
#define STRIDE(off) \
	MOVD stride+off(FP), R9; \
	LSL  $2, R9, R9

// ---------------------------------------------------------------- Q8_0

// KERNELS4(n1, d1, n4, d4, f1, f4, ONE, FOUR, N, D): a type's four kernels
// (TEXT symbols n1, d1 one-input, n4, d4 four-input; frames f1, f4): ONE
// and FOUR with the widening multiply-adds (N) and with SDOT (D).
#define KERNELS4(n1, d1, n4, d4, f1, f4, ONE, FOUR, N, D) \
	TEXT n1(SB), NOSPLIT, f1; ONE(N); \
	TEXT d1(SB), NOSPLIT, f1; ONE(D); \
	TEXT n4(SB), NOSPLIT, f4; FOUR(N); \
	TEXT d4(SB), NOSPLIT, f4; FOUR(D)

// Q8W loads a weight block at R0 (moved on by 34): quants in V0, V1 and
// the scale d_w in F16 (through the table at R4).
#define Q8W \
	MOVHU.P 2(R0), R7;                \
	VLD1.P  32(R0), [V0.B16, V1.B16]; \
	FMOVS   (R4)(R7<<2), F16

// QSUM(I32): S6 = float(S) with S the exact sum of the 32 products of the
// weight quants in V0, V1 by the activation quants in V2, V3 (V4, V5 are
// clobbered).
#define QSUM(I32) \
	I32(6, 0, 2, 1, 3, 4, 5); \
	VADDV   V6.S4, V6;        \
	SCVTF_4S(6, 6)

// Q8A(I32, qs, d, acc): one activation block (quants at qs, scale at d,
// both moved on) against the block of Q8W: acc = fma(float(S), d_w*d_a,
// acc) with S the exact sum of the 32 products, as the AVX2 kernels do.
#define Q8A(I32, qs, d, acc) \
	VLD1.P  32(qs), [V2.B16, V3.B16]; \
	FMOVS.P 4(d), F17;                \
	QSUM(I32);                        \
	FMULS   F17, F16, F18;            \
	FMADDS  F18, acc, F6, acc

#define DOTQ8_0(I32) \
	Q8ARGS;                          \
q8row:                                   \
	MOVD R19, R1;                    \
	MOVD R20, R2;                    \
	MOVD R22, R3;                    \
	VEOR V20.B16, V20.B16, V20.B16;  \
q8blk:                                   \
	Q8W;                             \
	Q8A(I32, R1, R2, F20);           \
	LOOP(R3, q8blk);                 \
	FMOVS.P F20, 4(R6);              \
	LOOP(R5, q8row);                 \
	RET

// Each weight block is loaded once for the four activation rows.
#define DOT4Q8_0(I32) \
	Q8ARGS;                          \
	STRIDE(56);                      \
q8row4:                                  \
	PTRS4(R19, R1, R13, R14, R15);   \
	PTRS4(R20, R2, R10, R11, R12);   \
	MOVD R22, R3;                    \
	ZERO4(V20, V21, V22, V23);       \
q8blk4:                                  \
	Q8W;                             \
	Q8A(I32, R1, R2, F20);           \
	Q8A(I32, R13, R10, F21);         \
	Q8A(I32, R14, R11, F22);         \
	Q8A(I32, R15, R12, F23);         \
	LOOP(R3, q8blk4);                \
	STORE4(F20, F21, F22, F23);      \
	LOOP(R5, q8row4);                \
	RET

// func dotQ8_0NEON(w *byte, qs *int8, d *float32, nb int, tab *float32, rows int, out *float32)
// func dot4Q8_0NEON(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
// and the same for the SDOT ones.
KERNELS4(·dotQ8_0NEON, ·dotQ8_0SDOT, ·dot4Q8_0NEON, ·dot4Q8_0SDOT, $0-56, $0-64, DOTQ8_0, DOT4Q8_0, I32N, I32D)

// ---------------------------------------------------------------- Q4_0

// NIBS splits the 16 bytes in V1 into their low nibbles (elements 0-15 of
// a block) in V0 and their high ones (16-31) in V1. V31 holds 0x0f bytes.
#define NIBS \
	VAND    V31.B16, V1.B16, V0.B16; \
	VUSHR   $4, V1.B16, V1.B16

// Q4W loads a weight block at R0 (moved on by 18): its nibbles in V0, V1
// (NIBS), the scale d_w in F16.
#define Q4W \
	MOVHU.P 2(R0), R7;               \
	VLD1.P  16(R0), [V1.B16];        \
	FMOVS   (R4)(R7<<2), F16;        \
	NIBS

// QSA(I32, qs, d, s): one activation block of a type with activation
// sums (quants at qs, d_a at d into F17, s_a = d_a*Σa at s into F19, all
// moved on) against the weight quants in V0, V1: S6 = float(S) (QSUM).
#define QSA(I32, qs, d, s) \
	VLD1.P  32(qs), [V2.B16, V3.B16]; \
	FMOVS.P 4(d), F17;                \
	FMOVS.P 4(s), F19;                \
	QSUM(I32)

// Q4A(I32, qs, d, s, acc): one activation block against Q4W's: with S the
// exact sum of nibble times quant, acc += d_w * (d_a*S - o*s_a) where F30
// holds the offset o of the unsigned quants (8 for Q4_0, 16 for Q5_0:
// they are q+o) and s_a = d_a*Σa (o*s_a is exact).
#define Q4A(I32, qs, d, s, acc) \
	QSA(I32, qs, d, s);               \
	FMULS   F6, F17, F18;             \
	FMSUBS  F19, F18, F30, F18;       \
	FMADDS  F18, acc, F16, acc

#define Q4CONST \
	VMOVI $15, V31.B16; \
	FMOVS $8.0, F30

// DOTQS(CONST, W, A, I32), DOT4QS: the loops of the block types with
// activation sums (Q4_0, Q4_1, Q5_0, Q5_1): CONST sets their constants, W
// loads and unpacks a weight block, A(I32, qs, d, s, acc) runs one
// activation block against it.
#define DOTQS(CONST, W, A, I32) \
	QSARGS;                          \
	CONST;                           \
qsrow:                                   \
	MOVD R19, R1;                    \
	MOVD R20, R2;                    \
	MOVD R21, R8;                    \
	MOVD R22, R3;                    \
	VEOR V20.B16, V20.B16, V20.B16;  \
qsblk:                                   \
	W;                               \
	A(I32, R1, R2, R8, F20);         \
	LOOP(R3, qsblk);                 \
	FMOVS.P F20, 4(R6);              \
	LOOP(R5, qsrow);                 \
	RET

// Each weight block is loaded and unpacked once for the four activation
// rows.
#define DOT4QS(CONST, W, A, I32) \
	QSARGS;                          \
	STRIDE(64);                      \
	CONST;                           \
qsrow4:                                  \
	PTRS4(R19, R1, R13, R14, R15);   \
	PTRS4(R20, R2, R10, R11, R12);   \
	PTRS4(R21, R8, R16, R17, R23);   \
	MOVD R22, R3;                    \
	ZERO4(V20, V21, V22, V23);       \
qsblk4:                                  \
	W;                               \
	A(I32, R1, R2, R8, F20);         \
	A(I32, R13, R10, R16, F21);      \
	A(I32, R14, R11, R17, F22);      \
	A(I32, R15, R12, R23, F23);      \
	LOOP(R3, qsblk4);                \
	STORE4(F20, F21, F22, F23);      \
	LOOP(R5, qsrow4);                \
	RET

// QSKERNELS(n1, d1, n4, d4, CONST, W, A): the four kernels of a type of
// blocks of 32 with a scale and an offset or minimum, DOTQS and DOT4QS with
// its macros:
// func dotXNEON(w *byte, qs *int8, d, s *float32, nb int, tab *float32, rows int, out *float32)
// func dot4XNEON(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
// and the same for the SDOT ones.
#define QSKERNELS(n1, d1, n4, d4, CONST, W, A) \
	TEXT n1(SB), NOSPLIT, $0-64; DOTQS(CONST, W, A, I32N); \
	TEXT d1(SB), NOSPLIT, $0-64; DOTQS(CONST, W, A, I32D); \
	TEXT n4(SB), NOSPLIT, $0-72; DOT4QS(CONST, W, A, I32N); \
	TEXT d4(SB), NOSPLIT, $0-72; DOT4QS(CONST, W, A, I32D)

QSKERNELS(·dotQ4_0NEON, ·dotQ4_0SDOT, ·dot4Q4_0NEON, ·dot4Q4_0SDOT, Q4CONST, Q4W, Q4A)

// ---------------------------------------------------------------- Q4_1, Q5_0, Q5_1

// Q4QS: the 16 bytes of nibbles at R0 (moved on by 16) in V0, V1 (NIBS).
#define Q4QS \
	VLD1.P  16(R0), [V1.B16]; \
	NIBS

// Q41W loads a Q4_1 block at R0 (moved on by 20): the scale d_w in F16,
// the offset m in F15, the nibbles in V0, V1.
#define Q41W \
	HALFP(F16); \
	HALFP(F15); \
	Q4QS

// Q41A(I32, qs, d, s, acc): one activation block against a block with an
// offset (Q4_1, Q5_1): acc = fma(float(S), d_w*d_a, acc), then
// acc = fma(m, s_a, acc) (s_a = d_a*Σa).
#define Q41A(I32, qs, d, s, acc) \
	QSA(I32, qs, d, s);               \
	FMULS   F17, F16, F18;            \
	FMADDS  F18, acc, F6, acc;        \
	FMADDS  F19, acc, F15, acc

#define Q41CONST \
	VMOVI $15, V31.B16

// Q5HI(qh): the fifth bits of a Q5_0/Q5_1 block (a 32-bit register, bit j
// for element j) as 0x10 in the bytes of V0 (elements 0-15) and V1
// (16-31); Q5HIV(qh, lo, hi) the same into lo and hi. TBL spreads qh's
// bytes 0, 1 over the low and high eight lanes of V9 (2, 3 over V10's),
// CMTST against the lane's bit (V27) gives 0xff where it is set. V25, V26
// hold the TBL indices, V28 0x10 bytes; V8-V10 are clobbered.
#define Q5HI(qh) Q5HIV(qh, V0, V1)

#define Q5HIV(qh, lo, hi) \
	VMOV   qh, V8.S[0];               \
	VTBL   V25.B16, [V8.B16], V9.B16;  \
	VTBL   V26.B16, [V8.B16], V10.B16; \
	VCMTST V27.B16, V9.B16, V9.B16;   \
	VCMTST V27.B16, V10.B16, V10.B16; \
	VAND   V28.B16, V9.B16, V9.B16;   \
	VAND   V28.B16, V10.B16, V10.B16; \
	VORR   V9.B16, lo.B16, lo.B16;    \
	VORR   V10.B16, hi.B16, hi.B16

// Q5CONST: V31 = 0x0f, V28 = 0x10, V27 = the bit of each byte lane in its
// half (1, 2, ..., 128), V25, V26 = the byte indices of Q5HI; F30 = 16 (the
// offset of Q5_0).
#define Q5CONST \
	VMOVI $15, V31.B16;                                        \
	VMOVI $16, V28.B16;                                        \
	VMOVQ $0x8040201008040201, $0x8040201008040201, V27;       \
	VMOVQ $0x0000000000000000, $0x0101010101010101, V25;       \
	VMOVQ $0x0202020202020202, $0x0303030303030303, V26;       \
	FMOVS $16.0, F30

// Q5QS: the quants of a Q5_0 or Q5_1 block at R0 (its 32-bit qh, then its
// nibbles; moved on by 20) as 5-bit quants in V0, V1.
#define Q5QS \
	MOVWU.P 4(R0), R7; \
	Q4QS;              \
	Q5HI(R7)

// Q50W loads a Q5_0 block at R0 (moved on by 22): the 5-bit quants (q+16)
// in V0, V1, the scale in F16. Its activation blocks run Q4A with F30 = 16.
#define Q50W \
	HALFP(F16); \
	Q5QS

// Q51W loads a Q5_1 block at R0 (moved on by 24): as Q50W, and the offset
// m in F15. Its activation blocks run Q41A.
#define Q51W \
	HALFP(F16); \
	HALFP(F15); \
	Q5QS

QSKERNELS(·dotQ4_1NEON, ·dotQ4_1SDOT, ·dot4Q4_1NEON, ·dot4Q4_1SDOT, Q41CONST, Q41W, Q41A)
QSKERNELS(·dotQ5_0NEON, ·dotQ5_0SDOT, ·dot4Q5_0NEON, ·dot4Q5_0SDOT, Q5CONST, Q50W, Q4A)
QSKERNELS(·dotQ5_1NEON, ·dotQ5_1SDOT, ·dot4Q5_1NEON, ·dot4Q5_1SDOT, Q5CONST, Q51W, Q41A)

// ---------------------------------------------------------------- Q4_K, Q5_K

// Q4KDEC: one 32-byte chunk of nibbles at R0 (moved on by 32): the low
// nibbles (sub-block 2c) in V2, V3, the high ones (sub-block 2c+1) in V0,
// V1. V31 holds 0x0f bytes.
#define Q4KDEC \
	VLD1.P 32(R0), [V0.B16, V1.B16]; \
	VAND   V31.B16, V0.B16, V2.B16;  \
	VAND   V31.B16, V1.B16, V3.B16;  \
	VUSHR  $4, V0.B16, V0.B16;       \
	VUSHR  $4, V1.B16, V1.B16

// KPROD(I32, qs, x0, x1): the decoded chunk against the 64 activation
// quants at qs (moved on by 64): Vx0 = the int32 partial sums of
// sub-block 2c, Vx1 of 2c+1. V4-V9 are clobbered.
#define KPROD(I32, qs, x0, x1) \
	VLD1.P 64(qs), [V4.B16, V5.B16, V6.B16, V7.B16]; \
	I32(x0, 2, 4, 3, 5, 8, 9);                       \
	I32(x1, 0, 6, 1, 7, 8, 9)

// Q4KC(I32, x0, x1): Q4KDEC, then KPROD against the activations at R1.
#define Q4KC(I32, x0, x1) \
	Q4KDEC; \
	KPROD(I32, R1, x0, x1)

// KSCALES: the scales of the Q4_K/Q5_K super-block at R0 (not moved): d in
// F14, dmin in F15, and the eight 6-bit scales and minimums, unpacked in general
// registers four bytes at a time (R7, R10-R15 are clobbered), then widened
// in vectors: V26, V27 the scales as int32, V28, V29 the minimums as
// float32.
#define KSCALES \
	HALF((R0), F14);                 \
	HALF(2(R0), F15);                \
	KSCALES6

// KSCALES6 is KSCALES without d and dmin.
#define KSCALES6 \
	KSCB(R0);                        \
	VMOV   R13, V24.D[0];            \
	VMOV   R14, V25.D[0];            \
	VUXTL  V24.B8, V24.H8;           \
	VUXTL  V24.H4, V26.S4;           \
	VUXTL2 V24.H8, V27.S4;           \
	VUXTL  V25.B8, V25.H8;           \
	VUXTL  V25.H4, V28.S4;           \
	VUXTL2 V25.H8, V29.S4;           \
	UCVTF_4S(28, 28);                \
	UCVTF_4S(29, 29)

// KSCB(p): the eight 6-bit scales of the Q4_K/Q5_K super-block at p as
// bytes in R13, its eight minimums in R14 (R10-R12, R15 are clobbered).
#define KSCB(p) \
	MOVWU  4(p), R10;                \
	MOVWU  8(p), R11;                \
	MOVWU  12(p), R12;               \
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
	ORR    R12<<32, R14, R14

// KFLOAT: with V16..V23 the int32 partial sums of sub-blocks 0..7 and
// KSCALES's registers, one activation row's scales (R2) and sums (R8,
// both moved on by 8):
//   acc += d * Σ_j D_j*float(sc_j*S_j) - dmin * Σ_j s_j*mn_j
// (F30) with S_j the exact integer sum of sub-block j.
#define KFLOAT \
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

// Q4KSB(I32): one Q4_K super-block at R0 (moved on by 144) against one
// activation row (quants R1, scales R2, sums R8, moved on by 256, 8, 8),
// into F30. V31 holds 0x0f bytes.
#define Q4KSB(I32) \
	KSCALES;                         \
	ADD    $16, R0, R0;              \
	Q4KC(I32, 16, 17);               \
	Q4KC(I32, 18, 19);               \
	Q4KC(I32, 20, 21);               \
	Q4KC(I32, 22, 23);               \
	KFLOAT

// Q5KDEC: Q4KDEC with the fifth bits: bit 0 of V10, V11 (qh shifted
// right by 2c) for the low nibbles, bit 1 for the high ones; V10, V11
// move on to the next chunk's bits. V12 holds 0x10 bytes; V8, V9 are
// clobbered.
#define Q5KDEC \
	Q4KDEC;                          \
	Q5KBIT(4, V2, V3);               \
	Q5KBIT(3, V0, V1);               \
	VUSHR  $2, V10.B16, V10.B16;     \
	VUSHR  $2, V11.B16, V11.B16

// Q5KBIT(sh, x0, x1): bit 4-sh of V10, V11 as 0x10 ored into x0, x1.
#define Q5KBIT(sh, x0, x1) \
	VSHL   $sh, V10.B16, V8.B16;     \
	VSHL   $sh, V11.B16, V9.B16;     \
	VAND   V12.B16, V8.B16, V8.B16;  \
	VAND   V12.B16, V9.B16, V9.B16;  \
	VORR   V8.B16, x0.B16, x0.B16;   \
	VORR   V9.B16, x1.B16, x1.B16

#define Q5KC(I32, x0, x1) \
	Q5KDEC; \
	KPROD(I32, R1, x0, x1)

// Q5KSB(I32): one Q5_K super-block at R0 (moved on by 176), as Q4KSB; its
// 32 bytes of fifth bits (after the scales) go to V10, V11.
#define Q5KSB(I32) \
	KSCALES;                         \
	ADD    $16, R0, R0;              \
	Q5KPRE;                          \
	Q5KC(I32, 16, 17);               \
	Q5KC(I32, 18, 19);               \
	Q5KC(I32, 20, 21);               \
	Q5KC(I32, 22, 23);               \
	KFLOAT

// DOTK(SB, I32), DOT4K: the loops of Q4_K and Q5_K, SB(I32) one
// super-block.
#define DOTK(SB, I32) \
	KARGS;                           \
	VMOVI $15, V31.B16;              \
krow:                                    \
	MOVD R19, R1;                    \
	MOVD R20, R2;                    \
	MOVD R21, R8;                    \
	MOVD R22, R3;                    \
	VEOR V30.B16, V30.B16, V30.B16;  \
ksb:                                     \
	SB(I32);                         \
	LOOP(R3, ksb);                   \
	FMOVS.P F30, 4(R6);              \
	LOOP(R5, krow);                  \
	RET

// The four-input K kernels unpack each chunk once for the four activation
// rows. Activation row k's sub-block sums build up in V(16+2k) (sub-blocks
// 0-3) and V(17+2k) (4-7), in KFLOAT's lane order: KCc(I32, qs, a, b) is
// chunk c's KPROD into V24, V25, folded in pairs into a, b (register
// numbers).
#define KC0(I32, qs, a, b) \
	KPROD(I32, qs, 24, 25); \
	ADDP_4S(a, 24, 25)

#define KC1(I32, qs, a, b) \
	KPROD(I32, qs, 24, 25); \
	ADDP_4S(b, 24, 25);     \
	ADDP_4S(a, a, b)

#define KC2(I32, qs, a, b) \
	KPROD(I32, qs, 24, 25); \
	ADDP_4S(b, 24, 25)

#define KC3(I32, qs, a, b) \
	KPROD(I32, qs, 24, 25); \
	ADDP_4S(24, 24, 25);    \
	ADDP_4S(b, b, 24)

// KCHUNK(DEC, I32, KC): one chunk for the four activation rows (quants at
// R1, R2, R8, R16).
#define KCHUNK(DEC, I32, KC) \
	DEC;                   \
	KC(I32, R1, 16, 17);   \
	KC(I32, R2, 18, 19);   \
	KC(I32, R8, 20, 21);   \
	KC(I32, R16, 22, 23)

// ROWAT(k, p): R7 = the k-th pointer of the array at p plus R17.
#define ROWAT(k, p) \
	MOVD k*8(p), R7; \
	ADD  R17, R7, R7

// KFLOAT4(k, a, b, acc): KFLOAT's float operations, in its order, for
// activation row k (its scales and sums at the k-th pointers of R20, R21
// plus R17 bytes) with the sub-block sums in Va, Vb, into Sacc; d, dmin in
// F10, F11. V0-V7 are clobbered.
#define KFLOAT4(k, a, b, acc) \
	ROWAT(k, R20);                   \
	VLD1   (R7), [V0.S4, V1.S4];     \
	ROWAT(k, R21);                   \
	VLD1   (R7), [V2.S4, V3.S4];     \
	MUL_4S(a, a, 26);                \
	MUL_4S(b, b, 27);                \
	SCVTF_4S(a, a);                  \
	SCVTF_4S(b, b);                  \
	FMUL_4S(a, a, 0);                \
	FMLA_4S(a, b, 1);                \
	FMUL_4S(2, 2, 28);               \
	FMLA_4S(2, 29, 3);               \
	HSUM4(a);                        \
	HSUM4(2);                        \
	FMADD_S(acc, 10, a, acc);        \
	FMSUB_S(acc, 11, 2, acc)

// Q4KPRE, Q5KPRE: a super-block's loads after its scales, before its
// chunks: none for Q4_K; Q5_K's fifth bits into V10, V11 (and 0x10 bytes
// into V12, as Q5KDEC wants).
#define Q4KPRE \
	NOP

#define Q5KPRE \
	VLD1.P 32(R0), [V10.B16, V11.B16]; \
	VMOVI  $16, V12.B16

// DOT4K(PRE, DEC, I32): the four-input loop of Q4_K (Q4KPRE, Q4KDEC)
// and Q5_K (Q5KPRE loads the fifth bits that follow the scales, Q5KDEC). The outputs accumulate in
// S13, S14, S15, S30 (V31 is set again per super-block: the constants
// fill every register); R24 holds the super-block's start, R17 the
// offset of its activation scales and sums.
#define DOT4K(PRE, DEC, I32) \
	KARGS;                           \
	STRIDE(64);                      \
krow4:                                   \
	PTRS4(R19, R1, R2, R8, R16);     \
	MOVD $0, R17;                    \
	MOVD R22, R3;                    \
	ZERO4(V13, V14, V15, V30);       \
ksb4:                                    \
	MOVD   R0, R24;                  \
	VMOVI  $15, V31.B16;             \
	KSCALES6;                        \
	ADD    $16, R0, R0;              \
	PRE;                             \
	KCHUNK(DEC, I32, KC0);           \
	KCHUNK(DEC, I32, KC1);           \
	KCHUNK(DEC, I32, KC2);           \
	KCHUNK(DEC, I32, KC3);           \
	HALF((R24), F10);                \
	HALF(2(R24), F11);               \
	KFLOAT4(0, 16, 17, 13);          \
	KFLOAT4(1, 18, 19, 14);          \
	KFLOAT4(2, 20, 21, 15);          \
	KFLOAT4(3, 22, 23, 30);          \
	ADD    $32, R17, R17;            \
	LOOP(R3, ksb4);                  \
	STORE4(F13, F14, F15, F30);      \
	LOOP(R5, krow4);                 \
	RET

// KKERNELS(n1, d1, n4, d4, SUB, PRE, DEC): a K-quant's four kernels (with
// QSKERNELS' signatures, nsb super-blocks for nb), DOTK and DOT4K with its
// macros.
#define KKERNELS(n1, d1, n4, d4, SUB, PRE, DEC) \
	TEXT n1(SB), NOSPLIT, $0-64; DOTK(SUB, I32N); \
	TEXT d1(SB), NOSPLIT, $0-64; DOTK(SUB, I32D); \
	TEXT n4(SB), NOSPLIT, $0-72; DOT4K(PRE, DEC, I32N); \
	TEXT d4(SB), NOSPLIT, $0-72; DOT4K(PRE, DEC, I32D)

KKERNELS(·dotQ4_KNEON, ·dotQ4_KSDOT, ·dot4Q4_KNEON, ·dot4Q4_KSDOT, Q4KSB, Q4KPRE, Q4KDEC)
KKERNELS(·dotQ5_KNEON, ·dotQ5_KSDOT, ·dot4Q5_KNEON, ·dot4Q5_KSDOT, Q5KSB, Q5KPRE, Q5KDEC)

// ---------------------------------------------------------------- Q6_K

// Q6LOAD(qh): one half of a super-block: its 64 bytes of low nibbles at
// R0 (moved on by 64) in V0-V3, its 32 bytes of high bits (at R0+qh) in
// V4, V5.
#define Q6LOAD(qh) \
	ADD    $qh, R0, R7;                              \
	VLD1   (R7), [V4.B16, V5.B16];                   \
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]

// Q6U0(t0, t1) - Q6U3: group k (0-3) of the half loaded by Q6LOAD as its
// 32 6-bit quants (+32) in V6, V7. For position l of group k, the low
// four bits are nibble k>>1 of byte l + 32*(k&1), the high two bits bits
// 2k, 2k+1 of qh[l]. V29 holds 0x30 bytes, V31 0x0f bytes; t0, t1 are
// clobbered.
#define Q6U0(t0, t1) Q6UL(4, V0, V1, t0, t1)
#define Q6U1(t0, t1) Q6UL(2, V2, V3, t0, t1)

// Q6UL(sh, l0, l1, t0, t1): Q6U0 (sh = 4, the low nibbles of V0, V1) and
// Q6U1 (sh = 2, those of V2, V3).
#define Q6UL(sh, l0, l1, t0, t1) \
	VSHL   $sh, V4.B16, t0.B16;     \
	VSHL   $sh, V5.B16, t1.B16;     \
	VAND   V29.B16, t0.B16, t0.B16; \
	VAND   V29.B16, t1.B16, t1.B16; \
	VAND   V31.B16, l0.B16, V6.B16; \
	VAND   V31.B16, l1.B16, V7.B16; \
	Q6OR(t0, t1)

#define Q6U2(t0, t1) \
	VAND   V29.B16, V4.B16, t0.B16; \
	VAND   V29.B16, V5.B16, t1.B16; \
	VUSHR  $4, V0.B16, V6.B16;      \
	VUSHR  $4, V1.B16, V7.B16;      \
	Q6OR(t0, t1)

#define Q6U3(t0, t1) \
	VUSHR  $2, V4.B16, t0.B16;      \
	VUSHR  $2, V5.B16, t1.B16;      \
	VAND   V29.B16, t0.B16, t0.B16; \
	VAND   V29.B16, t1.B16, t1.B16; \
	VUSHR  $4, V2.B16, V6.B16;      \
	VUSHR  $4, V3.B16, V7.B16;      \
	Q6OR(t0, t1)

// Q6OR(t0, t1) ors the high bits in t0, t1 into V6, V7.
#define Q6OR(t0, t1) \
	VORR   t0.B16, V6.B16, V6.B16; \
	VORR   t1.B16, V7.B16, V7.B16

// Q6NEG makes the quants in V6, V7 signed (-32; V28 holds 32 bytes), so
// that the products need no activation sums (b is not read).
#define Q6NEG \
	VSUB   V28.B16, V6.B16, V6.B16; \
	VSUB   V28.B16, V7.B16, V7.B16

// Q6P(I16, qs, t0, t1): the signed group in V6, V7 against the 32
// activation quants at qs (moved on by 32): V24, V25 = the int32 partial
// sums of its first and last 16 products (each 16 has its own scale),
// with I16's temporaries Vt0, Vt1. V8, V9 are clobbered.
#define Q6P(I16, qs, t0, t1) \
	VLD1.P 32(qs), [V8.B16, V9.B16]; \
	I16(24, 6, 8, t0);               \
	I16(25, 7, 9, t1)

// Q6G(I16, p): the group in V6, V7 (unsigned) against the next 32
// activation quants at R1: p (a V register) = [the two partial sums of
// the first 16 products, those of the last 16]. V8-V11, V24, V25 are
// clobbered.
#define Q6G(I16, p) \
	Q6NEG;                   \
	Q6P(I16, R1, 10, 11);    \
	VADDP  V25.S4, V24.S4, p.S4

// Q6H(I16, s0, s1, qh): one half of a super-block (Q6LOAD(qh)) against
// 128 activation quants: s0, s1 = the exact sums of its eight groups of
// 16, in order. V24, V25 are the temporaries of Q6U0-Q6U3.
#define Q6H(I16, s0, s1, qh) \
	Q6LOAD(qh);                   \
	Q6U0(V24, V25);               \
	Q6G(I16, V12);                \
	Q6U1(V24, V25);               \
	Q6G(I16, V13);                \
	Q6U2(V24, V25);               \
	Q6G(I16, V14);                \
	Q6U3(V24, V25);               \
	Q6G(I16, V15);                \
	VADDP  V13.S4, V12.S4, s0.S4; \
	VADDP  V15.S4, V14.S4, s1.S4

// Q6KSB(I16): one super-block at R0 (moved on by 210) against one
// activation row (quants R1, block scales R2, moved on by 256 and 8):
//   acc += d * Σ_j D_j * float(Σ_{g in j} sc_g*S_g)
// (F30) with S_g the exact sum of group g of 16 and sc_g its int8 scale.
// V20-V23 hold the sixteen scales as int32, V28 32 bytes.
#define Q6KSB(I16) \
	HALF(208(R0), F26);              \
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
	Q6ARGS;                          \
	Q6KCONST;                        \
q6krow:                                  \
	MOVD R19, R1;                    \
	MOVD R20, R2;                    \
	MOVD R22, R3;                    \
	VEOR V30.B16, V30.B16, V30.B16;  \
q6ksb:                                   \
	Q6KSB(I16);                      \
	LOOP(R3, q6ksb);                 \
	FMOVS.P F30, 4(R6);              \
	LOOP(R5, q6krow);                \
	RET

// The four-input Q6_K loop unpacks each group of 32 quants once for the
// four activation rows. Per activation row k it keeps the sums of the
// current half's groups of 16 in two registers a, b (Q6F0-Q6F3 fold them
// in Q6G's then Q6H's lane order) and the float vector bv of the
// super-block's Σ D_j*float(...) (Q6FH0, Q6FH1: Q6KSB's float operations
// in its order), with its output in acc; (a, b, bv, acc) are (11, 12, 13,
// 23), (14, 15, 16, 26), (17, 18, 19, 27), (20, 21, 22, 30). R24 holds the
// super-block's start, R17 the offset of its activation scales; V10 is
// the only temporary of I16N here.

#define Q6F0(a, b) \
	ADDP_4S(a, 24, 25)

#define Q6F1(a, b) \
	ADDP_4S(24, 24, 25); \
	ADDP_4S(a, a, 24)

#define Q6F2(a, b) \
	ADDP_4S(b, 24, 25)

#define Q6F3(a, b) \
	ADDP_4S(24, 24, 25); \
	ADDP_4S(b, b, 24)

// Q6GRP4(I16, U, F): one group (U: Q6U0-Q6U3) for the four activation
// rows.
#define Q6GRP4(I16, U, F) \
	U(V8, V9);             \
	Q6NEG;                 \
	Q6P(I16, R1, 10, 10);  \
	F(11, 12);             \
	Q6P(I16, R2, 10, 10);  \
	F(14, 15);             \
	Q6P(I16, R8, 10, 10);  \
	F(17, 18);             \
	Q6P(I16, R16, 10, 10); \
	F(20, 21)

// Q6HALF4(I16, qh): one half of the super-block (Q6LOAD(qh)) for the four
// activation rows.
#define Q6HALF4(I16, qh) \
	Q6LOAD(qh);                \
	Q6GRP4(I16, Q6U0, Q6F0);   \
	Q6GRP4(I16, Q6U1, Q6F1);   \
	Q6GRP4(I16, Q6U2, Q6F2);   \
	Q6GRP4(I16, Q6U3, Q6F3)

// Q6SC(off): the half's eight scales (at R24+off) as int32 in V2, V3.
#define Q6SC(off) \
	ADD  $off, R24, R7;  \
	VLD1 (R7), [V0.B8];  \
	SXTL_8H(1, 0);       \
	SXTL_4S(2, 1);       \
	SXTL2_4S(3, 1)

// Q6FH0(k, a, b, bv), Q6FH1: the half's block sums of activation row k,
// scaled, converted and times the row's block scales D (Q6KSB's FMUL for
// the first half, its FMLA for the second).
#define Q6FH0(k, a, b, bv) \
	Q6FH(k, a, b);         \
	VLD1 (R7), [V4.S4];    \
	FMUL_4S(bv, a, 4)

#define Q6FH1(k, a, b, bv) \
	Q6FH(k, a, b);         \
	ADD  $16, R7, R7;      \
	VLD1 (R7), [V4.S4];    \
	FMLA_4S(bv, a, 4)

// Q6FH(k, a, b): Va = float(the sums in Va, Vb times the scales in V2,
// V3, added in pairs); R7 = activation row k's block scales D of the
// super-block.
#define Q6FH(k, a, b) \
	MUL_4S(a, a, 2);       \
	MUL_4S(b, b, 3);       \
	ADDP_4S(a, a, b);      \
	SCVTF_4S(a, a);        \
	ROWAT(k, R20)

#define DOT4Q6_K(I16) \
	Q6ARGS;                          \
	STRIDE(64);                      \
	Q6KCONST;                        \
q6krow4:                                 \
	PTRS4(R19, R1, R2, R8, R16);     \
	MOVD $0, R17;                    \
	MOVD R22, R3;                    \
	ZERO4(V23, V26, V27, V30);       \
q6ksb4:                                  \
	MOVD   R0, R24;                  \
	Q6HALF4(I16, 128);               \
	Q6SC(192);                       \
	Q6FH0(0, 11, 12, 13);            \
	Q6FH0(1, 14, 15, 16);            \
	Q6FH0(2, 17, 18, 19);            \
	Q6FH0(3, 20, 21, 22);            \
	Q6HALF4(I16, 96);                \
	Q6SC(200);                       \
	Q6FH1(0, 11, 12, 13);            \
	Q6FH1(1, 14, 15, 16);            \
	Q6FH1(2, 17, 18, 19);            \
	Q6FH1(3, 20, 21, 22);            \
	HALF(208(R24), F0);              \
	HSUM4(13);                       \
	FMADD_S(23, 0, 13, 23);          \
	HSUM4(16);                       \
	FMADD_S(26, 0, 16, 26);          \
	HSUM4(19);                       \
	FMADD_S(27, 0, 19, 27);          \
	HSUM4(22);                       \
	FMADD_S(30, 0, 22, 30);          \
	ADD    $82, R0, R0;              \
	ADD    $32, R17, R17;            \
	LOOP(R3, q6ksb4);                \
	STORE4(F23, F26, F27, F30);      \
	LOOP(R5, q6krow4);               \
	RET

// func dotQ6_KNEON(w *byte, qs *int8, d *float32, b *int16, nsb int, tab *float32, rows int, out *float32)
// func dot4Q6_KNEON(w *byte, qs *[4]*int8, d *[4]*float32, b *[4]*int16, nsb int, tab *float32, rows int, out *float32, stride int)
// and the same for the SDOT ones.
KERNELS4(·dotQ6_KNEON, ·dotQ6_KSDOT, ·dot4Q6_KNEON, ·dot4Q6_KSDOT, $0-64, $0-72, DOTQ6_K, DOT4Q6_K, I16N, I16D)

// ---------------------------------------------------------------- pairs of rows (SMMLA)

// The i8mm path's four-input kernels take the weight rows two at a time
// (row r at R0, row r+1 at R24 = R0 + the row's bytes in R25) and the
// activation rows two at a time. SMMLA multiplies the 2×8 int8 matrix of
// its first operand (8 quants of each of two activation rows) by the
// transpose of its second's (8 quants of each of two weight rows) into
// the 2×2 int32 matrix [a·w_r, a·w_r+1, b·w_r, b·w_r+1]: 32 products an
// instruction, twice SDOT's, and a weight block is unpacked and paired
// once for the four activation rows. A block's four sums are the exact
// integers S of the one-row kernels; they are converted together and the
// float operations run lane-wise, each lane (one output) the one-row
// kernel's scalar operations in its order with the operands in the same
// places (FMUL, FMLA, FMLS round as FMULS, FMADDS, FMSUBS do), so the
// outputs are the same bits as the dotprod and neon kernels'.
//
// An accumulator's lanes are the outputs (a, r), (a, r+1), (b, r),
// (b, r+1): a factor of the activation rows is the vector [f_a, f_a, f_b,
// f_b], one of the weight rows [f_r, f_r+1, f_r, f_r+1]. The wrappers
// (gen_i8mm_arm64.go) pass an even row count and run the dotprod kernel on
// an odd last row.
//
// Vector registers: V0-V3 the two rows' unpacked quants, V8-V11 them
// paired, V4-V7 and V12-V15 two activation blocks and them paired, V24
// their sums, V22 the weight scales d_w, V23 the offsets m (Q4_1, Q5_1),
// V29 d_a, V30 s_a, V18 the offset o of the unsigned quants (Q4_0, Q5_0),
// V20, V21 the accumulators, V17 scratch; V25-V28 and V31 hold the
// constants of the one-row unpacking macros.

// MMHALVES(f, v): the halves indexed by R7 (row r's) and R26 (row r+1's)
// through the table at R4 as [h_r, h_r+1, h_r, h_r+1] in v (f is v's
// scalar name; V17 is clobbered); MMH2 loads them first from R0 and R24
// (moved on by 2).
#define MMHALVES(f, v) \
	FMOVS (R4)(R7<<2), f;    \
	FMOVS (R4)(R26<<2), F17; \
	VMOV  V17.S[0], v.S[1];  \
	VZIP1 v.D2, v.D2, v.D2

#define MMH2(f, v) \
	MOVHU.P 2(R0), R7;  \
	MOVHU.P 2(R24), R26; \
	MMHALVES(f, v)

// Q8W2 loads the Q8_0 blocks of rows r and r+1 (R0, R24, moved on by 34):
// row r's quants in V0, V1, row r+1's in V2, V3, the scales in V22.
#define Q8W2 \
	MOVHU.P 2(R0), R7;                 \
	VLD1.P  32(R0), [V0.B16, V1.B16];  \
	MOVHU.P 2(R24), R26;               \
	VLD1.P  32(R24), [V2.B16, V3.B16]; \
	MMHALVES(F22, V22)

// MMNIBS: the two rows' 16 bytes of nibbles (R0, R24, moved on by 16)
// split as NIBS does: row r's in V0, V1, row r+1's in V2, V3 (V31 holds
// 0x0f bytes).
#define MMNIBS \
	VLD1.P 16(R0), [V1.B16];        \
	VLD1.P 16(R24), [V3.B16];       \
	VAND   V31.B16, V1.B16, V0.B16; \
	VUSHR  $4, V1.B16, V1.B16;      \
	VAND   V31.B16, V3.B16, V2.B16; \
	VUSHR  $4, V3.B16, V3.B16

// MMQ5QS: the two rows' 5-bit quants (each block's qh, then its nibbles;
// moved on by 20) as Q5QS unpacks them, into V0, V1 and V2, V3.
#define MMQ5QS \
	MOVWU.P 4(R0), R7;      \
	MOVWU.P 4(R24), R26;    \
	MMNIBS;                 \
	Q5HIV(R7, V0, V1);      \
	Q5HIV(R26, V2, V3)

// The two-row loads of the block types with activation sums: Q4_0 (18
// bytes: d, nibbles), Q4_1 (20: d, m, nibbles), Q5_0 (22: d, qh,
// nibbles), Q5_1 (24: d, m, qh, nibbles); d in V22, m in V23.
#define Q4W2  MMH2(F22, V22); MMNIBS
#define Q41W2 MMH2(F22, V22); MMH2(F23, V23); MMNIBS
#define Q50W2 MMH2(F22, V22); MMQ5QS
#define Q51W2 MMH2(F22, V22); MMH2(F23, V23); MMQ5QS

// WZIP pairs the two weight rows by 8 quants (SMMLA's second operands):
// V8-V11 = [row r's, row r+1's] elements 0-7, 8-15, 16-23, 24-31.
#define WZIP \
	VZIP1 V2.D2, V0.D2, V8.D2;  \
	VZIP2 V2.D2, V0.D2, V9.D2;  \
	VZIP1 V3.D2, V1.D2, V10.D2; \
	VZIP2 V3.D2, V1.D2, V11.D2

// MMSUM(qa, qb): V24 = float32 of the exact sums of the activation blocks
// at qa and qb (moved on by 32) against the paired weight blocks (WZIP),
// in the accumulator's lane order. V4-V7, V12-V15 are clobbered.
#define MMSUM(qa, qb) \
	VLD1.P 32(qa), [V4.B16, V5.B16]; \
	VLD1.P 32(qb), [V6.B16, V7.B16]; \
	VZIP1  V6.D2, V4.D2, V12.D2;     \
	VZIP2  V6.D2, V4.D2, V13.D2;     \
	VZIP1  V7.D2, V5.D2, V14.D2;     \
	VZIP2  V7.D2, V5.D2, V15.D2;     \
	ZERO_2D(24);                     \
	SMMLA_4S(24, 12, 8);             \
	SMMLA_4S(24, 13, 9);             \
	SMMLA_4S(24, 14, 10);            \
	SMMLA_4S(24, 15, 11);            \
	SCVTF_4S(24, 24)

// MMPAIR(a, b, v): the floats at a and b (moved on by 4) as [a, a, b, b]
// in v.
#define MMPAIR(a, b, v) \
	VLD1.P 4(a), v.S[0]; \
	VLD1.P 4(b), v.S[1]; \
	VZIP1  v.S4, v.S4, v.S4

// Q8MMA(qa, da, sa, qb, db, sb, acc): the blocks of activation rows a and
// b against the paired Q8_0 blocks (sa, sb are not read), Q8A lane-wise:
// D = d_w*d_a, acc = fma(float(S), D, acc).
#define Q8MMA(qa, da, sa, qb, db, sb, acc) \
	MMSUM(qa, qb);         \
	MMPAIR(da, db, V29);   \
	FMUL_4S(29, 22, 29);   \
	VFMLA V29.S4, V24.S4, acc.S4

// Q4MMA(...): the same for Q4_0 and Q5_0, Q4A lane-wise: T = d_a*float(S),
// T = T - o*s_a (fused; V18 holds o), acc = fma(d_w, T, acc).
#define Q4MMA(qa, da, sa, qb, db, sb, acc) \
	MMSUM(qa, qb);                \
	MMPAIR(da, db, V29);          \
	MMPAIR(sa, sb, V30);          \
	FMUL_4S(24, 29, 24);          \
	VFMLS V30.S4, V18.S4, V24.S4; \
	VFMLA V24.S4, V22.S4, acc.S4

// Q41MMA(...): the same for Q4_1 and Q5_1, Q41A lane-wise: D = d_w*d_a,
// acc = fma(float(S), D, acc), acc = fma(m, s_a, acc).
#define Q41MMA(qa, da, sa, qb, db, sb, acc) \
	MMSUM(qa, qb);                \
	MMPAIR(da, db, V29);          \
	MMPAIR(sa, sb, V30);          \
	FMUL_4S(29, 22, 29);          \
	VFMLA V29.S4, V24.S4, acc.S4; \
	VFMLA V30.S4, V23.S4, acc.S4

// The constants: those of the one-row kernels, and o in every lane of V18.
#define MMQ8CONST
#define MMQ4CONST \
	Q4CONST;         \
	FMOVS $8.0, F18; \
	VDUP  V18.S[0], V18.S4
#define MMQ5CONST \
	Q5CONST;          \
	FMOVS $16.0, F18; \
	VDUP  V18.S[0], V18.S4

// MMSTORE: a pair of rows' outputs, V20 = [(0, r), (0, r+1), (1, r),
// (1, r+1)] by (input, row) and V21 the same of inputs 2 and 3: an input's
// two are adjacent, at R6 + k*R9 for input k. R6 moves on by two outputs.
#define MMSTORE \
	MOVD R6, R7;         \
	VST1 V20.D[0], (R7); \
	ADD  R9, R7, R7;     \
	VST1 V20.D[1], (R7); \
	ADD  R9, R7, R7;     \
	VST1 V21.D[0], (R7); \
	ADD  R9, R7, R7;     \
	VST1 V21.D[1], (R7); \
	ADD  $8, R6, R6

// MMROWS(bytes): R25 = the bytes of a row of R22 blocks of bytes each,
// R5 = the pairs of rows.
#define MMROWS(bytes) \
	MOVD $bytes, R7;   \
	MUL  R22, R7, R25; \
	LSR  $1, R5, R5

// DOT4MM(ARGS, off, SPTRS, bytes, CONST, W2, A): the pair loop. ARGS loads
// the arguments (the stride at off), SPTRS the activation sums' pointers
// (if any), CONST the constants; W2 loads and pairs the two rows' blocks of
// bytes each, A(qa, da, sa, qb, db, sb, acc) runs two activation rows
// against them.
#define DOT4MM(ARGS, off, SPTRS, bytes, CONST, W2, A) \
	ARGS;                                 \
	STRIDE(off);                          \
	CONST;                                \
	MMROWS(bytes);                        \
mmrow:                                        \
	ADD  R25, R0, R24;                    \
	PTRS4(R19, R1, R13, R14, R15);        \
	PTRS4(R20, R2, R10, R11, R12);        \
	SPTRS;                                \
	MOVD R22, R3;                         \
	VEOR V20.B16, V20.B16, V20.B16;       \
	VEOR V21.B16, V21.B16, V21.B16;       \
mmblk:                                        \
	W2;                                   \
	WZIP;                                 \
	A(R1, R2, R8, R13, R10, R16, V20);    \
	A(R14, R11, R17, R15, R12, R23, V21); \
	LOOP(R3, mmblk);                      \
	MOVD R24, R0;                         \
	MMSTORE;                              \
	LOOP(R5, mmrow);                      \
	RET

#define MMNOS
#define MMSPTRS PTRS4(R21, R8, R16, R17, R23)

// func dot4Q8_0SMMLA(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
// func dot4XSMMLA(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
TEXT ·dot4Q8_0SMMLA(SB), NOSPLIT, $0-64; DOT4MM(Q8ARGS, 56, MMNOS, 34, MMQ8CONST, Q8W2, Q8MMA)
TEXT ·dot4Q4_0SMMLA(SB), NOSPLIT, $0-72; DOT4MM(QSARGS, 64, MMSPTRS, 18, MMQ4CONST, Q4W2, Q4MMA)
TEXT ·dot4Q4_1SMMLA(SB), NOSPLIT, $0-72; DOT4MM(QSARGS, 64, MMSPTRS, 20, Q41CONST, Q41W2, Q41MMA)
TEXT ·dot4Q5_0SMMLA(SB), NOSPLIT, $0-72; DOT4MM(QSARGS, 64, MMSPTRS, 22, MMQ5CONST, Q50W2, Q4MMA)
TEXT ·dot4Q5_1SMMLA(SB), NOSPLIT, $0-72; DOT4MM(QSARGS, 64, MMSPTRS, 24, MMQ5CONST, Q51W2, Q41MMA)

// ---------------------------------------------------------------- pairs of rows, K-quants (SMMLA)

// The K-quant pair kernels (Q4_K, Q5_K, Q6_K) run each output's float operations
// of the one-row kernel (KFLOAT, Q6KSB) in its order, lane-wise as above.
// Where the one-row kernel has a vector of sub-blocks (lanes j) and adds
// its lanes as HSUM4 does, they have a vector per sub-block j (lanes the
// four outputs, SMMLA's order) and add those vectors in the same order
// (MMHSUM); a factor of sub-block j is in lane form: [f_r, f_r+1, f_r,
// f_r+1] for the weight rows', [f_a, f_a, f_b, f_b] for the activation
// rows'. Both kernels keep the rows at R0 and R24 (R25 bytes apart) and
// the activation rows' quants at R1, R2 (rows 0, 1) and R8, R16 (2, 3);
// V20, V21 are the outputs (MMSTORE's).

// MMACT(qa, qb): 32 quants of activation rows a and b (at qa, qb, moved on
// by 32) paired by 8 as WZIP pairs the weights: V30, V10, V8, V11 = [a's,
// b's] elements 0-7, 8-15, 16-23, 24-31. V9 is clobbered.
#define MMACT(qa, qb) \
	VLD1.P 32(qa), [V8.B16, V9.B16];   \
	VLD1.P 32(qb), [V10.B16, V11.B16]; \
	VZIP1  V10.D2, V8.D2, V30.D2;      \
	VZIP2  V10.D2, V8.D2, V10.D2;      \
	VZIP1  V11.D2, V9.D2, V8.D2;       \
	VZIP2  V11.D2, V9.D2, V11.D2

// MMDOT2(m, a0, a1, w0, w1): Vm += the 2×2 sums of 16 paired activations
// (Va0, Va1) by 16 paired weights (Vw0, Vw1; register numbers).
#define MMDOT2(m, a0, a1, w0, w1) \
	SMMLA_4S(m, a0, w0); \
	SMMLA_4S(m, a1, w1)

// MMHL(pa, pb, f, v): the halves at pa (row r's) and pb (row r+1's)
// through the table at R4 in lane form in v (f is v's scalar name); V4 and
// R7 are clobbered.
#define MMHL(pa, pb, f, v) \
	HALF(pa, f);            \
	HALF(pb, F4);           \
	VMOV  V4.S[0], v.S[1];  \
	VZIP1 v.D2, v.D2, v.D2

// MMHSUM(a, b, c, d): Va = (Va+Vb) + (Vc+Vd), HSUM4's order lane-wise.
#define MMHSUM(a, b, c, d) \
	FADD_4S(a, a, b); \
	FADD_4S(c, c, d); \
	FADD_4S(a, a, c)

// Q4_K, Q5_K. A chunk (64 quants of each row) is loaded, paired and split once
// for the four activation rows; the integer sums of sub-block j of
// activation rows 0, 1 build up in V(12+j), those of rows 2, 3 in
// V(22+j). The float operations follow at the end of the super-block,
// with its scales decoded then (KMMSC).

// MMNIB(s, lo, hi): the low nibbles of Vs in lo, the high ones in hi (V31
// holds 0x0f bytes).
#define MMNIB(s, lo, hi) \
	VAND  V31.B16, s.B16, lo.B16; \
	VUSHR $4, s.B16, hi.B16

// KMMW: a chunk of both rows' nibbles (32 bytes at R0, R24, moved on)
// paired (WZIP) and split: V0-V3 the low nibbles (sub-block 2c), V4-V7 the
// high ones (2c+1), in WZIP's order.
#define KMMW \
	VLD1.P 32(R0), [V0.B16, V1.B16];  \
	VLD1.P 32(R24), [V2.B16, V3.B16]; \
	WZIP;                             \
	MMNIB(V8, V0, V4);                \
	MMNIB(V9, V1, V5);                \
	MMNIB(V10, V2, V6);               \
	MMNIB(V11, V3, V7)

// KMMA(qa, qb, m0, m1): the chunk against activation rows a and b: their
// sub-block sums of 2c into Vm0, of 2c+1 into Vm1.
#define KMMA(qa, qb, m0, m1) \
	MMACT(qa, qb);            \
	MMDOT2(m0, 30, 10, 0, 1); \
	MMDOT2(m0, 8, 11, 2, 3);  \
	MMACT(qa, qb);            \
	MMDOT2(m1, 30, 10, 4, 5); \
	MMDOT2(m1, 8, 11, 6, 7)

// KMMC(m, SH): chunk c (its sub-blocks m-12 and m-11) of Q4_K for the four
// activation rows (SH is Q5_K's).
#define KMMC(m, SH) \
	KMMW;                       \
	KMMA(R1, R2, m, m+1);       \
	KMMA(R8, R16, m+10, m+11)

// KMMC5(m, SH): the same for Q5_K: KMMW's nibbles get their fifth bits
// (KMMQH, KMMB5) before the products.
#define KMMC5(m, SH) \
	KMMW;                       \
	VMOVI $16, V11.B16;         \
	KMMQH(16);                  \
	KMMB5(SH, V10, V0, V4);     \
	KMMB5(SH, V9, V1, V5);      \
	KMMQH(32);                  \
	KMMB5(SH, V10, V2, V6);     \
	KMMB5(SH, V9, V3, V7);      \
	KMMA(R1, R2, m, m+1);       \
	KMMA(R8, R16, m+10, m+11)

// KMMQH(off): 16 bytes of Q5_K fifth bits of both rows (at off from their
// super-blocks, R23 and R23+R25) paired: V10 = [row r's, row r+1's] of
// elements off-16 to off-9, V9 of off-8 to off-1 (as WZIP pairs them). V8
// is clobbered.
#define KMMQH(off) \
	ADD   $off, R23, R7;          \
	VLD1  (R7), [V8.B16];         \
	ADD   R25, R7, R7;            \
	VLD1  (R7), [V9.B16];         \
	VZIP1 V9.D2, V8.D2, V10.D2;   \
	VZIP2 V9.D2, V8.D2, V9.D2

// KMMB5(SH, h, lo, hi): the fifth bits of chunk c in h (SH(h) shifts them
// right by 2c: Q5SH0-Q5SH6) as 0x10 (V11) ored into the low nibbles lo (bit
// 2c) and the high ones hi (bit 2c+1), as Q5KDEC does. h and V30 are
// clobbered.
#define KMMB5(SH, h, lo, hi) \
	SH(h);                           \
	VSHL $4, h.B16, V30.B16;         \
	VAND V11.B16, V30.B16, V30.B16;  \
	VORR V30.B16, lo.B16, lo.B16;    \
	VSHL $3, h.B16, h.B16;           \
	VAND V11.B16, h.B16, h.B16;      \
	VORR h.B16, hi.B16, hi.B16

#define Q5SH0(v) NOP
#define Q5SH2(v) VUSHR $2, v.B16, v.B16
#define Q5SH4(v) VUSHR $4, v.B16, v.B16
#define Q5SH6(v) VUSHR $6, v.B16, v.B16

// MMWIDE(s, t, z0, z1, z2, z3): the bytes of row r (the low half of s)
// and of row r+1 (the high half) widened to uint32 in compact lane form:
// z0 = [b_r,0, b_r+1,0, b_r,1, b_r+1,1], z1 the same of bytes 2, 3, z2 of
// 4, 5, z3 of 6, 7 (a lane form is then one VZIP of z.D2 with itself).
// s and t are clobbered.
#define MMWIDE(s, t, z0, z1, z2, z3) \
	VUXTL  s.B8, t.H8;        \
	VUXTL2 s.B16, s.H8;       \
	VZIP1  s.H8, t.H8, z0.H8; \
	VZIP2  s.H8, t.H8, z2.H8; \
	VUXTL2 z0.H8, z1.S4;      \
	VUXTL  z0.H4, z0.S4;      \
	VUXTL2 z2.H8, z3.S4;      \
	VUXTL  z2.H4, z2.S4

// KMMSC: the scales of the two rows' super-blocks (row r's at R23, row
// r+1's at R26 = R23+R25): d and dmin in lane form in V0, V1, the scales
// (int32) in compact lane form in V4-V7, the minimums (float32) in V8-V11.
#define KMMSC \
	ADD  R25, R23, R26;                \
	KSCB(R23);                         \
	VMOV R13, V2.D[0];                 \
	VMOV R14, V3.D[0];                 \
	KSCB(R26);                         \
	VMOV R13, V2.D[1];                 \
	VMOV R14, V3.D[1];                 \
	MMHL((R23), (R26), F0, V0);        \
	MMHL(2(R23), 2(R26), F1, V1);      \
	MMWIDE(V2, V8, V4, V5, V6, V7);    \
	MMWIDE(V3, V30, V8, V9, V10, V11); \
	UCVTF_4S(8, 8);                    \
	UCVTF_4S(9, 9);                    \
	UCVTF_4S(10, 10);                  \
	UCVTF_4S(11, 11)

// KMMX(zip, z, m): sub-block j's sums (Vm for activation rows 0, 1, Vm+10
// for 2, 3) times its scales (the lane form of z by zip: VZIP1 for even j,
// VZIP2 for odd), then converted: KFLOAT's MUL and SCVTF.
#define KMMX(zip, z, m) \
	zip z.D2, z.D2, V30.D2; \
	MUL_4S(m, m, 30);       \
	SCVTF_4S(m, m);         \
	MUL_4S(m+10, m+10, 30); \
	SCVTF_4S(m+10, m+10)

// MMLD(ka, kb, p): the eight floats of activation rows ka and kb (the
// pointers ka, kb of the array at p, plus R17) in compact lane form: V6,
// V4, V2, V5 = [f_a,j, f_b,j, f_a,j+1, f_b,j+1] for j = 0, 2, 4, 6 (a lane
// form is then one VZIP of z.S4 with itself). V3 is clobbered.
#define MMLD(ka, kb, p) \
	ROWAT(ka, p);               \
	VLD1  (R7), [V2.S4, V3.S4]; \
	ROWAT(kb, p);               \
	VLD1  (R7), [V4.S4, V5.S4]; \
	VZIP1 V4.S4, V2.S4, V6.S4;  \
	VZIP2 V4.S4, V2.S4, V4.S4;  \
	VZIP1 V5.S4, V3.S4, V2.S4;  \
	VZIP2 V5.S4, V3.S4, V5.S4

// KMMP(zip, c0, c1, p): P_i = X_i*D_i, P_i += X_i+4*D_i+4 (KFLOAT's FMUL,
// FMLA) in Vp (X_i; X_i+4 in Vp+4), the activation scales' lane forms from
// the compacts c0, c1 by zip.
#define KMMP(zip, c0, c1, p) \
	zip c0.S4, c0.S4, V30.S4; \
	FMUL_4S(p, p, 30);        \
	zip c1.S4, c1.S4, V30.S4; \
	FMLA_4S(p, p+4, 30)

// KMMQ(zip, c0, c1, z0, z1, q): Q_i = s_i*mn_i, Q_i += mn_i+4*s_i+4
// (KFLOAT's FMUL, FMLA) into Vq, the activation sums' lane forms from c0,
// c1, the minimums' from z0, z1.
#define KMMQ(zip, c0, c1, z0, z1, q) \
	zip c0.S4, c0.S4, V30.S4; \
	zip z0.D2, z0.D2, V31.D2; \
	FMUL_4S(q, 30, 31);       \
	zip c1.S4, c1.S4, V30.S4; \
	zip z1.D2, z1.D2, V31.D2; \
	FMLA_4S(q, 31, 30)

// KMMF(ka, kb, m, acc): the rest of KFLOAT for activation rows ka, kb
// (X_j in Vm+j): acc += d*Σ_j D_j*X_j - dmin*Σ_j s_j*mn_j.
#define KMMF(ka, kb, m, acc) \
	MMLD(ka, kb, R20);                  \
	KMMP(VZIP1, V6, V2, m);             \
	KMMP(VZIP2, V6, V2, m+1);           \
	KMMP(VZIP1, V4, V5, m+2);           \
	KMMP(VZIP2, V4, V5, m+3);           \
	MMHSUM(m, m+1, m+2, m+3);           \
	MMLD(ka, kb, R21);                  \
	KMMQ(VZIP1, V6, V2, V8, V10, m+4);  \
	KMMQ(VZIP2, V6, V2, V8, V10, m+5);  \
	KMMQ(VZIP1, V4, V5, V9, V11, m+6);  \
	KMMQ(VZIP2, V4, V5, V9, V11, m+7);  \
	MMHSUM(m+4, m+5, m+6, m+7);         \
	FMLA_4S(acc, 0, m);                 \
	FMLS_4S(acc, 1, m+4)

// DOT4KMM(bytes, hdr, C): the pair loop of Q4_K (144 bytes a super-block,
// its chunks after 16, KMMC) and Q5_K (176, 48, KMMC5). V0-V7 hold a
// chunk's weights, V8-V11 and V30 the paired activations, V31 0x0f bytes
// (set again per super-block); R23 is row r's super-block, R17 the offset
// of its activation scales and sums.
#define DOT4KMM(bytes, hdr, C) \
	KARGS;                          \
	STRIDE(64);                     \
	MMROWS(bytes);                  \
kmmrow:                                 \
	ADD  R25, R0, R24;              \
	PTRS4(R19, R1, R2, R8, R16);    \
	MOVD $0, R17;                   \
	MOVD R22, R3;                   \
	VEOR V20.B16, V20.B16, V20.B16; \
	VEOR V21.B16, V21.B16, V21.B16; \
kmmsb:                                  \
	MOVD  R0, R23;                  \
	ADD   $hdr, R0, R0;             \
	ADD   $hdr, R24, R24;           \
	VMOVI $15, V31.B16;             \
	ZERO4(V12, V13, V14, V15);      \
	ZERO4(V16, V17, V18, V19);      \
	ZERO4(V22, V23, V24, V25);      \
	ZERO4(V26, V27, V28, V29);      \
	C(12, Q5SH0);                   \
	C(14, Q5SH2);                   \
	C(16, Q5SH4);                   \
	C(18, Q5SH6);                   \
	KMMSC;                          \
	KMMX(VZIP1, V4, 12);            \
	KMMX(VZIP2, V4, 13);            \
	KMMX(VZIP1, V5, 14);            \
	KMMX(VZIP2, V5, 15);            \
	KMMX(VZIP1, V6, 16);            \
	KMMX(VZIP2, V6, 17);            \
	KMMX(VZIP1, V7, 18);            \
	KMMX(VZIP2, V7, 19);            \
	KMMF(0, 1, 12, 20);             \
	KMMF(2, 3, 22, 21);             \
	ADD  $32, R17, R17;             \
	LOOP(R3, kmmsb);                \
	MOVD R24, R0;                   \
	MMSTORE;                        \
	LOOP(R5, kmmrow);               \
	RET

// Q6_K. A group (32 quants of each row, Q6U0-Q6U3's) is loaded, unpacked
// and paired once for the four activation rows, and its two sums of 16
// are scaled and added into the block's integer sum, converted and times
// the activation scale at once (Q6MMA): Q6KSB's FMUL (first half) or FMLA
// (second half) of block j = 4h+k goes into the vector P_k, V(12+k) for
// activation rows 0, 1 and V(16+k) for rows 2, 3. The activation scales
// are at R10, R11, R12, R13 (rows 0-3, moved on); V28, V29, V31 hold
// Q6KCONST's constants.

// Q6MMSC(off): the eight int8 scales at off of the half in both rows'
// super-blocks, widened to int32 in compact lane form (as MMWIDE's): V22
// for groups of 16 0, 1 (group k = 0 of the half), V23 2, 3, V24 4, 5, V25
// 6, 7. V0-V2 are clobbered.
#define Q6MMSC(off) \
	MOVD  off(R0), R7;         \
	VMOV  R7, V0.D[0];         \
	MOVD  off(R24), R7;        \
	VMOV  R7, V0.D[1];         \
	SXTL_8H(1, 0);             \
	SXTL2_8H(0, 0);            \
	VZIP1 V0.H8, V1.H8, V2.H8; \
	VZIP2 V0.H8, V1.H8, V0.H8; \
	SXTL_4S(22, 2);            \
	SXTL2_4S(23, 2);           \
	SXTL_4S(24, 0);            \
	SXTL2_4S(25, 0)

// Q6MMROW(p, ql, qh, HSH, LOW, l0, l1, h0, h1): group k of a half of the
// super-block at p (32 bytes of nibbles at p+ql, of high bits at p+qh) as
// signed quants in l0, l1, as Q6U0-Q6U3 and Q6NEG unpack it: HSH(h) moves
// bits 2k, 2k+1 of the high bits to bits 4, 5, LOW(l) picks nibble k>>1.
// h0, h1 are clobbered.
#define Q6MMROW(p, ql, qh, HSH, LOW, l0, l1, h0, h1) \
	ADD  $ql, p, R7;                \
	VLD1 (R7), [l0.B16, l1.B16];    \
	ADD  $qh, p, R7;                \
	VLD1 (R7), [h0.B16, h1.B16];    \
	HSH(h0);                        \
	HSH(h1);                        \
	VAND V29.B16, h0.B16, h0.B16;   \
	VAND V29.B16, h1.B16, h1.B16;   \
	LOW(l0);                        \
	LOW(l1);                        \
	VORR h0.B16, l0.B16, l0.B16;    \
	VORR h1.B16, l1.B16, l1.B16;    \
	VSUB V28.B16, l0.B16, l0.B16;   \
	VSUB V28.B16, l1.B16, l1.B16

#define Q6SHL4(v) VSHL  $4, v.B16, v.B16
#define Q6SHL2(v) VSHL  $2, v.B16, v.B16
#define Q6SH0(v)  NOP
#define Q6SHR2(v) VUSHR $2, v.B16, v.B16
#define Q6NIB0(v) VAND  V31.B16, v.B16, v.B16
#define Q6NIB1(v) VUSHR $4, v.B16, v.B16

// Q6MMA(qa, da, qb, db, OP, p): the paired group (V2, V3, V6, V7) against
// activation rows a and b (quants at qa, qb, block scales at da, db, all
// moved on): its two sums of 16 (V0, V1) times their scales (lane forms
// in V26, V27) added (Q6KSB's MUL, ADDP), converted, times the rows'
// block scales (MMPAIR) and OP'd into Vp: FMUL_4S sets it, FMLA_4S adds.
#define Q6MMA(qa, da, qb, db, OP, p) \
	MMACT(qa, qb);           \
	ZERO_2D(0);              \
	ZERO_2D(1);              \
	MMDOT2(0, 30, 10, 2, 3); \
	MMDOT2(1, 8, 11, 6, 7);  \
	MUL_4S(0, 0, 26);        \
	MLA_4S(0, 1, 27);        \
	SCVTF_4S(0, 0);          \
	MMPAIR(da, db, V1);      \
	OP(p, 0, 1)

// Q6MMG(ql, qh, HSH, LOW, sc, OP, p): group k of the half (Q6MMROW's
// arguments; sc its scales' compact lane form) of both rows, paired, for
// the four activation rows (into Vp and Vp+4).
#define Q6MMG(ql, qh, HSH, LOW, sc, OP, p) \
	Q6MMROW(R0, ql, qh, HSH, LOW, V0, V1, V2, V3);  \
	Q6MMROW(R24, ql, qh, HSH, LOW, V4, V5, V6, V7); \
	VZIP1 V4.D2, V0.D2, V2.D2;                      \
	VZIP2 V4.D2, V0.D2, V3.D2;                      \
	VZIP1 V5.D2, V1.D2, V6.D2;                      \
	VZIP2 V5.D2, V1.D2, V7.D2;                      \
	VZIP1 sc.D2, sc.D2, V26.D2;                     \
	VZIP2 sc.D2, sc.D2, V27.D2;                     \
	Q6MMA(R1, R10, R2, R11, OP, p);                 \
	Q6MMA(R8, R12, R16, R13, OP, p+4)

// Q6MMHALF(ql0, ql1, qh, OP): a half of the super-block (its nibbles at
// ql0, ql1, its high bits at qh), groups k = 0-3.
#define Q6MMHALF(ql0, ql1, qh, OP) \
	Q6MMG(ql0, qh, Q6SHL4, Q6NIB0, V22, OP, 12); \
	Q6MMG(ql1, qh, Q6SHL2, Q6NIB0, V23, OP, 13); \
	Q6MMG(ql0, qh, Q6SH0, Q6NIB1, V24, OP, 14);  \
	Q6MMG(ql1, qh, Q6SHR2, Q6NIB1, V25, OP, 15)

// DOT4Q6MM: the pair loop of Q6_K; per super-block, HSUM4 and Q6KSB's
// FMADDS (acc += d*h) lane-wise.
#define DOT4Q6MM \
	Q6ARGS;                          \
	STRIDE(64);                      \
	Q6KCONST;                        \
	MMROWS(210);                     \
q6mmrow:                                 \
	ADD  R25, R0, R24;               \
	PTRS4(R19, R1, R2, R8, R16);     \
	PTRS4(R20, R10, R11, R12, R13);  \
	MOVD R22, R3;                    \
	VEOR V20.B16, V20.B16, V20.B16;  \
	VEOR V21.B16, V21.B16, V21.B16;  \
q6mmsb:                                  \
	Q6MMSC(192);                     \
	Q6MMHALF(0, 32, 128, FMUL_4S);   \
	Q6MMSC(200);                     \
	Q6MMHALF(64, 96, 160, FMLA_4S);  \
	MMHL(208(R0), 208(R24), F0, V0); \
	MMHSUM(12, 13, 14, 15);          \
	FMLA_4S(20, 0, 12);              \
	MMHSUM(16, 17, 18, 19);          \
	FMLA_4S(21, 0, 16);              \
	ADD  $210, R0, R0;               \
	ADD  $210, R24, R24;             \
	LOOP(R3, q6mmsb);                \
	MOVD R24, R0;                    \
	MMSTORE;                         \
	LOOP(R5, q6mmrow);               \
	RET

// func dot4XSMMLA(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)
// (Q6_K: d *[4]*float32, b *[4]*int16 for d, s)
TEXT ·dot4Q4_KSMMLA(SB), NOSPLIT, $0-72; DOT4KMM(144, 16, KMMC)
TEXT ·dot4Q5_KSMMLA(SB), NOSPLIT, $0-72; DOT4KMM(176, 48, KMMC5)
TEXT ·dot4Q6_KSMMLA(SB), NOSPLIT, $0-72; DOT4Q6MM

// ---------------------------------------------------------------- floats

// The float kernels (F32, F16, BF16) share their bodies: WLOAD puts eight
// weights, as float32, in V1 (elements 0-3) and V2 (4-7), moving R0 on.
// Each output is Σ over the row in two vector accumulators (lo, hi lanes),
// added, then summed as HSUM4 does. Registers: R19 x (dot4: the array of
// four), R22 n/8.

#define F32W \
	VLD1.P 32(R0), [V1.S4, V2.S4]

#define F16W H2S(R0)

// H2S(p): the eight halves at p (moved on by 16) as float32 in V1, V2
// (F16W; the fp16 conversions below).
#define H2S(p) \
	VLD1.P 16(p), [V0.H8]; \
	FCVTL_4S(1, 0);        \
	FCVTL2_4S(2, 0)

// A bfloat16 is the top half of a float32.
#define BF16W \
	VLD1.P 16(R0), [V0.H8]; \
	SHLL_4S(1, 0);          \
	SHLL2_4S(2, 0)

// FX(x, a0, a1, t0, t1): eight activations at x (moved on by 32) times
// the eight weights in V1, V2: a0 += lo*x[0:4], a1 += hi*x[4:8] (a0, a1,
// t0, t1 are V registers).
#define FX(x, a0, a1, t0, t1) \
	VLD1.P 32(x), [t0.S4, t1.S4]; \
	VFMLA  V1.S4, t0.S4, a0.S4;   \
	VFMLA  V2.S4, t1.S4, a1.S4

// FSUM(a0, a1): Sa0 = HSUM4(Va0 + Va1).
#define FSUM(a0, a1) \
	FADD_4S(a0, a0, a1); \
	HSUM4(a0)

#define DOTFLOAT(WLOAD) \
	FARGS;                          \
frow:                                   \
	MOVD R19, R1;                   \
	MOVD R22, R3;                   \
	VEOR V16.B16, V16.B16, V16.B16; \
	VEOR V17.B16, V17.B16, V17.B16; \
floop:                                  \
	WLOAD;                          \
	FX(R1, V16, V17, V3, V4);       \
	LOOP(R3, floop);                \
	FSUM(16, 17);                   \
	FMOVS.P F16, 4(R6);             \
	LOOP(R5, frow);                 \
	RET

// Eight weights are loaded (and widened) once for the four activation
// rows.
#define DOT4FLOAT(WLOAD) \
	FARGS;                          \
	STRIDE(40);                     \
frow4:                                  \
	PTRS4(R19, R1, R13, R14, R15);  \
	MOVD R22, R3;                   \
	ZERO4(V16, V17, V18, V19);      \
	ZERO4(V20, V21, V22, V23);      \
floop4:                                 \
	WLOAD;                          \
	FX(R1, V16, V17, V3, V4);       \
	FX(R13, V18, V19, V5, V6);      \
	FX(R14, V20, V21, V7, V8);      \
	FX(R15, V22, V23, V9, V10);     \
	LOOP(R3, floop4);               \
	FSUM(16, 17);                   \
	FSUM(18, 19);                   \
	FSUM(20, 21);                   \
	FSUM(22, 23);                   \
	STORE4(F16, F18, F20, F22);     \
	LOOP(R5, frow4);                \
	RET

// FKERNELS(n1, n4, W): a float type's two kernels, DOTFLOAT and DOT4FLOAT
// with its loads W:
// func dotXNEON(w *byte, x *float32, n, rows int, out *float32)
// func dot4XNEON(w *byte, x *[4]*float32, n, rows int, out *float32, stride int)
#define FKERNELS(n1, n4, W) \
	TEXT n1(SB), NOSPLIT, $0-40; DOTFLOAT(W); \
	TEXT n4(SB), NOSPLIT, $0-48; DOT4FLOAT(W)

FKERNELS(·dotF32NEON, ·dot4F32NEON, F32W)
FKERNELS(·dotF16NEON, ·dot4F16NEON, F16W)
FKERNELS(·dotBF16NEON, ·dot4BF16NEON, BF16W)

// func axpyNEON(alpha float32, x, y *float32, n int)
// y[i] += alpha*x[i] (one FMA each) for n a multiple of 8.
TEXT ·axpyNEON(SB), NOSPLIT, $0-32
	FMOVS alpha+0(FP), F0
	MOVD  x+8(FP), R0
	MOVD  y+16(FP), R1
	MOVD  n+24(FP), R2
	LSR   $3, R2, R2
	VDUP  V0.S[0], V0.S4

axpyloop:
	VLD1.P 32(R0), [V1.S4, V2.S4]
	VLD1   (R1), [V3.S4, V4.S4]
	VFMLA  V1.S4, V0.S4, V3.S4
	VFMLA  V2.S4, V0.S4, V4.S4
	VST1.P [V3.S4, V4.S4], 32(R1)
	LOOP(R2, axpyloop)
	RET

// ---------------------------------------------------------------- activations

// EACH8(M): M(i) for i = 0..7, on the eight vectors of a block (V0-V7).
#define EACH8(M) M(0); M(1); M(2); M(3); M(4); M(5); M(6); M(7)

#define QABS(i)   FABS_4S(8+i, i)   // V(8+i) = |Vi|
#define QSCALE(i) FMUL_4S(i, i, 10) // Vi *= V10 (127/amax)
#define QROUND(i) FCVTNS_4S(i, i)   // Vi = int32(round half even(Vi))

// func quantizeActNEON(x *float32, qs *int8, d, s *float32, nb int)
// quantizeAct on nb blocks of 32, with its exact results: amax over the
// block, d = amax/127 rounded to fp16 (FCVT rounds to nearest even, as
// FP32ToFP16 does), q = x*(127/amax) in float32 rounded half to even
// (FCVTNS), S = d*float(Σq). For amax = 0 quantizeAct takes 127/amax as 0;
// here it is +Inf, every x is ±0, x*Inf is NaN and FCVTNS makes it 0: the
// same zeros.
TEXT ·quantizeActNEON(SB), NOSPLIT, $0-40
	MOVD  x+0(FP), R0
	MOVD  qs+8(FP), R1
	MOVD  d+16(FP), R2
	MOVD  s+24(FP), R3
	MOVD  nb+32(FP), R4
	FMOVS $127.0, F31

qloop:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	EACH8(QABS)
	FMAX_4S(8, 8, 9)
	FMAX_4S(10, 10, 11)
	FMAX_4S(12, 12, 13)
	FMAX_4S(14, 14, 15)
	FMAX_4S(8, 8, 10)
	FMAX_4S(12, 12, 14)
	FMAX_4S(8, 8, 12)
	FMAXV_S(8, 8)          // amax
	FDIVS  F31, F8, F9     // amax/127
	FCVTSH F9, F9
	FCVTHS F9, F9          // d
	FDIVS  F8, F31, F10    // 127/amax
	VDUP   V10.S[0], V10.S4
	EACH8(QSCALE)
	EACH8(QROUND)

	// S = d * float(Σq).
	VADD   V1.S4, V0.S4, V16.S4
	VADD   V3.S4, V2.S4, V17.S4
	VADD   V5.S4, V4.S4, V18.S4
	VADD   V7.S4, V6.S4, V19.S4
	VADD   V17.S4, V16.S4, V16.S4
	VADD   V19.S4, V18.S4, V18.S4
	VADD   V18.S4, V16.S4, V16.S4
	VADDV  V16.S4, V16
	SCVTF_4S(16, 16)
	FMULS  F16, F9, F17

	// The quants, |q| <= 127, narrowed to bytes in order.
	XTN_4H(20, 0)
	XTN2_8H(20, 1)
	XTN_4H(21, 2)
	XTN2_8H(21, 3)
	XTN_4H(22, 4)
	XTN2_8H(22, 5)
	XTN_4H(23, 6)
	XTN2_8H(23, 7)
	XTN_8B(24, 20)
	XTN2_16B(24, 21)
	XTN_8B(25, 22)
	XTN2_16B(25, 23)
	VST1.P [V24.B16, V25.B16], 32(R1)
	FMOVS.P F9, 4(R2)
	FMOVS.P F17, 4(R3)
	LOOP(R4, qloop)
	RET

// ---------------------------------------------------------------- fp16 conversions

// func f16ToF32NEON(dst *float32, src *uint16, n int)
// n (a multiple of 8) halves to float32, exactly.
TEXT ·f16ToF32NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	LSR  $3, R2, R2

h2sloop:
	H2S(R1)
	VST1.P [V1.S4, V2.S4], 32(R0)
	LOOP(R2, h2sloop)
	RET

// func f32ToF16NEON(dst *uint16, src *float32, n int)
// n (a multiple of 8) float32 values to halves, rounded to nearest even as
// FP32ToFP16 does (FPCR's default rounding; Go leaves it so).
TEXT ·f32ToF16NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	LSR  $3, R2, R2

s2hloop:
	VLD1.P 32(R1), [V1.S4, V2.S4]
	FCVTN_4H(0, 1)
	FCVTN2_8H(0, 2)
	VST1.P [V0.H8], 16(R0)
	LOOP(R2, s2hloop)
	RET

// func f16RowsToF32NEON(dst *float32, src *uint16, stride, w, rows int)
// Row j's w halves (w a multiple of 8) at src + j*stride go to dst + j*w.
TEXT ·f16RowsToF32NEON(SB), NOSPLIT, $0-40
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD stride+16(FP), R3
	LSL  $1, R3, R3 // bytes
	MOVD w+24(FP), R4
	LSR  $3, R4, R4
	MOVD rows+32(FP), R5

rowsrow:
	MOVD R1, R6
	MOVD R4, R2

rowsloop:
	H2S(R6)
	VST1.P [V1.S4, V2.S4], 32(R0)
	LOOP(R2, rowsloop)
	ADD    R3, R1, R1
	LOOP(R5, rowsrow)
	RET

// ---------------------------------------------------------------- ceilings

// PEAK(MAC0, MAC1): R0 rounds of eight MAC0 into V16-V23 and eight MAC1
// into V24-V31 (Vd, V0, V1; V0 holds 3 bytes, V1 5 bytes), sixteen
// independent accumulators, so that only the multiply pipes limit it.
#define PEAK(MAC0, MAC1) \
	CMP   $0, R0;       \
	BLE   peakdone;     \
	VMOVI $3, V0.B16;   \
	VMOVI $5, V1.B16;   \
peakloop:                   \
	MAC8(MAC0, 16);     \
	MAC8(MAC1, 24);     \
	LOOP(R0, peakloop); \
peakdone:                   \
	RET

// MAC8(MAC, d): MAC(d+i, 0, 1) for i = 0..7.
#define MAC8(MAC, d) \
	MAC(d, 0, 1);   \
	MAC(d+1, 0, 1); \
	MAC(d+2, 0, 1); \
	MAC(d+3, 0, 1); \
	MAC(d+4, 0, 1); \
	MAC(d+5, 0, 1); \
	MAC(d+6, 0, 1); \
	MAC(d+7, 0, 1)

// func int8MulPeakNEON(n int)
// n rounds of 8 SMLAL + 8 SMLAL2 (128 int8 multiply-adds).
TEXT ·int8MulPeakNEON(SB), NOSPLIT, $0-8
	MOVD n+0(FP), R0
	PEAK(SMLAL_8H, SMLAL2_8H)

// func int8MulPeakSDOT(n int)
// n rounds of 16 SDOT (256 int8 multiply-adds).
TEXT ·int8MulPeakSDOT(SB), NOSPLIT, $0-8
	MOVD n+0(FP), R0
	PEAK(SDOT_4S, SDOT_4S)

// func int8MulPeakSMMLA(n int)
// n rounds of 16 SMMLA (512 int8 multiply-adds).
TEXT ·int8MulPeakSMMLA(SB), NOSPLIT, $0-8
	MOVD n+0(FP), R0
	PEAK(SMMLA_4S, SMMLA_4S)
