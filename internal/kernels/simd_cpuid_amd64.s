//go:build amd64 && !purego

#include "textflag.h"

// func cpuidSignature() uint32
// EAX of CPUID leaf 1: the stepping, model and family fields.
TEXT ·cpuidSignature(SB), NOSPLIT, $0-4
	MOVL $1, AX
	XORL CX, CX
	CPUID
	MOVL AX, ret+0(FP)
	RET
