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
