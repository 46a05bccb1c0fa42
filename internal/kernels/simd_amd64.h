// Macros shared by the assembly kernels (simd_*_amd64.s include this file).

// PFD is how far ahead of the weights the matrix-vector kernels prefetch
// (one stream; the hardware prefetcher alone leaves part of the memory
// bandwidth unused on Zen 1).
#define PFD 1024

// PTRS4(r0, r1, r2, r3) loads the four pointers of the array at AX.
#define PTRS4(r0, r1, r2, r3) \
	MOVQ 0(AX), r0; \
	MOVQ 8(AX), r1; \
	MOVQ 16(AX), r2; \
	MOVQ 24(AX), r3

// KT2(a, b, t): a = [a0+a2, b0+b2, a1+a3, b1+b3] (per 128-bit lane), and
// KT4(a, b, t), on KT2 results a (of vectors i, i+1) and b (i+2, i+3):
// a = the four vectors' lane sums in order. A transposition of single
// micro-ops on Zen 1, where VPHADDD ymm and the lane-crossing permutes are
// several; the sums are exact integers, so their order does not matter.
#define KT2(a, b, t) \
	VPUNPCKLDQ b, a, t; \
	VPUNPCKHDQ b, a, a; \
	VPADDD     t, a, a

#define KT4(a, b, t) \
	VPUNPCKLQDQ b, a, t; \
	VPUNPCKHQDQ b, a, a; \
	VPADDD      t, a, a

// KH2(a, b, t, u), on KT4 results a and b of 256-bit registers (each
// 128-bit half holding four vectors' partial sums): t = a's four sums,
// then b's, the halves added; u is clobbered.
#define KH2(a, b, t, u) \
	VPERM2I128 $0x20, b, a, t; \
	VPERM2I128 $0x31, b, a, u; \
	VPADDD     u, t, t

// XT4: X0 = [ΣX0, ΣX2, ΣX10, ΣX12] (lane sums of four blocks' int32
// partial sums); X1, X3 are clobbered.
#define XT4 \
	KT2(X0, X2, X1); \
	KT2(X10, X12, X3); \
	KT4(X0, X10, X1)

// HSUM4: X0 lanes 0-3 = the sums of Y0, Y1, Y2, Y3 (pairs, pairs of
// pairs, then the two halves).
#define HSUM4 \
	VHADDPS      Y1, Y0, Y0; \
	VHADDPS      Y3, Y2, Y2; \
	VHADDPS      Y2, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0

// HMAX8(y, x, tx): every lane of x (y's low half) is the largest of y's
// 8 floats (tx scratch).
#define HMAX8(y, x, tx) \
	VEXTRACTF128 $1, y, tx; \
	VMAXPS       tx, x, x;  \
	VPERMILPS    $0x4e, x, tx; \
	VMAXPS       tx, x, x;  \
	VPERMILPS    $0xb1, x, tx; \
	VMAXPS       tx, x, x

// STOREX4(x, outarg, stride, p): stores the lanes of x to out,
// out+stride, out+2*stride, out+3*stride (out the argument outarg, stride
// a register holding bytes, p a scratch pointer register) and moves the
// argument on to the next row's output.
#define STOREX4(x, outarg, stride, p) \
	MOVQ       outarg, p; \
	VMOVSS     x, (p); \
	VEXTRACTPS $1, x, (p)(stride*1); \
	VEXTRACTPS $2, x, (p)(stride*2); \
	LEAQ       (p)(stride*2), p; \
	VEXTRACTPS $3, x, (p)(stride*1); \
	ADDQ       $4, outarg

// NEXTROW1(off, label): stores the sum of Y0 (HSUM1) at (AX), moves AX
// on, and loops to label while the argument rows (at off in the frame),
// decremented, is not 0; then returns.
#define NEXTROW1(off, label) \
	HSUM1; \
	MOVSS      X0, (AX); \
	ADDQ       $4, AX; \
	DECQ       rows+off(FP); \
	JNZ        label; \
	VZEROUPPER; \
	RET

// HSUM1: X0 lane 0 = the sum of Y0 in HSUM4's order (pairs, pairs of
// pairs, then the two halves); X1 is clobbered.
#define HSUM1 \
	VHADDPS      Y0, Y0, Y0; \
	VHADDPS      Y0, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0

// ISUM1: X0 lanes = the sum of its four int32 lanes; X1 is clobbered.
#define ISUM1 \
	VPSHUFD $0x4e, X0, X1; \
	VPADDD  X1, X0, X0; \
	VPSHUFD $0xb1, X0, X1; \
	VPADDD  X1, X0, X0

// W4HALVES(o): X8 = the halves at o(SI) of four consecutive weight rows
// (R13 bytes apart, R9 three rows) as floats, through the table at R8.
#define W4HALVES(o) \
	MOVWLZX   o(SI), DX; \
	MOVWLZX   o(SI)(R13*1), R11; \
	MOVWLZX   o(SI)(R13*2), R12; \
	MOVWLZX   o(SI)(R9*1), R14; \
	VMOVSS    (R8)(DX*4), X8; \
	VINSERTPS $0x10, (R8)(R11*4), X8, X8; \
	VINSERTPS $0x20, (R8)(R12*4), X8, X8; \
	VINSERTPS $0x30, (R8)(R14*4), X8, X8

// DA4(x): x = the four activation rows' block scales at AX in the arrays
// at BX, DI, R13, R14.
#define DA4(x) \
	VMOVSS    (BX)(AX*1), x; \
	VINSERTPS $0x10, (DI)(AX*1), x, x; \
	VINSERTPS $0x20, (R13)(AX*1), x, x; \
	VINSERTPS $0x30, (R14)(AX*1), x, x

// ROWS3(arg, r, r3): r = the row stride argument arg (floats) in bytes,
// r3 = 3*r: four rows at (p), (p)(r*1), (p)(r*2), (p)(r3*1).
#define ROWS3(arg, r, r3) \
	MOVQ arg, r;     \
	SHLQ $2, r;      \
	LEAQ (r)(r*2), r3

// SOFTMAXARGS(shift): the FlashSoftmax kernels' arguments (s, nq, m, l,
// o, ldo, vd): SI = s, CX = nq, R8 = m, R9 = l, R10 = o, R11 = ldo in
// bytes, R12 = vd >> shift (the registers of a row of o).
#define SOFTMAXARGS(shift) \
	MOVQ s+0(FP), SI;    \
	MOVQ nq+8(FP), CX;   \
	MOVQ m+16(FP), R8;   \
	MOVQ l+24(FP), R9;   \
	MOVQ o+32(FP), R10;  \
	MOVQ ldo+40(FP), R11; \
	SHLQ $2, R11;        \
	MOVQ vd+48(FP), R12; \
	SHRQ $shift, R12

// KTILEQ8COL(shift, SCALE, PAIR, step) is the body of
// func kTileQ8ColX(dst *float32, ld int, src *uint16, stride, blocks, cnt int):
// KTile of q8_0 rows by column (kTileColQ8's bits) for blocks blocks of
// 32 values, cnt rows (a multiple of 1<<shift, the rows of a vector)
// a vector at a time: SCALE decodes the scale column at R10, then for
// each of the block's 16 columns of code pairs (R14) PAIR stores the low
// bytes times the scales at (BX) (tile row 2p) and the high bytes at
// (BX)(R8*1) (row 2p+1); step is the bytes of a vector's halves. DI =
// dst, R8 = ld in bytes, SI = src, R9 = stride (the bytes from a word
// column to the next), CX the blocks left.
#define KTILEQ8COL(shift, SCALE, PAIR, step) \
	MOVQ dst+0(FP), DI;       \
	MOVQ ld+8(FP), R8;        \
	SHLQ $2, R8;              \
	MOVQ src+16(FP), SI;      \
	MOVQ stride+24(FP), R9;   \
	MOVQ blocks+32(FP), CX;   \
kqblk:                        \
	MOVQ cnt+40(FP), DX;      \
	SHRQ $shift, DX;          \
	MOVQ SI, R10;             \
	MOVQ DI, R12;             \
kqchunk:                      \
	SCALE;                    \
	LEAQ (R10)(R9*1), R14;    \
	MOVQ R12, BX;             \
	MOVQ $16, R13;            \
kqpair:                       \
	PAIR;                     \
	LEAQ (BX)(R8*2), BX;      \
	ADDQ R9, R14;             \
	DECQ R13;                 \
	JNZ  kqpair;              \
	ADDQ $step, R10;          \
	ADDQ $(2*step), R12;      \
	DECQ DX;                  \
	JNZ  kqchunk;             \
	MOVQ R9, AX;              \
	SHLQ $4, AX;              \
	ADDQ R9, AX;              \
	ADDQ AX, SI;              \
	MOVQ R8, AX;              \
	SHLQ $5, AX;              \
	ADDQ AX, DI;              \
	DECQ CX;                  \
	JNZ  kqblk;               \
	VZEROUPPER;               \
	RET

// SPLIT256(wide, narrow) is the body of an avx2 entry point with a 256-bit
// and a 128-bit form (split256_amd64.go): a jump to narrow where the CPU
// splits 256-bit integer multiplies (split256), else to wide.
#define SPLIT256(wide, narrow) \
	CMPB ·split256(SB), $0; \
	JNE  narrow256; \
	JMP  wide(SB); \
narrow256: \
	JMP narrow(SB)
