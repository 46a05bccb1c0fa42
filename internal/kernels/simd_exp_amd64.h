// exp(x) on 8 floats (simd_elem_amd64.s defines the constants, ·expc):
// Cephes' expf: n = round(x·log2 e), r = x - n·ln 2 in two parts (C1 has
// few bits, so n·C1 is exact), e^r by a degree-7 polynomial, times 2^n
// built in the exponent bits: within 2 ulp of exp. Below LO (where 2^n
// would not be normal) the result is 0, above HI +Inf.

// Each constant repeated 8 times, so that it can be a 256-bit memory operand.
#define LOG2E ·expc+0(SB)
#define C1 ·expc+32(SB)
#define C2 ·expc+64(SB)
#define P0 ·expc+96(SB)
#define P1 ·expc+128(SB)
#define P2 ·expc+160(SB)
#define P3 ·expc+192(SB)
#define P4 ·expc+224(SB)
#define P5 ·expc+256(SB)
#define ONE ·expc+288(SB)
#define HI ·expc+320(SB)
#define LO ·expc+352(SB)
#define INF ·expc+384(SB)
#define BIAS ·expc+416(SB)

// EXPK(x, r, k): r = x clamped to [LO, HI], k = round(r·log2 e).
#define EXPK(x, r, k) \
	VMINPS   HI, x, r; \
	VMAXPS   LO, r, r; \
	VMULPS   LOG2E, r, k; \
	VROUNDPS $0, k, k

// EXPEND(x, k, y): y = y·2^k, then 0 below LO, +Inf above HI, x if NaN.
#define EXPEND(x, k, y) \
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

// EXP(x, r, k, y): y = exp(x) for the 8 floats of x (kept); r, k are
// clobbered. NaN stays NaN. The reduction and the polynomial are fused
// multiply-adds.
#define EXP(x, r, k, y) \
	EXPK(x, r, k); \
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
	EXPEND(x, k, y)

// EXPU(x, r, k, y) is EXP with every product rounded before its sum:
// expGo's bits (elem.go; the Go compiler does not fuse on amd64), which
// ExpSum's oracle gives.
#define EXPU(x, r, k, y) \
	EXPK(x, r, k); \
	VMULPS  C1, k, y; \
	VSUBPS  y, r, r; \
	VMULPS  C2, k, y; \
	VSUBPS  y, r, r; \
	VMOVUPS P0, y; \
	EXPUP(P1, r, y); \
	EXPUP(P2, r, y); \
	EXPUP(P3, r, y); \
	EXPUP(P4, r, y); \
	EXPUP(P5, r, y); \
	VMULPS  r, y, y; \
	EXPUP(r, r, y); \
	VADDPS  ONE, y, y; \
	EXPEND(x, k, y)

// EXPUP(c, r, y): y = y·r + c, rounded twice.
#define EXPUP(c, r, y) \
	VMULPS r, y, y; \
	VADDPS c, y, y
