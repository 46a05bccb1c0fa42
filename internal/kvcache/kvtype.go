package kvcache

import (
	"fmt"
	"math"
	"strings"
	"unsafe"

	"mistralrs/internal/kernels"
)

// Type is how a pool stores key or value rows. Keys and values may differ
// (llama.cpp's -ctk/-ctv). F32 and F16 are read by attention in place; the
// other types are decoded a tile of rows at a time into float32 (Span.KQ,
// DecodeRows).
//
// Every type but F32 is kept in 16-bit words, so one pool of words holds
// any pair of types: a row of n values takes Words(n) words.
//   - F16, BF16: one word a value, rounded to nearest even.
//   - Q8_0, Q4_0: llama.cpp's blocks of 32 values (a half scale, then 32
//     int8s or 16 bytes of 4-bit pairs), quantized as ggml's reference
//     quantizers do (kernels.Quantize).
//   - F8E4M3: blocks of 32 values as Q8_0's, a half scale d = max|x|/448 and
//     32 bytes of OCP E4M3 (1 sign, 4 exponent bits of bias 7, 3 mantissa
//     bits; no infinities) holding x/d rounded to nearest even and saturated
//     at ±448. mistral.rs scales its f8e4m3 cache per tensor; a scale per
//     block keeps the full range of E4M3 for every head of every position,
//     at 2 bytes per 32 values.
type Type uint8

// The cache types.
const (
	F32 Type = iota
	F16
	BF16
	Q8_0
	Q4_0
	F8E4M3
	nTypes
)

var typeNames = [nTypes]string{"f32", "f16", "bf16", "q8_0", "q4_0", "f8e4m3"}

// String is the type's name as the flags take it.
func (t Type) String() string {
	if t < nTypes {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", t)
}

// Auto is the type "auto" (and "") stands for: f16, chosen by measurement
// (docs/performance.md, "KV cache types"). Its keys and values are within
// a KL of 1e-7 of f32's on float weights, it holds twice f32's tokens, and
// decode at depth reads half the bytes: 1.36x f32's speed at 8000 tokens on
// the 1.2B shape, the same at depth 0. q8_0 is smaller still but costs
// ~500x f16's divergence and decodes no faster end to end.
const Auto = F16

// TypeNames lists the names ParseType accepts.
func TypeNames() string { return "auto (" + Auto.String() + "), " + strings.Join(typeNames[:], ", ") }

// ParseType reads a cache type name; "" and "auto" are Auto.
func ParseType(s string) (Type, error) {
	if s == "" || s == "auto" {
		return Auto, nil
	}
	for t, name := range typeNames {
		if s == name {
			return Type(t), nil
		}
	}
	return F32, fmt.Errorf("KV cache type %q: want one of %s", s, TypeNames())
}

// rotated reports whether rows of t are rotated before they are stored
// (Pool.SetRotation): llama.cpp's quantized types, as llama.cpp does by
// default (its LLAMA_ATTN_ROT_DISABLE turns it off). A rotation spreads
// an outlier channel of a head over all its values before a block of 32
// shares one scale. f8e4m3 keeps mistral.rs's plain rows.
func (t Type) rotated() bool { return t == Q8_0 || t == Q4_0 }

// blockLen is the number of values a type quantizes together.
func (t Type) blockLen() int {
	switch t {
	case Q8_0, Q4_0, F8E4M3:
		return 32
	}
	return 1
}

// CheckRow reports why rows of n values cannot be stored as t.
func (t Type) CheckRow(n int) error {
	if b := t.blockLen(); n%b != 0 {
		return fmt.Errorf("KV cache type %s stores blocks of %d values: this model's rows of %d values do not split into them", t, b, n)
	}
	return nil
}

// Words is the number of 16-bit words a row of n values takes (float32
// rows of a pool of words take two a value).
func (t Type) Words(n int) int {
	switch t {
	case F32:
		return 2 * n
	case Q8_0, F8E4M3:
		return n / 32 * 17
	case Q4_0:
		return n / 32 * 9
	}
	return n
}

// Bytes is the memory of a row of n values.
func (t Type) Bytes(n int) int64 { return 2 * int64(t.Words(n)) }

// kernelType is the kernels type with the same layout, if there is one.
func (t Type) kernelType() (kernels.Type, bool) {
	switch t {
	case F32:
		return kernels.F32, true
	case F16:
		return kernels.F16, true
	case BF16:
		return kernels.BF16, true
	case Q8_0:
		return kernels.Q8_0, true
	case Q4_0:
		return kernels.Q4_0, true
	}
	return 0, false
}

// wordBytes views words as their little-endian bytes, the layout of the
// kernels' blocks (the machines this runs on are little-endian).
func wordBytes(w []uint16) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 2*len(w))
}

// EncodeRow stores the row x as t in dst (t.Words(len(x)) words).
func EncodeRow(t Type, dst []uint16, x []float32) {
	dst = dst[:t.Words(len(x))]
	if t == F16 {
		kernels.F32ToF16s(dst, x)
		return
	}
	if kt, ok := t.kernelType(); ok {
		kernels.Quantize(kt, x, wordBytes(dst))
		return
	}
	b := wordBytes(dst)
	for i := 0; i < len(x); i += 32 {
		encodeF8Block((*[32]float32)(x[i:]), (*[34]byte)(b[i/32*34:]))
	}
}

// DecodeRows decodes values [off, off+w) of cnt rows of t, each rowWords
// words apart in src, into dst (cnt rows of w values, one after another).
func DecodeRows(dst []float32, t Type, src []uint16, rowWords, off, w, cnt int) {
	kernels.VTile(dst, w, &kernels.KVRows{T: t.KV(), W: src, Stride: rowWords, Off: off}, w, cnt)
}

// KV is the kernels' name of t (the same order).
func (t Type) KV() kernels.KVType { return kernels.KVType(t) }

// e4m3Max is the largest finite E4M3 value (0x7e).
const e4m3Max = kernels.E4M3Max

// e4m3Table holds the values of the positive codes 0..0x7e, increasing.
var e4m3Table = func() (t [0x7f]float32) {
	for c := range t {
		t[c] = kernels.E4M3ToFP32(byte(c))
	}
	return t
}()

// e4m3 encodes v as E4M3, rounding to nearest even and saturating at ±448
// (NaN becomes 0: a cache row never holds one from a finite model).
func e4m3(v float32) byte {
	var sign byte
	if v < 0 {
		sign, v = 0x80, -v
	}
	if !(v > 0) { // zero or NaN
		return sign
	}
	if v >= e4m3Max {
		return sign | 0x7e
	}
	lo, hi := 0, len(e4m3Table)-1 // the first code not below v
	for lo < hi {
		mid := (lo + hi) / 2
		if e4m3Table[mid] < v {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	c := lo
	if c > 0 {
		below, above := v-e4m3Table[c-1], e4m3Table[c]-v
		if below < above || (below == above && (c-1)&1 == 0) {
			c--
		}
	}
	return sign | byte(c)
}

// e4m3Value decodes an E4M3 code (the NaN codes 0x7f and 0xff read as ±448:
// the encoder never writes them).
func e4m3Value(c byte) float32 { return kernels.E4M3ToFP32(c) }

func encodeF8Block(x *[32]float32, blk *[34]byte) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	h := kernels.FP32ToFP16(amax / e4m3Max)
	blk[0], blk[1] = byte(h), byte(h>>8)
	d := kernels.FP16ToFP32(h)
	if d == 0 {
		clear(blk[2:])
		return
	}
	id := 1 / d
	for i, v := range x {
		blk[2+i] = e4m3(v * id)
	}
}
