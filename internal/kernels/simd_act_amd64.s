//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"
#include "simd_data.h"

// QACONST sets the constants: Y15 abs mask, Y12 the VPERMD order of the
// packed bytes, X11 127.0.
#define QACONST \
	MOVL         $0x7fffffff, DX; \
	VMOVD        DX, X15; \
	VPBROADCASTD X15, Y15; \
	VMOVDQU      qaperm<>(SB), Y12; \
	MOVL         $0x42fe0000, DX; \
	VMOVD        DX, X11

// QAMAX sets every lane of X4 to the largest |x| of the 32 floats at off(SI).
#define QAMAX(off) \
	VANDPS       off(SI), Y15, Y4; \
	VANDPS       off+32(SI), Y15, Y5; \
	VMAXPS       Y5, Y4, Y4; \
	VANDPS       off+64(SI), Y15, Y5; \
	VANDPS       off+96(SI), Y15, Y6; \
	VMAXPS       Y6, Y5, Y5; \
	VMAXPS       Y5, Y4, Y4; \
	HMAX8(Y4, X4, X5)

// QROUND: yv = yv rounded to the nearest int32, ties to even (MXCSR's
// default rounding, which Go keeps).
#define QROUND(yv) \
	VCVTPS2DQ yv, yv

// QBLOCK quantizes the block at off(SI) with 1/d broadcast in Y6: 32 bytes
// to qoff(DI); Y4 is left with 8 partial sums of the quants.
#define QBLOCK(off, qoff) \
	VMULPS    off(SI), Y6, Y0; \
	VMULPS    off+32(SI), Y6, Y1; \
	VMULPS    off+64(SI), Y6, Y2; \
	VMULPS    off+96(SI), Y6, Y3; \
	QROUND(Y0); \
	QROUND(Y1); \
	QROUND(Y2); \
	QROUND(Y3); \
	VPADDD    Y1, Y0, Y4; \
	VPADDD    Y3, Y2, Y5; \
	VPADDD    Y5, Y4, Y4; \
	VPACKSSDW Y1, Y0, Y0; \
	VPACKSSDW Y3, Y2, Y2; \
	VPACKSSWB Y2, Y0, Y0; \
	VPERMD    Y0, Y12, Y0; \
	VMOVDQU   Y0, qoff(DI)

// QSUM1 stores S = d*Σq of one block (partial sums in Y4, d in X8) at
// soff(R9).
#define QSUM1(soff) \
	VEXTRACTI128 $1, Y4, X5; \
	VPADDD       X5, X4, X4; \
	VPSHUFD      $0x4e, X4, X5; \
	VPADDD       X5, X4, X4; \
	VPSHUFD      $0xb1, X4, X5; \
	VPADDD       X5, X4, X4; \
	VCVTDQ2PS    X4, X4; \
	VMULSS       X8, X4, X4; \
	VMOVSS       X4, soff(R9)

// QAMAX4(off, x): x = the largest |x| of each of the four blocks from
// off(SI), in lanes 0-3.
#define QAMAX4(off, x) \
	QAMAX(off); \
	VMOVAPS  X4, x; \
	QAMAX(off+128); \
	VBLENDPS $2, X4, x, x; \
	QAMAX(off+256); \
	VBLENDPS $4, X4, x, x; \
	QAMAX(off+384); \
	VBLENDPS $8, X4, x, x

// QPAIR(i0, i1, off, qoff, acc): quantizes the two blocks from off(SI) (to
// qoff(DI)) with the inverses at ids-32+i0(SP) and ids-32+i1(SP); acc =
// their quant sums, pairwise (VPHADDD).
#define QPAIR(i0, i1, off, qoff, acc) \
	VBROADCASTSS ids-32+i0(SP), Y6; \
	QBLOCK(off, qoff); \
	VMOVDQA      Y4, acc; \
	VBROADCASTSS ids-32+i1(SP), Y6; \
	QBLOCK(off+128, qoff+32); \
	VPHADDD      Y4, acc, acc

// Per block of 32, exactly as quantizeAct: d = amax/127 rounded to fp16
// (VCVTPS2PH, round to nearest even, as FP32ToFP16), id = 127/amax (0 when
// amax is 0), q = x*id rounded to nearest even, S = d*float(Σq).
//
// One block alone is a long dependency chain (maximum, two divisions,
// rounding, packing), so the main kernel takes 8 blocks at a time: first
// their maxima, scales and inverses as vectors (one division each for all
// 8), then the 8 independent quantizations.

// func quantizeActAVX2(x *float32, qs *int8, d, s *float32, nb int)
// One block at a time, for the blocks left over by quantizeAct8AVX2.
TEXT ·quantizeActAVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), BX
	MOVQ s+24(FP), R9
	MOVQ nb+32(FP), CX
	QACONST

qaloop:
	QAMAX(0)
	VDIVSS       X11, X4, X8 // d
	VCVTPS2PH    $0, X8, X8
	VCVTPH2PS    X8, X8
	VMOVSS       X8, (BX)
	VDIVSS       X4, X11, X6 // 127/amax
	VXORPS       X7, X7, X7
	VCMPSS       $4, X7, X4, X7 // amax != 0
	VANDPS       X7, X6, X6
	VBROADCASTSS X6, Y6
	QBLOCK(0, 0)
	QSUM1(0)
	ADDQ         $128, SI
	ADDQ         $32, DI
	ADDQ         $4, BX
	ADDQ         $4, R9
	DECQ         CX
	JNZ          qaloop
	VZEROUPPER
	RET

// func quantizeAct8AVX2(x *float32, qs *int8, d, s *float32, ng int)
// ng groups of 8 blocks. X9/X7 gather the maxima, ids-32(SP) the inverses;
// Y7-Y9 gather the quant sums (VPHADDD tree).
TEXT ·quantizeAct8AVX2(SB), NOSPLIT, $32-40
	MOVQ x+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), BX
	MOVQ s+24(FP), R9
	MOVQ ng+32(FP), CX
	QACONST

qa8loop:
	QAMAX4(0, X9)
	QAMAX4(512, X7)
	VINSERTF128  $1, X7, Y9, Y9
	VBROADCASTSS X11, Y11
	VDIVPS       Y11, Y9, Y8 // d
	VCVTPS2PH    $0, Y8, X8
	VCVTPH2PS    X8, Y8
	VMOVUPS      Y8, (BX)
	VDIVPS       Y9, Y11, Y6 // 127/amax
	VXORPS       Y7, Y7, Y7
	VCMPPS       $4, Y7, Y9, Y7 // amax != 0
	VANDPS       Y7, Y6, Y6
	VMOVUPS      Y6, ids-32(SP)
	QPAIR(0, 4, 0, 0, Y7)
	QPAIR(8, 12, 256, 64, Y8)
	VPHADDD      Y8, Y7, Y7
	QPAIR(16, 20, 512, 128, Y8)
	QPAIR(24, 28, 768, 192, Y9)
	VPHADDD      Y9, Y8, Y8

	// S = d*Σq for the 8 blocks: Y7 = [lows of 0-3 | highs of 0-3], Y8
	// the same for 4-7.
	VINSERTI128  $1, X8, Y7, Y9
	VPERM2I128   $0x31, Y8, Y7, Y4
	VPADDD       Y4, Y9, Y9
	VCVTDQ2PS    Y9, Y9
	VMULPS       (BX), Y9, Y9
	VMOVUPS      Y9, (R9)
	ADDQ         $1024, SI
	ADDQ         $256, DI
	ADDQ         $32, BX
	ADDQ         $32, R9
	DECQ         CX
	JNZ          qa8loop
	VZEROUPPER
	RET

PERM8(qaperm<>, 0, 4, 1, 5, 2, 6, 3, 7)
