// Macros of the packed-weight kernels (pack.go), shared by the AVX-512
// VNNI file (simd_pack_amd64.s) and the AVX-512 BW one (simd_packbw_amd64.s):
// each defines PMAC(m, w, y), y += the 16 rows' 4-byte products of the
// unsigned bytes in w with the 4 signed activation bytes at m, before
// including this file.

// AVX-512 VNNI kernels over packed weights (pack.go): groups of 16 rows
// whose 32-element blocks are stored as eight 64-byte chunks, chunk k
// holding columns 4k..4k+3 of the 16 rows (4 bytes per row), then the
// group's block scales (16 halves per block). One VPDPBUSD multiplies a
// chunk (16 rows × 4 unsigned bytes) by 4 activation bytes broadcast to
// every row: 64 multiply-adds whose 16 lanes are the 16 rows' partial
// sums, so after the eight chunks of a block each lane holds its row's
// exact block sum without any horizontal reduction.
//
// Every output gets the float operations of the AVX2 kernels, in the same
// order (block by block from 0): Q8_0 acc = fma(float(S), d_w*d_a, acc),
// Q4_0 that and then acc = fma(-8*d_w, S_a, acc) (the AVX2 kernel's
// fma(d_w, -8*S_a, acc): the same exact product). So the results are
// bit-identical to the AVX2 path's, alone or in batches of any size.
//
// Q8_0 chunks hold w+128 (VPDPBUSD's first operand is unsigned): the
// block sum is the raw sum minus 128*Σa (Act.I holds 128*Σa per block of
// the activations). Q4_0 chunks hold the nibbles as stored (0..15):
// chunk j's low nibbles are columns 4j.., its high nibbles 16+4j.., and
// the raw sum Σq*a is what the AVX2 kernel computes too.
//
// Registers: SI weights (advances a block), R12 the block's scales, DI the
// first token's quants, R8/R9 one and three token strides of quants, BX
// and DX the first token's block scale and sum, R10/R11 one and three
// strides of those, AX the group's outputs for the first token, R13/R14
// one and three output strides, CX blocks left, R15 groups left. Z0-Z7
// hold a block's eight chunks (as VPDPBUSD's unsigned operand), Z8 the
// rows' scales, Z9 the Q4_0 offset scales, Z16-Z19 the four tokens'
// outputs, Z20-Z27 temporaries, Z30/Z31 constants.

// PKARGS loads the arguments shared by the kernels, PKGP those in
// general registers (the AVX-VNNI file's too), and K1 = all 16 rows:
// func(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
#define PKGP \
	MOVQ  w+0(FP), SI; \
	MOVQ  qstride+32(FP), R8; \
	LEAQ  (R8)(R8*2), R9; \
	MOVQ  dstride+56(FP), R10; \
	SHLQ  $2, R10; \
	LEAQ  (R10)(R10*2), R11; \
	MOVQ  out+64(FP), AX; \
	MOVQ  ostride+72(FP), R13; \
	SHLQ  $2, R13; \
	LEAQ  (R13)(R13*2), R14; \
	MOVQ  groups+16(FP), R15

#define PKARGS PKGP; MOVL $0xffff, CX; KMOVW CX, K1

// PKGROUP starts a group: the token pointers back at block 0, R12 at the
// group's scales (after nb blocks of qbytes quants), CX = nb.
#define PKGROUP(qbytes) \
	MOVQ  qs+24(FP), DI; \
	MOVQ  d+40(FP), BX; \
	MOVQ  s+48(FP), DX; \
	MOVQ  nb+8(FP), CX; \
	MOVQ  CX, R12; \
	IMULQ $qbytes, R12; \
	ADDQ  SI, R12

// PKNEXT moves to the next block (qbytes of quants, sbytes of scales,
// 32*asub activation quants, asub activation scales, sbytes of
// activation sums) and loops.
#define PKNEXT(qbytes, sbytes, asub, abytes, loop) \
	ADDQ $qbytes, SI; \
	ADDQ $sbytes, R12; \
	ADDQ $(32*asub), DI; \
	ADDQ $(4*asub), BX; \
	ADDQ $abytes, DX; \
	DECQ CX; \
	JNZ  loop

// The interleaved layout (packKernels.inter, packed.inter) puts each
// block's scales right after its quants: one stream per group, which the
// one-token kernels' prefetches cover whole, where the file order's
// scales (after the group's quants) were a second stream, each group's
// first lines of it missed from memory. PKGROUPI and PKNEXTI are PKGROUP
// and PKNEXT for it; PKEND moves SI to the next group after the loop (the
// file order's is after the scales, R12; the interleaved one's is SI).
#define PKGROUPI(qbytes) \
	MOVQ qs+24(FP), DI; \
	MOVQ d+40(FP), BX; \
	MOVQ s+48(FP), DX; \
	MOVQ nb+8(FP), CX; \
	LEAQ qbytes(SI), R12

#define PKNEXTI(qbytes, sbytes, asub, abytes, loop) \
	ADDQ $(qbytes+sbytes), SI; \
	ADDQ $(qbytes+sbytes), R12; \
	ADDQ $(32*asub), DI; \
	ADDQ $(4*asub), BX; \
	ADDQ $abytes, DX; \
	DECQ CX; \
	JNZ  loop

#define PKEND MOVQ R12, SI
#define PKENDI

// PKMASK switches K1 to the caller's mask before the last group's stores.
#define PKMASK(full) \
	CMPQ  R15, $1; \
	JNE   full; \
	KMOVW mask+80(FP), K1; \
full:

// One token streams the weights from memory: the hardware prefetcher
// alone left a third of the bandwidth unused (Zen 5: Q6_K decode at 29
// GB/s against the AVX2 kernels' 47 on the file's pages). PF8(o) fetches
// the 512 bytes at o(SI) (o = PKPFD ahead of the block being read).
#define PKPFD 2048
#define PF8(o) \
	PREFETCHT0 (o)(SI); \
	PREFETCHT0 (o+64)(SI); \
	PREFETCHT0 (o+128)(SI); \
	PREFETCHT0 (o+192)(SI); \
	PREFETCHT0 (o+256)(SI); \
	PREFETCHT0 (o+320)(SI); \
	PREFETCHT0 (o+384)(SI); \
	PREFETCHT0 (o+448)(SI)

// Q8_0's one-token kernel reads a block four times faster than a
// Q4_0-layout one: from PKPFD ahead its prefetches came too late, and into
// L1 they competed with the loads. 12 KiB ahead into L2 (PREFETCHT1) read
// 5-10 % more (Zen 5, 71 MB matrix, CPU time; BenchmarkMatVecDRAM; the
// packed copy on huge pages, alignedBytes, did the most).
#define PFQ8_0 \
	PREFETCHT1 (12288)(SI); \
	PREFETCHT1 (12288+64)(SI); \
	PREFETCHT1 (12288+128)(SI); \
	PREFETCHT1 (12288+192)(SI); \
	PREFETCHT1 (12288+256)(SI); \
	PREFETCHT1 (12288+320)(SI); \
	PREFETCHT1 (12288+384)(SI); \
	PREFETCHT1 (12288+448)(SI)
// PFQ8I: PFQ8_0 for the interleaved layout (544 bytes a block: nine lines).
#define PFQ8I PFQ8_0; PREFETCHT1 (12288+512)(SI)

#define PFQ4_0 PREFETCHT0 (PKPFD)(SI); PREFETCHT0 (PKPFD+64)(SI); PREFETCHT0 (PKPFD+128)(SI); PREFETCHT0 (PKPFD+192)(SI)
#define PFQ5 PFQ4_0; PREFETCHT0 (PKPFD+256)(SI)
// The K-quants' super-blocks are larger than PKPFD: fetch the next one
// (and a bit) while reading this one.
#define PFK(q) PF8(q+1024); PF8(q+1536); PF8(q+2048); PF8(q+2560)
#define PFQ4_K PFK(2048)
#define PFQ5_K PFK(2560); PF8(2560+3072)
#define PFQ6_K PFK(3072); PF8(3072+3072); PF8(3072+3584)

// The one-token K-quant kernels spread those prefetches over the
// super-block instead: sub-block j fetches its eighth of a super-block
// PKPFL2 bytes ahead, a few lines at a time, where 32-48 prefetches at the
// top of each super-block left Q6_K decode from memory at 0.83x the AVX2
// kernel's (Zen 5). The eighths cover the whole super-block, scales
// included (5, 6 and 7 lines of 37, 45 and 53; the scales are in that
// stream only in the interleaved layout, PKGROUPI), into L2 (PREFETCHT1): a
// super-block ahead into L1, without the scales, read a 75 MB matrix at
// 9.5 GB/s (Q4_K 11-12) on one Zen 5 core, 8 KiB ahead into L2 at 13-17.
#define PKPFL2 8192
#define PFL5(o) PREFETCHT1 (o)(SI); PREFETCHT1 (o+64)(SI); PREFETCHT1 (o+128)(SI); PREFETCHT1 (o+192)(SI); PREFETCHT1 (o+256)(SI)
#define PFJQ4_K(j) PFL5(PKPFL2+320*j)
#define PFJQ5_K(j) PFL5(PKPFL2+384*j); PREFETCHT1 (PKPFL2+384*j+320)(SI)
#define PFJQ6_K(j) PFL5(PKPFL2+448*j); PREFETCHT1 (PKPFL2+448*j+320)(SI); PREFETCHT1 (PKPFL2+448*j+384)(SI)
#define PKNOPF

// DOT8K(j, q, y): y += the eight chunks Z0-Z7 times activation block j
// of the token's blocks at q (an address without displacement), 4 bytes
// broadcast per chunk; DOT8(q, y) is block 0.
#define DOT8K(j, q, y) \
	PMAC((32*j) q, Z0, y); \
	PMAC((32*j+4) q, Z1, y); \
	PMAC((32*j+8) q, Z2, y); \
	PMAC((32*j+12) q, Z3, y); \
	PMAC((32*j+16) q, Z4, y); \
	PMAC((32*j+20) q, Z5, y); \
	PMAC((32*j+24) q, Z6, y); \
	PMAC((32*j+28) q, Z7, y)

// DOT8KS(j, q, y): DOT8K as two chains (even chunks into y, odd ones into
// Z22, then added: the same integer sum), for the one-token kernels,
// where nothing else overlaps the chain's latency; DOT8S is block 0.
#define DOT8KS(j, q, y) \
	VPXORD Z22, Z22, Z22; \
	PMAC((32*j) q, Z0, y); \
	PMAC((32*j+4) q, Z1, Z22); \
	PMAC((32*j+8) q, Z2, y); \
	PMAC((32*j+12) q, Z3, Z22); \
	PMAC((32*j+16) q, Z4, y); \
	PMAC((32*j+20) q, Z5, Z22); \
	PMAC((32*j+24) q, Z6, y); \
	PMAC((32*j+28) q, Z7, Z22); \
	VPADDD Z22, y, y

#define DOT8(q, y) DOT8K(0, q, y)
#define DOT8S(q, y) DOT8KS(0, q, y)

// CONST32(v, z): z = the 32-bit value v in every lane (CX clobbered).
#define CONST32(v, z) MOVL $v, CX; VPBROADCASTD CX, z

// The kernels' constants: Z31 = 0x0f bytes (KCONST), and Z30 = -8.0
// (Q4CONST), -16.0 with Z29 = 0x10 bytes (Q5CONST), 0x10 bytes (KCONST5)
// or 0x30 bytes (KCONST6).
#define KCONST CONST32(0x0f0f0f0f, Z31)
#define Q4CONST KCONST; CONST32(0xc1000000, Z30)
#define Q5CONST KCONST; CONST32(0xc1800000, Z30); CONST32(0x10101010, Z29)
#define KCONST5 KCONST; CONST32(0x10101010, Z30)
#define KCONST6 KCONST; CONST32(0x30303030, Z30)

// Q8W loads a Q8_0 block's chunks and scales.
#define Q8W \
	VMOVDQU32 0(SI), Z0; \
	VMOVDQU32 64(SI), Z1; \
	VMOVDQU32 128(SI), Z2; \
	VMOVDQU32 192(SI), Z3; \
	VMOVDQU32 256(SI), Z4; \
	VMOVDQU32 320(SI), Z5; \
	VMOVDQU32 384(SI), Z6; \
	VMOVDQU32 448(SI), Z7; \
	VCVTPH2PS (R12), Z8

// Q8TOKW(DOT, q, dd, ss, acc, x, y): one token's block (quants at q,
// scale at dd, 128*Σa at ss) into acc, its sum by DOT; x, y clobbered.
// Q8TOK for four tokens, Q8TOK1 (two chains) for one.
#define Q8TOKW(DOT, q, dd, ss, acc, x, y) \
	VPXORD       y, y, y; \
	DOT(q, y); \
	VPSUBD.BCST  ss, y, y; \
	VCVTDQ2PS    y, y; \
	VMULPS.BCST  dd, Z8, x; \
	VFMADD231PS  x, y, acc

#define Q8TOK(q, dd, ss, acc, x, y) Q8TOKW(DOT8, q, dd, ss, acc, x, y)
#define Q8TOK1(q, dd, ss, acc, x, y) Q8TOKW(DOT8S, q, dd, ss, acc, x, y)

// Q4U: Z0-Z7 = a Q4_0-layout block's nibbles (Z31 = 0x0f).
#define Q4U \
	VMOVDQU32 0(SI), Z0; \
	VMOVDQU32 64(SI), Z1; \
	VMOVDQU32 128(SI), Z2; \
	VMOVDQU32 192(SI), Z3; \
	VPSRLW    $4, Z0, Z4; \
	VPSRLW    $4, Z1, Z5; \
	VPSRLW    $4, Z2, Z6; \
	VPSRLW    $4, Z3, Z7; \
	KAND

// Q5U: Q4U with the fifth bits: the 64 bytes after the nibbles hold, in
// bit k of row r's 4 bytes, the fifth bits of chunk k (elements 4k..4k+3:
// chunk k is Zk), moved to bit 4 and merged (Z29 = 0x10).
#define Q5U1(SH, z) \
	VMOVDQA64  Z13, Z14; \
	SH(Z14); \
	VPTERNLOGD $0xf8, Z29, Z14, z

#define Q5U \
	Q4U; \
	VMOVDQU32 256(SI), Z13; \
	Q5U1(SLL4, Z0); \
	Q5U1(SLL3, Z1); \
	Q5U1(SLL2, Z2); \
	Q5U1(SLL1, Z3); \
	Q5U1(NOSH, Z4); \
	Q5U1(SRL1, Z5); \
	Q5U1(SRL2, Z6); \
	Q5U1(SRL3, Z7)

// The offset or minimum term of Q4_0, Q4_1, Q5_0, Q5_1: Z8 = d, Z9 =
// -8*d or -16*d (Z30 = -8.0 or -16.0) or the rows' minimums m (the halves
// after d). The token term is then Q4TOK's.
#define QOFF \
	VCVTPH2PS (R12), Z8; \
	VMULPS    Z30, Z8, Z9

#define QMIN \
	VCVTPH2PS (R12), Z8; \
	VCVTPH2PS 32(R12), Z9

#define Q4W Q4U; QOFF
#define Q41W Q4U; QMIN
#define Q50W Q5U; QOFF
#define Q51W Q5U; QMIN

// Q4TOKW(DOT, ...): as Q8TOKW with ss the float sum S_a, and the offset
// or minimum term (Z9).
#define Q4TOKW(DOT, q, dd, ss, acc, x, y) \
	VPXORD           y, y, y; \
	DOT(q, y); \
	VCVTDQ2PS        y, y; \
	VMULPS.BCST      dd, Z8, x; \
	VFMADD231PS      x, y, acc; \
	VFMADD231PS.BCST ss, Z9, acc

#define Q4TOK(q, dd, ss, acc, x, y) Q4TOKW(DOT8, q, dd, ss, acc, x, y)
#define Q4TOK1(q, dd, ss, acc, x, y) Q4TOKW(DOT8S, q, dd, ss, acc, x, y)

// Q4_K: a super-block of 256 is 8 sub-blocks of 32 with a 6-bit scale
// and minimum each. The group's super-block is 4 pieces of 8 chunks
// (piece c: bytes 32c.. of the 16 rows' quants, whose low nibbles are
// sub-block 2c and high nibbles 2c+1), then its scales: the 8 sub-blocks'
// scale bytes (16 rows each), their minimum bytes, the rows' d and dmin
// halves (320 bytes). Per sub-block j and token: acc = fma(float(S),
// d*sc_j*d_a, acc), then acc -= dmin*m_j*S_a with S_a = d_a*Σa of the
// activation block (Act.S), as the AVX2 kernel computes them per lane
// (its sub-block sums then meet in a horizontal sum: the results agree
// within rounding, not bit for bit).

// KSC(j): Z8 = d*sc_j, Z9 = dmin*m_j for the 16 rows (Z28 = d, Z29 = dmin).
#define KSC(j) \
	VPMOVZXBD (16*j)(R12), Z8; \
	VPMOVZXBD (128+16*j)(R12), Z9; \
	VCVTDQ2PS Z8, Z8; \
	VCVTDQ2PS Z9, Z9; \
	VMULPS    Z28, Z8, Z8; \
	VMULPS    Z29, Z9, Z9

// KLO(c), KHI(c): Z0-Z7 = the low (high) nibbles of piece c's chunks.
#define KLOAD(c) \
	VMOVDQU32 (512*c)(SI), Z0; \
	VMOVDQU32 (512*c+64)(SI), Z1; \
	VMOVDQU32 (512*c+128)(SI), Z2; \
	VMOVDQU32 (512*c+192)(SI), Z3; \
	VMOVDQU32 (512*c+256)(SI), Z4; \
	VMOVDQU32 (512*c+320)(SI), Z5; \
	VMOVDQU32 (512*c+384)(SI), Z6; \
	VMOVDQU32 (512*c+448)(SI), Z7

#define KLO(c) KLOAD(c); KAND

#define KHI(c) \
	KLOAD(c); \
	VPSRLW    $4, Z0, Z0; \
	VPSRLW    $4, Z1, Z1; \
	VPSRLW    $4, Z2, Z2; \
	VPSRLW    $4, Z3, Z3; \
	VPSRLW    $4, Z4, Z4; \
	VPSRLW    $4, Z5, Z5; \
	VPSRLW    $4, Z6, Z6; \
	VPSRLW    $4, Z7, Z7; \
	KAND

#define KAND \
	VPANDD Z31, Z0, Z0; \
	VPANDD Z31, Z1, Z1; \
	VPANDD Z31, Z2, Z2; \
	VPANDD Z31, Z3, Z3; \
	VPANDD Z31, Z4, Z4; \
	VPANDD Z31, Z5, Z5; \
	VPANDD Z31, Z6, Z6; \
	VPANDD Z31, Z7, Z7

// KTOKW(DOT, j, q, dd, ss, acc, x, y): sub-block j of one token into acc,
// its sum by DOT; KTOK4 for four tokens, KTOK1 (two chains) for one.
#define KTOKW(DOT, j, q, dd, ss, acc, x, y) \
	VPXORD            y, y, y; \
	DOT(j, q, y); \
	VCVTDQ2PS         y, y; \
	VMULPS.BCST       (4*j) dd, Z8, x; \
	VFMADD231PS       x, y, acc; \
	VFNMADD231PS.BCST (4*j) ss, Z9, acc

#define KTOK4(j) \
	KTOKW(DOT8K, j, (DI), (BX), (DX), Z16, Z20, Z21); \
	KTOKW(DOT8K, j, (DI)(R8*1), (BX)(R10*1), (DX)(R10*1), Z17, Z22, Z23); \
	KTOKW(DOT8K, j, (DI)(R8*2), (BX)(R10*2), (DX)(R10*2), Z18, Z24, Z25); \
	KTOKW(DOT8K, j, (DI)(R9*1), (BX)(R11*1), (DX)(R11*1), Z19, Z26, Z27)

#define KTOK1(j) KTOKW(DOT8KS, j, (DI), (BX), (DX), Z16, Z20, Z21)
#define KTOK1Q4(j) PFJQ4_K(j); KTOK1(j)
#define KTOK1Q5(j) PFJQ5_K(j); KTOK1(j)

// Q4KSB(TOKS): one super-block against the tokens TOKS multiplies.
#define Q4KSB(TOKS) \
	VCVTPH2PS 256(R12), Z28; \
	VCVTPH2PS 288(R12), Z29; \
	KLO(0); KSC(0); TOKS(0); \
	KHI(0); KSC(1); TOKS(1); \
	KLO(1); KSC(2); TOKS(2); \
	KHI(1); KSC(3); TOKS(3); \
	KLO(2); KSC(4); TOKS(4); \
	KHI(2); KSC(5); TOKS(5); \
	KLO(3); KSC(6); TOKS(6); \
	KHI(3); KSC(7); TOKS(7)

// Q5_K: Q4_K with a fifth bit per quant: after the 4 pieces (2048 bytes)
// one more of 8 chunks holds the qh bytes of the 16 rows (bit j of qh[l]
// is sub-block j's fifth bit of element l), then the scales as Q4_K's.
// Sub-block j's quants are its nibbles (Z0-Z7 from KLO/KHI) with bit j of
// the qh chunks moved to bit 4 (shifted by words, masked, merged).

// Q5H(j, SH): Z0-Z7 |= bit j of the qh chunks as 0x10 (SH shifts it
// there; Z30 = 0x10 bytes, Z14 scratch).
#define Q5H1(k, SH, z) \
	VMOVDQU32 (2048+64*k)(SI), Z14; \
	SH(Z14); \
	VPTERNLOGD $0xf8, Z30, Z14, z

#define Q5H(SH) \
	Q5H1(0, SH, Z0); \
	Q5H1(1, SH, Z1); \
	Q5H1(2, SH, Z2); \
	Q5H1(3, SH, Z3); \
	Q5H1(4, SH, Z4); \
	Q5H1(5, SH, Z5); \
	Q5H1(6, SH, Z6); \
	Q5H1(7, SH, Z7)

// Word shifts of a register in place (the masks drop what crosses bytes).
#define NOSH(z)
#define SLL1(z) VPSLLW $1, z, z
#define SLL2(z) VPSLLW $2, z, z
#define SLL3(z) VPSLLW $3, z, z
#define SLL4(z) VPSLLW $4, z, z
#define SRL1(z) VPSRLW $1, z, z
#define SRL2(z) VPSRLW $2, z, z
#define SRL3(z) VPSRLW $3, z, z
#define SRL4(z) VPSRLW $4, z, z

#define Q5KSB(TOKS) \
	VCVTPH2PS 256(R12), Z28; \
	VCVTPH2PS 288(R12), Z29; \
	KLO(0); Q5H(SLL4); KSC(0); TOKS(0); \
	KHI(0); Q5H(SLL3); KSC(1); TOKS(1); \
	KLO(1); Q5H(SLL2); KSC(2); TOKS(2); \
	KHI(1); Q5H(SLL1); KSC(3); TOKS(3); \
	KLO(2); Q5H(NOSH); KSC(4); TOKS(4); \
	KHI(2); Q5H(SRL1); KSC(5); TOKS(5); \
	KLO(3); Q5H(SRL2); KSC(6); TOKS(6); \
	KHI(3); Q5H(SRL3); KSC(7); TOKS(7)

// Q6_K: 16 sub-blocks of 16 with an int8 scale each, quants of 6 bits
// (q+32, so 0..63: VPDPBUSD's unsigned operand as they are). The group's
// super-block: 4 pieces of low nibbles (piece 2h+s: bytes 64h+32s.. of the
// rows' ql, whose low nibbles are block 4h+s and high nibbles 4h+s+2), 2
// pieces of high bits (piece h: the rows' qh bytes 32h.., bits 2q of
// block 4h+q), then the 16 scales (a byte per row) and d. A block of 32
// has two sub-blocks: each sums into its own register, minus 32*Σa of its
// 16 activations (Act.I), times its scale; the two are added as integers
// and scaled once: acc = fma(float(sc_a*S_a + sc_b*S_b), d*d_a, acc).

// Q6U1(k, loff, hoff, LSH, HSH, z): z = chunk k of a block's 6-bit quants
// from the low-nibble piece at loff (shifted by LSH) and the high-bit
// piece at hoff (shifted by HSH to bits 4-5). Z31 = 0x0f, Z30 = 0x30.
#define Q6U1(k, loff, hoff, LSH, HSH, z) \
	VMOVDQU32  (loff+64*k)(SI), z; \
	LSH(z); \
	VMOVDQU32  (hoff+64*k)(SI), Z14; \
	HSH(Z14); \
	VPANDD     Z30, Z14, Z14; \
	VPTERNLOGD $0xe4, Z31, Z14, z

// Q6U(j, loff, hoff, LSH, HSH): Z0-Z7 = block j's quants, Z8/Z9 the
// scales of its two sub-blocks (16 rows each, as int32).
#define Q6U(j, loff, hoff, LSH, HSH) \
	Q6U1(0, loff, hoff, LSH, HSH, Z0); \
	Q6U1(1, loff, hoff, LSH, HSH, Z1); \
	Q6U1(2, loff, hoff, LSH, HSH, Z2); \
	Q6U1(3, loff, hoff, LSH, HSH, Z3); \
	Q6U1(4, loff, hoff, LSH, HSH, Z4); \
	Q6U1(5, loff, hoff, LSH, HSH, Z5); \
	Q6U1(6, loff, hoff, LSH, HSH, Z6); \
	Q6U1(7, loff, hoff, LSH, HSH, Z7); \
	VPMOVSXBD (32*j)(R12), Z8; \
	VPMOVSXBD (32*j+16)(R12), Z9

// Q6TOK(j, q, dd, ss, acc, x, y, z): block j of one token into acc (its
// sums of 16 at ss, two per block).
#define Q6TOK(j, q, dd, ss, acc, x, y, z) \
	VPXORD        y, y, y; \
	VPXORD        z, z, z; \
	PMAC((32*j) q, Z0, y); \
	PMAC((32*j+4) q, Z1, y); \
	PMAC((32*j+8) q, Z2, y); \
	PMAC((32*j+12) q, Z3, y); \
	PMAC((32*j+16) q, Z4, z); \
	PMAC((32*j+20) q, Z5, z); \
	PMAC((32*j+24) q, Z6, z); \
	PMAC((32*j+28) q, Z7, z); \
	VPSUBD.BCST   (8*j) ss, y, y; \
	VPSUBD.BCST   (8*j+4) ss, z, z; \
	VPMULLD       Z8, y, y; \
	VPMULLD       Z9, z, z; \
	VPADDD        z, y, y; \
	VCVTDQ2PS     y, y; \
	VMULPS.BCST   (4*j) dd, Z28, x; \
	VFMADD231PS   x, y, acc

// The activation sums are per 16: their token stride is twice R10.
#define Q6TOK4(j) \
	Q6TOK(j, (DI), (BX), (DX), Z16, Z20, Z21, Z10); \
	Q6TOK(j, (DI)(R8*1), (BX)(R10*1), (DX)(R10*2), Z17, Z22, Z23, Z11); \
	Q6TOK(j, (DI)(R8*2), (BX)(R10*2), (DX)(R10*4), Z18, Z24, Z25, Z12); \
	Q6TOK(j, (DI)(R9*1), (BX)(R11*1), (DX)(R11*2), Z19, Z26, Z27, Z13)

#define Q6TOK1P(j) PFJQ6_K(j); Q6TOK1(j)

#define Q6TOK1(j) \
	Q6TOK(j, (DI), (BX), (DX), Z16, Z20, Z21, Z10)

#define Q6KSB(TOKS) \
	VCVTPH2PS 256(R12), Z28; \
	Q6U(0, 0, 2048, NOSH, SLL4); TOKS(0); \
	Q6U(1, 512, 2048, NOSH, SLL2); TOKS(1); \
	Q6U(2, 0, 2048, SRL4, NOSH); TOKS(2); \
	Q6U(3, 512, 2048, SRL4, SRL2); TOKS(3); \
	Q6U(4, 1024, 2560, NOSH, SLL4); TOKS(4); \
	Q6U(5, 1536, 2560, NOSH, SLL2); TOKS(5); \
	Q6U(6, 1024, 2560, SRL4, NOSH); TOKS(6); \
	Q6U(7, 1536, 2560, SRL4, SRL2); TOKS(7)

// Q4_1, Q5_0, Q5_1: Q4_0's layout (Q5: with 64 bytes of fifth bits after
// the nibbles), scales d then (Q4_1, Q5_1) the minimums m; the AVX2
// kernels' operations: acc = fma(float(X), d*d_a, acc), acc = fma(S_a, c,
// acc) with c = -16*d or m.

// F16 and BF16: a group is the 16 rows' values column by column (32
// bytes per column), converted to float32 as they are loaded (16 rows in
// one register) and multiplied by each token's value of that column,
// broadcast (VFMADD231PS with an embedded broadcast). Every output keeps
// four partial sums, of the columns c with c%4 = 0..3, added as (p0+p1) +
// (p2+p3) at the end: the same operations for one token or four. The
// activations are float32 (Act.F): qs points at the first token's, qstride
// is the bytes between tokens, nb the column count / 4. Where the CPU has
// AVX512-BF16, BF16 goes through simd_pack_amd64.s's VDPBF16PS kernels
// instead (bfloat16 activations).

#define F16C(o, z) VCVTPH2PS (o)(SI), z
#define BF16C(o, z) VPMOVZXWD (o)(SI), z; VPSLLD $16, z, z
#define F16LOAD F16C(0, Z0); F16C(32, Z1); F16C(64, Z2); F16C(96, Z3)
#define BF16LOAD BF16C(0, Z0); BF16C(32, Z1); BF16C(64, Z2); BF16C(96, Z3)

// FTOK(q, a0, a1, a2, a3): a token's four columns at q into its partials.
#define FTOK(q, a0, a1, a2, a3) \
	VFMADD231PS.BCST 0 q, Z0, a0; \
	VFMADD231PS.BCST 4 q, Z1, a1; \
	VFMADD231PS.BCST 8 q, Z2, a2; \
	VFMADD231PS.BCST 12 q, Z3, a3

#define FSUM(a0, a1, a2, a3) \
	VADDPS a1, a0, a0; \
	VADDPS a3, a2, a2; \
	VADDPS a2, a0, a0

#define FZERO(a0, a1, a2, a3) \
	VPXORD a0, a0, a0; \
	VPXORD a1, a1, a1; \
	VPXORD a2, a2, a2; \
	VPXORD a3, a3, a3

// FGROUP(LOAD, astep, TOKS, ZEROS, SUMS, STORE): the group and column
// loops: LOAD takes 4 columns' weights (128 bytes), TOKS multiplies them
// with the tokens' activations, astep bytes per 4 columns.
#define FGROUP(LOAD, astep, TOKS, ZEROS, SUMS, STORE) \
group: \
	MOVQ qs+24(FP), DI; \
	MOVQ nb+8(FP), CX; \
	ZEROS; \
loop: \
	LOAD; \
	TOKS; \
	ADDQ $128, SI; \
	ADDQ $astep, DI; \
	DECQ CX; \
	JNZ  loop; \
	SUMS; \
	PKMASK(store); \
	STORE; \
	ADDQ $64, AX; \
	DECQ R15; \
	JNZ  group; \
	VZEROUPPER; \
	RET

#define FZERO4 \
	FZERO(Z16, Z17, Z18, Z19); \
	FZERO(Z20, Z21, Z22, Z23); \
	FZERO(Z24, Z25, Z26, Z27); \
	FZERO(Z28, Z29, Z30, Z31)

#define FTOK4 \
	FTOK((DI), Z16, Z17, Z18, Z19); \
	FTOK((DI)(R8*1), Z20, Z21, Z22, Z23); \
	FTOK((DI)(R8*2), Z24, Z25, Z26, Z27); \
	FTOK((DI)(R9*1), Z28, Z29, Z30, Z31)

#define FSUM4 \
	FSUM(Z16, Z17, Z18, Z19); \
	FSUM(Z20, Z21, Z22, Z23); \
	FSUM(Z24, Z25, Z26, Z27); \
	FSUM(Z28, Z29, Z30, Z31)

#define FSTORE4 \
	VMOVUPS Z16, K1, (AX); \
	VMOVUPS Z20, K1, (AX)(R13*1); \
	VMOVUPS Z24, K1, (AX)(R13*2); \
	VMOVUPS Z28, K1, (AX)(R14*1)

#define FZERO1 FZERO(Z16, Z17, Z18, Z19)
#define FTOK1 PREFETCHT0 (PKPFD)(SI); PREFETCHT0 (PKPFD+64)(SI); FTOK((DI), Z16, Z17, Z18, Z19)
#define FSUM1 FSUM(Z16, Z17, Z18, Z19)
#define FSTORE1 VMOVUPS Z16, K1, (AX)

// PKRUN4(BODY, X, Y, qbytes, sbytes, asub, abytes): the group and block
// loops of the four-token kernels; BODY(X, Y) does one block (qbytes of
// quants, sbytes of scales, asub activation blocks of 32, abytes of
// activation sums) for the four tokens into Z16-Z19. PKRUN1 is the same
// for one token (Z16), the weights prefetched (PF) a few blocks ahead.
#define PKRUN4(BODY, X, Y, qbytes, sbytes, asub, abytes) PKRUN4L(PKGROUP, PKNEXT, PKEND, BODY, X, Y, qbytes, sbytes, asub, abytes)

// PKRUN4L, PKRUN1L: PKRUN4 and PKRUN1 over the layout whose group start,
// next block and group end are GRP, NXT and END.
#define PKRUN4L(GRP, NXT, END, BODY, X, Y, qbytes, sbytes, asub, abytes) \
group: \
	GRP(qbytes); \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
loop: \
	BODY(X, Y); \
	NXT(qbytes, sbytes, asub, abytes, loop); \
	END; \
	PKMASK(store); \
	VMOVUPS Z16, K1, (AX); \
	VMOVUPS Z17, K1, (AX)(R13*1); \
	VMOVUPS Z18, K1, (AX)(R13*2); \
	VMOVUPS Z19, K1, (AX)(R14*1); \
	ADDQ    $64, AX; \
	DECQ    R15; \
	JNZ     group; \
	VZEROUPPER; \
	RET

#define PKRUN1(BODY, X, Y, PF, qbytes, sbytes, asub, abytes) PKRUN1L(PKGROUP, PKNEXT, PKEND, BODY, X, Y, PF, qbytes, sbytes, asub, abytes)

#define PKRUN1L(GRP, NXT, END, BODY, X, Y, PF, qbytes, sbytes, asub, abytes) \
group: \
	GRP(qbytes); \
	VPXORD Z16, Z16, Z16; \
loop: \
	PF; \
	BODY(X, Y); \
	NXT(qbytes, sbytes, asub, abytes, loop); \
	END; \
	PKMASK(store); \
	VMOVUPS Z16, K1, (AX); \
	ADDQ    $64, AX; \
	DECQ    R15; \
	JNZ     group; \
	VZEROUPPER; \
	RET

// Blocks of 32 (W loads a block, TOK multiplies it with a token's) and
// super-blocks of 256 (SB(TOKS) does one, 8 activation blocks).
#define QBODY4(W, TOK) \
	W; \
	TOK((DI), (BX), (DX), Z16, Z20, Z21); \
	TOK((DI)(R8*1), (BX)(R10*1), (DX)(R10*1), Z17, Z22, Z23); \
	TOK((DI)(R8*2), (BX)(R10*2), (DX)(R10*2), Z18, Z24, Z25); \
	TOK((DI)(R9*1), (BX)(R11*1), (DX)(R11*1), Z19, Z26, Z27)

#define QBODY1(W, TOK) W; TOK((DI), (BX), (DX), Z16, Z20, Z21)
#define KBODY(SB, TOKS) SB(TOKS)

#define PKGEMM4(W, TOK, qbytes, sbytes) PKRUN4(QBODY4, W, TOK, qbytes, sbytes, 1, 4)
#define PKGEMM1(W, TOK, PF, qbytes, sbytes) PKRUN1(QBODY1, W, TOK, PF, qbytes, sbytes, 1, 4)
#define PKGEMMK4(SB, TOKS, qbytes, sbytes, abytes) PKRUN4(KBODY, SB, TOKS, qbytes, sbytes, 8, abytes)
#define PKGEMMK1(SB, TOKS, PF, qbytes, sbytes, abytes) PKRUN1(KBODY, SB, TOKS, PF, qbytes, sbytes, 8, abytes)

// The kernels of each type, for the TEXT blocks of the VNNI and BW files:
// GEMM4<type> four tokens, GEMM1<type> one.
#define GEMM4Q4_0 PKARGS; Q4CONST; PKGEMM4(Q4W, Q4TOK, 256, 32)
#define GEMM1Q4_0 PKARGS; Q4CONST; PKGEMM1(Q4W, Q4TOK1, PFQ4_0, 256, 32)
#define GEMM4Q4_1 PKARGS; Q4CONST; PKGEMM4(Q41W, Q4TOK, 256, 64)
#define GEMM1Q4_1 PKARGS; Q4CONST; PKGEMM1(Q41W, Q4TOK1, PFQ4_0, 256, 64)
#define GEMM4Q5_0 PKARGS; Q5CONST; PKGEMM4(Q50W, Q4TOK, 320, 32)
#define GEMM1Q5_0 PKARGS; Q5CONST; PKGEMM1(Q50W, Q4TOK1, PFQ5, 320, 32)
#define GEMM4Q5_1 PKARGS; Q5CONST; PKGEMM4(Q51W, Q4TOK, 320, 64)
#define GEMM1Q5_1 PKARGS; Q5CONST; PKGEMM1(Q51W, Q4TOK1, PFQ5, 320, 64)
#define GEMM4Q8_0 PKARGS; PKGEMM4(Q8W, Q8TOK, 512, 32)
#define GEMM1Q8_0 PKARGS; PKGEMM1(Q8W, Q8TOK1, PFQ8_0, 512, 32)
#define GEMM4Q4_K PKARGS; KCONST; PKGEMMK4(Q4KSB, KTOK4, 2048, 320, 32)
#define GEMM1Q4_K PKARGS; KCONST; PKGEMMK1(Q4KSB, KTOK1Q4, PKNOPF, 2048, 320, 32)
#define GEMM4Q5_K PKARGS; KCONST5; PKGEMMK4(Q5KSB, KTOK4, 2560, 320, 32)
#define GEMM1Q5_K PKARGS; KCONST5; PKGEMMK1(Q5KSB, KTOK1Q5, PKNOPF, 2560, 320, 32)
#define GEMM4Q6_K PKARGS; KCONST6; PKGEMMK4(Q6KSB, Q6TOK4, 3072, 288, 64)
#define GEMM1Q6_K PKARGS; KCONST6; PKGEMMK1(Q6KSB, Q6TOK1P, PKNOPF, 3072, 288, 64)
#define GEMM4F16 PKARGS; FGROUP(F16LOAD, 16, FTOK4, FZERO4, FSUM4, FSTORE4)
#define GEMM1F16 PKARGS; FGROUP(F16LOAD, 16, FTOK1, FZERO1, FSUM1, FSTORE1)
#define GEMM4BF16 PKARGS; FGROUP(BF16LOAD, 16, FTOK4, FZERO4, FSUM4, FSTORE4)
#define GEMM1BF16 PKARGS; FGROUP(BF16LOAD, 16, FTOK1, FZERO1, FSUM1, FSTORE1)

