//go:build amd64 && !purego

#include "textflag.h"
#include "simd_flash512_amd64.h"

// AVX-512 flash attention kernels (flash.go has the contracts and the Go
// oracles, whose bits these give): fused multiply-adds in the oracles'
// order, four query rows at a time in sixteen accumulators (an outer
// product of four rows by 64 keys or 64 value columns per step).

// ZERO16 clears Z0-Z15.
#define ZERO16 \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	VPXORD Z4, Z4, Z4 \
	VPXORD Z5, Z5, Z5 \
	VPXORD Z6, Z6, Z6 \
	VPXORD Z7, Z7, Z7 \
	VPXORD Z8, Z8, Z8 \
	VPXORD Z9, Z9, Z9 \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11 \
	VPXORD Z12, Z12, Z12 \
	VPXORD Z13, Z13, Z13 \
	VPXORD Z14, Z14, Z14 \
	VPXORD Z15, Z15, Z15

// func flashScores64AVX512(s, q *float32, ldq int, kt *float32, nq, hd int, scale float32)
// FlashScores with nk = 64: rows four at a time (Z0-Z15: row i's keys
// 16c..16c+15 in Z(4i+c)), then one at a time (Z0-Z3).
TEXT ·flashScores64AVX512(SB), NOSPLIT, $0-52
	MOVQ         s+0(FP), DX
	MOVQ         q+8(FP), SI
	MOVQ         ldq+16(FP), R8
	SHLQ         $2, R8
	LEAQ         (R8)(R8*2), R9
	MOVQ         kt+24(FP), R11
	MOVQ         nq+32(FP), BX
	MOVQ         hd+40(FP), R12
	VBROADCASTSS scale+48(FP), Z31

squad:
	CMPQ BX, $4
	JL   sone
	ZERO16
	MOVQ R11, DI
	MOVQ SI, AX
	MOVQ R12, CX

squadd:
	VMOVUPS      0(DI), Z16
	VMOVUPS      64(DI), Z17
	VMOVUPS      128(DI), Z18
	VMOVUPS      192(DI), Z19
	VBROADCASTSS (AX), Z20
	VBROADCASTSS (AX)(R8*1), Z21
	VBROADCASTSS (AX)(R8*2), Z22
	VBROADCASTSS (AX)(R9*1), Z23
	FMA4x4(Z20, Z21, Z22, Z23)
	ADDQ         $4, AX
	ADDQ         $256, DI
	DECQ         CX
	JNZ          squadd
	VMULPS  Z31, Z0, Z0
	VMULPS  Z31, Z1, Z1
	VMULPS  Z31, Z2, Z2
	VMULPS  Z31, Z3, Z3
	VMULPS  Z31, Z4, Z4
	VMULPS  Z31, Z5, Z5
	VMULPS  Z31, Z6, Z6
	VMULPS  Z31, Z7, Z7
	VMULPS  Z31, Z8, Z8
	VMULPS  Z31, Z9, Z9
	VMULPS  Z31, Z10, Z10
	VMULPS  Z31, Z11, Z11
	VMULPS  Z31, Z12, Z12
	VMULPS  Z31, Z13, Z13
	VMULPS  Z31, Z14, Z14
	VMULPS  Z31, Z15, Z15
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VMOVUPS Z4, 256(DX)
	VMOVUPS Z5, 320(DX)
	VMOVUPS Z6, 384(DX)
	VMOVUPS Z7, 448(DX)
	VMOVUPS Z8, 512(DX)
	VMOVUPS Z9, 576(DX)
	VMOVUPS Z10, 640(DX)
	VMOVUPS Z11, 704(DX)
	VMOVUPS Z12, 768(DX)
	VMOVUPS Z13, 832(DX)
	VMOVUPS Z14, 896(DX)
	VMOVUPS Z15, 960(DX)
	ADDQ $1024, DX
	LEAQ (SI)(R8*4), SI
	SUBQ $4, BX
	JMP  squad

sone:
	TESTQ BX, BX
	JZ    sdone
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ  R11, DI
	MOVQ  SI, AX
	MOVQ  R12, CX

soned:
	VBROADCASTSS (AX), Z20
	VFMADD231PS  0(DI), Z20, Z0
	VFMADD231PS  64(DI), Z20, Z1
	VFMADD231PS  128(DI), Z20, Z2
	VFMADD231PS  192(DI), Z20, Z3
	ADDQ         $4, AX
	ADDQ         $256, DI
	DECQ         CX
	JNZ          soned
	VMULPS       Z31, Z0, Z0
	VMULPS       Z31, Z1, Z1
	VMULPS       Z31, Z2, Z2
	VMULPS       Z31, Z3, Z3
	VMOVUPS      Z0, 0(DX)
	VMOVUPS      Z1, 64(DX)
	VMOVUPS      Z2, 128(DX)
	VMOVUPS      Z3, 192(DX)
	ADDQ         $256, DX
	ADDQ         R8, SI
	DECQ         BX
	JMP          sone

sdone:
	VZEROUPPER
	RET

// func flashAccumAVX512(o *float32, ldo int, p, v *float32, nq, nk, vd int)
// FlashAccum for vd a multiple of 16: rows four at a time, their columns
// 64 at a time (Z(4i+c): row i's columns 16c..16c+15) then 16 at a time;
// then the rows left one at a time, columns 16 at a time. Each o element
// gets p[i][j]·v[j][d] added for j in order (the oracle's fused chain).
TEXT ·flashAccumAVX512(SB), NOSPLIT, $0-56
	MOVQ o+0(FP), DI
	MOVQ ldo+8(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R9
	MOVQ p+16(FP), SI
	MOVQ v+24(FP), R11
	MOVQ nq+32(FP), BX
	MOVQ nk+40(FP), R13
	SHLQ $2, R13
	LEAQ (R13)(R13*2), R14
	MOVQ vd+48(FP), R12
	SHLQ $2, R12

aquad:
	CMPQ BX, $4
	JL   aone
	XORQ DX, DX             // column offset in bytes

aquad64:
	LEAQ 256(DX), R15
	CMPQ R15, R12
	JG   aquad16
	LEAQ (DI)(DX*1), R10
	LOAD16x4
	LEAQ (R11)(DX*1), AX
	MOVQ SI, R15
	MOVQ R13, CX
	SHRQ $2, CX

aquad64j:
	VMOVUPS      0(AX), Z16
	VMOVUPS      64(AX), Z17
	VMOVUPS      128(AX), Z18
	VMOVUPS      192(AX), Z19
	VBROADCASTSS (R15), Z20
	VBROADCASTSS (R15)(R13*1), Z21
	VBROADCASTSS (R15)(R13*2), Z22
	VBROADCASTSS (R15)(R14*1), Z23
	FMA4x4(Z20, Z21, Z22, Z23)
	ADDQ         $4, R15
	ADDQ         R12, AX
	DECQ         CX
	JNZ          aquad64j
	STORE16x4
	ADDQ $256, DX
	JMP  aquad64

aquad16:
	CMPQ DX, R12
	JGE  aquadnext
	LEAQ (DI)(DX*1), R10
	VMOVUPS (R10), Z0
	VMOVUPS (R10)(R8*1), Z4
	VMOVUPS (R10)(R8*2), Z8
	VMOVUPS (R10)(R9*1), Z12
	LEAQ (R11)(DX*1), AX
	MOVQ SI, R15
	MOVQ R13, CX
	SHRQ $2, CX

aquad16j:
	VMOVUPS      (AX), Z16
	VBROADCASTSS (R15), Z20
	VBROADCASTSS (R15)(R13*1), Z21
	VBROADCASTSS (R15)(R13*2), Z22
	VBROADCASTSS (R15)(R14*1), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z16, Z23, Z12
	ADDQ         $4, R15
	ADDQ         R12, AX
	DECQ         CX
	JNZ          aquad16j
	VMOVUPS Z0, (R10)
	VMOVUPS Z4, (R10)(R8*1)
	VMOVUPS Z8, (R10)(R8*2)
	VMOVUPS Z12, (R10)(R9*1)
	ADDQ $64, DX
	JMP  aquad16

aquadnext:
	LEAQ (DI)(R8*4), DI
	LEAQ (SI)(R13*4), SI
	SUBQ $4, BX
	JMP  aquad

aone:
	TESTQ BX, BX
	JZ    adone
	XORQ  DX, DX

aone16:
	CMPQ DX, R12
	JGE  aonenext
	LEAQ (DI)(DX*1), R10
	VMOVUPS (R10), Z0
	LEAQ (R11)(DX*1), AX
	MOVQ SI, R15
	MOVQ R13, CX
	SHRQ $2, CX

aone16j:
	VBROADCASTSS (R15), Z20
	VFMADD231PS  (AX), Z20, Z0
	ADDQ         $4, R15
	ADDQ         R12, AX
	DECQ         CX
	JNZ          aone16j
	VMOVUPS Z0, (R10)
	ADDQ $64, DX
	JMP  aone16

aonenext:
	ADDQ R8, DI
	ADDQ R13, SI
	DECQ BX
	JMP  aone

adone:
	VZEROUPPER
	RET

// Flash's exp constants, each 16 times (512-bit memory operands): as
// flashExp (elem.go's Cephes constants, 1.5·2^23 to round to an integer).
#define FLOG2E flashc<>+0(SB)
#define FMAGIC flashc<>+64(SB)
#define FC1 flashc<>+128(SB)
#define FC2 flashc<>+192(SB)
#define FP0 flashc<>+256(SB)
#define FP1 flashc<>+320(SB)
#define FP2 flashc<>+384(SB)
#define FP3 flashc<>+448(SB)
#define FP4 flashc<>+512(SB)
#define FP5 flashc<>+576(SB)
#define FONE flashc<>+640(SB)
#define FHI flashc<>+704(SB)
#define FLO flashc<>+768(SB)
#define FINF flashc<>+832(SB)
#define FBIAS flashc<>+896(SB)

DATA flashc<>+0(SB)/4, $0x3fb8aa3b
DATA flashc<>+4(SB)/4, $0x3fb8aa3b
DATA flashc<>+8(SB)/4, $0x3fb8aa3b
DATA flashc<>+12(SB)/4, $0x3fb8aa3b
DATA flashc<>+16(SB)/4, $0x3fb8aa3b
DATA flashc<>+20(SB)/4, $0x3fb8aa3b
DATA flashc<>+24(SB)/4, $0x3fb8aa3b
DATA flashc<>+28(SB)/4, $0x3fb8aa3b
DATA flashc<>+32(SB)/4, $0x3fb8aa3b
DATA flashc<>+36(SB)/4, $0x3fb8aa3b
DATA flashc<>+40(SB)/4, $0x3fb8aa3b
DATA flashc<>+44(SB)/4, $0x3fb8aa3b
DATA flashc<>+48(SB)/4, $0x3fb8aa3b
DATA flashc<>+52(SB)/4, $0x3fb8aa3b
DATA flashc<>+56(SB)/4, $0x3fb8aa3b
DATA flashc<>+60(SB)/4, $0x3fb8aa3b
DATA flashc<>+64(SB)/4, $0x4b400000
DATA flashc<>+68(SB)/4, $0x4b400000
DATA flashc<>+72(SB)/4, $0x4b400000
DATA flashc<>+76(SB)/4, $0x4b400000
DATA flashc<>+80(SB)/4, $0x4b400000
DATA flashc<>+84(SB)/4, $0x4b400000
DATA flashc<>+88(SB)/4, $0x4b400000
DATA flashc<>+92(SB)/4, $0x4b400000
DATA flashc<>+96(SB)/4, $0x4b400000
DATA flashc<>+100(SB)/4, $0x4b400000
DATA flashc<>+104(SB)/4, $0x4b400000
DATA flashc<>+108(SB)/4, $0x4b400000
DATA flashc<>+112(SB)/4, $0x4b400000
DATA flashc<>+116(SB)/4, $0x4b400000
DATA flashc<>+120(SB)/4, $0x4b400000
DATA flashc<>+124(SB)/4, $0x4b400000
DATA flashc<>+128(SB)/4, $0x3f318000
DATA flashc<>+132(SB)/4, $0x3f318000
DATA flashc<>+136(SB)/4, $0x3f318000
DATA flashc<>+140(SB)/4, $0x3f318000
DATA flashc<>+144(SB)/4, $0x3f318000
DATA flashc<>+148(SB)/4, $0x3f318000
DATA flashc<>+152(SB)/4, $0x3f318000
DATA flashc<>+156(SB)/4, $0x3f318000
DATA flashc<>+160(SB)/4, $0x3f318000
DATA flashc<>+164(SB)/4, $0x3f318000
DATA flashc<>+168(SB)/4, $0x3f318000
DATA flashc<>+172(SB)/4, $0x3f318000
DATA flashc<>+176(SB)/4, $0x3f318000
DATA flashc<>+180(SB)/4, $0x3f318000
DATA flashc<>+184(SB)/4, $0x3f318000
DATA flashc<>+188(SB)/4, $0x3f318000
DATA flashc<>+192(SB)/4, $0xb95e8083
DATA flashc<>+196(SB)/4, $0xb95e8083
DATA flashc<>+200(SB)/4, $0xb95e8083
DATA flashc<>+204(SB)/4, $0xb95e8083
DATA flashc<>+208(SB)/4, $0xb95e8083
DATA flashc<>+212(SB)/4, $0xb95e8083
DATA flashc<>+216(SB)/4, $0xb95e8083
DATA flashc<>+220(SB)/4, $0xb95e8083
DATA flashc<>+224(SB)/4, $0xb95e8083
DATA flashc<>+228(SB)/4, $0xb95e8083
DATA flashc<>+232(SB)/4, $0xb95e8083
DATA flashc<>+236(SB)/4, $0xb95e8083
DATA flashc<>+240(SB)/4, $0xb95e8083
DATA flashc<>+244(SB)/4, $0xb95e8083
DATA flashc<>+248(SB)/4, $0xb95e8083
DATA flashc<>+252(SB)/4, $0xb95e8083
DATA flashc<>+256(SB)/4, $0x39506967
DATA flashc<>+260(SB)/4, $0x39506967
DATA flashc<>+264(SB)/4, $0x39506967
DATA flashc<>+268(SB)/4, $0x39506967
DATA flashc<>+272(SB)/4, $0x39506967
DATA flashc<>+276(SB)/4, $0x39506967
DATA flashc<>+280(SB)/4, $0x39506967
DATA flashc<>+284(SB)/4, $0x39506967
DATA flashc<>+288(SB)/4, $0x39506967
DATA flashc<>+292(SB)/4, $0x39506967
DATA flashc<>+296(SB)/4, $0x39506967
DATA flashc<>+300(SB)/4, $0x39506967
DATA flashc<>+304(SB)/4, $0x39506967
DATA flashc<>+308(SB)/4, $0x39506967
DATA flashc<>+312(SB)/4, $0x39506967
DATA flashc<>+316(SB)/4, $0x39506967
DATA flashc<>+320(SB)/4, $0x3ab743ce
DATA flashc<>+324(SB)/4, $0x3ab743ce
DATA flashc<>+328(SB)/4, $0x3ab743ce
DATA flashc<>+332(SB)/4, $0x3ab743ce
DATA flashc<>+336(SB)/4, $0x3ab743ce
DATA flashc<>+340(SB)/4, $0x3ab743ce
DATA flashc<>+344(SB)/4, $0x3ab743ce
DATA flashc<>+348(SB)/4, $0x3ab743ce
DATA flashc<>+352(SB)/4, $0x3ab743ce
DATA flashc<>+356(SB)/4, $0x3ab743ce
DATA flashc<>+360(SB)/4, $0x3ab743ce
DATA flashc<>+364(SB)/4, $0x3ab743ce
DATA flashc<>+368(SB)/4, $0x3ab743ce
DATA flashc<>+372(SB)/4, $0x3ab743ce
DATA flashc<>+376(SB)/4, $0x3ab743ce
DATA flashc<>+380(SB)/4, $0x3ab743ce
DATA flashc<>+384(SB)/4, $0x3c088908
DATA flashc<>+388(SB)/4, $0x3c088908
DATA flashc<>+392(SB)/4, $0x3c088908
DATA flashc<>+396(SB)/4, $0x3c088908
DATA flashc<>+400(SB)/4, $0x3c088908
DATA flashc<>+404(SB)/4, $0x3c088908
DATA flashc<>+408(SB)/4, $0x3c088908
DATA flashc<>+412(SB)/4, $0x3c088908
DATA flashc<>+416(SB)/4, $0x3c088908
DATA flashc<>+420(SB)/4, $0x3c088908
DATA flashc<>+424(SB)/4, $0x3c088908
DATA flashc<>+428(SB)/4, $0x3c088908
DATA flashc<>+432(SB)/4, $0x3c088908
DATA flashc<>+436(SB)/4, $0x3c088908
DATA flashc<>+440(SB)/4, $0x3c088908
DATA flashc<>+444(SB)/4, $0x3c088908
DATA flashc<>+448(SB)/4, $0x3d2aa9c1
DATA flashc<>+452(SB)/4, $0x3d2aa9c1
DATA flashc<>+456(SB)/4, $0x3d2aa9c1
DATA flashc<>+460(SB)/4, $0x3d2aa9c1
DATA flashc<>+464(SB)/4, $0x3d2aa9c1
DATA flashc<>+468(SB)/4, $0x3d2aa9c1
DATA flashc<>+472(SB)/4, $0x3d2aa9c1
DATA flashc<>+476(SB)/4, $0x3d2aa9c1
DATA flashc<>+480(SB)/4, $0x3d2aa9c1
DATA flashc<>+484(SB)/4, $0x3d2aa9c1
DATA flashc<>+488(SB)/4, $0x3d2aa9c1
DATA flashc<>+492(SB)/4, $0x3d2aa9c1
DATA flashc<>+496(SB)/4, $0x3d2aa9c1
DATA flashc<>+500(SB)/4, $0x3d2aa9c1
DATA flashc<>+504(SB)/4, $0x3d2aa9c1
DATA flashc<>+508(SB)/4, $0x3d2aa9c1
DATA flashc<>+512(SB)/4, $0x3e2aaaaa
DATA flashc<>+516(SB)/4, $0x3e2aaaaa
DATA flashc<>+520(SB)/4, $0x3e2aaaaa
DATA flashc<>+524(SB)/4, $0x3e2aaaaa
DATA flashc<>+528(SB)/4, $0x3e2aaaaa
DATA flashc<>+532(SB)/4, $0x3e2aaaaa
DATA flashc<>+536(SB)/4, $0x3e2aaaaa
DATA flashc<>+540(SB)/4, $0x3e2aaaaa
DATA flashc<>+544(SB)/4, $0x3e2aaaaa
DATA flashc<>+548(SB)/4, $0x3e2aaaaa
DATA flashc<>+552(SB)/4, $0x3e2aaaaa
DATA flashc<>+556(SB)/4, $0x3e2aaaaa
DATA flashc<>+560(SB)/4, $0x3e2aaaaa
DATA flashc<>+564(SB)/4, $0x3e2aaaaa
DATA flashc<>+568(SB)/4, $0x3e2aaaaa
DATA flashc<>+572(SB)/4, $0x3e2aaaaa
DATA flashc<>+576(SB)/4, $0x3f000000
DATA flashc<>+580(SB)/4, $0x3f000000
DATA flashc<>+584(SB)/4, $0x3f000000
DATA flashc<>+588(SB)/4, $0x3f000000
DATA flashc<>+592(SB)/4, $0x3f000000
DATA flashc<>+596(SB)/4, $0x3f000000
DATA flashc<>+600(SB)/4, $0x3f000000
DATA flashc<>+604(SB)/4, $0x3f000000
DATA flashc<>+608(SB)/4, $0x3f000000
DATA flashc<>+612(SB)/4, $0x3f000000
DATA flashc<>+616(SB)/4, $0x3f000000
DATA flashc<>+620(SB)/4, $0x3f000000
DATA flashc<>+624(SB)/4, $0x3f000000
DATA flashc<>+628(SB)/4, $0x3f000000
DATA flashc<>+632(SB)/4, $0x3f000000
DATA flashc<>+636(SB)/4, $0x3f000000
DATA flashc<>+640(SB)/4, $0x3f800000
DATA flashc<>+644(SB)/4, $0x3f800000
DATA flashc<>+648(SB)/4, $0x3f800000
DATA flashc<>+652(SB)/4, $0x3f800000
DATA flashc<>+656(SB)/4, $0x3f800000
DATA flashc<>+660(SB)/4, $0x3f800000
DATA flashc<>+664(SB)/4, $0x3f800000
DATA flashc<>+668(SB)/4, $0x3f800000
DATA flashc<>+672(SB)/4, $0x3f800000
DATA flashc<>+676(SB)/4, $0x3f800000
DATA flashc<>+680(SB)/4, $0x3f800000
DATA flashc<>+684(SB)/4, $0x3f800000
DATA flashc<>+688(SB)/4, $0x3f800000
DATA flashc<>+692(SB)/4, $0x3f800000
DATA flashc<>+696(SB)/4, $0x3f800000
DATA flashc<>+700(SB)/4, $0x3f800000
DATA flashc<>+704(SB)/4, $0x42b0c0a5
DATA flashc<>+708(SB)/4, $0x42b0c0a5
DATA flashc<>+712(SB)/4, $0x42b0c0a5
DATA flashc<>+716(SB)/4, $0x42b0c0a5
DATA flashc<>+720(SB)/4, $0x42b0c0a5
DATA flashc<>+724(SB)/4, $0x42b0c0a5
DATA flashc<>+728(SB)/4, $0x42b0c0a5
DATA flashc<>+732(SB)/4, $0x42b0c0a5
DATA flashc<>+736(SB)/4, $0x42b0c0a5
DATA flashc<>+740(SB)/4, $0x42b0c0a5
DATA flashc<>+744(SB)/4, $0x42b0c0a5
DATA flashc<>+748(SB)/4, $0x42b0c0a5
DATA flashc<>+752(SB)/4, $0x42b0c0a5
DATA flashc<>+756(SB)/4, $0x42b0c0a5
DATA flashc<>+760(SB)/4, $0x42b0c0a5
DATA flashc<>+764(SB)/4, $0x42b0c0a5
DATA flashc<>+768(SB)/4, $0xc2aeac50
DATA flashc<>+772(SB)/4, $0xc2aeac50
DATA flashc<>+776(SB)/4, $0xc2aeac50
DATA flashc<>+780(SB)/4, $0xc2aeac50
DATA flashc<>+784(SB)/4, $0xc2aeac50
DATA flashc<>+788(SB)/4, $0xc2aeac50
DATA flashc<>+792(SB)/4, $0xc2aeac50
DATA flashc<>+796(SB)/4, $0xc2aeac50
DATA flashc<>+800(SB)/4, $0xc2aeac50
DATA flashc<>+804(SB)/4, $0xc2aeac50
DATA flashc<>+808(SB)/4, $0xc2aeac50
DATA flashc<>+812(SB)/4, $0xc2aeac50
DATA flashc<>+816(SB)/4, $0xc2aeac50
DATA flashc<>+820(SB)/4, $0xc2aeac50
DATA flashc<>+824(SB)/4, $0xc2aeac50
DATA flashc<>+828(SB)/4, $0xc2aeac50
DATA flashc<>+832(SB)/4, $0x7f800000
DATA flashc<>+836(SB)/4, $0x7f800000
DATA flashc<>+840(SB)/4, $0x7f800000
DATA flashc<>+844(SB)/4, $0x7f800000
DATA flashc<>+848(SB)/4, $0x7f800000
DATA flashc<>+852(SB)/4, $0x7f800000
DATA flashc<>+856(SB)/4, $0x7f800000
DATA flashc<>+860(SB)/4, $0x7f800000
DATA flashc<>+864(SB)/4, $0x7f800000
DATA flashc<>+868(SB)/4, $0x7f800000
DATA flashc<>+872(SB)/4, $0x7f800000
DATA flashc<>+876(SB)/4, $0x7f800000
DATA flashc<>+880(SB)/4, $0x7f800000
DATA flashc<>+884(SB)/4, $0x7f800000
DATA flashc<>+888(SB)/4, $0x7f800000
DATA flashc<>+892(SB)/4, $0x7f800000
DATA flashc<>+896(SB)/4, $0x7f
DATA flashc<>+900(SB)/4, $0x7f
DATA flashc<>+904(SB)/4, $0x7f
DATA flashc<>+908(SB)/4, $0x7f
DATA flashc<>+912(SB)/4, $0x7f
DATA flashc<>+916(SB)/4, $0x7f
DATA flashc<>+920(SB)/4, $0x7f
DATA flashc<>+924(SB)/4, $0x7f
DATA flashc<>+928(SB)/4, $0x7f
DATA flashc<>+932(SB)/4, $0x7f
DATA flashc<>+936(SB)/4, $0x7f
DATA flashc<>+940(SB)/4, $0x7f
DATA flashc<>+944(SB)/4, $0x7f
DATA flashc<>+948(SB)/4, $0x7f
DATA flashc<>+952(SB)/4, $0x7f
DATA flashc<>+956(SB)/4, $0x7f
GLOBL flashc<>(SB), RODATA|NOPTR, $960

// func expSumAVX512(x *float32, n int, m float32) float32
// ExpSum for n a multiple of 16 (> 0): flashExp's operations on 16 lanes
// (no fused multiply-adds), lane l summing x[j] for j%16 == l, then the
// lanes added pairwise (l+8, l+4, l+2, l+1).
TEXT ·expSumAVX512(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	SHRQ         $4, CX
	VBROADCASTSS m+16(FP), Z15
	VPXORD       Z14, Z14, Z14
	VPXORD       Z13, Z13, Z13

eloop:
	VMOVUPS   (DI), Z0
	VSUBPS    Z15, Z0, Z0
	VMULPS    FLOG2E, Z0, Z1
	VADDPS    FMAGIC, Z1, Z1
	VSUBPS    FMAGIC, Z1, Z1
	VMULPS    FC1, Z1, Z2
	VSUBPS    Z2, Z0, Z2
	VMULPS    FC2, Z1, Z3
	VSUBPS    Z3, Z2, Z2
	VMOVUPS   FP0, Z3
	VMULPS    Z2, Z3, Z3
	VADDPS    FP1, Z3, Z3
	VMULPS    Z2, Z3, Z3
	VADDPS    FP2, Z3, Z3
	VMULPS    Z2, Z3, Z3
	VADDPS    FP3, Z3, Z3
	VMULPS    Z2, Z3, Z3
	VADDPS    FP4, Z3, Z3
	VMULPS    Z2, Z3, Z3
	VADDPS    FP5, Z3, Z3
	VMULPS    Z2, Z3, Z3
	VMULPS    Z2, Z3, Z3
	VADDPS    Z2, Z3, Z3
	VADDPS    FONE, Z3, Z3
	VCVTPS2DQ Z1, Z1
	VPADDD    FBIAS, Z1, Z1
	VPSLLD    $23, Z1, Z1
	VMULPS    Z1, Z3, Z3
	VCMPPS    $1, FLO, Z0, K1
	VMOVAPS   Z13, K1, Z3
	VCMPPS    $14, FHI, Z0, K2
	VMOVUPS   FINF, K2, Z3
	VCMPPS    $3, Z0, Z0, K3
	VMOVAPS   Z0, K3, Z3
	VMOVUPS   Z3, (DI)
	VADDPS    Z3, Z14, Z14
	ADDQ      $64, DI
	DECQ      CX
	JNZ       eloop

	VEXTRACTF64X4 $1, Z14, Y1
	VADDPS        Y1, Y14, Y14
	VEXTRACTF128  $1, Y14, X1
	VADDPS        X1, X14, X14
	VMOVHLPS      X14, X14, X1
	VADDPS        X1, X14, X14
	VMOVSHDUP     X14, X1
	VADDSS        X1, X14, X14
	VMOVSS        X14, ret+24(FP)
	VZEROUPPER
	RET

// func rowMaxAVX512(x *float32, n int) float32
// RowMax for n a multiple of 16 (> 0).
TEXT ·rowMaxAVX512(SB), NOSPLIT, $0-20
	MOVQ    x+0(FP), DI
	MOVQ    n+8(FP), CX
	SHRQ    $4, CX
	VMOVUPS (DI), Z0
	ADDQ    $64, DI
	DECQ    CX
	JZ      mdone

mloop:
	VMAXPS (DI), Z0, Z0
	ADDQ   $64, DI
	DECQ   CX
	JNZ    mloop

mdone:
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0x4e, X0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0xb1, X0, X1
	VMAXPS        X1, X0, X0
	VMOVSS        X0, ret+16(FP)
	VZEROUPPER
	RET
