package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Block layouts follow ggml's ggml-common.h; every half is little-endian.
//
//	Q4_0 (18 B / 32): d f16, qs[16]  — low nibbles are elements 0..15, high 16..31, value (q-8)*d
//	Q4_1 (20 B / 32): d f16, m f16, qs[16] — value q*d + m
//	Q5_0 (22 B / 32): d f16, qh u32, qs[16] — bit j of qh is the fifth bit of element j, value (q-16)*d
//	Q5_1 (24 B / 32): d f16, m f16, qh u32, qs[16] — value q*d + m
//	Q8_0 (34 B / 32): d f16, qs[32] int8 — value q*d
//	Q4_K (144 B / 256): d f16, dmin f16, scales[12] (6-bit scales and mins of 8 sub-blocks), qs[128]
//	Q5_K (176 B / 256): as Q4_K then qh[32] before qs[128]
//	Q6_K (210 B / 256): ql[128], qh[64], scales[16] int8, d f16
//
// Dequantization reproduces ggml's float operations one by one (explicit
// float32 conversions stop the compiler from fusing a*b+c into an FMA), so
// the values are bit-identical to ggml's dequantize_row_* functions.

// Dequantize decodes len(dst) elements of type t from src. len(dst) must be a
// multiple of the block size and src must hold t.RowSize(len(dst)) bytes.
func Dequantize(t Type, src []byte, dst []float32) {
	checkQuantArgs("Dequantize", t, len(dst), len(src))
	n := len(dst)
	src = src[:t.RowSize(n)]
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = f16Table[binary.LittleEndian.Uint16(src[2*i:])]
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToFP32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q4_0:
		for b := 0; b < n/32; b++ {
			blk := (*[18]byte)(src[b*18:])
			y := (*[32]float32)(dst[b*32:])
			d := f16At(blk[0:])
			for j := 0; j < 16; j++ {
				y[j] = float32(int32(blk[2+j]&15)-8) * d
				y[j+16] = float32(int32(blk[2+j]>>4)-8) * d
			}
		}
	case Q4_1:
		for b := 0; b < n/32; b++ {
			blk := (*[20]byte)(src[b*20:])
			y := (*[32]float32)(dst[b*32:])
			d, m := f16At(blk[0:]), f16At(blk[2:])
			for j := 0; j < 16; j++ {
				y[j] = float32(float32(blk[4+j]&15)*d) + m
				y[j+16] = float32(float32(blk[4+j]>>4)*d) + m
			}
		}
	case Q5_0:
		for b := 0; b < n/32; b++ {
			blk := (*[22]byte)(src[b*22:])
			y := (*[32]float32)(dst[b*32:])
			d := f16At(blk[0:])
			qh := binary.LittleEndian.Uint32(blk[2:])
			for j := 0; j < 16; j++ {
				x0 := int32(blk[6+j]&15|byte(qh>>j&1)<<4) - 16
				x1 := int32(blk[6+j]>>4|byte(qh>>(j+16)&1)<<4) - 16
				y[j] = float32(x0) * d
				y[j+16] = float32(x1) * d
			}
		}
	case Q5_1:
		for b := 0; b < n/32; b++ {
			blk := (*[24]byte)(src[b*24:])
			y := (*[32]float32)(dst[b*32:])
			d, m := f16At(blk[0:]), f16At(blk[2:])
			qh := binary.LittleEndian.Uint32(blk[4:])
			for j := 0; j < 16; j++ {
				x0 := blk[8+j]&15 | byte(qh>>j&1)<<4
				x1 := blk[8+j]>>4 | byte(qh>>(j+16)&1)<<4
				y[j] = float32(float32(x0)*d) + m
				y[j+16] = float32(float32(x1)*d) + m
			}
		}
	case Q8_0:
		for b := 0; b < n/32; b++ {
			blk := (*[34]byte)(src[b*34:])
			y := (*[32]float32)(dst[b*32:])
			d := f16At(blk[0:])
			for j := 0; j < 32; j++ {
				y[j] = float32(int8(blk[2+j])) * d
			}
		}
	case Q4_K:
		for b := 0; b < n/256; b++ {
			dequantQ4K((*[144]byte)(src[b*144:]), (*[256]float32)(dst[b*256:]))
		}
	case Q5_K:
		for b := 0; b < n/256; b++ {
			dequantQ5K((*[176]byte)(src[b*176:]), (*[256]float32)(dst[b*256:]))
		}
	case Q6_K:
		for b := 0; b < n/256; b++ {
			dequantQ6K((*[210]byte)(src[b*210:]), (*[256]float32)(dst[b*256:]))
		}
	default:
		panic(fmt.Sprintf("kernels: Dequantize: type %s is not supported", t))
	}
}

// checkQuantArgs panics on argument errors: they are programming errors of
// the caller (sizes come from validated tensor shapes).
func checkQuantArgs(fn string, t Type, n, nbytes int) {
	if !t.Supported() {
		panic(fmt.Sprintf("kernels: %s: type %s is not supported", fn, t))
	}
	if err := t.CheckRow(n); err != nil {
		panic(fmt.Sprintf("kernels: %s: %v", fn, err))
	}
	if need := t.RowSize(n); nbytes < need {
		panic(fmt.Sprintf("kernels: %s: %d %s elements need %d bytes, have %d", fn, n, t, need, nbytes))
	}
}

// scaleMinK4 decodes the 6-bit scale and min of sub-block j (0..7) of a
// Q4_K/Q5_K super-block (ggml's get_scale_min_k4).
func scaleMinK4(j int, q *[12]byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

func dequantQ4K(blk *[144]byte, y *[256]float32) {
	d, dmin := f16At(blk[0:]), f16At(blk[2:])
	scales := (*[12]byte)(blk[4:])
	for c := 0; c < 4; c++ {
		qs := (*[32]byte)(blk[16+32*c:])
		sc, m := scaleMinK4(2*c, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(2*c+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := 0; l < 32; l++ {
			y[64*c+l] = float32(d1*float32(qs[l]&15)) - m1
			y[64*c+32+l] = float32(d2*float32(qs[l]>>4)) - m2
		}
	}
}

func dequantQ5K(blk *[176]byte, y *[256]float32) {
	d, dmin := f16At(blk[0:]), f16At(blk[2:])
	scales := (*[12]byte)(blk[4:])
	qh := (*[32]byte)(blk[16:])
	for c := 0; c < 4; c++ {
		qs := (*[32]byte)(blk[48+32*c:])
		sc, m := scaleMinK4(2*c, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(2*c+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		s1, s2 := uint(2*c), uint(2*c+1)
		for l := 0; l < 32; l++ {
			q1 := qs[l]&15 | (qh[l]>>s1&1)<<4
			q2 := qs[l]>>4 | (qh[l]>>s2&1)<<4
			y[64*c+l] = float32(d1*float32(q1)) - m1
			y[64*c+32+l] = float32(d2*float32(q2)) - m2
		}
	}
}

func dequantQ6K(blk *[210]byte, y *[256]float32) {
	d := f16At(blk[208:])
	for h := 0; h < 2; h++ {
		ql := (*[64]byte)(blk[64*h:])
		qh := (*[32]byte)(blk[128+32*h:])
		sc := (*[8]byte)(blk[192+8*h:])
		yy := (*[128]float32)(y[128*h:])
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int32(ql[l]&15|(qh[l]&3)<<4) - 32
			q2 := int32(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
			q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int32(ql[l+32]>>4|(qh[l]>>6)<<4) - 32
			yy[l] = d * float32(int8(sc[is])) * float32(q1)
			yy[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			yy[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			yy[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
	}
}

// Quantize encodes src into dst as type t with a reference quantizer: the
// same algorithms as ggml's quantize_row_*_ref for the 32-element types, and
// a least-squares scale search for the K-quants. len(src) must be a multiple
// of the block size and dst must hold t.RowSize(len(src)) bytes.
func Quantize(t Type, src []float32, dst []byte) {
	checkQuantArgs("Quantize", t, len(src), len(dst))
	n := len(src)
	dst = dst[:t.RowSize(n)]
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], FP32ToFP16(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], FP32ToBF16(v))
		}
	case Q4_0:
		for b := 0; b < n/32; b++ {
			quantQ4_0((*[32]float32)(src[b*32:]), (*[18]byte)(dst[b*18:]))
		}
	case Q4_1:
		for b := 0; b < n/32; b++ {
			quantQ4_1((*[32]float32)(src[b*32:]), (*[20]byte)(dst[b*20:]))
		}
	case Q5_0:
		for b := 0; b < n/32; b++ {
			quantQ5_0((*[32]float32)(src[b*32:]), (*[22]byte)(dst[b*22:]))
		}
	case Q5_1:
		for b := 0; b < n/32; b++ {
			quantQ5_1((*[32]float32)(src[b*32:]), (*[24]byte)(dst[b*24:]))
		}
	case Q8_0:
		for b := 0; b < n/32; b++ {
			quantQ8_0((*[32]float32)(src[b*32:]), (*[34]byte)(dst[b*34:]))
		}
	case Q4_K:
		for b := 0; b < n/256; b++ {
			quantQ4K((*[256]float32)(src[b*256:]), (*[144]byte)(dst[b*144:]))
		}
	case Q5_K:
		for b := 0; b < n/256; b++ {
			quantQ5K((*[256]float32)(src[b*256:]), (*[176]byte)(dst[b*176:]))
		}
	case Q6_K:
		for b := 0; b < n/256; b++ {
			quantQ6K((*[256]float32)(src[b*256:]), (*[210]byte)(dst[b*210:]))
		}
	default:
		panic(fmt.Sprintf("kernels: Quantize: type %s is not supported", t))
	}
}

// signedAbsMax returns the element of largest magnitude (first one on ties),
// with its sign, as ggml's symmetric quantizers use it.
func signedAbsMax(x []float32) float32 {
	var amax, mx float32
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax, mx = a, v
		}
	}
	return mx
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		lo = min(lo, v)
		hi = max(hi, v)
	}
	return lo, hi
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// truncClamp converts like C's (int8_t) cast of a non-negative float, then
// limits to hi (ggml's MIN(hi, (int8_t)(v))).
func truncClamp(v float32, hi int32) byte {
	i := int32(v)
	return byte(min(max(i, 0), hi))
}

func quantQ4_0(x *[32]float32, blk *[18]byte) {
	d := signedAbsMax(x[:]) / -8
	id := inv(d)
	putF16(blk[0:], d)
	for j := 0; j < 16; j++ {
		blk[2+j] = truncClamp(float32(x[j]*id)+8.5, 15) | truncClamp(float32(x[j+16]*id)+8.5, 15)<<4
	}
}

func quantQ4_1(x *[32]float32, blk *[20]byte) {
	lo, hi := minMax(x[:])
	d := (hi - lo) / 15
	id := inv(d)
	putF16(blk[0:], d)
	putF16(blk[2:], lo)
	for j := 0; j < 16; j++ {
		blk[4+j] = truncClamp(float32((x[j]-lo)*id)+0.5, 15) | truncClamp(float32((x[j+16]-lo)*id)+0.5, 15)<<4
	}
}

func quantQ5_0(x *[32]float32, blk *[22]byte) {
	d := signedAbsMax(x[:]) / -16
	id := inv(d)
	putF16(blk[0:], d)
	var qh uint32
	for j := 0; j < 16; j++ {
		x0 := truncClamp(float32(x[j]*id)+16.5, 31)
		x1 := truncClamp(float32(x[j+16]*id)+16.5, 31)
		blk[6+j] = x0&15 | (x1&15)<<4
		qh |= uint32(x0>>4) << j
		qh |= uint32(x1>>4) << (j + 16)
	}
	binary.LittleEndian.PutUint32(blk[2:], qh)
}

func quantQ5_1(x *[32]float32, blk *[24]byte) {
	lo, hi := minMax(x[:])
	d := (hi - lo) / 31
	id := inv(d)
	putF16(blk[0:], d)
	putF16(blk[2:], lo)
	var qh uint32
	for j := 0; j < 16; j++ {
		x0 := truncClamp(float32((x[j]-lo)*id)+0.5, 31)
		x1 := truncClamp(float32((x[j+16]-lo)*id)+0.5, 31)
		blk[8+j] = x0&15 | (x1&15)<<4
		qh |= uint32(x0>>4) << j
		qh |= uint32(x1>>4) << (j + 16)
	}
	binary.LittleEndian.PutUint32(blk[4:], qh)
}

func quantQ8_0(x *[32]float32, blk *[34]byte) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d := amax / 127
	id := inv(d)
	putF16(blk[0:], d)
	for j, v := range x {
		blk[2+j] = byte(int8(roundf(v * id)))
	}
}

// roundf rounds half away from zero like C's roundf, without a branch (the
// sign of activations is random). Adding ±0.5 in float64 is exact for any
// float32, so truncation gives the right result.
func roundf(v float32) int32 {
	f := float64(v)
	half := math.Float64frombits(math.Float64bits(0.5) | math.Float64bits(f)&(1<<63))
	return int32(f + half)
}

// nearestInt rounds half to even like ggml's nearest_int (used by the
// K-quants): adding 1.5·2^23 leaves the rounded integer in the low mantissa
// bits. Valid for |v| < 2^22, far above any level a quantizer computes. The
// float32 conversion keeps the compiler from fusing a product into the add.
func nearestInt(v float32) int32 {
	f := float32(v) + 12582912
	return int32(math.Float32bits(f)&0x7fffff) - 0x400000
}
