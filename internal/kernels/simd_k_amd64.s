//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"
#include "simd_data.h"

// K-quants: super-blocks of 256 weights against 8 activation blocks of 32.
// Each activation block has its own scale, so every sub-block's integer sum
// is scaled in float; the sums of a super-block are gathered into one vector
// of 8 int32 (VPHADDD) so that one conversion and one FMA serve all of them.
// As in the Q4_0 kernel the quants are unpacked in 128-bit halves, summed as
// int16 per sub-block, and widened by VPMADDWD with ones.

// ONES16 sets Y15 to int16 ones.
#define ONES16 \
	VPCMPEQW Y15, Y15, Y15; \
	VPSRLW   $15, Y15, Y15

// MASK0F sets Y14 to 0x0f bytes.
#define MASK0F \
	MOVL         $0x0f0f0f0f, DX; \
	VMOVD        DX, X14; \
	VPBROADCASTD X14, Y14

// Q4KPAIR2 sets xa and xb to the int32 sums [4 of the low nibbles] and [4
// of the high nibbles] times the activations of the 32 Q4_K quant bytes at
// q0p (bytes 0-15) and q1p (16-31); a0p-a3p are the four 16-byte
// activation pieces (for the KT2/KT4 transposition).
#define Q4KPAIR2(q0p, q1p, a0p, a1p, a2p, a3p, xa, xb) \
	VMOVDQU    q0p, X5; \
	VMOVDQU    q1p, X6; \
	VPAND      X14, X5, xa; \
	VPAND      X14, X6, X11; \
	VPMADDUBSW a0p, xa, xa; \
	VPMADDUBSW a1p, X11, X11; \
	VPADDW     X11, xa, xa; \
	VPSRLW     $4, X5, X5; \
	VPSRLW     $4, X6, X6; \
	VPAND      X14, X5, X5; \
	VPAND      X14, X6, X6; \
	VPMADDUBSW a2p, X5, X5; \
	VPMADDUBSW a3p, X6, X6; \
	VPADDW     X6, X5, xb; \
	VPMADDWD   X15, xa, xa; \
	VPMADDWD   X15, xb, xb

// KSCALES decodes the 6-bit scales and mins of the 8 sub-blocks of the
// Q4_K/Q5_K super-block at SI (ggml's get_scale_min_k4 on 32-bit words):
// R11 = the 8 scale bytes, R12 = the 8 min bytes. BX, DX, R13 clobbered.
#define KSCALES \
	MOVL 4(SI), R11; \
	MOVL 8(SI), BX; \
	MOVL 12(SI), DX; \
	MOVL R11, R12; \
	SHRL $6, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	ANDL $0x3f3f3f3f, R11; \
	MOVL DX, R13; \
	ANDL $0x0f0f0f0f, R13; \
	ORL  R13, R12; \
	SHLQ $32, R12; \
	ORQ  R12, R11; \
	MOVL BX, R12; \
	ANDL $0x3f3f3f3f, R12; \
	SHRL $6, BX; \
	ANDL $0x03030303, BX; \
	SHLL $4, BX; \
	SHRL $4, DX; \
	ANDL $0x0f0f0f0f, DX; \
	ORL  DX, BX; \
	SHLQ $32, BX; \
	ORQ  BX, R12

// The four-input kernels unpack each super-block once into a scratch
// area of the frame for the four activation rows: SCRATCH(r) points r at
// its first 64-byte aligned byte (the frames are 64 bytes larger than the
// area), so that its 16- and 32-byte loads and stores never straddle a
// cache line whatever the caller's frame (they did for some callers: -6% to
// +20% on the K-quant matrix products from Go-side changes alone).
#define SCRATCH(r) \
	LEAQ 63(SP), r; \
	ANDQ $-64, r

// KP(q0, q1, a0, a1, ra, rb, dst): dst = the int32 sums (pairs of int16
// sums) of the 32 unpacked quants at q0(DI) and q1(DI) (16 each) times the
// activations at a0(R9) and a1(R9); ra and rb are clobbered.
#define KP(q0, q1, a0, a1, ra, rb, dst) \
	VMOVDQU    q0(DI), ra; \
	VPMADDUBSW a0(R9), ra, ra; \
	VMOVDQU    q1(DI), rb; \
	VPMADDUBSW a1(R9), rb, rb; \
	VPADDW     rb, ra, dst; \
	VPMADDWD   X15, dst, dst

// KPAIR(o, a, b, t): a = the KT2-transposed sums of the two sub-blocks of
// 32 at o(DI) (b and t clobbered).
#define KPAIR(o, a, b, t) \
	KP(o, o+16, o, o+16, X4, X5, a); \
	KP(o+32, o+48, o+32, o+48, X5, X12, b); \
	KT2(a, b, t)

// KROWPTRS(off): R9 = activation row off/8's quants of super-block AX/32,
// R10 and R12 = its scales and sums.
#define KROWPTRS(OFF) \
	MOVQ qs+8(FP), R9; \
	MOVQ OFF(R9), R9; \
	LEAQ (R9)(AX*8), R9; \
	MOVQ d+16(FP), R10; \
	MOVQ OFF(R10), R10; \
	MOVQ s+24(FP), R12; \
	MOVQ OFF(R12), R12

// KROW4(off, acc): acc += the Q4_K/Q5_K sums of the unpacked super-block at
// 0(DI) (the scratch area: one quant a byte, in element order) against activation row
// off/8 (its pointers at off in qs, d, s), scaled: d*sc*d_a*Σq*a - dmin*m*S
// with Y10 = d*sc, Y11 = dmin*m. AX = 32*super-block index.
#define KROW4(OFF, ACC) \
	KROWPTRS(OFF); \
	KPAIR(0, X6, X7, X8); \
	KPAIR(64, X7, X8, X9); \
	KT4(X6, X7, X8); \
	KPAIR(128, X7, X8, X9); \
	KPAIR(192, X8, X9, X4); \
	KT4(X7, X8, X9); \
	VINSERTI128 $1, X7, Y6, Y6; \
	VCVTDQ2PS   Y6, Y6; \
	VMULPS      (R10)(AX*1), Y10, Y12; \
	VFMADD231PS Y6, Y12, ACC; \
	VMULPS      (R12)(AX*1), Y11, Y12; \
	VSUBPS      Y12, ACC, ACC

// KSCALES1: after KSCALES, Y2 = d*sc*d_a per sub-block and Y1 = dmin*m*S
// for the activation scales at R9 and sums at R10: the operations (and
// their order) of the four-input kernels (KSCALESF, KROW4), so that the two
// agree bit for bit.
#define KSCALES1 \
	VMOVQ        R11, X2; \
	VPMOVZXBD    X2, Y2; \
	VCVTDQ2PS    Y2, Y2; \
	MOVWLZX      (SI), DX; \
	VBROADCASTSS (R8)(DX*4), Y3; \
	VMULPS       Y3, Y2, Y2; \
	VMULPS       (R9), Y2, Y2; \
	VMOVQ        R12, X1; \
	VPMOVZXBD    X1, Y1; \
	VCVTDQ2PS    Y1, Y1; \
	MOVWLZX      2(SI), DX; \
	VBROADCASTSS (R8)(DX*4), Y4; \
	VMULPS       Y4, Y1, Y1; \
	VMULPS       (R10), Y1, Y1

// SUMSQ4K: X7 (lane 0) and Y7 lane 1 = the 8 int32 sub-block sums of the
// Q4_K super-block at SI against the activations at DI.
#define SUMSQ4K \
	Q4KPAIR2(16(SI), 32(SI), (DI), 16(DI), 32(DI), 48(DI), X7, X8); \
	KT2(X7, X8, X3); \
	Q4KPAIR2(48(SI), 64(SI), 64(DI), 80(DI), 96(DI), 112(DI), X8, X9); \
	KT2(X8, X9, X3); \
	KT4(X7, X8, X3); \
	Q4KPAIR2(80(SI), 96(SI), 128(DI), 144(DI), 160(DI), 176(DI), X8, X9); \
	KT2(X8, X9, X3); \
	Q4KPAIR2(112(SI), 128(SI), 192(DI), 208(DI), 224(DI), 240(DI), X9, X10); \
	KT2(X9, X10, X3); \
	KT4(X8, X9, X3); \
	VINSERTI128 $1, X8, Y7, Y7

// Q5_K's fifth bits: bit 2j (2j+1) of qh[l] belongs to element l of
// sub-block 2j (2j+1). QHx(hx) sets X12 to the bits of one sub-block from
// 16 qh bytes in hx, moved to 0x10 (shifted left by 4 ... right by 3; QH0
// and QHN both unshifted, with a copy or without) and masked.
#define QHL4(hx) VPSLLW $4, hx, X12; VPAND q5kx10<>(SB), X12, X12
#define QHL3(hx) VPSLLW $3, hx, X12; VPAND q5kx10<>(SB), X12, X12
#define QHL2(hx) VPSLLW $2, hx, X12; VPAND q5kx10<>(SB), X12, X12
#define QHL1(hx) VPSLLW $1, hx, X12; VPAND q5kx10<>(SB), X12, X12
#define QH0(hx) VMOVDQA hx, X12; VPAND q5kx10<>(SB), X12, X12
#define QHN(hx) VPAND q5kx10<>(SB), hx, X12
#define QHR1(hx) VPSRLW $1, hx, X12; VPAND q5kx10<>(SB), X12, X12
#define QHR2(hx) VPSRLW $2, hx, X12; VPAND q5kx10<>(SB), X12, X12
#define QHR3(hx) VPSRLW $3, hx, X12; VPAND q5kx10<>(SB), X12, X12

// Q5KH(qh, x, hx): x |= the fifth bits that qh picks from hx.
#define Q5KH(qh, x, hx) \
	qh(hx); \
	VPOR X12, x, x

// Q5KP(s0, s1, qhlo, qhhi, a, dst): dst = the 4 int32 sums of the pair of
// Q5_K sub-blocks whose low bits are the 32 bytes at s0(SI) and s1(SI)
// (fifth bits from X3, X4 by qhlo and qhhi) times the 64 activations at
// a(DI), KT2-transposed; X5, X6, X11 clobbered.
#define Q5KP(s0, s1, qhlo, qhhi, a0, a1, a2, a3, dst) \
	VMOVDQU    s0(SI), X5; \
	VMOVDQU    s1(SI), X6; \
	VPAND      X14, X5, dst; \
	VPAND      X14, X6, X11; \
	Q5KH(qhlo, dst, X3); \
	Q5KH(qhlo, X11, X4); \
	VPMADDUBSW a0(DI), dst, dst; \
	VPMADDUBSW a1(DI), X11, X11; \
	VPADDW     X11, dst, dst; \
	VPSRLW     $4, X5, X5; \
	VPSRLW     $4, X6, X6; \
	VPAND      X14, X5, X5; \
	VPAND      X14, X6, X6; \
	Q5KH(qhhi, X5, X3); \
	Q5KH(qhhi, X6, X4); \
	VPMADDUBSW a2(DI), X5, X5; \
	VPMADDUBSW a3(DI), X6, X6; \
	VPADDW     X6, X5, X5; \
	VPMADDWD   X15, dst, dst; \
	VPMADDWD   X15, X5, X5; \
	KT2(dst, X5, X6)

// SUMSQ5K is SUMSQ4K for Q5_K: X3 = qh[0:16], X4 = qh[16:32].
#define SUMSQ5K \
	VMOVDQU 16(SI), X3; \
	VMOVDQU 32(SI), X4; \
	Q5KP(48, 64, QHL4, QHL3, 0, 16, 32, 48, X7); \
	Q5KP(80, 96, QHL2, QHL1, 64, 80, 96, 112, X8); \
	KT4(X7, X8, X6); \
	Q5KP(112, 128, QHN, QHR1, 128, 144, 160, 176, X9); \
	Q5KP(144, 160, QHR2, QHR3, 192, 208, 224, 240, X10); \
	KT4(X9, X10, X6); \
	VINSERTI128 $1, X9, Y7, Y7

// KDOT(SETUP, SUMS, size) is the body of the one-input Q4_K/Q5_K kernels,
// func dotXAVX2(w *byte, qs *int8, d, s *float32, nsb int, tab *float32, rows int, out *float32):
// rows consecutive weight rows, as dotQ4_0AVX2 (QDOT); Y0 accumulates
// d*sc*d_a*Σq*a - dmin*m*S, super-block (of size bytes) by super-block.
// The lane sums are in dot4's order (its HSUM): pairs, pairs of pairs, then
// the two halves.
#define KDOT(SETUP, SUMS, size) \
	MOVQ    w+0(FP), SI; \
	MOVQ    tab+40(FP), R8; \
	MOVQ    out+56(FP), AX; \
	ONES16; \
	MASK0F; \
	SETUP; \
row: \
	MOVQ   qs+8(FP), DI; \
	MOVQ   d+16(FP), R9; \
	MOVQ   s+24(FP), R10; \
	MOVQ   nsb+32(FP), CX; \
	VXORPS Y0, Y0, Y0; \
loop: \
	PREFETCHT0 PFD(SI); \
	PREFETCHT0 PFD+64(SI); \
	PREFETCHT0 PFD+128(SI); \
	KSCALES; \
	KSCALES1; \
	SUMS; \
	VCVTDQ2PS   Y7, Y7; \
	VFMADD231PS Y7, Y2, Y0; \
	VSUBPS      Y1, Y0, Y0; \
	ADDQ $size, SI; \
	ADDQ $256, DI; \
	ADDQ $32, R9; \
	ADDQ $32, R10; \
	DECQ CX; \
	JNZ  loop; \
	NEXTROW1(48, row)

#define PERMSUMS VMOVDQU permsums<>(SB), Y13
#define NOSETUP

// KSCALESF: after KSCALES, Y10 = d*sc and Y11 = dmin*m of the 8 sub-blocks
// of the super-block at SI, as floats.
#define KSCALESF \
	VMOVQ        R11, X10; \
	VPMOVZXBD    X10, Y10; \
	VCVTDQ2PS    Y10, Y10; \
	MOVWLZX      (SI), DX; \
	VBROADCASTSS (R8)(DX*4), Y12; \
	VMULPS       Y12, Y10, Y10; \
	VMOVQ        R12, X11; \
	VPMOVZXBD    X11, Y11; \
	VCVTDQ2PS    Y11, Y11; \
	MOVWLZX      2(SI), DX; \
	VBROADCASTSS (R8)(DX*4), Y12; \
	VMULPS       Y12, Y11, Y11

// Q4KU(s, d): the 32 quant bytes at s(SI) as one nibble a byte, the low
// nibbles (sub-block 2j) to d(SP) and the next 16 bytes, the high ones
// (sub-block 2j+1) 32 bytes further.
#define Q4KU(s0, s1, d0, d1, d2, d3) \
	VMOVDQU s0(SI), X4; \
	VMOVDQU s1(SI), X5; \
	VPAND   X14, X4, X6; \
	VPAND   X14, X5, X7; \
	VMOVDQU X6, d0(DI); \
	VMOVDQU X7, d1(DI); \
	VPSRLW  $4, X4, X4; \
	VPSRLW  $4, X5, X5; \
	VPAND   X14, X4, X4; \
	VPAND   X14, X5, X5; \
	VMOVDQU X4, d2(DI); \
	VMOVDQU X5, d3(DI)

// UNPACKQ4K unpacks the Q4_K super-block at SI into 0(DI).
#define UNPACKQ4K \
	Q4KU(16, 32, 0, 16, 32, 48); \
	Q4KU(48, 64, 64, 80, 96, 112); \
	Q4KU(80, 96, 128, 144, 160, 176); \
	Q4KU(112, 128, 192, 208, 224, 240)

// Q5KU: Q4KU with the fifth bits of sub-blocks 2j (shlo) and 2j+1 (shhi).
#define Q5KU(s0, s1, shlo, shhi, d0, d1, d2, d3) \
	VMOVDQU s0(SI), X5; \
	VMOVDQU s1(SI), X6; \
	VPAND   X14, X5, X7; \
	VPAND   X14, X6, X8; \
	Q5KH(shlo, X7, X9); \
	Q5KH(shlo, X8, X13); \
	VMOVDQU X7, d0(DI); \
	VMOVDQU X8, d1(DI); \
	VPSRLW  $4, X5, X5; \
	VPSRLW  $4, X6, X6; \
	VPAND   X14, X5, X5; \
	VPAND   X14, X6, X6; \
	Q5KH(shhi, X5, X9); \
	Q5KH(shhi, X6, X13); \
	VMOVDQU X5, d2(DI); \
	VMOVDQU X6, d3(DI)

// UNPACKQ5K unpacks the Q5_K super-block at SI into 0(DI) (X9 =
// qh[0:16], X13 = qh[16:32]; one quant,
// 0..31, a byte: pairs of quants times activations stay within int16,
// 2*2*31*127).
#define UNPACKQ5K \
	VMOVDQU 16(SI), X9; \
	VMOVDQU 32(SI), X13; \
	Q5KU(48, 64, QHL4, QHL3, 0, 16, 32, 48); \
	Q5KU(80, 96, QHL2, QHL1, 64, 80, 96, 112); \
	Q5KU(112, 128, QH0, QHR1, 128, 144, 160, 176); \
	Q5KU(144, 160, QHR2, QHR3, 192, 208, 224, 240)

// KDOT4(UNPACK, size) is the body of the four-input Q4_K/Q5_K kernels,
// func dot4XAVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int):
// each super-block (of size bytes) is unpacked once into the scratch area at DI (one
// quant a byte, in element order) and its scales into Y10 (d*sc) and Y11
// (dmin*m); then each activation row runs the sums against it (KROW4).
// Y0-Y3 accumulate the activation rows, AX is 32*super-block index (offset
// into d and s; 8*AX into qs). rows consecutive weight rows: row r's output
// for activation row k goes to out[k*stride + r] (R15 = stride in bytes).
#define KDOT4(UNPACK, size, ROW) \
	MOVQ    w+0(FP), SI; \
	MOVQ    tab+40(FP), R8; \
	MOVQ    stride+64(FP), R15; \
	SHLQ    $2, R15; \
	SCRATCH(DI); \
	ONES16; \
	MASK0F; \
row: \
	MOVQ   nsb+32(FP), CX; \
	XORQ   AX, AX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
loop: \
	KSCALES; \
	KSCALESF; \
	UNPACK; \
	ROW(0, Y0); \
	ROW(8, Y1); \
	ROW(16, Y2); \
	ROW(24, Y3); \
	ADDQ $size, SI; \
	ADDQ $32, AX; \
	DECQ CX; \
	JNZ  loop; \
	HSUM4; \
	STOREX4(X0, out+56(FP), R15, DX); \
	DECQ rows+48(FP); \
	JNZ  row; \
	VZEROUPPER; \
	RET

// Q6T8: from KT4 results Y4 (blocks 0-3) and Y5 (4-7), Y4 = the 8 block
// sums (the two lanes added); X6, X7 are clobbered.
#define Q6T8 \
	VEXTRACTI128 $1, Y4, X6; \
	VEXTRACTI128 $1, Y5, X7; \
	VPADDD       X6, X4, X4; \
	VPADDD       X7, X5, X5; \
	VINSERTI128  $1, X5, Y4, Y4

// Q6P(i, p): p = block i's products against the activation row at R9 with
// the unpacked weights (0..63, the unsigned operand) and scales.
#define Q6P(i, p) \
	VMOVDQU    256+(i*32)(DI), p; \
	VPMADDUBSW (i*32)(R9), p, p; \
	VPMADDWD   0+(i*32)(DI), p, p

// Q6ROW(k, acc): acc += d*d_a*(block sums) for activation row k/8 (its
// pointers in the arrays at R12, R13, R14), whose sums of 16 quants (at
// R11) take out the 32 the unpacked weights are short of:
// Σ sc*(q-32)*a = Σ sc*q*a - 32*Σ sc*Σa.
#define Q6ROW(k, acc) \
	MOVQ        k(R12), R9; \
	LEAQ        (R9)(AX*8), R9; \
	MOVQ        k(R13), R10; \
	MOVQ        k(R14), R11; \
	Q6P(0, Y4); \
	Q6P(1, Y5); \
	KT2(Y4, Y5, Y6); \
	Q6P(2, Y5); \
	Q6P(3, Y6); \
	KT2(Y5, Y6, Y7); \
	KT4(Y4, Y5, Y6); \
	Q6P(4, Y5); \
	Q6P(5, Y6); \
	KT2(Y5, Y6, Y7); \
	Q6P(6, Y6); \
	Q6P(7, Y7); \
	KT2(Y6, Y7, Y8); \
	KT4(Y5, Y6, Y7); \
	Q6T8; \
	VPMADDWD    (R11)(AX*1), Y13, Y5; \
	VPSLLD      $5, Y5, Y5; \
	VPSUBD      Y5, Y4, Y4; \
	VCVTDQ2PS   Y4, Y4; \
	VMULPS      (R10)(AX*1), Y12, Y5; \
	VFMADD231PS Y4, Y5, acc

// Q6_K unpacking: a quant (0..63) is 4 low bits from ql and 2 high bits
// from qh. Q6Hx(src, dst) sets dst to the high bits (to 0x30) of one block
// of 32 from the qh bytes in src (shifted left by 4 or 2, in place, or
// right by 2); Q6Lx(src, dst, m) sets dst to the low nibbles (Q6LL) or high
// nibbles (Q6LH) of the ql bytes in src, m the 0x0f mask.
#define Q6HL4(src, dst) VPSLLW $4, src, dst; VPAND q6m30<>(SB), dst, dst
#define Q6HL2(src, dst) VPSLLW $2, src, dst; VPAND q6m30<>(SB), dst, dst
#define Q6HN(src, dst) VPAND q6m30<>(SB), src, dst
#define Q6HR2(src, dst) VPSRLW $2, src, dst; VPAND q6m30<>(SB), dst, dst
#define Q6LL(src, dst, m) VPAND m, src, dst
#define Q6LH(src, dst, m) VPSRLW $4, src, dst; VPAND m, dst, dst

// Q6U1(H, L, ql, d): the block of 32 quants that H picks from the qh in Y4
// and L from ql, to d(SP) (Y7, Y8 clobbered).
#define Q6U1(H, L, ql, d) \
	H(Y4, Y7); \
	L(ql, Y8, q6m0f<>(SB)); \
	VPOR    Y8, Y7, Y7; \
	VMOVDQU Y7, d(DI)

// Q6U4(qh, ql0, ql1, d0, d1, d2, d3): the four blocks of one half of the
// super-block at SI (qh at qh(SI), ql at ql0(SI) and ql1(SI)) to d0-d3.
#define Q6U4(qh, ql0, ql1, d0, d1, d2, d3) \
	VMOVDQU qh(SI), Y4; \
	VMOVDQU ql0(SI), Y5; \
	VMOVDQU ql1(SI), Y6; \
	Q6U1(Q6HL4, Q6LL, Y5, d0); \
	Q6U1(Q6HL2, Q6LL, Y6, d1); \
	Q6U1(Q6HN, Q6LH, Y5, d2); \
	Q6U1(Q6HR2, Q6LH, Y6, d3)

// Q6SC(t, ysc, d): block t/32's scales of the half in ysc, spread to its
// int16 pairs, to d(SP).
#define Q6SC(t, ysc, d) \
	VPSHUFB q6shuf<>+t(SB), ysc, Y7; \
	VMOVDQU Y7, d(DI)

// Q6B1(H, L, ql, a, t, ysc, dst): dst = the products (pairs of int16 sums
// times the scales) of the block that H and L pick (qh in Y2) against the
// activations at a(DI); t/32 picks its scales from ysc.
#define Q6B1(H, L, ql, a, t, ysc, dst) \
	H(Y2, Y5); \
	L(ql, Y6, Y14); \
	VPOR       Y6, Y5, Y5; \
	VPMADDUBSW a(DI), Y5, Y5; \
	VPSHUFB    q6shuf<>+t(SB), ysc, Y6; \
	VPMADDWD   Y6, Y5, dst

// Q6D1(qh, ql0, ql1, a, ysc): Y7 = the sums of the four blocks of one half
// of the super-block at SI against the activations from a(DI) (split over
// the lanes), its scales in ysc.
#define Q6D1(qh, ql0, ql1, a, ysc) \
	VMOVDQU qh(SI), Y2; \
	VMOVDQU ql0(SI), Y3; \
	VMOVDQU ql1(SI), Y4; \
	Q6B1(Q6HL4, Q6LL, Y3, a+0, 0, ysc, Y7); \
	Q6B1(Q6HL2, Q6LL, Y4, a+32, 32, ysc, Y8); \
	KT2(Y7, Y8, Y6); \
	Q6B1(Q6HN, Q6LH, Y3, a+64, 64, ysc, Y8); \
	Q6B1(Q6HR2, Q6LH, Y4, a+96, 96, ysc, Y9); \
	KT2(Y8, Y9, Y6); \
	KT4(Y7, Y8, Y6)

// func dotQ4_KAVX2(w *byte, qs *int8, d, s *float32, nsb int, tab *float32, rows int, out *float32)
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $0-64
	KDOT(PERMSUMS, SUMSQ4K, 144)

// Q5_K: as Q4_K with a fifth bit per quant from qh (32 bytes before qs).

// func dotQ5_KAVX2(w *byte, qs *int8, d, s *float32, nsb int, tab *float32, rows int, out *float32)
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $0-64
	KDOT(NOSETUP, SUMSQ5K, 176)

// func dot4Q4_KAVX2X(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)
// dot4Q4_KAVX2 on 128-bit registers (split256).
TEXT ·dot4Q4_KAVX2X(SB), NOSPLIT, $320-72
	KDOT4(UNPACKQ4K, 144, KROW4)

// func dot4Q4_KAVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)
// The avx2 path's four-input Q4_K kernel: dot4Q4_KAVX2X where the CPU
// splits 256-bit integer multiplies (split256), else dot4Q4_KAVX2Y.
TEXT ·dot4Q4_KAVX2(SB), NOSPLIT, $0-72
	SPLIT256(·dot4Q4_KAVX2Y, ·dot4Q4_KAVX2X)

// func dot4Q5_KAVX2X(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)
// dot4Q5_KAVX2 on 128-bit registers (split256).
TEXT ·dot4Q5_KAVX2X(SB), NOSPLIT, $320-72
	KDOT4(UNPACKQ5K, 176, KROW4)

// func dot4Q5_KAVX2(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)
// The avx2 path's four-input Q5_K kernel: dot4Q5_KAVX2X where the CPU
// splits 256-bit integer multiplies (split256), else dot4Q5_KAVX2Y.
TEXT ·dot4Q5_KAVX2(SB), NOSPLIT, $0-72
	SPLIT256(·dot4Q5_KAVX2Y, ·dot4Q5_KAVX2X)

// func dot4Q6_KAVX2(w *byte, qs *[4]*int8, d *[4]*float32, b *[4]*int16, nsb int, tab *float32, rows int, out *float32, stride int)
// As dot4Q4_K: the super-block's quants (0..63, element order) go to
// 256(DI) once (the scratch area), its scales, spread to the int16 pairs of each block of
// 32, to 0(DI) (32 bytes a block), all 16 to Y13 and d to Y12; then
// each row. Y0-Y3 accumulate the rows, AX = 32*super-block index (offset
// into d and b, 8*AX into qs). Row r's output for activation row k goes to
// out[k*stride + r] (R15 = stride in bytes).
TEXT ·dot4Q6_KAVX2(SB), NOSPLIT, $576-72
	MOVQ         w+0(FP), SI
	SCRATCH(DI)
	MOVQ         qs+8(FP), R12
	MOVQ         d+16(FP), R13
	MOVQ         b+24(FP), R14
	MOVQ         tab+40(FP), R8
	MOVQ         stride+64(FP), R15
	SHLQ         $2, R15

q6kx4row:
	MOVQ   nsb+32(FP), CX
	XORQ   AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

q6kx4loop:
	VPMOVSXBW    192(SI), Y13
	VPERM2I128   $0x11, Y13, Y13, Y11
	VINSERTI128  $1, X13, Y13, Y10
	MOVWLZX      208(SI), DX
	VBROADCASTSS (R8)(DX*4), Y12
	Q6U4(128, 0, 32, 256, 288, 320, 352)
	Q6U4(160, 64, 96, 384, 416, 448, 480)

	// The scales of each block in int16 pairs, once for the four rows.
	Q6SC(0, Y10, 0)
	Q6SC(32, Y10, 32)
	Q6SC(64, Y10, 64)
	Q6SC(96, Y10, 96)
	Q6SC(0, Y11, 128)
	Q6SC(32, Y11, 160)
	Q6SC(64, Y11, 192)
	Q6SC(96, Y11, 224)
	Q6ROW(0, Y0)
	Q6ROW(8, Y1)
	Q6ROW(16, Y2)
	Q6ROW(24, Y3)

	ADDQ $210, SI
	ADDQ $32, AX
	DECQ CX
	JNZ  q6kx4loop

	HSUM4
	STOREX4(X0, out+56(FP), R15, DX)
	DECQ rows+48(FP)
	JNZ  q6kx4row
	VZEROUPPER
	RET

PERM8(permsums<>, 0, 4, 1, 5, 2, 6, 3, 7)

// func dotQ6_KAVX2(w *byte, qs *int8, d *float32, b *int16, nsb int, tab *float32, rows int, out *float32)
// rows consecutive weight rows, as dotQ4_0AVX2, with the quants (0..63)
// as the unsigned operand and the activations' sums of 16 quants (b)
// taking out the 32, as dot4Q6_KAVX2. Y0 accumulates; Y10/Y11 hold the
// scales of the two halves, Y13 all 16.
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $0-64
	MOVQ   w+0(FP), SI
	MOVQ   tab+40(FP), R8
	MOVQ   out+56(FP), AX
	MASK0F

q6krow:
	MOVQ   qs+8(FP), DI
	MOVQ   d+16(FP), R9
	MOVQ   b+24(FP), R10
	MOVQ   nsb+32(FP), CX
	VXORPS Y0, Y0, Y0

q6kloop:
	PREFETCHT0 PFD(SI)
	PREFETCHT0 PFD+64(SI)
	PREFETCHT0 PFD+128(SI)
	PREFETCHT0 PFD+192(SI)
	VPMOVSXBW   192(SI), Y13
	VPERM2I128  $0x11, Y13, Y13, Y11
	VINSERTI128 $1, X13, Y13, Y10
	Q6D1(128, 0, 32, 0, Y10)
	VMOVDQA      Y7, Y1
	Q6D1(160, 64, 96, 128, Y11)

	// The two lanes added: the 8 block sums in order, less 32*Σ sc*Σa.
	VEXTRACTI128 $1, Y1, X6
	VEXTRACTI128 $1, Y7, X8
	VPADDD       X6, X1, X1
	VPADDD       X8, X7, X7
	VINSERTI128  $1, X7, Y1, Y1
	VPMADDWD     (R10), Y13, Y5
	VPSLLD       $5, Y5, Y5
	VPSUBD       Y5, Y1, Y1
	VCVTDQ2PS    Y1, Y1
	MOVWLZX      208(SI), DX
	VBROADCASTSS (R8)(DX*4), Y2
	VMULPS       (R9), Y2, Y2
	VFMADD231PS  Y1, Y2, Y0

	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  q6kloop

	// The lane sums in dot4's order (see dotQ4_KAVX2).
	NEXTROW1(48, q6krow)

SPLAT32(q6m30<>, 0x3030303030303030)

// VPSHUFB masks for block t of a half (q6shuf<>+32t): lane 0 repeats
// int16 word 2t, lane 1 word 2t+1. Q6SHUFW(k) writes the 16 bytes of word
// k at q6shuf<>+16k.
#define Q6SHUFW(k) \
	DATA q6shuf<>+(16*k)(SB)/8, $(0x0100010001000100+k*0x0202020202020202); \
	DATA q6shuf<>+(16*k+8)(SB)/8, $(0x0100010001000100+k*0x0202020202020202)

Q6SHUFW(0); Q6SHUFW(1); Q6SHUFW(2); Q6SHUFW(3)
Q6SHUFW(4); Q6SHUFW(5); Q6SHUFW(6); Q6SHUFW(7)
GLOBL q6shuf<>(SB), RODATA|NOPTR, $128

SPLAT16(q5kx10<>, 0x1010101010101010)
SPLAT32(q6m0f<>, 0x0f0f0f0f0f0f0f0f)

// KPY(o, dst): dst = the 8 int32 partial sums of the 32 unpacked quants
// at o(DI) times the activations at o(R9) (256-bit registers).
#define KPY(o, dst) \
	VMOVDQU    o(DI), dst; \
	VPMADDUBSW o(R9), dst, dst; \
	VPMADDWD   Y15, dst, dst

// KROW4Y: KROW4 on 256-bit registers: the same integer sums (one
// register a sub-block, reduced per 128-bit half by KT2/KT4 and the
// halves added), the same float steps, so the same bits.
#define KROW4Y(OFF, ACC) \
	KROWPTRS(OFF); \
	KPY(0, Y4); \
	KPY(32, Y5); \
	KPY(64, Y6); \
	KPY(96, Y7); \
	KT2(Y4, Y5, Y12); \
	KT2(Y6, Y7, Y12); \
	KT4(Y4, Y6, Y12); \
	KPY(128, Y5); \
	KPY(160, Y6); \
	KPY(192, Y7); \
	KPY(224, Y8); \
	KT2(Y5, Y6, Y12); \
	KT2(Y7, Y8, Y12); \
	KT4(Y5, Y7, Y12); \
	KH2(Y4, Y5, Y6, Y7); \
	VCVTDQ2PS   Y6, Y6; \
	VMULPS      (R10)(AX*1), Y10, Y12; \
	VFMADD231PS Y6, Y12, ACC; \
	VMULPS      (R12)(AX*1), Y11, Y12; \
	VSUBPS      Y12, ACC, ACC

// Q4KUY(s, d): Q4KU on 256-bit registers: the 32 quant bytes at s(SI),
// their low nibbles to d(DI) and their high ones to d+32(DI). KROW4Y's
// 32-byte loads need 32-byte stores here: a load that spans two 16-byte
// stores still in flight is not forwarded from them and waits (Q4KU's
// stores cost the 256-bit kernel two thirds of its gain on Zen 3).
#define Q4KUY(s, d) \
	VMOVDQU s(SI), Y4; \
	VPAND   Y14, Y4, Y5; \
	VPSRLW  $4, Y4, Y4; \
	VPAND   Y14, Y4, Y4; \
	VMOVDQU Y5, d(DI); \
	VMOVDQU Y4, d+32(DI)

#define UNPACKQ4KY \
	Q4KUY(16, 0); \
	Q4KUY(48, 64); \
	Q4KUY(80, 128); \
	Q4KUY(112, 192)

// func dot4Q4_KAVX2Y(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)
// The four-input Q4_K kernel on 256-bit registers (KDOT4 with UNPACKQ4KY
// and KROW4Y).
TEXT ·dot4Q4_KAVX2Y(SB), NOSPLIT, $320-72
	KDOT4(UNPACKQ4KY, 144, KROW4Y)

// The fifth bits of Q5_K on 256-bit registers: QHxY(h) sets Y12 to the
// bits of one sub-block from the 32 qh bytes in h, moved to 0x10 and
// masked with Y13 (0x10 bytes), as QHx.
#define QHL4Y(h) VPSLLW $4, h, Y12; VPAND Y13, Y12, Y12
#define QHL3Y(h) VPSLLW $3, h, Y12; VPAND Y13, Y12, Y12
#define QHL2Y(h) VPSLLW $2, h, Y12; VPAND Y13, Y12, Y12
#define QHL1Y(h) VPSLLW $1, h, Y12; VPAND Y13, Y12, Y12
#define QHNY(h) VPAND Y13, h, Y12
#define QHR1Y(h) VPSRLW $1, h, Y12; VPAND Y13, Y12, Y12
#define QHR2Y(h) VPSRLW $2, h, Y12; VPAND Y13, Y12, Y12
#define QHR3Y(h) VPSRLW $3, h, Y12; VPAND Y13, Y12, Y12

// Q5KUY(s, qhlo, qhhi, d): Q4KUY with the fifth bits (qh in Y9) of the
// low nibbles' sub-block (qhlo) and the high ones' (qhhi).
#define Q5KUY(s, qhlo, qhhi, d) \
	VMOVDQU s(SI), Y4; \
	VPAND   Y14, Y4, Y5; \
	qhlo(Y9); \
	VPOR    Y12, Y5, Y5; \
	VPSRLW  $4, Y4, Y4; \
	VPAND   Y14, Y4, Y4; \
	qhhi(Y9); \
	VPOR    Y12, Y4, Y4; \
	VMOVDQU Y5, d(DI); \
	VMOVDQU Y4, d+32(DI)

// UNPACKQ5KY unpacks the Q5_K super-block at SI into 0(DI) in 32-byte
// stores (Q4KUY says why).
#define UNPACKQ5KY \
	VMOVDQU      16(SI), Y9; \
	VPBROADCASTB q5kx10<>(SB), Y13; \
	Q5KUY(48, QHL4Y, QHL3Y, 0); \
	Q5KUY(80, QHL2Y, QHL1Y, 64); \
	Q5KUY(112, QHNY, QHR1Y, 128); \
	Q5KUY(144, QHR2Y, QHR3Y, 192)

// func dot4Q5_KAVX2Y(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)
// The four-input Q5_K kernel on 256-bit registers (KDOT4 with UNPACKQ5KY
// and KROW4Y).
TEXT ·dot4Q5_KAVX2Y(SB), NOSPLIT, $320-72
	KDOT4(UNPACKQ5KY, 176, KROW4Y)
