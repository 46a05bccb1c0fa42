//go:build amd64 && !purego

#include "textflag.h"
#include "simd_amd64.h"

// Attention for four queries that read the same cached rows (consecutive
// tokens of one head, or the query heads sharing a KV head): each row is
// loaded once for the four. Every query gets exactly dotsAVX2's and
// axpysAVX2's operations, so its results are the same bits as alone.

// DOTHALF: the four partial sums x0 of the dot product in acc0/acc1
// (dotsAVX2's two accumulators): acc0+acc1, then its two halves added.
#define DOTHALF(acc0, acc1, x0, x1) \
	VADDPS       acc1, acc0, acc0; \
	VEXTRACTF128 $1, acc0, x1; \
	VADDPS       x1, x0, x0

// func dots4AVX2(q *[4]*float32, k *float32, hd, stride, cnt int, scale float32, out *[4]*float32)
// out[g][j] = (q[g] · k[j*stride:][:hd]) * scale for g < 4, j < cnt; hd is a
// multiple of 8. R10-R13: the queries, R14, R15, BX, DI: the outputs, DX:
// row j, CX: byte offset in the row, SI: row bytes, AX: 4*j.
TEXT ·dots4AVX2(SB), NOSPLIT, $0-56
	MOVQ         q+0(FP), AX
	PTRS4(R10, R11, R12, R13)
	MOVQ         out+48(FP), AX
	PTRS4(R14, R15, BX, DI)
	MOVQ         k+8(FP), DX
	MOVQ         hd+16(FP), SI
	SHLQ         $2, SI
	MOVQ         stride+24(FP), R8
	SHLQ         $2, R8
	MOVQ         cnt+32(FP), R9
	VBROADCASTSS scale+40(FP), X15
	XORQ         AX, AX
	TESTQ        R9, R9
	JZ           d4end

d4row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ   CX, CX

d4chunk:
	// 16 values while 16 remain, as dotsAVX2.
	LEAQ        64(CX), R8
	CMPQ        R8, SI
	JG          d4tail
	VMOVUPS     (DX)(CX*1), Y8
	VMOVUPS     32(DX)(CX*1), Y9
	VFMADD231PS (R10)(CX*1), Y8, Y0
	VFMADD231PS 32(R10)(CX*1), Y9, Y1
	VFMADD231PS (R11)(CX*1), Y8, Y2
	VFMADD231PS 32(R11)(CX*1), Y9, Y3
	VFMADD231PS (R12)(CX*1), Y8, Y4
	VFMADD231PS 32(R12)(CX*1), Y9, Y5
	VFMADD231PS (R13)(CX*1), Y8, Y6
	VFMADD231PS 32(R13)(CX*1), Y9, Y7
	MOVQ        R8, CX
	JMP         d4chunk

d4tail:
	CMPQ        CX, SI
	JGE         d4red
	VMOVUPS     (DX)(CX*1), Y8
	VFMADD231PS (R10)(CX*1), Y8, Y0
	VFMADD231PS (R11)(CX*1), Y8, Y2
	VFMADD231PS (R12)(CX*1), Y8, Y4
	VFMADD231PS (R13)(CX*1), Y8, Y6

d4red:
	// Each dot as dotsAVX2 reduces it: the accumulators added, the halves
	// added, then two horizontal adds, which serve the four dots at once
	// (lane g of the second is ((w0+w1)+(w2+w3)) of dot g).
	DOTHALF(Y0, Y1, X0, X1)
	DOTHALF(Y2, Y3, X2, X3)
	DOTHALF(Y4, Y5, X4, X5)
	DOTHALF(Y6, Y7, X6, X7)
	VHADDPS    X2, X0, X0
	VHADDPS    X6, X4, X4
	VHADDPS    X4, X0, X0
	VMULPS     X15, X0, X0
	VMOVSS     X0, (R14)(AX*1)
	VEXTRACTPS $1, X0, (R15)(AX*1)
	VEXTRACTPS $2, X0, (BX)(AX*1)
	VEXTRACTPS $3, X0, (DI)(AX*1)
	MOVQ  stride+24(FP), R8
	SHLQ  $2, R8
	ADDQ  R8, DX
	ADDQ  $4, AX
	DECQ  R9
	JNZ   d4row

d4end:
	VZEROUPPER
	RET

// func axpys4AVX2(y *[4]*float32, hd int, w *[4]*float32, x *float32, stride, cnt int)
// y[g][:hd] += w[g][j] * x[j*stride:][:hd] for j < cnt in order, g < 4;
// hd is a multiple of 8. The four outputs are held in registers 16 values
// (two YMM each) at a time, then 8. R10-R13: outputs, R14, R15, BX, DI:
// weights, SI: x, CX: byte offset of the columns, DX: row j at CX, AX: 4*j,
// R9: 4*cnt, R8: row bytes.
TEXT ·axpys4AVX2(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), AX
	PTRS4(R10, R11, R12, R13)
	MOVQ w+16(FP), AX
	PTRS4(R14, R15, BX, DI)
	MOVQ x+24(FP), SI
	MOVQ stride+32(FP), R8
	SHLQ $2, R8
	MOVQ cnt+40(FP), R9
	SHLQ $2, R9
	TESTQ R9, R9
	JZ   a4end
	XORQ CX, CX

a4cols16:
	MOVQ    hd+8(FP), AX
	SHLQ    $2, AX
	SUBQ    CX, AX
	CMPQ    AX, $64
	JL      a4cols8
	VMOVUPS (R10)(CX*1), Y0
	VMOVUPS 32(R10)(CX*1), Y1
	VMOVUPS (R11)(CX*1), Y2
	VMOVUPS 32(R11)(CX*1), Y3
	VMOVUPS (R12)(CX*1), Y4
	VMOVUPS 32(R12)(CX*1), Y5
	VMOVUPS (R13)(CX*1), Y6
	VMOVUPS 32(R13)(CX*1), Y7
	LEAQ    (SI)(CX*1), DX
	XORQ    AX, AX

a4loop16:
	VBROADCASTSS (R14)(AX*1), Y8
	VFMADD231PS  (DX), Y8, Y0
	VFMADD231PS  32(DX), Y8, Y1
	VBROADCASTSS (R15)(AX*1), Y8
	VFMADD231PS  (DX), Y8, Y2
	VFMADD231PS  32(DX), Y8, Y3
	VBROADCASTSS (BX)(AX*1), Y8
	VFMADD231PS  (DX), Y8, Y4
	VFMADD231PS  32(DX), Y8, Y5
	VBROADCASTSS (DI)(AX*1), Y8
	VFMADD231PS  (DX), Y8, Y6
	VFMADD231PS  32(DX), Y8, Y7
	ADDQ         R8, DX
	ADDQ         $4, AX
	CMPQ         AX, R9
	JL           a4loop16

	VMOVUPS Y0, (R10)(CX*1)
	VMOVUPS Y1, 32(R10)(CX*1)
	VMOVUPS Y2, (R11)(CX*1)
	VMOVUPS Y3, 32(R11)(CX*1)
	VMOVUPS Y4, (R12)(CX*1)
	VMOVUPS Y5, 32(R12)(CX*1)
	VMOVUPS Y6, (R13)(CX*1)
	VMOVUPS Y7, 32(R13)(CX*1)
	ADDQ    $64, CX
	JMP     a4cols16

a4cols8:
	CMPQ    AX, $32
	JL      a4end
	VMOVUPS (R10)(CX*1), Y0
	VMOVUPS (R11)(CX*1), Y2
	VMOVUPS (R12)(CX*1), Y4
	VMOVUPS (R13)(CX*1), Y6
	LEAQ    (SI)(CX*1), DX
	XORQ    AX, AX

a4loop8:
	VBROADCASTSS (R14)(AX*1), Y8
	VFMADD231PS  (DX), Y8, Y0
	VBROADCASTSS (R15)(AX*1), Y8
	VFMADD231PS  (DX), Y8, Y2
	VBROADCASTSS (BX)(AX*1), Y8
	VFMADD231PS  (DX), Y8, Y4
	VBROADCASTSS (DI)(AX*1), Y8
	VFMADD231PS  (DX), Y8, Y6
	ADDQ         R8, DX
	ADDQ         $4, AX
	CMPQ         AX, R9
	JL           a4loop8

	VMOVUPS Y0, (R10)(CX*1)
	VMOVUPS Y2, (R11)(CX*1)
	VMOVUPS Y4, (R12)(CX*1)
	VMOVUPS Y6, (R13)(CX*1)
	ADDQ    $32, CX
	MOVQ    hd+8(FP), AX
	SHLQ    $2, AX
	SUBQ    CX, AX
	JMP     a4cols8

a4end:
	VZEROUPPER
	RET
