//go:build amd64 && !purego

#include "textflag.h"

// Element-wise kernels of the model (swiglu, softmax, rmsnorm) on 8 floats
// at a time; n is a multiple of 8 (the Go side pads the rest through the
// same code, so an element's result does not depend on where it lies).
//
// exp(x) is Cephes' expf: n = round(x·log2 e), r = x - n·ln 2 in two parts
// (C1 has few bits, so n·C1 is exact), e^r by a degree-7 polynomial, times
// 2^n built in the exponent bits: within 2 ulp of exp. Below LO (where 2^n
// would not be normal) the result is 0, above HI +Inf.

// Each constant repeated 8 times, so that it can be a 256-bit memory operand.

#define LOG2E elemc<>+0(SB)
#define C1 elemc<>+32(SB)
#define C2 elemc<>+64(SB)
#define P0 elemc<>+96(SB)
#define P1 elemc<>+128(SB)
#define P2 elemc<>+160(SB)
#define P3 elemc<>+192(SB)
#define P4 elemc<>+224(SB)
#define P5 elemc<>+256(SB)
#define ONE elemc<>+288(SB)
#define HI elemc<>+320(SB)
#define LO elemc<>+352(SB)
#define INF elemc<>+384(SB)
#define BIAS elemc<>+416(SB)

DATA elemc<>+0(SB)/4, $0x3fb8aa3b
DATA elemc<>+4(SB)/4, $0x3fb8aa3b
DATA elemc<>+8(SB)/4, $0x3fb8aa3b
DATA elemc<>+12(SB)/4, $0x3fb8aa3b
DATA elemc<>+16(SB)/4, $0x3fb8aa3b
DATA elemc<>+20(SB)/4, $0x3fb8aa3b
DATA elemc<>+24(SB)/4, $0x3fb8aa3b
DATA elemc<>+28(SB)/4, $0x3fb8aa3b
DATA elemc<>+32(SB)/4, $0x3f318000
DATA elemc<>+36(SB)/4, $0x3f318000
DATA elemc<>+40(SB)/4, $0x3f318000
DATA elemc<>+44(SB)/4, $0x3f318000
DATA elemc<>+48(SB)/4, $0x3f318000
DATA elemc<>+52(SB)/4, $0x3f318000
DATA elemc<>+56(SB)/4, $0x3f318000
DATA elemc<>+60(SB)/4, $0x3f318000
DATA elemc<>+64(SB)/4, $0xb95e8083
DATA elemc<>+68(SB)/4, $0xb95e8083
DATA elemc<>+72(SB)/4, $0xb95e8083
DATA elemc<>+76(SB)/4, $0xb95e8083
DATA elemc<>+80(SB)/4, $0xb95e8083
DATA elemc<>+84(SB)/4, $0xb95e8083
DATA elemc<>+88(SB)/4, $0xb95e8083
DATA elemc<>+92(SB)/4, $0xb95e8083
DATA elemc<>+96(SB)/4, $0x39506967
DATA elemc<>+100(SB)/4, $0x39506967
DATA elemc<>+104(SB)/4, $0x39506967
DATA elemc<>+108(SB)/4, $0x39506967
DATA elemc<>+112(SB)/4, $0x39506967
DATA elemc<>+116(SB)/4, $0x39506967
DATA elemc<>+120(SB)/4, $0x39506967
DATA elemc<>+124(SB)/4, $0x39506967
DATA elemc<>+128(SB)/4, $0x3ab743ce
DATA elemc<>+132(SB)/4, $0x3ab743ce
DATA elemc<>+136(SB)/4, $0x3ab743ce
DATA elemc<>+140(SB)/4, $0x3ab743ce
DATA elemc<>+144(SB)/4, $0x3ab743ce
DATA elemc<>+148(SB)/4, $0x3ab743ce
DATA elemc<>+152(SB)/4, $0x3ab743ce
DATA elemc<>+156(SB)/4, $0x3ab743ce
DATA elemc<>+160(SB)/4, $0x3c088908
DATA elemc<>+164(SB)/4, $0x3c088908
DATA elemc<>+168(SB)/4, $0x3c088908
DATA elemc<>+172(SB)/4, $0x3c088908
DATA elemc<>+176(SB)/4, $0x3c088908
DATA elemc<>+180(SB)/4, $0x3c088908
DATA elemc<>+184(SB)/4, $0x3c088908
DATA elemc<>+188(SB)/4, $0x3c088908
DATA elemc<>+192(SB)/4, $0x3d2aa9c1
DATA elemc<>+196(SB)/4, $0x3d2aa9c1
DATA elemc<>+200(SB)/4, $0x3d2aa9c1
DATA elemc<>+204(SB)/4, $0x3d2aa9c1
DATA elemc<>+208(SB)/4, $0x3d2aa9c1
DATA elemc<>+212(SB)/4, $0x3d2aa9c1
DATA elemc<>+216(SB)/4, $0x3d2aa9c1
DATA elemc<>+220(SB)/4, $0x3d2aa9c1
DATA elemc<>+224(SB)/4, $0x3e2aaaaa
DATA elemc<>+228(SB)/4, $0x3e2aaaaa
DATA elemc<>+232(SB)/4, $0x3e2aaaaa
DATA elemc<>+236(SB)/4, $0x3e2aaaaa
DATA elemc<>+240(SB)/4, $0x3e2aaaaa
DATA elemc<>+244(SB)/4, $0x3e2aaaaa
DATA elemc<>+248(SB)/4, $0x3e2aaaaa
DATA elemc<>+252(SB)/4, $0x3e2aaaaa
DATA elemc<>+256(SB)/4, $0x3f000000
DATA elemc<>+260(SB)/4, $0x3f000000
DATA elemc<>+264(SB)/4, $0x3f000000
DATA elemc<>+268(SB)/4, $0x3f000000
DATA elemc<>+272(SB)/4, $0x3f000000
DATA elemc<>+276(SB)/4, $0x3f000000
DATA elemc<>+280(SB)/4, $0x3f000000
DATA elemc<>+284(SB)/4, $0x3f000000
DATA elemc<>+288(SB)/4, $0x3f800000
DATA elemc<>+292(SB)/4, $0x3f800000
DATA elemc<>+296(SB)/4, $0x3f800000
DATA elemc<>+300(SB)/4, $0x3f800000
DATA elemc<>+304(SB)/4, $0x3f800000
DATA elemc<>+308(SB)/4, $0x3f800000
DATA elemc<>+312(SB)/4, $0x3f800000
DATA elemc<>+316(SB)/4, $0x3f800000
DATA elemc<>+320(SB)/4, $0x42b0c0a5
DATA elemc<>+324(SB)/4, $0x42b0c0a5
DATA elemc<>+328(SB)/4, $0x42b0c0a5
DATA elemc<>+332(SB)/4, $0x42b0c0a5
DATA elemc<>+336(SB)/4, $0x42b0c0a5
DATA elemc<>+340(SB)/4, $0x42b0c0a5
DATA elemc<>+344(SB)/4, $0x42b0c0a5
DATA elemc<>+348(SB)/4, $0x42b0c0a5
DATA elemc<>+352(SB)/4, $0xc2aeac50
DATA elemc<>+356(SB)/4, $0xc2aeac50
DATA elemc<>+360(SB)/4, $0xc2aeac50
DATA elemc<>+364(SB)/4, $0xc2aeac50
DATA elemc<>+368(SB)/4, $0xc2aeac50
DATA elemc<>+372(SB)/4, $0xc2aeac50
DATA elemc<>+376(SB)/4, $0xc2aeac50
DATA elemc<>+380(SB)/4, $0xc2aeac50
DATA elemc<>+384(SB)/4, $0x7f800000
DATA elemc<>+388(SB)/4, $0x7f800000
DATA elemc<>+392(SB)/4, $0x7f800000
DATA elemc<>+396(SB)/4, $0x7f800000
DATA elemc<>+400(SB)/4, $0x7f800000
DATA elemc<>+404(SB)/4, $0x7f800000
DATA elemc<>+408(SB)/4, $0x7f800000
DATA elemc<>+412(SB)/4, $0x7f800000
DATA elemc<>+416(SB)/4, $0x7f
DATA elemc<>+420(SB)/4, $0x7f
DATA elemc<>+424(SB)/4, $0x7f
DATA elemc<>+428(SB)/4, $0x7f
DATA elemc<>+432(SB)/4, $0x7f
DATA elemc<>+436(SB)/4, $0x7f
DATA elemc<>+440(SB)/4, $0x7f
DATA elemc<>+444(SB)/4, $0x7f
GLOBL elemc<>(SB), RODATA|NOPTR, $448

// EXP(x, r, k, y): y = exp(x) for the 8 floats of x (kept); r, k are
// clobbered. NaN stays NaN.
#define EXP(x, r, k, y) \
	VMINPS       HI, x, r; \
	VMAXPS       LO, r, r; \
	VMULPS       LOG2E, r, k; \
	VROUNDPS     $0, k, k; \
	VFNMADD231PS C1, k, r; \
	VFNMADD231PS C2, k, r; \
	VMOVUPS      P0, y; \
	VFMADD213PS  P1, r, y; \
	VFMADD213PS  P2, r, y; \
	VFMADD213PS  P3, r, y; \
	VFMADD213PS  P4, r, y; \
	VFMADD213PS  P5, r, y; \
	VMULPS       r, y, y; \
	VFMADD213PS  r, r, y; \
	VADDPS       ONE, y, y; \
	VCVTPS2DQ    k, k; \
	VPADDD       BIAS, k, k; \
	VPSLLD       $23, k, k; \
	VMULPS       k, y, y; \
	VCMPPS       $1, LO, x, k; \
	VANDNPS      y, k, y; \
	VCMPPS       $14, HI, x, k; \
	VBLENDVPS    k, INF, y, y; \
	VCMPPS       $3, x, x, k; \
	VBLENDVPS    k, x, y, y

// func siluMulAVX2(gate, up *float32, n int)
// g[i] = g[i] / (1 + exp(-g[i])) * u[i]; two groups of 8 per iteration
// so that the two exp chains overlap.
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-24
	MOVQ   gate+0(FP), DI
	MOVQ   up+8(FP), SI
	MOVQ   n+16(FP), CX
	VXORPS Y15, Y15, Y15
	SHRQ   $3, CX
	TESTQ  $1, CX
	JZ     silupairs
	VMOVUPS (DI), Y0
	VSUBPS  Y0, Y15, Y1
	EXP(Y1, Y2, Y3, Y4)
	VADDPS  ONE, Y4, Y4
	VDIVPS  Y4, Y0, Y0
	VMULPS  (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI

silupairs:
	SHRQ $1, CX
	JZ   siludone

siluloop:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y5
	VSUBPS  Y0, Y15, Y1
	VSUBPS  Y5, Y15, Y6
	EXP(Y1, Y2, Y3, Y4)
	EXP(Y6, Y7, Y8, Y9)
	VADDPS  ONE, Y4, Y4
	VADDPS  ONE, Y9, Y9
	VDIVPS  Y4, Y0, Y0
	VDIVPS  Y9, Y5, Y5
	VMULPS  (SI), Y0, Y0
	VMULPS  32(SI), Y5, Y5
	VMOVUPS Y0, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ    $64, DI
	ADDQ    $64, SI
	DECQ    CX
	JNZ     siluloop

siludone:
	VZEROUPPER
	RET

// func expSubSumAVX2(x *float32, n int, sub float32) float64
// x[i] = exp(x[i] - sub); returns Σ x[i], summed in float64 (4 lanes of
// Y14 and 4 of Y13, then pairwise).
TEXT ·expSubSumAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS sub+16(FP), Y15
	VXORPD       Y14, Y14, Y14
	VXORPD       Y13, Y13, Y13
	SHRQ         $3, CX
	JZ           expdone

exploop:
	VMOVUPS      (DI), Y0
	VSUBPS       Y15, Y0, Y0
	EXP(Y0, Y1, Y2, Y3)
	VMOVUPS      Y3, (DI)
	VCVTPS2PD    X3, Y4
	VEXTRACTF128 $1, Y3, X5
	VCVTPS2PD    X5, Y5
	VADDPD       Y4, Y14, Y14
	VADDPD       Y5, Y13, Y13
	ADDQ         $32, DI
	DECQ         CX
	JNZ          exploop

expdone:
	VADDPD       Y13, Y14, Y14
	VEXTRACTF128 $1, Y14, X13
	VADDPD       X13, X14, X14
	VHADDPD      X14, X14, X14
	VMOVSD       X14, ret+24(FP)
	VZEROUPPER
	RET

// func maxAVX2(x *float32, n int) float32
// n >= 8.
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ    x+0(FP), DI
	MOVQ    n+8(FP), CX
	SHRQ    $3, CX
	VMOVUPS (DI), Y0
	ADDQ    $32, DI
	DECQ    CX
	JZ      maxdone

maxloop:
	VMAXPS (DI), Y0, Y0
	ADDQ   $32, DI
	DECQ   CX
	JNZ    maxloop

maxdone:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSS       X0, ret+16(FP)
	VZEROUPPER
	RET

// func scaleAVX2(x *float32, n int, s float32)
// x[i] *= s.
TEXT ·scaleAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS s+16(FP), Y15
	SHRQ         $3, CX
	JZ           scaledone

scaleloop:
	VMULPS  (DI), Y15, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	DECQ    CX
	JNZ     scaleloop

scaledone:
	VZEROUPPER
	RET

// func sumSqAVX2(x *float32, n int) float64
// Σ x[i]², each square rounded to float32 and summed in float64 (as ggml's
// rms_norm does).
TEXT ·sumSqAVX2(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), DI
	MOVQ   n+8(FP), CX
	VXORPD Y14, Y14, Y14
	VXORPD Y13, Y13, Y13
	SHRQ   $3, CX
	JZ     sumsqdone

sumsqloop:
	VMOVUPS      (DI), Y0
	VMULPS       Y0, Y0, Y0
	VCVTPS2PD    X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD    X2, Y2
	VADDPD       Y1, Y14, Y14
	VADDPD       Y2, Y13, Y13
	ADDQ         $32, DI
	DECQ         CX
	JNZ          sumsqloop

sumsqdone:
	VADDPD       Y13, Y14, Y14
	VEXTRACTF128 $1, Y14, X13
	VADDPD       X13, X14, X14
	VHADDPD      X14, X14, X14
	VMOVSD       X14, ret+16(FP)
	VZEROUPPER
	RET

// func mulScaleAVX2(out, x, w *float32, n int, s float32)
// out[i] = x[i] * s * w[i] (in that order).
TEXT ·mulScaleAVX2(SB), NOSPLIT, $0-36
	MOVQ         out+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS s+32(FP), Y15
	SHRQ         $3, CX
	JZ           mulscaledone

mulscaleloop:
	VMULPS  (SI), Y15, Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	DECQ    CX
	JNZ     mulscaleloop

mulscaledone:
	VZEROUPPER
	RET

// Attention's scores and weighted sum of values over a span of cached
// positions, one call per span instead of one per position. Each position
// gets exactly DotF32's and Axpy's operations (hd is a multiple of 8), so
// the results are the same bits as position by position.

// func dotsAVX2(q, k *float32, hd, stride, cnt int, scale float32, out *float32)
// out[j] = (q · k[j*stride:][:hd]) * scale for j < cnt (dotVecAVX2's order).
TEXT ·dotsAVX2(SB), NOSPLIT, $0-56
	MOVQ         k+8(FP), DX
	MOVQ         stride+24(FP), R8
	SHLQ         $2, R8
	MOVQ         cnt+32(FP), R9
	VBROADCASTSS scale+40(FP), X15
	MOVQ         out+48(FP), AX
	SUBQ         $4, R9
	JL           dotsone

	// Four positions at a time (their FMA chains overlap), each with the
	// operations of one.
dotsfour:
	MOVQ   q+0(FP), SI
	MOVQ   DX, DI
	LEAQ   (DX)(R8*1), R10
	LEAQ   (DX)(R8*2), R11
	LEAQ   (R10)(R8*2), R12
	MOVQ   hd+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	SUBQ   $16, CX
	JL     dotsfourtail

dotsfourloop:
	VMOVUPS     (SI), Y8
	VMOVUPS     32(SI), Y9
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	VFMADD231PS (R10), Y8, Y2
	VFMADD231PS 32(R10), Y9, Y3
	VFMADD231PS (R11), Y8, Y4
	VFMADD231PS 32(R11), Y9, Y5
	VFMADD231PS (R12), Y8, Y6
	VFMADD231PS 32(R12), Y9, Y7
	ADDQ        $64, SI
	ADDQ        $64, DI
	ADDQ        $64, R10
	ADDQ        $64, R11
	ADDQ        $64, R12
	SUBQ        $16, CX
	JGE         dotsfourloop

dotsfourtail:
	ADDQ        $16, CX
	JZ          dotsfourdone
	VMOVUPS     (SI), Y8
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (R10), Y8, Y2
	VFMADD231PS (R11), Y8, Y4
	VFMADD231PS (R12), Y8, Y6

dotsfourdone:
	// Each position's sum reduced as one position's below (accumulators
	// added, halves added, two horizontal adds), the horizontal adds
	// shared by the four: lane j of the second is position j's sum.
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VADDPS       Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VADDPS       X3, X2, X2
	VADDPS       Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS       X5, X4, X4
	VADDPS       Y7, Y6, Y6
	VEXTRACTF128 $1, Y6, X7
	VADDPS       X7, X6, X6
	VHADDPS      X2, X0, X0
	VHADDPS      X6, X4, X4
	VHADDPS      X4, X0, X0
	VMULPS       X15, X0, X0
	VMOVUPS      X0, (AX)
	ADDQ         $16, AX
	LEAQ         (DX)(R8*4), DX
	SUBQ         $4, R9
	JGE          dotsfour

dotsone:
	ADDQ $4, R9
	JZ   dotsend

dotsrow:
	MOVQ   q+0(FP), SI
	MOVQ   DX, DI
	MOVQ   hd+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	SUBQ   $16, CX
	JL     dotstail

dotsloop:
	VMOVUPS     (SI), Y2
	VMOVUPS     32(SI), Y3
	VFMADD231PS (DI), Y2, Y0
	VFMADD231PS 32(DI), Y3, Y1
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JGE         dotsloop

dotstail:
	ADDQ        $16, CX
	JZ          dotsdone
	VMOVUPS     (SI), Y2
	VFMADD231PS (DI), Y2, Y0

dotsdone:
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMULSS       X15, X0, X0
	VMOVSS       X0, (AX)
	ADDQ         $4, AX
	ADDQ         R8, DX
	DECQ         R9
	JNZ          dotsrow

dotsend:
	VZEROUPPER
	RET

// func axpysAVX2(y *float32, hd int, w, x *float32, stride, cnt int)
// y[:hd] += w[j] * x[j*stride:][:hd] for j < cnt in order, with y held in
// registers 64 values (8 YMM) at a time, then 8 at a time.
TEXT ·axpysAVX2(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ hd+8(FP), BX
	MOVQ x+24(FP), SI
	MOVQ stride+32(FP), R8
	SHLQ $2, R8
	SUBQ $64, BX
	JL   axs8

axs64:
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7
	MOVQ    w+16(FP), DX
	MOVQ    SI, R10
	MOVQ    cnt+40(FP), CX

axs64loop:
	VBROADCASTSS (DX), Y8
	VFMADD231PS  0(R10), Y8, Y0
	VFMADD231PS  32(R10), Y8, Y1
	VFMADD231PS  64(R10), Y8, Y2
	VFMADD231PS  96(R10), Y8, Y3
	VFMADD231PS  128(R10), Y8, Y4
	VFMADD231PS  160(R10), Y8, Y5
	VFMADD231PS  192(R10), Y8, Y6
	VFMADD231PS  224(R10), Y8, Y7
	ADDQ         $4, DX
	ADDQ         R8, R10
	DECQ         CX
	JNZ          axs64loop

	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	ADDQ    $256, DI
	ADDQ    $256, SI
	SUBQ    $64, BX
	JGE     axs64

axs8:
	ADDQ $56, BX
	JL   axsdone

axs8col:
	VMOVUPS (DI), Y0
	MOVQ    w+16(FP), DX
	MOVQ    SI, R10
	MOVQ    cnt+40(FP), CX

axs8loop:
	VBROADCASTSS (DX), Y8
	VFMADD231PS  (R10), Y8, Y0
	ADDQ         $4, DX
	ADDQ         R8, R10
	DECQ         CX
	JNZ          axs8loop

	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $8, BX
	JGE     axs8col

axsdone:
	VZEROUPPER
	RET

// F16 twins of dotsAVX2 and axpysAVX2 for an F16 KV cache: the cached
// rows are halves, converted in registers as they are loaded.

// func dotsF16AVX2(q *float32, k *uint16, hd, stride, cnt int, scale float32, out *float32)
// out[j] = (q · halves k[j*stride:][:hd]) * scale for j < cnt: dotsAVX2's
// operations on the converted values (so its bits).
TEXT ·dotsF16AVX2(SB), NOSPLIT, $0-56
	MOVQ         k+8(FP), DX
	MOVQ         stride+24(FP), R8
	SHLQ         $1, R8
	MOVQ         cnt+32(FP), R9
	VBROADCASTSS scale+40(FP), X15
	MOVQ         out+48(FP), AX
	SUBQ         $4, R9
	JL           hdotsone

	// Four positions at a time (their FMA chains overlap), each with the
	// operations of one.
hdotsfour:
	MOVQ   q+0(FP), SI
	MOVQ   DX, DI
	LEAQ   (DX)(R8*1), R10
	LEAQ   (DX)(R8*2), R11
	LEAQ   (R10)(R8*2), R12
	MOVQ   hd+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	SUBQ   $16, CX
	JL     hdotsfourtail

hdotsfourloop:
	VMOVUPS     (SI), Y8
	VMOVUPS     32(SI), Y9
	VCVTPH2PS   (DI), Y14
	VFMADD231PS Y14, Y8, Y0
	VCVTPH2PS   16(DI), Y14
	VFMADD231PS Y14, Y9, Y1
	VCVTPH2PS   (R10), Y14
	VFMADD231PS Y14, Y8, Y2
	VCVTPH2PS   16(R10), Y14
	VFMADD231PS Y14, Y9, Y3
	VCVTPH2PS   (R11), Y14
	VFMADD231PS Y14, Y8, Y4
	VCVTPH2PS   16(R11), Y14
	VFMADD231PS Y14, Y9, Y5
	VCVTPH2PS   (R12), Y14
	VFMADD231PS Y14, Y8, Y6
	VCVTPH2PS   16(R12), Y14
	VFMADD231PS Y14, Y9, Y7
	ADDQ        $64, SI
	ADDQ        $32, DI
	ADDQ        $32, R10
	ADDQ        $32, R11
	ADDQ        $32, R12
	SUBQ        $16, CX
	JGE         hdotsfourloop

hdotsfourtail:
	ADDQ        $16, CX
	JZ          hdotsfourdone
	VMOVUPS     (SI), Y8
	VCVTPH2PS   (DI), Y14
	VFMADD231PS Y14, Y8, Y0
	VCVTPH2PS   (R10), Y14
	VFMADD231PS Y14, Y8, Y2
	VCVTPH2PS   (R11), Y14
	VFMADD231PS Y14, Y8, Y4
	VCVTPH2PS   (R12), Y14
	VFMADD231PS Y14, Y8, Y6

hdotsfourdone:
	// Each position's sum reduced as one position's below (accumulators
	// added, halves added, two horizontal adds), the horizontal adds
	// shared by the four: lane j of the second is position j's sum.
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VADDPS       Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VADDPS       X3, X2, X2
	VADDPS       Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS       X5, X4, X4
	VADDPS       Y7, Y6, Y6
	VEXTRACTF128 $1, Y6, X7
	VADDPS       X7, X6, X6
	VHADDPS      X2, X0, X0
	VHADDPS      X6, X4, X4
	VHADDPS      X4, X0, X0
	VMULPS       X15, X0, X0
	VMOVUPS      X0, (AX)
	ADDQ         $16, AX
	LEAQ         (DX)(R8*4), DX
	SUBQ         $4, R9
	JGE          hdotsfour

hdotsone:
	ADDQ $4, R9
	JZ   hdotsend

hdotsrow:
	MOVQ   q+0(FP), SI
	MOVQ   DX, DI
	MOVQ   hd+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	SUBQ   $16, CX
	JL     hdotstail

hdotsloop:
	VMOVUPS     (SI), Y2
	VMOVUPS     32(SI), Y3
	VCVTPH2PS   (DI), Y14
	VFMADD231PS Y14, Y2, Y0
	VCVTPH2PS   16(DI), Y14
	VFMADD231PS Y14, Y3, Y1
	ADDQ        $64, SI
	ADDQ        $32, DI
	SUBQ        $16, CX
	JGE         hdotsloop

hdotstail:
	ADDQ        $16, CX
	JZ          hdotsdone
	VMOVUPS     (SI), Y2
	VCVTPH2PS   (DI), Y14
	VFMADD231PS Y14, Y2, Y0

hdotsdone:
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMULSS       X15, X0, X0
	VMOVSS       X0, (AX)
	ADDQ         $4, AX
	ADDQ         R8, DX
	DECQ         R9
	JNZ          hdotsrow

hdotsend:
	VZEROUPPER
	RET

// func axpysF16AVX2(y *float32, hd int, w *float32, x *uint16, stride, cnt int)
// axpysAVX2 over halves x (converted exactly, so its bits).
TEXT ·axpysF16AVX2(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ hd+8(FP), BX
	MOVQ x+24(FP), SI
	MOVQ stride+32(FP), R8
	SHLQ $1, R8
	SUBQ $64, BX
	JL   haxs8

haxs64:
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7
	MOVQ    w+16(FP), DX
	MOVQ    SI, R10
	MOVQ    cnt+40(FP), CX

haxs64loop:
	VBROADCASTSS (DX), Y8
	VCVTPH2PS    0(R10), Y9
	VFMADD231PS  Y9, Y8, Y0
	VCVTPH2PS    16(R10), Y9
	VFMADD231PS  Y9, Y8, Y1
	VCVTPH2PS    32(R10), Y9
	VFMADD231PS  Y9, Y8, Y2
	VCVTPH2PS    48(R10), Y9
	VFMADD231PS  Y9, Y8, Y3
	VCVTPH2PS    64(R10), Y9
	VFMADD231PS  Y9, Y8, Y4
	VCVTPH2PS    80(R10), Y9
	VFMADD231PS  Y9, Y8, Y5
	VCVTPH2PS    96(R10), Y9
	VFMADD231PS  Y9, Y8, Y6
	VCVTPH2PS    112(R10), Y9
	VFMADD231PS  Y9, Y8, Y7
	ADDQ         $4, DX
	ADDQ         R8, R10
	DECQ         CX
	JNZ          haxs64loop

	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	ADDQ    $256, DI
	ADDQ    $128, SI
	SUBQ    $64, BX
	JGE     haxs64

haxs8:
	ADDQ $56, BX
	JL   haxsdone

haxs8col:
	VMOVUPS (DI), Y0
	MOVQ    w+16(FP), DX
	MOVQ    SI, R10
	MOVQ    cnt+40(FP), CX

haxs8loop:
	VBROADCASTSS (DX), Y8
	VCVTPH2PS    0(R10), Y9
	VFMADD231PS  Y9, Y8, Y0
	ADDQ         $4, DX
	ADDQ         R8, R10
	DECQ         CX
	JNZ          haxs8loop

	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $16, SI
	SUBQ    $8, BX
	JGE     haxs8col

haxsdone:
	VZEROUPPER
	RET

// Rotary embeddings: x holds heads of hd values whose first 2*half are
// rotated by the per-pair cos and sin (half values each), with exactly the
// operations of the Go loop (a*c - b*s, a*s + b*c, no fused multiply-add).

// func ropeNeoxAVX2(x *float32, heads, hd, half int, cos, sin *float32)
// Pairs (i, i+half); half is a multiple of 8.
TEXT ·ropeNeoxAVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), DI
	MOVQ heads+8(FP), R9
	MOVQ hd+16(FP), R10
	SHLQ $2, R10
	MOVQ half+24(FP), R11
	SHLQ $2, R11

ropenhead:
	MOVQ DI, SI
	MOVQ cos+32(FP), DX
	MOVQ sin+40(FP), BX
	MOVQ half+24(FP), CX
	SHRQ $3, CX

ropenloop:
	VMOVUPS (SI), Y0          // a
	VMOVUPS (SI)(R11*1), Y1   // b
	VMOVUPS (DX), Y2          // cos
	VMOVUPS (BX), Y3          // sin
	VMULPS  Y2, Y0, Y4
	VMULPS  Y3, Y1, Y5
	VSUBPS  Y5, Y4, Y4
	VMULPS  Y3, Y0, Y6
	VMULPS  Y2, Y1, Y7
	VADDPS  Y7, Y6, Y6
	VMOVUPS Y4, (SI)
	VMOVUPS Y6, (SI)(R11*1)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, BX
	DECQ    CX
	JNZ     ropenloop

	ADDQ R10, DI
	DECQ R9
	JNZ  ropenhead
	VZEROUPPER
	RET

// func ropePairsAVX2(x *float32, heads, hd, half int, cos, sin *float32)
// Pairs (2i, 2i+1); half is a multiple of 4. Each cos and sin is spread to
// both lanes of its pair; x times them and x with its pairs swapped times
// sin combine by VADDSUBPS: even lanes a*c - b*s, odd lanes b*c + a*s.
TEXT ·ropePairsAVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), DI
	MOVQ heads+8(FP), R9
	MOVQ hd+16(FP), R10
	SHLQ $2, R10

roppairhead:
	MOVQ DI, SI
	MOVQ cos+32(FP), DX
	MOVQ sin+40(FP), BX
	MOVQ half+24(FP), CX
	SHRQ $2, CX

roppairloop:
	VMOVUPS     (DX), X2
	VUNPCKLPS   X2, X2, X4
	VUNPCKHPS   X2, X2, X5
	VINSERTF128 $1, X5, Y4, Y2   // c0 c0 c1 c1 c2 c2 c3 c3
	VMOVUPS     (BX), X3
	VUNPCKLPS   X3, X3, X4
	VUNPCKHPS   X3, X3, X5
	VINSERTF128 $1, X5, Y4, Y3   // s0 s0 ... s3 s3
	VMOVUPS     (SI), Y0         // a0 b0 a1 b1 ...
	VPERMILPS   $0xb1, Y0, Y1    // b0 a0 b1 a1 ...
	VMULPS      Y2, Y0, Y0
	VMULPS      Y3, Y1, Y1
	VADDSUBPS   Y1, Y0, Y0
	VMOVUPS     Y0, (SI)
	ADDQ        $32, SI
	ADDQ        $16, DX
	ADDQ        $16, BX
	DECQ        CX
	JNZ         roppairloop

	ADDQ R10, DI
	DECQ R9
	JNZ  roppairhead
	VZEROUPPER
	RET
