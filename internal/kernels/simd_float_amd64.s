//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"

// Horizontal sum of Y0 into X0 (lane 0).
#define HSUM0 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VHADDPS      X0, X0, X0; \
	VHADDPS      X0, X0, X0

// The float kernels accumulate each output in two registers (even and odd
// groups of 8 elements, the last odd group into the even one), add them and
// sum the lanes pairwise (VHADDPS twice, then the halves): the one-row and
// the four-row kernels do exactly this per output, so MatMul's results do
// not depend on the batch. n is a multiple of 8 (the Go side adds the
// rest); rows are consecutive (matrix-vector products loop here rather than
// in Go). One macro per kernel shape, instantiated per weight type with the
// type's load: LOAD(off, y) sets y to the 8 floats of the weights at
// off(SI); B8 and B16 are the bytes of 8 and 16 weights.

#define LOADF32(off, y) VMOVUPS off(SI), y

#define LOADF16(off, y) VCVTPH2PS off(SI), y

#define LOADBF16(off, y) \
	VPMOVZXWD off(SI), y; \
	VPSLLD    $16, y, y

// FDOT is the body of func dotXAVX2(w *T, x *float32, n, rows int, out *float32).
#define FDOT(LOAD, B8, B16) \
	MOVQ w+0(FP), SI; \
	MOVQ out+32(FP), AX; \
row: \
	MOVQ   x+8(FP), DI; \
	MOVQ   n+16(FP), CX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y8, Y8, Y8; \
	SUBQ   $16, CX; \
	JL     tail; \
loop: \
	PREFETCHT0  PFD(SI); \
	LOAD(0, Y4); \
	LOAD(B8, Y5); \
	VFMADD231PS (DI), Y4, Y0; \
	VFMADD231PS 32(DI), Y5, Y8; \
	ADDQ        $B16, SI; \
	ADDQ        $64, DI; \
	SUBQ        $16, CX; \
	JGE         loop; \
tail: \
	ADDQ        $8, CX; \
	JL          done; \
	LOAD(0, Y4); \
	VFMADD231PS (DI), Y4, Y0; \
	ADDQ        $B8, SI; \
done: \
	VADDPS       Y8, Y0, Y0; \
	NEXTROW1(24, row)

// FMA4(src, off) adds the weights in src times the 8 activations at
// off(row k's pointer)(DX*1) to the accumulators of the four activation
// rows (Y0-Y3 for off 0, Y8-Y11 for off 32).
#define FMA4(src, off, y0, y1, y2, y3) \
	VFMADD231PS off(R8)(DX*1), src, y0; \
	VFMADD231PS off(R9)(DX*1), src, y1; \
	VFMADD231PS off(R10)(DX*1), src, y2; \
	VFMADD231PS off(R11)(DX*1), src, y3

// FDOT4 is the body of func dot4XAVX2(w *T, x *[4]*float32, n, rows int, out *float32, stride int):
// Y0-Y3 and Y8-Y11 accumulate activation rows 0-3 (even and odd groups of
// 8); DX indexes the activations, SI walks the weights. Row r's output for
// activation row k goes to out[k*stride + r] (R12 = stride in bytes).
#define FDOT4(LOAD, B8, B16) \
	MOVQ w+0(FP), SI; \
	MOVQ x+8(FP), AX; \
	PTRS4(R8, R9, R10, R11); \
	MOVQ stride+40(FP), R12; \
	SHLQ $2, R12; \
row: \
	MOVQ   n+16(FP), CX; \
	XORQ   DX, DX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11; \
	SUBQ   $16, CX; \
	JL     tail; \
loop: \
	LOAD(0, Y4); \
	LOAD(B8, Y5); \
	FMA4(Y4, 0, Y0, Y1, Y2, Y3); \
	FMA4(Y5, 32, Y8, Y9, Y10, Y11); \
	ADDQ        $B16, SI; \
	ADDQ        $64, DX; \
	SUBQ        $16, CX; \
	JGE         loop; \
tail: \
	ADDQ        $8, CX; \
	JL          done; \
	LOAD(0, Y4); \
	FMA4(Y4, 0, Y0, Y1, Y2, Y3); \
	ADDQ        $B8, SI; \
done: \
	VADDPS     Y8, Y0, Y0; \
	VADDPS     Y9, Y1, Y1; \
	VADDPS     Y10, Y2, Y2; \
	VADDPS     Y11, Y3, Y3; \
	HSUM4; \
	STOREX4(X0, out+32(FP), R12, AX); \
	DECQ       rows+24(FP); \
	JNZ        row; \
	VZEROUPPER; \
	RET

// FKERNELS(one, four, LOAD, B8, B16) is a float type's two kernels, one
// and four (its TEXT symbols), from its LOAD and the bytes of 8 and 16
// weights.
#define FKERNELS(one, four, LOAD, B8, B16) \
	TEXT one(SB), NOSPLIT, $0-40; \
	FDOT(LOAD, B8, B16); \
	TEXT four(SB), NOSPLIT, $0-48; \
	FDOT4(LOAD, B8, B16)

// The kernels' Go declarations (gen_avx2_amd64.go):
// func dotXAVX2(w *byte, x *float32, n, rows int, out *float32)
// func dot4XAVX2(w *byte, x *[4]*float32, n, rows int, out *float32, stride int)
FKERNELS(·dotF32AVX2, ·dot4F32AVX2, LOADF32, 32, 64)
FKERNELS(·dotF16AVX2, ·dot4F16AVX2, LOADF16, 16, 32)
FKERNELS(·dotBF16AVX2, ·dot4BF16AVX2, LOADBF16, 16, 32)

// func dotVecAVX2(a, b *float32, n int) float32
// n is a multiple of 8. Attention's scores: short vectors (a head, 64 to
// 128 values), so two accumulators and no row loop.
TEXT ·dotVecAVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	SUBQ   $16, CX
	JL     dvtail

dvloop:
	VMOVUPS     (SI), Y2
	VMOVUPS     32(SI), Y3
	VFMADD231PS (DI), Y2, Y0
	VFMADD231PS 32(DI), Y3, Y1
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JGE         dvloop

dvtail:
	ADDQ        $16, CX
	JZ          dvdone
	VMOVUPS     (SI), Y2
	VFMADD231PS (DI), Y2, Y0

dvdone:
	VADDPS Y1, Y0, Y0
	HSUM0
	VZEROUPPER
	MOVSS  X0, ret+24(FP)
	RET

// func axpyAVX2(alpha float32, x, y *float32, n int)
// y += alpha*x; n is a multiple of 8.
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	VBROADCASTSS alpha+0(FP), Y0
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n+24(FP), CX
	SUBQ         $16, CX
	JL           axtail

axloop:
	VMOVUPS     (DI), Y1
	VMOVUPS     32(DI), Y2
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VMOVUPS     Y1, (DI)
	VMOVUPS     Y2, 32(DI)
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JGE         axloop

axtail:
	ADDQ        $16, CX
	JZ          axdone
	VMOVUPS     (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS     Y1, (DI)

axdone:
	VZEROUPPER
	RET
