//go:build amd64 && !purego

#include "textflag.h"

// func prefetchRows(src *byte, stride, n, cnt int)
// Every cache line holding a byte of [src+j*stride, src+j*stride+n), j <
// cnt, into all the cache levels (PREFETCHT0).
TEXT ·prefetchRows(SB), NOSPLIT, $0-32
	MOVQ src+0(FP), SI
	MOVQ stride+8(FP), R13
	MOVQ n+16(FP), DX
	MOVQ cnt+24(FP), BX
	TESTQ BX, BX
	JZ   done
	DECQ DX

row:
	MOVQ SI, AX
	ANDQ $-64, AX
	LEAQ (SI)(DX*1), CX

line:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	CMPQ AX, CX
	JLE  line
	ADDQ R13, SI
	DECQ BX
	JNZ  row

done:
	RET
