// The row masks of the 256-bit packed kernels' stores (simd_packy_amd64.h
// and simd_packa_amd64.s): a group's last 8 rows of a half may be past the
// matrix, and the caller's mask says which are not.

// lanebits<>: lane i holds bit i.
DATA lanebits<>+0(SB)/8, $0x0000000200000001
DATA lanebits<>+8(SB)/8, $0x0000000800000004
DATA lanebits<>+16(SB)/8, $0x0000002000000010
DATA lanebits<>+24(SB)/8, $0x0000008000000040
GLOBL lanebits<>(SB), RODATA|NOPTR, $32

// LANEMASK(r, x, y): y's lane i = all ones where bit i of r is set, else 0
// (x is y's low half).
#define LANEMASK(r, x, y) \
	VMOVD        r, x; \
	VPBROADCASTD x, y; \
	VPAND        lanebits<>(SB), y, y; \
	VPCMPEQD     lanebits<>(SB), y, y
