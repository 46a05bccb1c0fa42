package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// Pure-Go dot kernels: the fallback on every CPU and the oracle the assembly
// kernels are tested against. Quantized weights meet 8-bit activations in
// blocks of 32: integer sums per block, scaled once per block.

// The float kernels read the weights with encoding/binary (one plain load
// each on little-endian machines) rather than reinterpreting the bytes, so
// that weights need no alignment. They work in chunks of 8 through array
// pointers, which leaves one bounds check per chunk; n is a multiple of 8 in
// practice (model dimensions are multiples of 32), a tail is handled anyway.

func f32le(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }
func f16le(b []byte) float32 { return f16Table[binary.LittleEndian.Uint16(b)] }
func bf16le(b []byte) float32 {
	return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16)
}

func dotF32(w []byte, a *Act, n int) float32 {
	w, y := w[:4*n], a.F[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		x, yv := (*[32]byte)(w[4*i:]), (*[8]float32)(y[i:])
		s0 += f32le(x[0:])*yv[0] + f32le(x[16:])*yv[4]
		s1 += f32le(x[4:])*yv[1] + f32le(x[20:])*yv[5]
		s2 += f32le(x[8:])*yv[2] + f32le(x[24:])*yv[6]
		s3 += f32le(x[12:])*yv[3] + f32le(x[28:])*yv[7]
	}
	for ; i < n; i++ {
		s0 += f32le(w[4*i:]) * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF16(w []byte, a *Act, n int) float32 {
	w, y := w[:2*n], a.F[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		x, yv := (*[16]byte)(w[2*i:]), (*[8]float32)(y[i:])
		s0 += f16le(x[0:])*yv[0] + f16le(x[8:])*yv[4]
		s1 += f16le(x[2:])*yv[1] + f16le(x[10:])*yv[5]
		s2 += f16le(x[4:])*yv[2] + f16le(x[12:])*yv[6]
		s3 += f16le(x[6:])*yv[3] + f16le(x[14:])*yv[7]
	}
	for ; i < n; i++ {
		s0 += f16le(w[2*i:]) * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotBF16(w []byte, a *Act, n int) float32 {
	w, y := w[:2*n], a.F[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		x, yv := (*[16]byte)(w[2*i:]), (*[8]float32)(y[i:])
		s0 += bf16le(x[0:])*yv[0] + bf16le(x[8:])*yv[4]
		s1 += bf16le(x[2:])*yv[1] + bf16le(x[10:])*yv[5]
		s2 += bf16le(x[4:])*yv[2] + bf16le(x[12:])*yv[6]
		s3 += bf16le(x[6:])*yv[3] + bf16le(x[14:])*yv[7]
	}
	for ; i < n; i++ {
		s0 += bf16le(w[2*i:]) * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// The float dot4 kernels decode each weight once for four activation rows.
// With five slices live, loops with per-element decoding run short of
// registers; a []float32 / []uint16 view of the weights keeps the loop
// tight. The views need aligned weights (GGUF aligns tensor data to 32
// bytes), misaligned rows take the plain loop.

// f32View returns w as n float32 values, or nil when w is not 4-byte
// aligned. Little-endian machines only, as GGUF is.
func f32View(w []byte, n int) []float32 {
	w = w[:4*n]
	if n == 0 || uintptr(unsafe.Pointer(&w[0]))%4 != 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&w[0])), n)
}

// u16View is f32View for 16-bit values.
func u16View(w []byte, n int) []uint16 {
	w = w[:2*n]
	if n == 0 || uintptr(unsafe.Pointer(&w[0]))%2 != 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&w[0])), n)
}

func dot4F32(w []byte, a *[4]*Act, n int, out *[4]float32) {
	x := f32View(w, n)
	if x == nil {
		dot4Plain(f32le, 4, w, a, n, out)
		return
	}
	y0, y1, y2, y3 := a[0].F[:n], a[1].F[:n], a[2].F[:n], a[3].F[:n]
	var s0, s1, s2, s3 float32
	for i, v := range x {
		s0 += v * y0[i]
		s1 += v * y1[i]
		s2 += v * y2[i]
		s3 += v * y3[i]
	}
	*out = [4]float32{s0, s1, s2, s3}
}

func dot4F16(w []byte, a *[4]*Act, n int, out *[4]float32) {
	x := u16View(w, n)
	if x == nil {
		dot4Plain(f16le, 2, w, a, n, out)
		return
	}
	t := f16Table
	y0, y1, y2, y3 := a[0].F[:n], a[1].F[:n], a[2].F[:n], a[3].F[:n]
	var s0, s1, s2, s3 float32
	for i, h := range x {
		v := t[h]
		s0 += v * y0[i]
		s1 += v * y1[i]
		s2 += v * y2[i]
		s3 += v * y3[i]
	}
	*out = [4]float32{s0, s1, s2, s3}
}

func dot4BF16(w []byte, a *[4]*Act, n int, out *[4]float32) {
	x := u16View(w, n)
	if x == nil {
		dot4Plain(bf16le, 2, w, a, n, out)
		return
	}
	y0, y1, y2, y3 := a[0].F[:n], a[1].F[:n], a[2].F[:n], a[3].F[:n]
	var s0, s1, s2, s3 float32
	for i, h := range x {
		v := math.Float32frombits(uint32(h) << 16)
		s0 += v * y0[i]
		s1 += v * y1[i]
		s2 += v * y2[i]
		s3 += v * y3[i]
	}
	*out = [4]float32{s0, s1, s2, s3}
}

// dot4Plain is the float dot4 for misaligned weights.
func dot4Plain(get func([]byte) float32, size int, w []byte, a *[4]*Act, n int, out *[4]float32) {
	for k, ak := range a {
		var s float32
		for i, y := range ak.F[:n] {
			s += get(w[size*i:]) * y
		}
		out[k] = s
	}
}

// The dot4 kernels decode each weight block once into 32 integer levels q
// and coefficients (d, m) such that element j of the block is d*q[j] + m,
// then run the four activation rows over the decoded block. For Q6_K the
// 16-element sub-block scales are folded into q (|q·scale| < 2^12). One
// kernel serves every type (dot4Of, with the type's unpack from the
// generated table in gen_generic.go): the unpack functions return q by
// value, so that it stays on the stack through the function value.

// unpackFunc decodes block b (of 32 elements) of w.
type unpackFunc func(w []byte, b int) (q [32]int16, d, m float32)

// dot4Of returns the dot4 kernel of the quantized type whose blocks unpack
// decodes.
func dot4Of(unpack unpackFunc) dot4Func {
	return func(w []byte, a *[4]*Act, n int, out *[4]float32) {
		c := acc4{a: a}
		for b := 0; b < n/32; b++ {
			q, d, m := unpack(w, b)
			c.add(&q, b, d, m)
		}
		*out = c.sum
	}
}

// blockDot4 returns Σ q·a for four activation blocks.
func blockDot4(q *[32]int16, a0, a1, a2, a3 *[32]int8) (s0, s1, s2, s3 int32) {
	for j, v := range q {
		w := int32(v)
		s0 += w * int32(a0[j])
		s1 += w * int32(a1[j])
		s2 += w * int32(a2[j])
		s3 += w * int32(a3[j])
	}
	return
}

// acc4 accumulates the four results of a dot4 kernel block by block.
type acc4 struct {
	a   *[4]*Act
	sum [4]float32
}

func (c *acc4) add(q *[32]int16, b int, d, m float32) {
	a := c.a
	s0, s1, s2, s3 := blockDot4(q, (*[32]int8)(a[0].Qs[b*32:]), (*[32]int8)(a[1].Qs[b*32:]),
		(*[32]int8)(a[2].Qs[b*32:]), (*[32]int8)(a[3].Qs[b*32:]))
	c.sum[0] += d*a[0].D[b]*float32(s0) + m*a[0].S[b]
	c.sum[1] += d*a[1].D[b]*float32(s1) + m*a[1].S[b]
	c.sum[2] += d*a[2].D[b]*float32(s2) + m*a[2].S[b]
	c.sum[3] += d*a[3].D[b]*float32(s3) + m*a[3].S[b]
}

func unpackQ4_0(w []byte, b int) (q [32]int16, d, m float32) {
	blk := (*[18]byte)(w[b*18:])
	for j := 0; j < 16; j++ {
		q[j] = int16(blk[2+j]&15) - 8
		q[j+16] = int16(blk[2+j]>>4) - 8
	}
	return q, f16At(blk[0:]), 0
}

func unpackQ4_1(w []byte, b int) (q [32]int16, d, m float32) {
	blk := (*[20]byte)(w[b*20:])
	for j := 0; j < 16; j++ {
		q[j] = int16(blk[4+j] & 15)
		q[j+16] = int16(blk[4+j] >> 4)
	}
	return q, f16At(blk[0:]), f16At(blk[2:])
}

func unpackQ5_0(w []byte, b int) (q [32]int16, d, m float32) {
	blk := (*[22]byte)(w[b*22:])
	qh := binary.LittleEndian.Uint32(blk[2:])
	for j := 0; j < 16; j++ {
		q[j] = int16(blk[6+j]&15|byte(qh>>j&1)<<4) - 16
		q[j+16] = int16(blk[6+j]>>4|byte(qh>>(j+16)&1)<<4) - 16
	}
	return q, f16At(blk[0:]), 0
}

func unpackQ5_1(w []byte, b int) (q [32]int16, d, m float32) {
	blk := (*[24]byte)(w[b*24:])
	qh := binary.LittleEndian.Uint32(blk[4:])
	for j := 0; j < 16; j++ {
		q[j] = int16(blk[8+j]&15 | byte(qh>>j&1)<<4)
		q[j+16] = int16(blk[8+j]>>4 | byte(qh>>(j+16)&1)<<4)
	}
	return q, f16At(blk[0:]), f16At(blk[2:])
}

func unpackQ8_0(w []byte, b int) (q [32]int16, d, m float32) {
	blk := (*[34]byte)(w[b*34:])
	for j := 0; j < 32; j++ {
		q[j] = int16(int8(blk[2+j]))
	}
	return q, f16At(blk[0:]), 0
}

func unpackQ4_K(w []byte, b int) (q [32]int16, d, m float32) {
	sb, j := b/8, b%8
	blk := (*[144]byte)(w[sb*144:])
	qs := (*[32]byte)(blk[16+32*(j/2):])
	shift := uint(4 * (j & 1))
	for l := 0; l < 32; l++ {
		q[l] = int16(qs[l] >> shift & 15)
	}
	sc, mn := scaleMinK4(j, (*[12]byte)(blk[4:]))
	return q, f16At(blk[0:]) * float32(sc), -f16At(blk[2:]) * float32(mn)
}

func unpackQ5_K(w []byte, b int) (q [32]int16, d, m float32) {
	sb, j := b/8, b%8
	blk := (*[176]byte)(w[sb*176:])
	qh := (*[32]byte)(blk[16:])
	qs := (*[32]byte)(blk[48+32*(j/2):])
	shift, hshift := uint(4*(j&1)), uint(j)
	for l := 0; l < 32; l++ {
		q[l] = int16(qs[l]>>shift&15 | (qh[l]>>hshift&1)<<4)
	}
	sc, mn := scaleMinK4(j, (*[12]byte)(blk[4:]))
	return q, f16At(blk[0:]) * float32(sc), -f16At(blk[2:]) * float32(mn)
}

func unpackQ6_K(w []byte, b int) (q [32]int16, d, m float32) {
	sb, j := b/8, b%8
	blk := (*[210]byte)(w[sb*210:])
	h, k := j/4, j%4 // half of the super-block, group of 32 within it
	ql := (*[32]byte)(blk[64*h+32*(k&1):])
	qh := (*[32]byte)(blk[128+32*h:])
	nibShift := uint(4 * (k >> 1))
	hiShift := uint(2 * k)
	sc := blk[192+8*h+2*k:]
	sc0, sc1 := int16(int8(sc[0])), int16(int8(sc[1]))
	for l := 0; l < 16; l++ {
		q[l] = (int16((ql[l]>>nibShift)&15|(qh[l]>>hiShift&3)<<4) - 32) * sc0
		q[l+16] = (int16((ql[l+16]>>nibShift)&15|(qh[l+16]>>hiShift&3)<<4) - 32) * sc1
	}
	return q, f16At(blk[208:]), 0
}
