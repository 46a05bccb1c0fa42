//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"

// The argument loads (PKGP) and the prefetches (PFQ8I) are the AVX-512
// kernels'.
#include "simd_pack_amd64.h"
#include "simd_lanes_amd64.h"

// AVX2 kernels over the packed Q8_0 layout (pack.go, the interleaved
// variant: a block's 512 bytes of quants, eight 64-byte chunks of 16 rows ×
// 4 bytes, then its 16 rows' scales): the avx2 path's on CPUs whose vector
// units are 256 bits wide (split256 false). A chunk half (8 rows × 4
// bytes) is one register: its 8 lanes are 8 rows, so a block's eight
// chunk halves leave each row's exact block sum in its lane without the
// horizontal reductions (shuffles) of the kernels over the file's rows,
// which bounded those at a third of the multiply pipes' rate (Zen 3).
// The chunks hold w+128 (the VPDPBUSD kernels' unsigned operand): XOR
// 0x80 gives w back, and each product runs as the file kernels' do,
// |w| × (a·sign(w)) by VPMADDUBSW (a pair of products fits int16) and
// VPMADDWD by ones. Per output and block the float steps are the other
// Q8_0 kernels': acc = fma(float(S), d_w*d_a, acc), so the same bits.
//
// Arguments (packKernels' gemmFunc): func(w *byte, nb, groups int, qs
// *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out
// *float32, ostride int, mask int); s is not read.
//
// Registers: SI the block, R12 the group's start, DI the first token's
// quants, R8/R9 one and three token strides of quants, BX the first
// token's block scale, R10/R11 one and three strides of scales (bytes), AX
// the group's outputs for the first token, R13/R14 one and three output
// strides (bytes), CX blocks left, R15 groups left, DX the half. Y0-Y3 the
// tokens' block sums, Y4 a chunk half (w), Y5 |w|, Y6 a product, Y7 the
// rows' scales, Y8 a token's scale times them, Y10-Y13 the outputs, Y14 =
// 0x80 bytes, Y15 = int16 ones.

// PAARGS loads the arguments and the constants.
#define PAARGS \
	PKGP; \
	VPCMPEQW     Y15, Y15, Y15; \
	VPSRLW       $15, Y15, Y15; \
	MOVL         $0x80808080, DX; \
	VMOVD        DX, X14; \
	VPBROADCASTD X14, Y14

// PAW(m): Y4 = the chunk half at m as w, Y5 = |w|.
#define PAW(m) \
	VMOVDQU m, Y4; \
	VPXOR   Y14, Y4, Y4; \
	VPABSB  Y4, Y5

// PAT(m, y): y += the 8 rows' 4-byte products of the chunk half in Y4/Y5
// with the 4 activation bytes at m.
#define PAT(m, y) \
	VPBROADCASTD m, Y6; \
	VPSIGNB      Y4, Y6, Y6; \
	VPMADDUBSW   Y6, Y5, Y6; \
	VPMADDWD     Y15, Y6, Y6; \
	VPADDD       Y6, y, y

// PACH1(k): chunk k's two halves against one token.
#define PACH1(k) \
	PAW((64*k)(SI)); \
	PAT((4*k)(DI), Y0); \
	PAW((64*k+32)(SI)); \
	PAT((4*k)(DI), Y1)

// PAF(dd, y, acc): acc += float(y) * (Y7 * the token's scale at dd).
#define PAF(dd, y, acc) \
	VBROADCASTSS dd, Y8; \
	VMULPS       Y7, Y8, Y8; \
	VCVTDQ2PS    y, y; \
	VFMADD231PS  Y8, y, acc

// PASTORE(y, o): the 8 outputs in y to o, the lanes of Y9 (PAMASK).
#define PASTORE(y, o) \
	VMASKMOVPS y, Y9, o

// PAMASK(full): Y9 = the lanes of half DX (0 or 32) that the stores
// write: all but in the last group, where the caller's mask bits (8 per
// half) pick. CX and R12 are clobbered.
#define PAMASK(full) \
	VPCMPEQD     Y9, Y9, Y9; \
	CMPQ         R15, $1; \
	JNE          full; \
	MOVQ         DX, CX; \
	SHRQ         $2, CX; \
	MOVQ         mask+80(FP), R12; \
	SHRQ         CX, R12; \
	LANEMASK(R12, X9, Y9); \
full:

// func gemm1Q8_0AVX2P(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
// One token (decode): both halves of each chunk in one pass, their sums in
// Y0 and Y1, their outputs in Y10 and Y11.
TEXT ·gemm1Q8_0AVX2P(SB), NOSPLIT, $0-88
	PAARGS

pa1group:
	MOVQ   qs+24(FP), DI
	MOVQ   d+40(FP), BX
	MOVQ   nb+8(FP), CX
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

pa1loop:
	PFQ8I
	VPXOR        Y0, Y0, Y0
	VPXOR        Y1, Y1, Y1
	PACH1(0)
	PACH1(1)
	PACH1(2)
	PACH1(3)
	PACH1(4)
	PACH1(5)
	PACH1(6)
	PACH1(7)
	VBROADCASTSS (BX), Y8
	VCVTPH2PS    512(SI), Y7
	VMULPS       Y7, Y8, Y7
	VCVTDQ2PS    Y0, Y0
	VFMADD231PS  Y7, Y0, Y10
	VCVTPH2PS    528(SI), Y7
	VMULPS       Y7, Y8, Y7
	VCVTDQ2PS    Y1, Y1
	VFMADD231PS  Y7, Y1, Y11
	ADDQ         $544, SI
	ADDQ         $32, DI
	ADDQ         $4, BX
	DECQ         CX
	JNZ          pa1loop

	XORQ DX, DX
	PAMASK(pa1full0)
	PASTORE(Y10, (AX))
	MOVQ $32, DX
	PAMASK(pa1full1)
	PASTORE(Y11, 32(AX))
	ADDQ $64, AX
	DECQ R15
	JNZ  pa1group
	VZEROUPPER
	RET

// The small-batch kernels (packKernels.gemmT: K = 2..8 tokens, their
// activations interleaved by block, actInterleave: token t's quants of
// block b at 32*(K*b+t), its scale at 4*(K*b+t)): each half of a group is
// read in passes of at most four tokens (K = 5..8 in two, the second from
// L1), so that a speculative verification reads the weights from memory
// once. The same steps per token as gemm4 and gemm1, so the same bits.
//
// Registers as gemm4's, but DI and BX are the part's activation quants
// and scales (token t at 32*t and 4*t), and the passes' outputs go to CX
// (the first token's, then one output stride, R13, per token).

// PTCH<n>(k, t): chunk k's half against the n tokens from t.
#define PTCH1(k, t) \
	PAW((64*k)(SI)(DX*1)); \
	PAT((32*t+4*k)(DI), Y0)

#define PTCH2(k, t) \
	PTCH1(k, t); \
	PAT((32*t+32+4*k)(DI), Y1)

#define PTCH3(k, t) \
	PTCH2(k, t); \
	PAT((32*t+64+4*k)(DI), Y2)

#define PTCH4(k, t) \
	PTCH3(k, t); \
	PAT((32*t+96+4*k)(DI), Y3)

// PTF<n>(t): the n tokens' float steps (PAF), scales from 4*t(BX).
#define PTF1(t) PAF((4*t)(BX), Y0, Y10)
#define PTF2(t) PTF1(t); PAF((4*t+4)(BX), Y1, Y11)
#define PTF3(t) PTF2(t); PAF((4*t+8)(BX), Y2, Y12)
#define PTF4(t) PTF3(t); PAF((4*t+12)(BX), Y3, Y13)

// PTST<n>: the n tokens' outputs (Y10...) to CX, CX+R13, ... under Y9.
#define PTST1 PASTORE(Y10, (CX))
#define PTST2 PTST1; PASTORE(Y11, (CX)(R13*1))
#define PTST3 PTST2; PASTORE(Y12, (CX)(R13*2))
#define PTST4 PTST3; PASTORE(Y13, (CX)(R14*1))

// PTPASS(CH, F, ST, t, K, loop): one pass over the group's blocks (half
// DX) for the tokens t.. of a part of K (CH, F, ST of their count): Y0-Y3
// the block sums, Y10-Y13 the outputs, stored to the first one's outputs;
// SI, DI and BX back at the group's start after.
#define PTPASS(CH, F, ST, t, K, loop) \
	MOVQ      qs+24(FP), DI; \
	MOVQ      d+40(FP), BX; \
	MOVQ      nb+8(FP), CX; \
	VXORPS    Y10, Y10, Y10; \
	VXORPS    Y11, Y11, Y11; \
	VXORPS    Y12, Y12, Y12; \
	VXORPS    Y13, Y13, Y13; \
loop: \
	VPXOR     Y0, Y0, Y0; \
	VPXOR     Y1, Y1, Y1; \
	VPXOR     Y2, Y2, Y2; \
	VPXOR     Y3, Y3, Y3; \
	CH(0, t); \
	CH(1, t); \
	CH(2, t); \
	CH(3, t); \
	CH(4, t); \
	CH(5, t); \
	CH(6, t); \
	CH(7, t); \
	MOVQ      DX, R12; \
	SHRQ      $1, R12; \
	VCVTPH2PS 512(SI)(R12*1), Y7; \
	F(t); \
	ADDQ      $544, SI; \
	ADDQ      $(32*K), DI; \
	ADDQ      $(4*K), BX; \
	DECQ      CX; \
	JNZ       loop; \
	MOVQ      nb+8(FP), CX; \
	IMULQ     $544, CX; \
	SUBQ      CX, SI; \
	MOVQ      $t, CX; \
	IMULQ     R13, CX; \
	ADDQ      AX, CX; \
	ADDQ      DX, CX; \
	ST

// PTGROUPS(PASSES, mfull): every group, each half by PASSES (the part's
// passes), the half's store mask first.
#define PTGROUPS(PASSES) \
	PAARGS; \
ptgroup: \
	XORQ DX, DX; \
pthalf: \
	PAMASK(ptfull); \
	PASSES; \
	ADDQ $32, DX; \
	CMPQ DX, $64; \
	JNE  pthalf; \
	MOVQ nb+8(FP), CX; \
	IMULQ $544, CX; \
	ADDQ CX, SI; \
	ADDQ $64, AX; \
	DECQ R15; \
	JNZ  ptgroup; \
	VZEROUPPER; \
	RET

#define PT2 PTPASS(PTCH2, PTF2, PTST2, 0, 2, pta)
#define PT3 PTPASS(PTCH3, PTF3, PTST3, 0, 3, pta)
#define PT4 PTPASS(PTCH4, PTF4, PTST4, 0, 4, pta)
#define PT5 PTPASS(PTCH3, PTF3, PTST3, 0, 5, pta); PTPASS(PTCH2, PTF2, PTST2, 3, 5, ptb)
#define PT6 PTPASS(PTCH3, PTF3, PTST3, 0, 6, pta); PTPASS(PTCH3, PTF3, PTST3, 3, 6, ptb)
#define PT7 PTPASS(PTCH4, PTF4, PTST4, 0, 7, pta); PTPASS(PTCH3, PTF3, PTST3, 4, 7, ptb)
#define PT8 PTPASS(PTCH4, PTF4, PTST4, 0, 8, pta); PTPASS(PTCH4, PTF4, PTST4, 4, 8, ptb)

// PACH4S(k, t) and PAF4S(t): chunk k's half (DX: 0 or 32) against the
// four tokens and their float steps, where each token's activations are
// their own rows (qs and d strided: R8/R9 and R10/R11), as gemm4 takes
// them; t is 0.
#define PACH4S(k, t) \
	PAW((64*k)(SI)(DX*1)); \
	PAT((4*k)(DI), Y0); \
	PAT((4*k)(DI)(R8*1), Y1); \
	PAT((4*k)(DI)(R8*2), Y2); \
	PAT((4*k)(DI)(R9*1), Y3)

#define PAF4S(t) \
	PAF((BX), Y0, Y10); \
	PAF((BX)(R10*1), Y1, Y11); \
	PAF((BX)(R10*2), Y2, Y12); \
	PAF((BX)(R11*1), Y3, Y13)

// func gemm4Q8_0AVX2P(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
// Four tokens, each with its own rows of quants and scales: each group in
// two passes over its blocks (PTPASS), rows 0-7 (DX = 0) and rows 8-15
// (DX = 32).
TEXT ·gemm4Q8_0AVX2P(SB), NOSPLIT, $0-88
	PTGROUPS(PTPASS(PACH4S, PAF4S, PTST4, 0, 1, pta))

// func gemmT<K>Q8_0AVX2P(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
TEXT ·gemmT2Q8_0AVX2P(SB), NOSPLIT, $0-88
	PTGROUPS(PT2)

TEXT ·gemmT3Q8_0AVX2P(SB), NOSPLIT, $0-88
	PTGROUPS(PT3)

TEXT ·gemmT4Q8_0AVX2P(SB), NOSPLIT, $0-88
	PTGROUPS(PT4)

TEXT ·gemmT5Q8_0AVX2P(SB), NOSPLIT, $0-88
	PTGROUPS(PT5)

TEXT ·gemmT6Q8_0AVX2P(SB), NOSPLIT, $0-88
	PTGROUPS(PT6)

TEXT ·gemmT7Q8_0AVX2P(SB), NOSPLIT, $0-88
	PTGROUPS(PT7)

TEXT ·gemmT8Q8_0AVX2P(SB), NOSPLIT, $0-88
	PTGROUPS(PT8)
