package kernels

import "math"

// FP16ToFP32 converts an IEEE 754 half-precision value to float32 exactly
// (every half value, subnormals included, is representable in float32).
func FP16ToFP32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal half: normalise it, float32 has the range for it.
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// FP32ToFP16 converts f to half precision rounding to nearest even, as the
// F16C instruction vcvtps2ph (and so ggml) does: overflow gives infinity,
// tiny values give subnormals or zero, NaN stays a (quiet) NaN.
func FP32ToFP16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign // below half the smallest subnormal
		}
		m := mant | 0x800000
		shift := uint32(14 - e)
		k := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && k&1 == 1) {
			k++ // may carry into the smallest normal, which is right
		}
		return sign | uint16(k)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is right, up to infinity
	}
	return sign | uint16(h)
}

// F16ToF32s converts halves to float32 (exact): dst[i] = FP16ToFP32(src[i])
// for i < len(src); dst must be at least as long.
func F16ToF32s(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i := f16ToF32sSIMD(dst, src); i < len(src); i++ {
		dst[i] = f16Table[src[i]]
	}
}

// F16RowsToF32 converts rows halves to float32 next to each other: row j's
// w values at src[j*stride:] go to dst[j*w:(j+1)*w] (one call for a tile of
// attention's cached rows).
func F16RowsToF32(dst []float32, src []uint16, stride, w, rows int) {
	if rows <= 0 || w <= 0 {
		return
	}
	_, _ = dst[rows*w-1], src[(rows-1)*stride+w-1]
	if f16RowsSIMD(dst, src, stride, w, rows) {
		return
	}
	for j := range rows {
		F16ToF32s(dst[j*w:(j+1)*w], src[j*stride:j*stride+w])
	}
}

// F32ToF16s converts float32 values to halves as FP32ToFP16 does (round to
// nearest even); dst must be at least as long as src.
func F32ToF16s(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i := f32ToF16sSIMD(dst, src); i < len(src); i++ {
		dst[i] = FP32ToFP16(src[i])
	}
}

// BF16ToFP32 converts a bfloat16 value to float32 (exact).
func BF16ToFP32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// FP32ToBF16 converts f to bfloat16 rounding to nearest even, as ggml does;
// NaN stays a quiet NaN, subnormals are kept (not flushed).
func FP32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// f16Table maps every half value to float32: quantized blocks hold their
// scales as halves, and a table lookup is the cheapest portable conversion.
// It is a package variable (not an init) so it is ready for every init.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = FP16ToFP32(uint16(i))
	}
	return &t
}()

// f16At reads the little-endian half at b[0:2] as float32.
func f16At(b []byte) float32 {
	_ = b[1]
	return f16Table[uint16(b[0])|uint16(b[1])<<8]
}

// putF16 stores f as a little-endian half at b[0:2].
func putF16(b []byte, f float32) {
	h := FP32ToFP16(f)
	b[0] = byte(h)
	b[1] = byte(h >> 8)
}
