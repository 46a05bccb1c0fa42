// Constants of the assembly kernels, one line each (the files of both
// architectures include this): name is a file-local symbol (name<>).

// SPLAT16(name, v) and SPLAT32(name, v): 16 and 32 bytes of the 8-byte
// word v repeated.
#define SPLAT16(name, v) \
	DATA name+0(SB)/8, $v; \
	DATA name+8(SB)/8, $v; \
	GLOBL name(SB), RODATA|NOPTR, $16

#define SPLAT32(name, v) \
	DATA name+0(SB)/8, $v; DATA name+8(SB)/8, $v; \
	DATA name+16(SB)/8, $v; DATA name+24(SB)/8, $v; \
	GLOBL name(SB), RODATA|NOPTR, $32

// WORDS16(name, a, b): 16 bytes, the 8-byte words a and b.
#define WORDS16(name, a, b) \
	DATA name+0(SB)/8, $a; \
	DATA name+8(SB)/8, $b; \
	GLOBL name(SB), RODATA|NOPTR, $16

// PERM8(name, ...): 8 int32 indices (a VPERMD order), 32 bytes.
#define PERM8(name, i0, i1, i2, i3, i4, i5, i6, i7) \
	DATA name+0(SB)/4, $i0; DATA name+4(SB)/4, $i1; \
	DATA name+8(SB)/4, $i2; DATA name+12(SB)/4, $i3; \
	DATA name+16(SB)/4, $i4; DATA name+20(SB)/4, $i5; \
	DATA name+24(SB)/4, $i6; DATA name+28(SB)/4, $i7; \
	GLOBL name(SB), RODATA|NOPTR, $32

// SPLAT4X8(name, off, v): the 32-bit value v 8 times at name+off (one row
// of a table of broadcast constants; the table's GLOBL comes after).
#define SPLAT4X8(name, off, v) \
	DATA name+off+0(SB)/4, $v; \
	DATA name+off+4(SB)/4, $v; \
	DATA name+off+8(SB)/4, $v; \
	DATA name+off+12(SB)/4, $v; \
	DATA name+off+16(SB)/4, $v; \
	DATA name+off+20(SB)/4, $v; \
	DATA name+off+24(SB)/4, $v; \
	DATA name+off+28(SB)/4, $v

// EXPCONSTS(ROW): exp's constants as ROW(i, bits) (simd_exp_amd64.h's
// table, simd_flash_arm64.s's, simd_flash512_amd64.s's): log2 e, C1 and
// C2 (ln 2 in two parts), P0-P5, 1, HI, LO, +Inf, 127 (the exponent's
// bias, an int32), 1.5·2^23 (adding and subtracting it rounds to an
// integer).
#define EXPCONSTS(ROW) \
	ROW(0, 0x3fb8aa3b); ROW(1, 0x3f318000); ROW(2, 0xb95e8083); \
	ROW(3, 0x39506967); ROW(4, 0x3ab743ce); ROW(5, 0x3c088908); \
	ROW(6, 0x3d2aa9c1); ROW(7, 0x3e2aaaaa); ROW(8, 0x3f000000); \
	ROW(9, 0x3f800000); ROW(10, 0x42b0c0a5); ROW(11, 0xc2aeac50); \
	ROW(12, 0x7f800000); ROW(13, 0x7f); ROW(14, 0x4b400000)
