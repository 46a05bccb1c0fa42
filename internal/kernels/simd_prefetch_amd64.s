//go:build amd64 && !purego

#include "textflag.h"

// func prefetchRows(src *byte, stride, n, cnt int)
// Every cache line holding a byte of [src+j*stride, src+j*stride+n), j <
// cnt, into L2 (PREFETCHT1): into L1 (PREFETCHT0), a tile's rows asked
// for at once held the core's miss buffers and decode attention at depth
// 8000 was no faster than without (Zen 4: 33 ms a token against 24-27).
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
	PREFETCHT1 (AX)
	ADDQ $64, AX
	CMPQ AX, CX
	JLE  line
	ADDQ R13, SI
	DECQ BX
	JNZ  row

done:
	RET
