// The skeleton of the 256-bit kernels over the AVX-512 kernels' packed
// layout, shared by the AVX-VNNI file (simd_packy_amd64.s, VPDPBUSD) and
// the avx2 path's (simd_packya_amd64.s, VPMADDUBSW and VPMADDWD by ones):
// each defines, before including this file, the products of a chunk with
// the tokens' activation bytes (YDA4, YDE1, YDO1: see there) and Y15SET,
// Y15's constant.

// The argument, group and block macros (PKGP, PKGROUP, PKNEXT), the
// prefetches and the word shifts are the AVX-512 kernels'.
#include "simd_pack_amd64.h"
#include "simd_lanes_amd64.h"

// AVX-VNNI kernels (avxvnni path: CPUs with the VEX form of VPDPBUSD but
// no AVX-512, e.g. Alder Lake and later clients, Sierra Forest) over the
// AVX-512 kernels' packed layout (pack.go). A 64-byte chunk (16 rows × 4
// bytes) is two 256-bit halves of 8 rows: a group is computed as its
// half 0 (rows 0-7) and then its half 1 (rows 8-15), each with the
// AVX-512 kernels' per-lane operations in the same order, so the results
// are the avx512 path's bits (and so the AVX2 kernels' where packExact
// says so). VEX has 16 vector registers and no embedded broadcast: a
// block is walked chunk by chunk, each chunk unpacked once into Y0 and
// multiplied with every token's 4 activation bytes (broadcast into Y1).
//
// Registers: the AVX-512 kernels' general ones; Y0 a chunk, Y1 the
// activation bytes, Y2/Y3 the rows' scales (Z8/Z9 there), Y4-Y7 the four
// tokens' integer sums, Y8-Y11 their outputs, Y12 and Y13 temporaries,
// Y14 = 0x0f bytes, Y15 = 0x10 bytes (the other constants in ycon<>).
// Q6_K has no avxvnni kernel (its one-token kernel decoded at half the
// speed of the kernel over the file's rows there); the avx2 path's
// (simd_packya_amd64.s) reads the interleaved layout (YRUNL).

// ycon<>: 0x0f bytes (0), 0x10 bytes (32), -8.0 (64) and -16.0 (96) in
// every lane.
DATA ycon<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ycon<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ycon<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ycon<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ycon<>+32(SB)/8, $0x1010101010101010
DATA ycon<>+40(SB)/8, $0x1010101010101010
DATA ycon<>+48(SB)/8, $0x1010101010101010
DATA ycon<>+56(SB)/8, $0x1010101010101010
DATA ycon<>+64(SB)/8, $0xc1000000c1000000
DATA ycon<>+72(SB)/8, $0xc1000000c1000000
DATA ycon<>+80(SB)/8, $0xc1000000c1000000
DATA ycon<>+88(SB)/8, $0xc1000000c1000000
DATA ycon<>+96(SB)/8, $0xc1800000c1800000
DATA ycon<>+104(SB)/8, $0xc1800000c1800000
DATA ycon<>+112(SB)/8, $0xc1800000c1800000
DATA ycon<>+120(SB)/8, $0xc1800000c1800000
GLOBL ycon<>(SB), RODATA|NOPTR, $128

#define YZ4 VPXOR Y4, Y4, Y4; VPXOR Y5, Y5, Y5; VPXOR Y6, Y6, Y6; VPXOR Y7, Y7, Y7
#define YZ1 VPXOR Y4, Y4, Y4; VPXOR Y5, Y5, Y5
#define YFIN4
#define YFIN1 VPADDD Y5, Y4, Y4

// YT4(F, j) runs a token's float step F on the four tokens (scales at BX,
// sums at DX, integer sums Y4-Y7, outputs Y8-Y11), YT1 on one.
#define YT4(F, j) \
	F(j, (BX), (DX), Y4, Y8); \
	F(j, (BX)(R10*1), (DX)(R10*1), Y5, Y9); \
	F(j, (BX)(R10*2), (DX)(R10*2), Y6, Y10); \
	F(j, (BX)(R11*1), (DX)(R11*1), Y7, Y11)

#define YT1(F, j) F(j, (BX), (DX), Y4, Y8)

// The float steps (the AVX-512 kernels' Q8TOKW, Q4TOKW and KTOKW after
// the integer sum): Y12 is their temporary.
#define YQ8F(j, dd, ss, y, acc) \
	VPBROADCASTD ss, Y12; \
	VPSUBD       Y12, y, y; \
	VCVTDQ2PS    y, y; \
	VBROADCASTSS dd, Y12; \
	VMULPS       Y2, Y12, Y12; \
	VFMADD231PS  Y12, y, acc

#define YQ4F(j, dd, ss, y, acc) \
	VCVTDQ2PS    y, y; \
	VBROADCASTSS dd, Y12; \
	VMULPS       Y2, Y12, Y12; \
	VFMADD231PS  Y12, y, acc; \
	VBROADCASTSS ss, Y12; \
	VFMADD231PS  Y12, Y3, acc

#define YKF(j, dd, ss, y, acc) YKFM(j, dd, ss, y, acc, Y2)

// YKFM is YKF with the rows' factor in m (Y2 there); YKFS is its first
// half, the scaled sum without the minimum term.
#define YKFM(j, dd, ss, y, acc, m) \
	YKFS(j, dd, y, acc, m); \
	VBROADCASTSS  (4*j) ss, Y12; \
	VFNMADD231PS  Y12, Y3, acc

#define YKFS(j, dd, y, acc, m) \
	VCVTDQ2PS     y, y; \
	VBROADCASTSS  (4*j) dd, Y12; \
	VMULPS        m, Y12, Y12; \
	VFMADD231PS   Y12, y, acc

// Unpacking chunk k of piece c of half h into Y0: YKL the low nibbles,
// YKH the high ones (Q4_0-layout blocks are piece 0's first 4 chunks).
// YF5(o, SH) merges the fifth bits at o(SI), moved by SH to bit 4; YNO5
// is the 4-bit types' nothing.
#define YKL(c, k, h) VPAND (512*c+64*k+32*h)(SI), Y14, Y0

#define YKH(c, k, h) \
	VMOVDQU (512*c+64*k+32*h)(SI), Y0; \
	VPSRLW  $4, Y0, Y0; \
	VPAND   Y14, Y0, Y0

#define YF5(o, SH) \
	VMOVDQU o(SI), Y13; \
	SH(Y13); \
	VPAND   Y15, Y13, Y13; \
	VPOR    Y13, Y0, Y0

#define YNO5(o, SH)

// Blocks of 32 of half h: Q8_0's, and Q4_0's layout with fifth bits F
// (Q4_1, Q5_0, Q5_1); DE and DO take the even and odd chunks.
#define YQ8B(h, F, DE, DO) \
	VMOVDQU (32*h)(SI), Y0; DE(0); \
	VMOVDQU (64+32*h)(SI), Y0; DO(4); \
	VMOVDQU (128+32*h)(SI), Y0; DE(8); \
	VMOVDQU (192+32*h)(SI), Y0; DO(12); \
	VMOVDQU (256+32*h)(SI), Y0; DE(16); \
	VMOVDQU (320+32*h)(SI), Y0; DO(20); \
	VMOVDQU (384+32*h)(SI), Y0; DE(24); \
	VMOVDQU (448+32*h)(SI), Y0; DO(28)

#define YQ4B(h, F, DE, DO) \
	YKL(0, 0, h); F((256+32*h), SLL4); DE(0); \
	YKL(0, 1, h); F((256+32*h), SLL3); DO(4); \
	YKL(0, 2, h); F((256+32*h), SLL2); DE(8); \
	YKL(0, 3, h); F((256+32*h), SLL1); DO(12); \
	YKH(0, 0, h); F((256+32*h), NOSH); DE(16); \
	YKH(0, 1, h); F((256+32*h), SRL1); DO(20); \
	YKH(0, 2, h); F((256+32*h), SRL2); DE(24); \
	YKH(0, 3, h); F((256+32*h), SRL3); DO(28)

// The rows' scales of half h: Y2 = d, Y3 = -8*d, -16*d or the minimums.
#define YSC8(h) VCVTPH2PS (16*h)(R12), Y2
#define YOFF8(h) YSC8(h); VMULPS ycon<>+64(SB), Y2, Y3
#define YOFF16(h) YSC8(h); VMULPS ycon<>+96(SB), Y2, Y3
#define YMIN(h) YSC8(h); VCVTPH2PS (32+16*h)(R12), Y3

// A block of 32 of half h against four tokens (YQ4) or one (YQ1): scales
// SC, chunks B with fifth bits F, float step TF.
#define YQ4(h, SC, B, F, TF) SC(h); YZ4; B(h, F, YDA4, YDA4); YT4(TF, 0)
#define YQ1(h, SC, B, F, TF) SC(h); YZ1; B(h, F, YDE1, YDO1); YFIN1; YT1(TF, 0)

// Q4_K and Q5_K: sub-block j (piece c's nibbles by U, fifth bits by F
// shifted by SH) of half h. YKSC: Y2 = d*sc_j, Y3 = dmin*m_j.
#define YKSC(j, h) \
	VPMOVZXBD (16*j+8*h)(R12), Y2; \
	VPMOVZXBD (128+16*j+8*h)(R12), Y3; \
	VCVTDQ2PS Y2, Y2; \
	VCVTDQ2PS Y3, Y3; \
	VCVTPH2PS (256+16*h)(R12), Y12; \
	VMULPS    Y12, Y2, Y2; \
	VCVTPH2PS (288+16*h)(R12), Y12; \
	VMULPS    Y12, Y3, Y3

#define YKSUB(j, c, U, F, SH, h, Z, DE, DO, FIN, T) \
	YKSC(j, h); \
	Z; \
	U(c, 0, h); F((2048+32*h), SH); DE((32*j)); \
	U(c, 1, h); F((2048+64+32*h), SH); DO((32*j+4)); \
	U(c, 2, h); F((2048+128+32*h), SH); DE((32*j+8)); \
	U(c, 3, h); F((2048+192+32*h), SH); DO((32*j+12)); \
	U(c, 4, h); F((2048+256+32*h), SH); DE((32*j+16)); \
	U(c, 5, h); F((2048+320+32*h), SH); DO((32*j+20)); \
	U(c, 6, h); F((2048+384+32*h), SH); DE((32*j+24)); \
	U(c, 7, h); F((2048+448+32*h), SH); DO((32*j+28)); \
	FIN; \
	T(YKF, j)

#define YKSB(h, F, Z, DE, DO, FIN, T) \
	YKSUB(0, 0, YKL, F, SLL4, h, Z, DE, DO, FIN, T); \
	YKSUB(1, 0, YKH, F, SLL3, h, Z, DE, DO, FIN, T); \
	YKSUB(2, 1, YKL, F, SLL2, h, Z, DE, DO, FIN, T); \
	YKSUB(3, 1, YKH, F, SLL1, h, Z, DE, DO, FIN, T); \
	YKSUB(4, 2, YKL, F, NOSH, h, Z, DE, DO, FIN, T); \
	YKSUB(5, 2, YKH, F, SRL1, h, Z, DE, DO, FIN, T); \
	YKSUB(6, 3, YKL, F, SRL2, h, Z, DE, DO, FIN, T); \
	YKSUB(7, 3, YKH, F, SRL3, h, Z, DE, DO, FIN, T)

// The bodies (one block or super-block of half h) of each type and token
// count, for YRUN.
#define Y4Q8_0(h) YQ4(h, YSC8, YQ8B, YNO5, YQ8F)
#define Y1Q8_0(h) YQ1(h, YSC8, YQ8B, YNO5, YQ8F)
#define Y4Q4_0(h) YQ4(h, YOFF8, YQ4B, YNO5, YQ4F)
#define Y1Q4_0(h) YQ1(h, YOFF8, YQ4B, YNO5, YQ4F)
#define Y4Q4_1(h) YQ4(h, YMIN, YQ4B, YNO5, YQ4F)
#define Y1Q4_1(h) YQ1(h, YMIN, YQ4B, YNO5, YQ4F)
#define Y4Q5_0(h) YQ4(h, YOFF16, YQ4B, YF5, YQ4F)
#define Y1Q5_0(h) YQ1(h, YOFF16, YQ4B, YF5, YQ4F)
#define Y4Q5_1(h) YQ4(h, YMIN, YQ4B, YF5, YQ4F)
#define Y1Q5_1(h) YQ1(h, YMIN, YQ4B, YF5, YQ4F)
#define Y4Q4_K(h) YKSB(h, YNO5, YZ4, YDA4, YDA4, YFIN4, YT4)
#define Y1Q4_K(h) YKSB(h, YNO5, YZ1, YDE1, YDO1, YFIN1, YT1)
#define Y4Q5_K(h) YKSB(h, YF5, YZ4, YDA4, YDA4, YFIN4, YT4)
#define Y1Q5_K(h) YKSB(h, YF5, YZ1, YDE1, YDO1, YFIN1, YT1)

// YHALF: half h of a group (its outputs zeroed, the block loop with the
// prefetch PF); YSTORE: its outputs stored (ST) under the rows' mask,
// every row but on the last group (mask's bits 8h..8h+7 there).
#define YHALF(h, G, N, BODY, PF, qbytes, sbytes, asub, abytes, loop) \
	G(qbytes); \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11; \
loop: \
	PF; \
	BODY(h); \
	N(qbytes, sbytes, asub, abytes, loop)

#define YSTORE(h, ST, full) \
	VPCMPEQD     Y0, Y0, Y0; \
	CMPQ         R15, $1; \
	JNE          full; \
	MOVQ         mask+80(FP), CX; \
	SHRQ         $(8*h), CX; \
	LANEMASK(CX, X0, Y0); \
full: \
	ST(h)

#define YST4(h) \
	VMASKMOVPS Y8, Y0, (32*h)(AX); \
	VMASKMOVPS Y9, Y0, (32*h)(AX)(R13*1); \
	VMASKMOVPS Y10, Y0, (32*h)(AX)(R13*2); \
	VMASKMOVPS Y11, Y0, (32*h)(AX)(R14*1)

#define YST1(h) VMASKMOVPS Y8, Y0, (32*h)(AX)

#define NOPF

// YRUN(BODY, ST, PF0, PF1, SET, qbytes, sbytes, asub, abytes): the kernel
// (PKRUN4/PKRUN1's arguments): per group half 0, then half 1 (the
// weights again, from the cache), PF0 and PF1 the prefetches of each
// pass and SET what they need. The four-token kernels prefetch nothing;
// the one-token ones fetch a few blocks ahead in half 0 and, in half 1,
// the next group's block (R14 = the bytes of a group), so that the
// memory is not idle while half 1 runs.
#define YRUN(BODY, ST, PF0, PF1, SET, qbytes, sbytes, asub, abytes) \
	YRUNL(PKGROUP, PKNEXT, qbytes, PKEND, BODY, ST, PF0, PF1, SET, qbytes, sbytes, asub, abytes)

// YRUNL is YRUN over a layout: G, N and END its group, next-block and
// group-end steps (PKGROUP, PKNEXT, PKEND or the interleaved layout's
// PKGROUPI, PKNEXTI, PKENDI), a block's bytes in the stream that half 1
// rewinds.
#define YRUNL(G, N, stride, END, BODY, ST, PF0, PF1, SET, qbytes, sbytes, asub, abytes) \
	PKGP; \
	SET(qbytes, sbytes); \
	VMOVDQU ycon<>+0(SB), Y14; \
	Y15SET; \
group: \
	YHALF(0, G, N, BODY, PF0, qbytes, sbytes, asub, abytes, loop0); \
	YSTORE(0, ST, full0); \
	MOVQ  nb+8(FP), CX; \
	IMULQ $stride, CX; \
	SUBQ  CX, SI; \
	YHALF(1, G, N, BODY, PF1, qbytes, sbytes, asub, abytes, loop1); \
	YSTORE(1, ST, full1); \
	YGROUPS(END)

// YGROUPS(END): the next group (END moves SI to it) until none is left.
#define YGROUPS(END) \
	END; \
	ADDQ $64, AX; \
	DECQ R15; \
	JNZ  group; \
	VZEROUPPER; \
	RET

#define NOSET(qbytes, sbytes)
#define GSET(qbytes, sbytes) MOVQ nb+8(FP), R14; IMULQ $(qbytes+sbytes), R14

// The next group's lines o, o+64, ... of the block at SI.
#define PN(o) PREFETCHT0 (o)(SI)(R14*1)
#define PN4(o) PN(o); PN(o+64); PN(o+128); PN(o+192)
#define PNQ8 PN4(0); PN4(256)
#define PNQ4 PN4(0)
#define PNQ5 PN4(0); PN(256)
#define PNQ4_K PN4(0); PN4(256); PN4(512); PN4(768); PN4(1024); PN4(1280); PN4(1536); PN4(1792)
#define PNQ5_K PNQ4_K; PN4(2048); PN4(2304)

