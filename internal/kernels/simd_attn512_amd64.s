//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 attention: the AVX2 kernels' operations in 512-bit registers,
// so the same bits (the AVX2 kernels stay the oracle, and a span may mix
// the two: MatMul-style tails go to AVX2).
//
// dots: a position's 16-value chunk goes into one accumulator whose lanes
// 0-7 and 8-15 are the AVX2 kernel's two; its sum is reduced as there
// (the accumulator's halves added, then the halves of that, then the pairs,
// then the two pair sums), but for 16 positions at once: a transposition
// tree (VSHUFF64X2, VSHUFF32X4, VSHUFPS) whose every add pairs the values
// the AVX2 reduction pairs, ending with the 16 sums in one register.

// KVD32(a, acc), KVD16: acc += the 16 cached values at a times the query
// chunk in Z16 (F16: converted first, exactly).
#define KVD32(a, acc) VFMADD231PS a, Z16, acc
#define KVD16(a, acc) VCVTPH2PS a, Z17; VFMADD231PS Z17, Z16, acc

// ROWS4(KV, a0, a1, a2, a3): four positions (DI, R8 bytes apart) into
// their accumulators; DI moves on four positions.
#define ROWS4(KV, a0, a1, a2, a3) \
	KV((DI), a0); \
	KV((DI)(R8*1), a1); \
	KV((DI)(R8*2), a2); \
	KV((DI)(R9*1), a3); \
	LEAQ (DI)(R8*4), DI

// PAIR(a, b): a = [a.lo256 + a.hi256, b.lo256 + b.hi256].
#define PAIR(a, b) \
	VSHUFF64X2 $0x44, b, a, Z18; \
	VSHUFF64X2 $0xee, b, a, Z19; \
	VADDPS     Z19, Z18, a

// QUAD(a, b): from two PAIR results, a = the four positions' 4-lane sums
// (each 128-bit lane: lo128 + hi128 of one position's 8).
#define QUAD(a, b) \
	VSHUFF32X4 $0x88, b, a, Z18; \
	VSHUFF32X4 $0xdd, b, a, Z19; \
	VADDPS     Z19, Z18, a

// HPAIR(a, b): per 128-bit lane, a = [a0+a1, a2+a3, b0+b1, b2+b3]: the
// two horizontal adds' pairs.
#define HPAIR(a, b) \
	VSHUFPS $0x88, b, a, Z18; \
	VSHUFPS $0xdd, b, a, Z19; \
	VADDPS  Z19, Z18, a

// DOTS512(KV, SH, E16) is the body of
// func dotsXAVX512(q *float32, k *T, hd, stride, cnt int, scale float32, out *float32):
// out[j] = (q · k[j*stride:][:hd]) * scale for j < cnt; hd and cnt are
// multiples of 16 (E16: bytes of 16 cached values). Z0-Z15: the 16
// positions' accumulators, Z16 the query chunk, Z30 the final
// permutation, Z31 the scale.
#define DOTS512(KV, SH, E16) \
	MOVQ         k+8(FP), DX; \
	MOVQ         stride+24(FP), R8; \
	SHLQ         $SH, R8; \
	LEAQ         (R8)(R8*2), R9; \
	MOVQ         cnt+32(FP), BX; \
	SHRQ         $4, BX; \
	JZ           end; \
	VBROADCASTSS scale+40(FP), Z31; \
	VMOVDQU32    dotsperm<>(SB), Z30; \
	MOVQ         out+48(FP), AX; \
group: \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	MOVQ   q+0(FP), SI; \
	MOVQ   DX, R10; \
	MOVQ   hd+16(FP), CX; \
	SHRQ   $4, CX; \
chunk: \
	VMOVUPS (SI), Z16; \
	MOVQ    R10, DI; \
	ROWS4(KV, Z0, Z1, Z2, Z3); \
	ROWS4(KV, Z4, Z5, Z6, Z7); \
	ROWS4(KV, Z8, Z9, Z10, Z11); \
	ROWS4(KV, Z12, Z13, Z14, Z15); \
	ADDQ    $64, SI; \
	ADDQ    $E16, R10; \
	DECQ    CX; \
	JNZ     chunk; \
	PAIR(Z0, Z1); \
	PAIR(Z2, Z3); \
	PAIR(Z4, Z5); \
	PAIR(Z6, Z7); \
	PAIR(Z8, Z9); \
	PAIR(Z10, Z11); \
	PAIR(Z12, Z13); \
	PAIR(Z14, Z15); \
	QUAD(Z0, Z2); \
	QUAD(Z4, Z6); \
	QUAD(Z8, Z10); \
	QUAD(Z12, Z14); \
	HPAIR(Z0, Z4); \
	HPAIR(Z8, Z12); \
	HPAIR(Z0, Z8); \
	VPERMPS Z0, Z30, Z0; \
	VMULPS  Z31, Z0, Z0; \
	VMOVUPS Z0, (AX); \
	ADDQ    $64, AX; \
	LEAQ    (DX)(R8*8), DX; \
	LEAQ    (DX)(R8*8), DX; \
	DECQ    BX; \
	JNZ     group; \
end: \
	VZEROUPPER; \
	RET

// After the tree, position p's sum is in lane 4*(p%4) + p/4.
DATA dotsperm<>+0(SB)/4, $0
DATA dotsperm<>+4(SB)/4, $4
DATA dotsperm<>+8(SB)/4, $8
DATA dotsperm<>+12(SB)/4, $12
DATA dotsperm<>+16(SB)/4, $1
DATA dotsperm<>+20(SB)/4, $5
DATA dotsperm<>+24(SB)/4, $9
DATA dotsperm<>+28(SB)/4, $13
DATA dotsperm<>+32(SB)/4, $2
DATA dotsperm<>+36(SB)/4, $6
DATA dotsperm<>+40(SB)/4, $10
DATA dotsperm<>+44(SB)/4, $14
DATA dotsperm<>+48(SB)/4, $3
DATA dotsperm<>+52(SB)/4, $7
DATA dotsperm<>+56(SB)/4, $11
DATA dotsperm<>+60(SB)/4, $15
GLOBL dotsperm<>(SB), RODATA|NOPTR, $64

// KVA32(off, acc), KVA16: acc += Z8 (the weight, broadcast) times the 16
// values at off(R10).
#define KVA32(off, acc) VFMADD231PS off(R10), Z8, acc
#define KVA16(off, acc) VCVTPH2PS off(R10), Z9; VFMADD231PS Z9, Z8, acc

// AXPYS512(KV, SH, E16) is the body of
// func axpysXAVX512(y *float32, hd int, w *float32, x *T, stride, cnt int):
// y[:hd] += w[j] * x[j*stride:][:hd] for j < cnt in order (each value's
// operations are the AVX2 kernel's); hd is a multiple of 16: y in
// registers 64 values at a time, then 16.
#define AXPYS512(KV, SH, E16) \
	MOVQ y+0(FP), DI; \
	MOVQ hd+8(FP), BX; \
	MOVQ x+24(FP), SI; \
	MOVQ stride+32(FP), R8; \
	SHLQ $SH, R8; \
	SUBQ $64, BX; \
	JL   by16; \
by64: \
	VMOVUPS 0(DI), Z0; \
	VMOVUPS 64(DI), Z1; \
	VMOVUPS 128(DI), Z2; \
	VMOVUPS 192(DI), Z3; \
	MOVQ    w+16(FP), DX; \
	MOVQ    SI, R10; \
	MOVQ    cnt+40(FP), CX; \
by64loop: \
	VBROADCASTSS (DX), Z8; \
	KV(0, Z0); \
	KV(E16, Z1); \
	KV(2*E16, Z2); \
	KV(3*E16, Z3); \
	ADDQ         $4, DX; \
	ADDQ         R8, R10; \
	DECQ         CX; \
	JNZ          by64loop; \
	VMOVUPS Z0, 0(DI); \
	VMOVUPS Z1, 64(DI); \
	VMOVUPS Z2, 128(DI); \
	VMOVUPS Z3, 192(DI); \
	ADDQ    $256, DI; \
	ADDQ    $(4*E16), SI; \
	SUBQ    $64, BX; \
	JGE     by64; \
by16: \
	ADDQ $48, BX; \
	JL   done; \
by16col: \
	VMOVUPS (DI), Z0; \
	MOVQ    w+16(FP), DX; \
	MOVQ    SI, R10; \
	MOVQ    cnt+40(FP), CX; \
by16loop: \
	VBROADCASTSS (DX), Z8; \
	KV(0, Z0); \
	ADDQ         $4, DX; \
	ADDQ         R8, R10; \
	DECQ         CX; \
	JNZ          by16loop; \
	VMOVUPS Z0, (DI); \
	ADDQ    $64, DI; \
	ADDQ    $E16, SI; \
	SUBQ    $16, BX; \
	JGE     by16col; \
done: \
	VZEROUPPER; \
	RET

// func dotsAVX512(q, k *float32, hd, stride, cnt int, scale float32, out *float32)
TEXT ·dotsAVX512(SB), NOSPLIT, $0-56
	DOTS512(KVD32, 2, 64)

// func dotsF16AVX512(q *float32, k *uint16, hd, stride, cnt int, scale float32, out *float32)
TEXT ·dotsF16AVX512(SB), NOSPLIT, $0-56
	DOTS512(KVD16, 1, 32)

// func axpysAVX512(y *float32, hd int, w, x *float32, stride, cnt int)
TEXT ·axpysAVX512(SB), NOSPLIT, $0-48
	AXPYS512(KVA32, 2, 64)

// func axpysF16AVX512(y *float32, hd int, w *float32, x *uint16, stride, cnt int)
TEXT ·axpysF16AVX512(SB), NOSPLIT, $0-48
	AXPYS512(KVA16, 1, 32)
