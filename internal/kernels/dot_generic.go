package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// Pure-Go dot kernels: the fallback on every CPU and the oracle the assembly
// kernels are tested against. Quantized weights meet 8-bit activations in
// blocks of 32: integer sums per block, scaled once per block.

// genericKernels returns the pure-Go kernel of every supported type. dotTable
// is initialised from it as a package variable, so it is complete before any
// init function (the assembly files' included) runs.
func genericKernels() map[Type]*typeKernels {
	return map[Type]*typeKernels{
		F32:  {dot: dotF32, dot4: dot4F32},
		F16:  {dot: dotF16, dot4: dot4F16},
		BF16: {dot: dotBF16, dot4: dot4BF16},
		Q4_0: {dot: dotQ4_0, dot4: dot4Q4_0},
		Q4_1: {dot: dotQ4_1, dot4: dot4Q4_1},
		Q5_0: {dot: dotQ5_0, dot4: dot4Q5_0},
		Q5_1: {dot: dotQ5_1, dot4: dot4Q5_1},
		Q8_0: {dot: dotQ8_0, dot4: dot4Q8_0},
		Q4_K: {dot: dotQ4_K, dot4: dot4Q4_K},
		Q5_K: {dot: dotQ5_K, dot4: dot4Q5_K},
		Q6_K: {dot: dotQ6_K, dot4: dot4Q6_K},
	}
}

// f32View reinterprets little-endian float32 bytes in place (GGUF data is
// little-endian, as are all the machines we target).
func f32View(w []byte, n int) []float32 {
	if n == 0 {
		return nil
	}
	_ = w[4*n-1]
	return unsafe.Slice((*float32)(unsafe.Pointer(&w[0])), n)
}

func u16View(w []byte, n int) []uint16 {
	if n == 0 {
		return nil
	}
	_ = w[2*n-1]
	return unsafe.Slice((*uint16)(unsafe.Pointer(&w[0])), n)
}

func dotF32(w []byte, a *Act, n int) float32 {
	x := f32View(w, n)
	y := a.F[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += x[i] * y[i]
		s1 += x[i+1] * y[i+1]
		s2 += x[i+2] * y[i+2]
		s3 += x[i+3] * y[i+3]
	}
	for ; i < n; i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF16(w []byte, a *Act, n int) float32 {
	x := u16View(w, n)
	y := a.F[:n]
	t := f16Table
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += t[x[i]] * y[i]
		s1 += t[x[i+1]] * y[i+1]
		s2 += t[x[i+2]] * y[i+2]
		s3 += t[x[i+3]] * y[i+3]
	}
	for ; i < n; i++ {
		s0 += t[x[i]] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotBF16(w []byte, a *Act, n int) float32 {
	x := u16View(w, n)
	y := a.F[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += math.Float32frombits(uint32(x[i])<<16) * y[i]
		s1 += math.Float32frombits(uint32(x[i+1])<<16) * y[i+1]
		s2 += math.Float32frombits(uint32(x[i+2])<<16) * y[i+2]
		s3 += math.Float32frombits(uint32(x[i+3])<<16) * y[i+3]
	}
	for ; i < n; i++ {
		s0 += math.Float32frombits(uint32(x[i])<<16) * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot4Float runs four float activation rows against one row of weights
// decoded by get, so the weight row is read once.
func dot4F32(w []byte, a *[4]*Act, n int, out *[4]float32) {
	x := f32View(w, n)
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

// The unpack functions decode block b (of 32 elements) of a quantized row
// into integer levels q and coefficients such that element j of the block is
// d0*q[j] + m for j < 16 and d1*q[j] + m for j >= 16 (the halves differ only
// for Q6_K, whose scales cover 16 elements). The dot4 kernels use them to
// decode each weight block once for four activation rows; they are called
// directly (not through a function value) so that q stays on the stack.

// blockDot returns the integer dot products of the two halves of a block.
func blockDot(q *[32]int8, a *[32]int8) (lo, hi int32) {
	var s0, s1, s2, s3 int32
	for j := 0; j < 16; j += 2 {
		s0 += int32(q[j]) * int32(a[j])
		s1 += int32(q[j+1]) * int32(a[j+1])
		s2 += int32(q[j+16]) * int32(a[j+16])
		s3 += int32(q[j+17]) * int32(a[j+17])
	}
	return s0 + s1, s2 + s3
}

func unpackQ4_0(w []byte, b int, q *[32]int8) (d0, d1, m float32) {
	blk := (*[18]byte)(w[b*18:])
	for j := 0; j < 16; j++ {
		q[j] = int8(blk[2+j]&15) - 8
		q[j+16] = int8(blk[2+j]>>4) - 8
	}
	d := f16At(blk[0:])
	return d, d, 0
}

func unpackQ4_1(w []byte, b int, q *[32]int8) (d0, d1, m float32) {
	blk := (*[20]byte)(w[b*20:])
	for j := 0; j < 16; j++ {
		q[j] = int8(blk[4+j] & 15)
		q[j+16] = int8(blk[4+j] >> 4)
	}
	d := f16At(blk[0:])
	return d, d, f16At(blk[2:])
}

func unpackQ5_0(w []byte, b int, q *[32]int8) (d0, d1, m float32) {
	blk := (*[22]byte)(w[b*22:])
	qh := binary.LittleEndian.Uint32(blk[2:])
	for j := 0; j < 16; j++ {
		q[j] = int8(blk[6+j]&15|byte(qh>>j&1)<<4) - 16
		q[j+16] = int8(blk[6+j]>>4|byte(qh>>(j+16)&1)<<4) - 16
	}
	d := f16At(blk[0:])
	return d, d, 0
}

func unpackQ5_1(w []byte, b int, q *[32]int8) (d0, d1, m float32) {
	blk := (*[24]byte)(w[b*24:])
	qh := binary.LittleEndian.Uint32(blk[4:])
	for j := 0; j < 16; j++ {
		q[j] = int8(blk[8+j]&15 | byte(qh>>j&1)<<4)
		q[j+16] = int8(blk[8+j]>>4 | byte(qh>>(j+16)&1)<<4)
	}
	d := f16At(blk[0:])
	return d, d, f16At(blk[2:])
}

func unpackQ8_0(w []byte, b int, q *[32]int8) (d0, d1, m float32) {
	blk := (*[34]byte)(w[b*34:])
	for j := 0; j < 32; j++ {
		q[j] = int8(blk[2+j])
	}
	d := f16At(blk[0:])
	return d, d, 0
}

func unpackQ4_K(w []byte, b int, q *[32]int8) (d0, d1, m float32) {
	sb, j := b/8, b%8
	blk := (*[144]byte)(w[sb*144:])
	qs := (*[32]byte)(blk[16+32*(j/2):])
	if j&1 == 0 {
		for l := 0; l < 32; l++ {
			q[l] = int8(qs[l] & 15)
		}
	} else {
		for l := 0; l < 32; l++ {
			q[l] = int8(qs[l] >> 4)
		}
	}
	sc, mn := scaleMinK4(j, (*[12]byte)(blk[4:]))
	d := f16At(blk[0:]) * float32(sc)
	return d, d, -f16At(blk[2:]) * float32(mn)
}

func unpackQ5_K(w []byte, b int, q *[32]int8) (d0, d1, m float32) {
	sb, j := b/8, b%8
	blk := (*[176]byte)(w[sb*176:])
	qh := (*[32]byte)(blk[16:])
	qs := (*[32]byte)(blk[48+32*(j/2):])
	shift := uint(j)
	if j&1 == 0 {
		for l := 0; l < 32; l++ {
			q[l] = int8(qs[l]&15 | (qh[l]>>shift&1)<<4)
		}
	} else {
		for l := 0; l < 32; l++ {
			q[l] = int8(qs[l]>>4 | (qh[l]>>shift&1)<<4)
		}
	}
	sc, mn := scaleMinK4(j, (*[12]byte)(blk[4:]))
	d := f16At(blk[0:]) * float32(sc)
	return d, d, -f16At(blk[2:]) * float32(mn)
}

func unpackQ6_K(w []byte, b int, q *[32]int8) (d0, d1, m float32) {
	sb, j := b/8, b%8
	blk := (*[210]byte)(w[sb*210:])
	h, k := j/4, j%4 // half of the super-block, group of 32 within it
	ql := (*[32]byte)(blk[64*h+32*(k&1):])
	qh := (*[32]byte)(blk[128+32*h:])
	nibShift := uint(4 * (k >> 1))
	hiShift := uint(2 * k)
	for l := 0; l < 32; l++ {
		q[l] = int8((ql[l]>>nibShift)&15|(qh[l]>>hiShift&3)<<4) - 32
	}
	d := f16At(blk[208:])
	sc := blk[192+8*h+2*k:]
	return d * float32(int8(sc[0])), d * float32(int8(sc[1])), 0
}

func dot4Q4_0(w []byte, a *[4]*Act, n int, out *[4]float32) {
	nb := n / 32
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	var q [32]int8
	var s0, s1, s2, s3 float32
	for b := 0; b < nb; b++ {
		d0, d1, m := unpackQ4_0(w, b, &q)
		s0 += blockSum(&q, a0, b, d0, d1, m)
		s1 += blockSum(&q, a1, b, d0, d1, m)
		s2 += blockSum(&q, a2, b, d0, d1, m)
		s3 += blockSum(&q, a3, b, d0, d1, m)
	}
	*out = [4]float32{s0, s1, s2, s3}
}

func dot4Q4_1(w []byte, a *[4]*Act, n int, out *[4]float32) {
	nb := n / 32
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	var q [32]int8
	var s0, s1, s2, s3 float32
	for b := 0; b < nb; b++ {
		d0, d1, m := unpackQ4_1(w, b, &q)
		s0 += blockSum(&q, a0, b, d0, d1, m)
		s1 += blockSum(&q, a1, b, d0, d1, m)
		s2 += blockSum(&q, a2, b, d0, d1, m)
		s3 += blockSum(&q, a3, b, d0, d1, m)
	}
	*out = [4]float32{s0, s1, s2, s3}
}

func dot4Q5_0(w []byte, a *[4]*Act, n int, out *[4]float32) {
	nb := n / 32
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	var q [32]int8
	var s0, s1, s2, s3 float32
	for b := 0; b < nb; b++ {
		d0, d1, m := unpackQ5_0(w, b, &q)
		s0 += blockSum(&q, a0, b, d0, d1, m)
		s1 += blockSum(&q, a1, b, d0, d1, m)
		s2 += blockSum(&q, a2, b, d0, d1, m)
		s3 += blockSum(&q, a3, b, d0, d1, m)
	}
	*out = [4]float32{s0, s1, s2, s3}
}

func dot4Q5_1(w []byte, a *[4]*Act, n int, out *[4]float32) {
	nb := n / 32
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	var q [32]int8
	var s0, s1, s2, s3 float32
	for b := 0; b < nb; b++ {
		d0, d1, m := unpackQ5_1(w, b, &q)
		s0 += blockSum(&q, a0, b, d0, d1, m)
		s1 += blockSum(&q, a1, b, d0, d1, m)
		s2 += blockSum(&q, a2, b, d0, d1, m)
		s3 += blockSum(&q, a3, b, d0, d1, m)
	}
	*out = [4]float32{s0, s1, s2, s3}
}

func dot4Q8_0(w []byte, a *[4]*Act, n int, out *[4]float32) {
	nb := n / 32
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	var q [32]int8
	var s0, s1, s2, s3 float32
	for b := 0; b < nb; b++ {
		d0, d1, m := unpackQ8_0(w, b, &q)
		s0 += blockSum(&q, a0, b, d0, d1, m)
		s1 += blockSum(&q, a1, b, d0, d1, m)
		s2 += blockSum(&q, a2, b, d0, d1, m)
		s3 += blockSum(&q, a3, b, d0, d1, m)
	}
	*out = [4]float32{s0, s1, s2, s3}
}

func dot4Q4_K(w []byte, a *[4]*Act, n int, out *[4]float32) {
	nb := n / 32
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	var q [32]int8
	var s0, s1, s2, s3 float32
	for b := 0; b < nb; b++ {
		d0, d1, m := unpackQ4_K(w, b, &q)
		s0 += blockSum(&q, a0, b, d0, d1, m)
		s1 += blockSum(&q, a1, b, d0, d1, m)
		s2 += blockSum(&q, a2, b, d0, d1, m)
		s3 += blockSum(&q, a3, b, d0, d1, m)
	}
	*out = [4]float32{s0, s1, s2, s3}
}

func dot4Q5_K(w []byte, a *[4]*Act, n int, out *[4]float32) {
	nb := n / 32
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	var q [32]int8
	var s0, s1, s2, s3 float32
	for b := 0; b < nb; b++ {
		d0, d1, m := unpackQ5_K(w, b, &q)
		s0 += blockSum(&q, a0, b, d0, d1, m)
		s1 += blockSum(&q, a1, b, d0, d1, m)
		s2 += blockSum(&q, a2, b, d0, d1, m)
		s3 += blockSum(&q, a3, b, d0, d1, m)
	}
	*out = [4]float32{s0, s1, s2, s3}
}

func dot4Q6_K(w []byte, a *[4]*Act, n int, out *[4]float32) {
	nb := n / 32
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	var q [32]int8
	var s0, s1, s2, s3 float32
	for b := 0; b < nb; b++ {
		d0, d1, m := unpackQ6_K(w, b, &q)
		s0 += blockSum(&q, a0, b, d0, d1, m)
		s1 += blockSum(&q, a1, b, d0, d1, m)
		s2 += blockSum(&q, a2, b, d0, d1, m)
		s3 += blockSum(&q, a3, b, d0, d1, m)
	}
	*out = [4]float32{s0, s1, s2, s3}
}

// blockSum is one unpacked weight block against block b of a.
func blockSum(q *[32]int8, a *Act, b int, d0, d1, m float32) float32 {
	lo, hi := blockDot(q, (*[32]int8)(a.Qs[b*32:]))
	return a.D[b]*(d0*float32(lo)+d1*float32(hi)) + m*a.S[b]
}
