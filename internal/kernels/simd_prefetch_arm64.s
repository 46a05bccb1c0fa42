//go:build arm64 && !purego

#include "textflag.h"

// func prefetchRows(src *byte, stride, n, cnt int)
// Every cache line (64 bytes apart: a 128-byte line is asked for twice)
// holding a byte of [src+j*stride, src+j*stride+n), j < cnt, into L2
// (PRFM PLDL2KEEP), as amd64's PREFETCHT1.
TEXT ·prefetchRows(SB), NOSPLIT, $0-32
	MOVD src+0(FP), R0
	MOVD stride+8(FP), R1
	MOVD n+16(FP), R2
	MOVD cnt+24(FP), R3
	CBZ  R3, done
	SUB  $1, R2

row:
	AND  $~63, R0, R4
	ADD  R0, R2, R5

line:
	PRFM (R4), PLDL2KEEP
	ADD  $64, R4
	CMP  R5, R4
	BLE  line
	ADD  R1, R0
	SUB  $1, R3
	CBNZ R3, row

done:
	RET
