//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"
#include "simd_data.h"
#include "simd_exp_amd64.h"

// Element-wise kernels of the model (swiglu, softmax, rmsnorm) on 8 floats
// at a time; n is a multiple of 8 (the Go side pads the rest through the
// same code, so an element's result does not depend on where it lies).
// exp is simd_exp_amd64.h's EXP; its constants are defined here.

#define EXPC8(i, v) SPLAT4X8(·expc, 32*i, v)

EXPCONSTS(EXPC8)
GLOBL ·expc(SB), RODATA|NOPTR, $480

// The F32 and F16 kernels are one macro each (DOTS, AXPYS), instantiated
// with the cache's element: KV(off, base, x, acc, t) adds x times the 8
// cached values at off(base) to acc (t: a scratch register for the
// conversion), SH is log2 of the element size, E8 the bytes of 8 elements.
#define KVF32(off, base, x, acc, t) VFMADD231PS off(base), x, acc
#define KVF16(off, base, x, acc, t) VCVTPH2PS off(base), t; VFMADD231PS t, x, acc

// DOTS(KV, SH, E8) is the body of
// func dotsXAVX2(q *float32, k *T, hd, stride, cnt int, scale float32, out *float32):
// out[j] = (q · k[j*stride:][:hd]) * scale for j < cnt (dotVecAVX2's
// order, on the converted values for F16: so the F32 kernel's bits). Four
// positions at a time (their FMA chains overlap), each with the operations
// of one; each position's sum is reduced as one position's (accumulators
// added, halves added, two horizontal adds), the horizontal adds shared by
// the four: lane j of the second is position j's sum.
#define DOTS(KV, SH, E8) \
	MOVQ         k+8(FP), DX; \
	MOVQ         stride+24(FP), R8; \
	SHLQ         $SH, R8; \
	MOVQ         cnt+32(FP), R9; \
	VBROADCASTSS scale+40(FP), X15; \
	MOVQ         out+48(FP), AX; \
	SUBQ         $4, R9; \
	JL           one; \
four: \
	MOVQ   q+0(FP), SI; \
	MOVQ   DX, DI; \
	LEAQ   (DX)(R8*1), R10; \
	LEAQ   (DX)(R8*2), R11; \
	LEAQ   (R10)(R8*2), R12; \
	MOVQ   hd+16(FP), CX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	SUBQ   $16, CX; \
	JL     fourtail; \
fourloop: \
	VMOVUPS (SI), Y8; \
	VMOVUPS 32(SI), Y9; \
	KV(0, DI, Y8, Y0, Y14); \
	KV(E8, DI, Y9, Y1, Y14); \
	KV(0, R10, Y8, Y2, Y14); \
	KV(E8, R10, Y9, Y3, Y14); \
	KV(0, R11, Y8, Y4, Y14); \
	KV(E8, R11, Y9, Y5, Y14); \
	KV(0, R12, Y8, Y6, Y14); \
	KV(E8, R12, Y9, Y7, Y14); \
	ADDQ    $64, SI; \
	ADDQ    $(2*E8), DI; \
	ADDQ    $(2*E8), R10; \
	ADDQ    $(2*E8), R11; \
	ADDQ    $(2*E8), R12; \
	SUBQ    $16, CX; \
	JGE     fourloop; \
fourtail: \
	ADDQ    $16, CX; \
	JZ      fourdone; \
	VMOVUPS (SI), Y8; \
	KV(0, DI, Y8, Y0, Y14); \
	KV(0, R10, Y8, Y2, Y14); \
	KV(0, R11, Y8, Y4, Y14); \
	KV(0, R12, Y8, Y6, Y14); \
fourdone: \
	VADDPS       Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VADDPS       Y3, Y2, Y2; \
	VEXTRACTF128 $1, Y2, X3; \
	VADDPS       X3, X2, X2; \
	VADDPS       Y5, Y4, Y4; \
	VEXTRACTF128 $1, Y4, X5; \
	VADDPS       X5, X4, X4; \
	VADDPS       Y7, Y6, Y6; \
	VEXTRACTF128 $1, Y6, X7; \
	VADDPS       X7, X6, X6; \
	VHADDPS      X2, X0, X0; \
	VHADDPS      X6, X4, X4; \
	VHADDPS      X4, X0, X0; \
	VMULPS       X15, X0, X0; \
	VMOVUPS      X0, (AX); \
	ADDQ         $16, AX; \
	LEAQ         (DX)(R8*4), DX; \
	SUBQ         $4, R9; \
	JGE          four; \
one: \
	ADDQ $4, R9; \
	JZ   end; \
row: \
	MOVQ   q+0(FP), SI; \
	MOVQ   DX, DI; \
	MOVQ   hd+16(FP), CX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	SUBQ   $16, CX; \
	JL     tail; \
loop: \
	VMOVUPS (SI), Y2; \
	VMOVUPS 32(SI), Y3; \
	KV(0, DI, Y2, Y0, Y14); \
	KV(E8, DI, Y3, Y1, Y14); \
	ADDQ    $64, SI; \
	ADDQ    $(2*E8), DI; \
	SUBQ    $16, CX; \
	JGE     loop; \
tail: \
	ADDQ    $16, CX; \
	JZ      done; \
	VMOVUPS (SI), Y2; \
	KV(0, DI, Y2, Y0, Y14); \
done: \
	VADDPS       Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VHADDPS      X0, X0, X0; \
	VHADDPS      X0, X0, X0; \
	VMULSS       X15, X0, X0; \
	VMOVSS       X0, (AX); \
	ADDQ         $4, AX; \
	ADDQ         R8, DX; \
	DECQ         R9; \
	JNZ          row; \
end: \
	VZEROUPPER; \
	RET

// AXPYS(KV, SH, E8) is the body of
// func axpysXAVX2(y *float32, hd int, w *float32, x *T, stride, cnt int):
// y[:hd] += w[j] * x[j*stride:][:hd] for j < cnt in order, with y held in
// registers 64 values (8 YMM) at a time, then 8 at a time (F16: the
// halves converted exactly, so the F32 kernel's bits).
#define AXPYS(KV, SH, E8) \
	MOVQ y+0(FP), DI; \
	MOVQ hd+8(FP), BX; \
	MOVQ x+24(FP), SI; \
	MOVQ stride+32(FP), R8; \
	SHLQ $SH, R8; \
	SUBQ $64, BX; \
	JL   by8; \
by64: \
	VMOVUPS 0(DI), Y0; \
	VMOVUPS 32(DI), Y1; \
	VMOVUPS 64(DI), Y2; \
	VMOVUPS 96(DI), Y3; \
	VMOVUPS 128(DI), Y4; \
	VMOVUPS 160(DI), Y5; \
	VMOVUPS 192(DI), Y6; \
	VMOVUPS 224(DI), Y7; \
	MOVQ    w+16(FP), DX; \
	MOVQ    SI, R10; \
	MOVQ    cnt+40(FP), CX; \
by64loop: \
	VBROADCASTSS (DX), Y8; \
	KV(0, R10, Y8, Y0, Y9); \
	KV(E8, R10, Y8, Y1, Y9); \
	KV(2*E8, R10, Y8, Y2, Y9); \
	KV(3*E8, R10, Y8, Y3, Y9); \
	KV(4*E8, R10, Y8, Y4, Y9); \
	KV(5*E8, R10, Y8, Y5, Y9); \
	KV(6*E8, R10, Y8, Y6, Y9); \
	KV(7*E8, R10, Y8, Y7, Y9); \
	ADDQ         $4, DX; \
	ADDQ         R8, R10; \
	DECQ         CX; \
	JNZ          by64loop; \
	VMOVUPS Y0, 0(DI); \
	VMOVUPS Y1, 32(DI); \
	VMOVUPS Y2, 64(DI); \
	VMOVUPS Y3, 96(DI); \
	VMOVUPS Y4, 128(DI); \
	VMOVUPS Y5, 160(DI); \
	VMOVUPS Y6, 192(DI); \
	VMOVUPS Y7, 224(DI); \
	ADDQ    $256, DI; \
	ADDQ    $(8*E8), SI; \
	SUBQ    $64, BX; \
	JGE     by64; \
by8: \
	ADDQ $56, BX; \
	JL   done; \
by8col: \
	VMOVUPS (DI), Y0; \
	MOVQ    w+16(FP), DX; \
	MOVQ    SI, R10; \
	MOVQ    cnt+40(FP), CX; \
by8loop: \
	VBROADCASTSS (DX), Y8; \
	KV(0, R10, Y8, Y0, Y9); \
	ADDQ         $4, DX; \
	ADDQ         R8, R10; \
	DECQ         CX; \
	JNZ          by8loop; \
	VMOVUPS Y0, (DI); \
	ADDQ    $32, DI; \
	ADDQ    $E8, SI; \
	SUBQ    $8, BX; \
	JGE     by8col; \
done: \
	VZEROUPPER; \
	RET

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
	HMAX8(Y0, X0, X1)
	VMOVSS X0, ret+16(FP)
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
TEXT ·dotsAVX2(SB), NOSPLIT, $0-56
	DOTS(KVF32, 2, 32)

// func axpysAVX2(y *float32, hd int, w, x *float32, stride, cnt int)
TEXT ·axpysAVX2(SB), NOSPLIT, $0-48
	AXPYS(KVF32, 2, 32)

// F16 twins of dotsAVX2 and axpysAVX2 for an F16 KV cache: the cached
// rows are halves, converted in registers as they are loaded.

// func dotsF16AVX2(q *float32, k *uint16, hd, stride, cnt int, scale float32, out *float32)
TEXT ·dotsF16AVX2(SB), NOSPLIT, $0-56
	DOTS(KVF16, 1, 16)

// func axpysF16AVX2(y *float32, hd int, w *float32, x *uint16, stride, cnt int)
TEXT ·axpysF16AVX2(SB), NOSPLIT, $0-48
	AXPYS(KVF16, 1, 16)

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

// The Hadamard kernel's signs: lane j of hadsN is -1 where bit N of j is
// set (the second value of a pair h = 1, 2, 4 apart), else +1.
PERM8(hads0<>, 0x3f800000, 0xbf800000, 0x3f800000, 0xbf800000, 0x3f800000, 0xbf800000, 0x3f800000, 0xbf800000)
PERM8(hads1<>, 0x3f800000, 0x3f800000, 0xbf800000, 0xbf800000, 0x3f800000, 0x3f800000, 0xbf800000, 0xbf800000)
PERM8(hads2<>, 0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000, 0xbf800000, 0xbf800000, 0xbf800000, 0xbf800000)

// HAD8(x) runs stages h = 1, 2, 4 within the 8 values of x: t is x with
// each pair swapped, and x*sign + t is a+b in the first of the pair and
// a-b in the second (one rounding, as the Go loop's addition).
#define HAD8(x) \
	VPERMILPS   $0xb1, x, Y8; VFMADD213PS Y8, Y12, x; \
	VPERMILPS   $0x4e, x, Y8; VFMADD213PS Y8, Y13, x; \
	VPERM2F128  $0x01, x, x, Y8; VFMADD213PS Y8, Y14, x

// HADBF(a, b): (a, b) = (a+b, a-b).
#define HADBF(a, b) VADDPS b, a, Y8; VSUBPS b, a, b; VMOVAPS Y8, a

// func hadamardAVX2(x *float32, runs, n int, scale float32)
// Hadamard over runs·n values, n a power of two >= 64: each block of 64
// through stages 1-32 in registers, the stages h >= 64 over memory, then
// the scale (in the registers when n is 64).
TEXT ·hadamardAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	MOVQ         runs+8(FP), CX
	MOVQ         n+16(FP), DX
	VBROADCASTSS scale+24(FP), Y15
	VMOVUPS      hads0<>(SB), Y12
	VMOVUPS      hads1<>(SB), Y13
	VMOVUPS      hads2<>(SB), Y14

hadrun:
	MOVQ DI, SI
	MOVQ DX, BX
	SHRQ $6, BX

hadblock:
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VMOVUPS 128(SI), Y4
	VMOVUPS 160(SI), Y5
	VMOVUPS 192(SI), Y6
	VMOVUPS 224(SI), Y7
	HAD8(Y0)
	HAD8(Y1)
	HAD8(Y2)
	HAD8(Y3)
	HAD8(Y4)
	HAD8(Y5)
	HAD8(Y6)
	HAD8(Y7)
	HADBF(Y0, Y1)
	HADBF(Y2, Y3)
	HADBF(Y4, Y5)
	HADBF(Y6, Y7)
	HADBF(Y0, Y2)
	HADBF(Y1, Y3)
	HADBF(Y4, Y6)
	HADBF(Y5, Y7)
	HADBF(Y0, Y4)
	HADBF(Y1, Y5)
	HADBF(Y2, Y6)
	HADBF(Y3, Y7)
	CMPQ    DX, $64
	JNE     hadstore
	VMULPS  Y15, Y0, Y0
	VMULPS  Y15, Y1, Y1
	VMULPS  Y15, Y2, Y2
	VMULPS  Y15, Y3, Y3
	VMULPS  Y15, Y4, Y4
	VMULPS  Y15, Y5, Y5
	VMULPS  Y15, Y6, Y6
	VMULPS  Y15, Y7, Y7

hadstore:
	VMOVUPS Y0, 0(SI)
	VMOVUPS Y1, 32(SI)
	VMOVUPS Y2, 64(SI)
	VMOVUPS Y3, 96(SI)
	VMOVUPS Y4, 128(SI)
	VMOVUPS Y5, 160(SI)
	VMOVUPS Y6, 192(SI)
	VMOVUPS Y7, 224(SI)
	ADDQ    $256, SI
	DECQ    BX
	JNZ     hadblock
	CMPQ    DX, $64
	JEQ     hadnext

	// Stages h = 64 .. n/2: pairs (j, j+h) for j in [i, i+h), i a
	// multiple of 2h; R8 is h.
	MOVQ $64, R8

hadstage:
	XORQ R9, R9

hadgroup:
	LEAQ (DI)(R9*4), SI
	LEAQ (SI)(R8*4), R11
	MOVQ R8, R10
	SHRQ $3, R10

hadpair:
	VMOVUPS (SI), Y0
	VMOVUPS (R11), Y1
	VADDPS  Y1, Y0, Y2
	VSUBPS  Y1, Y0, Y3
	VMOVUPS Y2, (SI)
	VMOVUPS Y3, (R11)
	ADDQ    $32, SI
	ADDQ    $32, R11
	DECQ    R10
	JNZ     hadpair
	LEAQ    (R9)(R8*2), R9
	CMPQ    R9, DX
	JB      hadgroup
	SHLQ    $1, R8
	CMPQ    R8, DX
	JB      hadstage

	MOVQ DI, SI
	MOVQ DX, R10
	SHRQ $3, R10

hadscale:
	VMULPS  (SI), Y15, Y0
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	DECQ    R10
	JNZ     hadscale

hadnext:
	LEAQ (DI)(DX*4), DI
	DECQ CX
	JNZ  hadrun
	VZEROUPPER
	RET
