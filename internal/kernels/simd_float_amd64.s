//go:build amd64 && !purego

#include "textflag.h"

// PFD is how far ahead of the weights the matrix-vector kernels prefetch
// (one stream; the hardware prefetcher alone leaves part of the memory
// bandwidth unused on Zen 1).
#define PFD 1024

// Horizontal sum of Y0 into X0 (lane 0).
#define HSUM0 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VHADDPS      X0, X0, X0; \
	VHADDPS      X0, X0, X0

// Sums of Y0, Y1, Y2, Y3 into X0 lanes 0..3.
#define HSUM4 \
	VHADDPS      Y1, Y0, Y0; \
	VHADDPS      Y3, Y2, Y2; \
	VHADDPS      Y2, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0

// The float kernels accumulate each output in two registers (even and odd
// groups of 8 elements, the last odd group into the even one), add them and
// sum the lanes pairwise (VHADDPS twice, then the halves): the one-row and
// the four-row kernels do exactly this per output, so MatMul's results do
// not depend on the batch. n is a multiple of 8 (the Go side adds the
// rest); rows are consecutive (matrix-vector products loop here rather than
// in Go).

// func dotF32AVX2(w, x *float32, n, rows int, out *float32)
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ out+32(FP), AX

f32row:
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y8, Y8, Y8
	SUBQ   $16, CX
	JL     f32tail

f32loop:
	PREFETCHT0  PFD(SI)
	VMOVUPS     0(SI), Y4
	VMOVUPS     32(SI), Y5
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y8
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JGE         f32loop

f32tail:
	ADDQ        $8, CX
	JL          f32done
	VMOVUPS     0(SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI

f32done:
	VADDPS       Y8, Y0, Y0
	VHADDPS      Y0, Y0, Y0
	VHADDPS      Y0, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	MOVSS        X0, (AX)
	ADDQ         $4, AX
	DECQ         rows+24(FP)
	JNZ          f32row
	VZEROUPPER
	RET

// func dot4F32AVX2(w *float32, x *[4]*float32, n, rows int, out *float32, stride int)
// Y0-Y3 and Y8-Y11 accumulate activation rows 0-3 (even and odd groups of
// 8); DX indexes the activations, SI walks the weights. Row r's output for
// activation row k goes to out[k*stride + r] (R12 = stride in bytes).
TEXT ·dot4F32AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R9
	MOVQ 16(AX), R10
	MOVQ 24(AX), R11
	MOVQ stride+40(FP), R12
	SHLQ $2, R12

f32x4row:
	MOVQ   n+16(FP), CX
	XORQ   DX, DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	SUBQ   $16, CX
	JL     f32x4tail

f32x4loop:
	VMOVUPS     0(SI), Y4
	VMOVUPS     32(SI), Y5
	VFMADD231PS (R8)(DX*1), Y4, Y0
	VFMADD231PS (R9)(DX*1), Y4, Y1
	VFMADD231PS (R10)(DX*1), Y4, Y2
	VFMADD231PS (R11)(DX*1), Y4, Y3
	VFMADD231PS 32(R8)(DX*1), Y5, Y8
	VFMADD231PS 32(R9)(DX*1), Y5, Y9
	VFMADD231PS 32(R10)(DX*1), Y5, Y10
	VFMADD231PS 32(R11)(DX*1), Y5, Y11
	ADDQ        $64, SI
	ADDQ        $64, DX
	SUBQ        $16, CX
	JGE         f32x4loop

f32x4tail:
	ADDQ        $8, CX
	JL          f32x4done
	VMOVUPS     0(SI), Y4
	VFMADD231PS (R8)(DX*1), Y4, Y0
	VFMADD231PS (R9)(DX*1), Y4, Y1
	VFMADD231PS (R10)(DX*1), Y4, Y2
	VFMADD231PS (R11)(DX*1), Y4, Y3
	ADDQ        $32, SI

f32x4done:
	VADDPS     Y8, Y0, Y0
	VADDPS     Y9, Y1, Y1
	VADDPS     Y10, Y2, Y2
	VADDPS     Y11, Y3, Y3
	HSUM4
	MOVQ       out+32(FP), AX
	VMOVSS     X0, (AX)
	VEXTRACTPS $1, X0, (AX)(R12*1)
	VEXTRACTPS $2, X0, (AX)(R12*2)
	LEAQ       (AX)(R12*2), AX
	VEXTRACTPS $3, X0, (AX)(R12*1)
	ADDQ       $4, out+32(FP)
	DECQ       rows+24(FP)
	JNZ        f32x4row
	VZEROUPPER
	RET

// func dotF16AVX2(w *byte, x *float32, n, rows int, out *float32)
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ out+32(FP), AX

f16row:
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y8, Y8, Y8
	SUBQ   $16, CX
	JL     f16tail

f16loop:
	PREFETCHT0  PFD(SI)
	VCVTPH2PS   0(SI), Y4
	VCVTPH2PS   16(SI), Y5
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y8
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JGE         f16loop

f16tail:
	ADDQ        $8, CX
	JL          f16done
	VCVTPH2PS   0(SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $16, SI

f16done:
	VADDPS       Y8, Y0, Y0
	VHADDPS      Y0, Y0, Y0
	VHADDPS      Y0, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	MOVSS        X0, (AX)
	ADDQ         $4, AX
	DECQ         rows+24(FP)
	JNZ          f16row
	VZEROUPPER
	RET

// func dot4F16AVX2(w *byte, x *[4]*float32, n, rows int, out *float32, stride int)
// Y0-Y3 and Y8-Y11 accumulate activation rows 0-3 (even and odd groups of
// 8); DX indexes the activations, SI walks the weights. Row r's output for
// activation row k goes to out[k*stride + r] (R12 = stride in bytes).
TEXT ·dot4F16AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R9
	MOVQ 16(AX), R10
	MOVQ 24(AX), R11
	MOVQ stride+40(FP), R12
	SHLQ $2, R12

f16x4row:
	MOVQ   n+16(FP), CX
	XORQ   DX, DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	SUBQ   $16, CX
	JL     f16x4tail

f16x4loop:
	VCVTPH2PS   0(SI), Y4
	VCVTPH2PS   16(SI), Y5
	VFMADD231PS (R8)(DX*1), Y4, Y0
	VFMADD231PS (R9)(DX*1), Y4, Y1
	VFMADD231PS (R10)(DX*1), Y4, Y2
	VFMADD231PS (R11)(DX*1), Y4, Y3
	VFMADD231PS 32(R8)(DX*1), Y5, Y8
	VFMADD231PS 32(R9)(DX*1), Y5, Y9
	VFMADD231PS 32(R10)(DX*1), Y5, Y10
	VFMADD231PS 32(R11)(DX*1), Y5, Y11
	ADDQ        $32, SI
	ADDQ        $64, DX
	SUBQ        $16, CX
	JGE         f16x4loop

f16x4tail:
	ADDQ        $8, CX
	JL          f16x4done
	VCVTPH2PS   0(SI), Y4
	VFMADD231PS (R8)(DX*1), Y4, Y0
	VFMADD231PS (R9)(DX*1), Y4, Y1
	VFMADD231PS (R10)(DX*1), Y4, Y2
	VFMADD231PS (R11)(DX*1), Y4, Y3
	ADDQ        $16, SI

f16x4done:
	VADDPS     Y8, Y0, Y0
	VADDPS     Y9, Y1, Y1
	VADDPS     Y10, Y2, Y2
	VADDPS     Y11, Y3, Y3
	HSUM4
	MOVQ       out+32(FP), AX
	VMOVSS     X0, (AX)
	VEXTRACTPS $1, X0, (AX)(R12*1)
	VEXTRACTPS $2, X0, (AX)(R12*2)
	LEAQ       (AX)(R12*2), AX
	VEXTRACTPS $3, X0, (AX)(R12*1)
	ADDQ       $4, out+32(FP)
	DECQ       rows+24(FP)
	JNZ        f16x4row
	VZEROUPPER
	RET

// func dotBF16AVX2(w *byte, x *float32, n, rows int, out *float32)
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ out+32(FP), AX

bf16row:
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y8, Y8, Y8
	SUBQ   $16, CX
	JL     bf16tail

bf16loop:
	PREFETCHT0  PFD(SI)
	VPMOVZXWD   0(SI), Y4
	VPSLLD      $16, Y4, Y4
	VPMOVZXWD   16(SI), Y5
	VPSLLD      $16, Y5, Y5
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y8
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JGE         bf16loop

bf16tail:
	ADDQ        $8, CX
	JL          bf16done
	VPMOVZXWD   0(SI), Y4
	VPSLLD      $16, Y4, Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $16, SI

bf16done:
	VADDPS       Y8, Y0, Y0
	VHADDPS      Y0, Y0, Y0
	VHADDPS      Y0, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	MOVSS        X0, (AX)
	ADDQ         $4, AX
	DECQ         rows+24(FP)
	JNZ          bf16row
	VZEROUPPER
	RET

// func dot4BF16AVX2(w *byte, x *[4]*float32, n, rows int, out *float32, stride int)
// Y0-Y3 and Y8-Y11 accumulate activation rows 0-3 (even and odd groups of
// 8); DX indexes the activations, SI walks the weights. Row r's output for
// activation row k goes to out[k*stride + r] (R12 = stride in bytes).
TEXT ·dot4BF16AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R9
	MOVQ 16(AX), R10
	MOVQ 24(AX), R11
	MOVQ stride+40(FP), R12
	SHLQ $2, R12

bf16x4row:
	MOVQ   n+16(FP), CX
	XORQ   DX, DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	SUBQ   $16, CX
	JL     bf16x4tail

bf16x4loop:
	VPMOVZXWD   0(SI), Y4
	VPSLLD      $16, Y4, Y4
	VPMOVZXWD   16(SI), Y5
	VPSLLD      $16, Y5, Y5
	VFMADD231PS (R8)(DX*1), Y4, Y0
	VFMADD231PS (R9)(DX*1), Y4, Y1
	VFMADD231PS (R10)(DX*1), Y4, Y2
	VFMADD231PS (R11)(DX*1), Y4, Y3
	VFMADD231PS 32(R8)(DX*1), Y5, Y8
	VFMADD231PS 32(R9)(DX*1), Y5, Y9
	VFMADD231PS 32(R10)(DX*1), Y5, Y10
	VFMADD231PS 32(R11)(DX*1), Y5, Y11
	ADDQ        $32, SI
	ADDQ        $64, DX
	SUBQ        $16, CX
	JGE         bf16x4loop

bf16x4tail:
	ADDQ        $8, CX
	JL          bf16x4done
	VPMOVZXWD   0(SI), Y4
	VPSLLD      $16, Y4, Y4
	VFMADD231PS (R8)(DX*1), Y4, Y0
	VFMADD231PS (R9)(DX*1), Y4, Y1
	VFMADD231PS (R10)(DX*1), Y4, Y2
	VFMADD231PS (R11)(DX*1), Y4, Y3
	ADDQ        $16, SI

bf16x4done:
	VADDPS     Y8, Y0, Y0
	VADDPS     Y9, Y1, Y1
	VADDPS     Y10, Y2, Y2
	VADDPS     Y11, Y3, Y3
	HSUM4
	MOVQ       out+32(FP), AX
	VMOVSS     X0, (AX)
	VEXTRACTPS $1, X0, (AX)(R12*1)
	VEXTRACTPS $2, X0, (AX)(R12*2)
	LEAQ       (AX)(R12*2), AX
	VEXTRACTPS $3, X0, (AX)(R12*1)
	ADDQ       $4, out+32(FP)
	DECQ       rows+24(FP)
	JNZ        bf16x4row
	VZEROUPPER
	RET

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
