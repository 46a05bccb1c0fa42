// The tile product's steps shared by the neon flash kernels
// (simd_flash_arm64.s) and FlashAccumKV's (simd_accumkv_arm64.s): C's four
// rows of 16 in V0-V15, B's 16 values in V16-V19, a broadcast A value in
// V20; R0 = C, R1 = its row stride in bytes, R9 the column in bytes, R16
// scratch.

// NFMA(a, c0, c1, c2, c3): c0-c3 += the A value at a (moved on by 4)
// times V16-V19.
#define NFMA(a, c0, c1, c2, c3) \
	VLD1R.P 4(a), [V20.S4];     \
	VFMLA   V16.S4, V20.S4, c0.S4; \
	VFMLA   V17.S4, V20.S4, c1.S4; \
	VFMLA   V18.S4, V20.S4, c2.S4; \
	VFMLA   V19.S4, V20.S4, c3.S4

// NFMA4: NFMA for the four rows of A at R11-R14 into V0-V15.
#define NFMA4 \
	NFMA(R11, V0, V1, V2, V3);   \
	NFMA(R12, V4, V5, V6, V7);   \
	NFMA(R13, V8, V9, V10, V11); \
	NFMA(R14, V12, V13, V14, V15)

// A row's 16 C values at p from or to c0-c3.
#define NLOAD(p, c0, c1, c2, c3) VLD1 (p), [c0.S4, c1.S4, c2.S4, c3.S4]
#define NSTORE(p, c0, c1, c2, c3) VST1 [c0.S4, c1.S4, c2.S4, c3.S4], (p)

// NROWS4(OP): OP on the four rows' C values at column R9 (R16 clobbered).
#define NROWS4(OP) \
	ADD R9, R0, R16;              \
	OP(R16, V0, V1, V2, V3);      \
	ADD R1, R16, R16;             \
	OP(R16, V4, V5, V6, V7);      \
	ADD R1, R16, R16;             \
	OP(R16, V8, V9, V10, V11);    \
	ADD R1, R16, R16;             \
	OP(R16, V12, V13, V14, V15)
