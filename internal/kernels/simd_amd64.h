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
