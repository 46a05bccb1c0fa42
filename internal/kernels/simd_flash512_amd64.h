// Macros of the AVX-512 flash kernels (simd_flash512_amd64.s,
// simd_accumkv512_amd64.s).

// FMA4x4(b0, b1, b2, b3): Z(4i+c) += b_i × Z(16+c), i, c < 4: four rows
// (broadcasts b0-b3) by four vectors Z16-Z19.
#define FMA4x4(b0, b1, b2, b3) \
	VFMADD231PS Z16, b0, Z0 \
	VFMADD231PS Z17, b0, Z1 \
	VFMADD231PS Z18, b0, Z2 \
	VFMADD231PS Z19, b0, Z3 \
	VFMADD231PS Z16, b1, Z4 \
	VFMADD231PS Z17, b1, Z5 \
	VFMADD231PS Z18, b1, Z6 \
	VFMADD231PS Z19, b1, Z7 \
	VFMADD231PS Z16, b2, Z8 \
	VFMADD231PS Z17, b2, Z9 \
	VFMADD231PS Z18, b2, Z10 \
	VFMADD231PS Z19, b2, Z11 \
	VFMADD231PS Z16, b3, Z12 \
	VFMADD231PS Z17, b3, Z13 \
	VFMADD231PS Z18, b3, Z14 \
	VFMADD231PS Z19, b3, Z15

// LOAD16x4 / STORE16x4: the 4 rows × 64 columns of o at R10 (rows R8
// bytes apart, R9 = 3*R8) into / from Z0-Z15.
#define LOAD16x4 \
	VMOVUPS 0(R10), Z0 \
	VMOVUPS 64(R10), Z1 \
	VMOVUPS 128(R10), Z2 \
	VMOVUPS 192(R10), Z3 \
	VMOVUPS 0(R10)(R8*1), Z4 \
	VMOVUPS 64(R10)(R8*1), Z5 \
	VMOVUPS 128(R10)(R8*1), Z6 \
	VMOVUPS 192(R10)(R8*1), Z7 \
	VMOVUPS 0(R10)(R8*2), Z8 \
	VMOVUPS 64(R10)(R8*2), Z9 \
	VMOVUPS 128(R10)(R8*2), Z10 \
	VMOVUPS 192(R10)(R8*2), Z11 \
	VMOVUPS 0(R10)(R9*1), Z12 \
	VMOVUPS 64(R10)(R9*1), Z13 \
	VMOVUPS 128(R10)(R9*1), Z14 \
	VMOVUPS 192(R10)(R9*1), Z15

#define STORE16x4 \
	VMOVUPS Z0, 0(R10) \
	VMOVUPS Z1, 64(R10) \
	VMOVUPS Z2, 128(R10) \
	VMOVUPS Z3, 192(R10) \
	VMOVUPS Z4, 0(R10)(R8*1) \
	VMOVUPS Z5, 64(R10)(R8*1) \
	VMOVUPS Z6, 128(R10)(R8*1) \
	VMOVUPS Z7, 192(R10)(R8*1) \
	VMOVUPS Z8, 0(R10)(R8*2) \
	VMOVUPS Z9, 64(R10)(R8*2) \
	VMOVUPS Z10, 128(R10)(R8*2) \
	VMOVUPS Z11, 192(R10)(R8*2) \
	VMOVUPS Z12, 0(R10)(R9*1) \
	VMOVUPS Z13, 64(R10)(R9*1) \
	VMOVUPS Z14, 128(R10)(R9*1) \
	VMOVUPS Z15, 192(R10)(R9*1)

// DECF16: Z16-Z19 = the 64 halves at AX as float32.
#define DECF16 \
	VCVTPH2PS 0(AX), Z16 \
	VCVTPH2PS 32(AX), Z17 \
	VCVTPH2PS 64(AX), Z18 \
	VCVTPH2PS 96(AX), Z19

// DECQ8: Z16-Z19 = the two Q8_0 blocks at AX (34 bytes each: an f16
// scale, 32 int8s) as float32: scale × value, one rounding, as the
// decoder.
#define DECQ8 \
	VPBROADCASTW (AX), Y20 \
	VCVTPH2PS    Y20, Z20 \
	VPBROADCASTW 34(AX), Y21 \
	VCVTPH2PS    Y21, Z21 \
	VPMOVSXBD    2(AX), Z16 \
	VPMOVSXBD    18(AX), Z17 \
	VPMOVSXBD    36(AX), Z18 \
	VPMOVSXBD    52(AX), Z19 \
	VCVTDQ2PS    Z16, Z16 \
	VCVTDQ2PS    Z17, Z17 \
	VCVTDQ2PS    Z18, Z18 \
	VCVTDQ2PS    Z19, Z19 \
	VMULPS       Z20, Z16, Z16 \
	VMULPS       Z20, Z17, Z17 \
	VMULPS       Z21, Z18, Z18 \
	VMULPS       Z21, Z19, Z19

// ACCROWS(DEC, loop): Z0-Z15 (four rows of o by 64 columns, as LOAD16x4
// lays them out) += the weights at R15 (rows R13 bytes apart, R14 =
// 3*R13) times R11 rows of values that DEC decodes from AX (rows R12
// bytes apart) into Z16-Z19: one fused multiply-add per term, rows in
// order.
#define ACCROWS(DEC, loop) \
loop: \
	DEC \
	VBROADCASTSS (R15), Z20 \
	VBROADCASTSS (R15)(R13*1), Z21 \
	VBROADCASTSS (R15)(R13*2), Z22 \
	VBROADCASTSS (R15)(R14*1), Z23 \
	FMA4x4(Z20, Z21, Z22, Z23) \
	ADDQ $4, R15 \
	ADDQ R12, AX \
	DECQ R11 \
	JNZ  loop
