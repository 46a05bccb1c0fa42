package kernels

import "encoding/binary"

// Fused pure-Go dot kernels of the quantized types against 8-bit
// activations: decode and multiply in one pass, integer sums per block of
// 32, one float scaling per block. The inner loops are small functions of
// their own: the compiler then keeps their accumulators in registers
// (inlined into the block loop they spilled to the stack), and the
// array-pointer arguments make them free of bounds checks.

// nibbleDot is Σ nibble·a over a block of 32: low nibbles are elements
// 0..15, high nibbles 16..31 (Q4_0, Q4_1).
func nibbleDot(nib *[16]byte, a *[32]int8) int32 {
	var s0, s1, s2, s3 int32
	for j := 0; j < 16; j += 2 {
		v0, v1 := nib[j], nib[j+1]
		s0 += int32(v0&15) * int32(a[j])
		s1 += int32(v0>>4) * int32(a[j+16])
		s2 += int32(v1&15) * int32(a[j+1])
		s3 += int32(v1>>4) * int32(a[j+17])
	}
	return (s0 + s1) + (s2 + s3)
}

// q5Dot is nibbleDot with the fifth bits from qh (Q5_0, Q5_1).
func q5Dot(nib *[16]byte, qh uint32, a *[32]int8) int32 {
	var s0, s1, s2, s3 int32
	for j := 0; j < 16; j += 2 {
		v0, v1 := nib[j], nib[j+1]
		h0, h1 := qh>>j, qh>>(j+16)
		s0 += int32(v0&15|byte(h0&1)<<4) * int32(a[j])
		s1 += int32(v0>>4|byte(h1&1)<<4) * int32(a[j+16])
		s2 += int32(v1&15|byte(h0&2)<<3) * int32(a[j+1])
		s3 += int32(v1>>4|byte(h1&2)<<3) * int32(a[j+17])
	}
	return (s0 + s1) + (s2 + s3)
}

// i8Dot is Σ x·a over a block of 32 signed bytes (Q8_0).
func i8Dot(x *[32]byte, a *[32]int8) int32 {
	var s0, s1, s2, s3 int32
	for j := 0; j < 32; j += 4 {
		s0 += int32(int8(x[j])) * int32(a[j])
		s1 += int32(int8(x[j+1])) * int32(a[j+1])
		s2 += int32(int8(x[j+2])) * int32(a[j+2])
		s3 += int32(int8(x[j+3])) * int32(a[j+3])
	}
	return (s0 + s1) + (s2 + s3)
}

// nibbleDot2 covers one 64-element chunk of a Q4_K super-block: the low
// nibbles of 32 bytes are one sub-block, the high nibbles the next.
func nibbleDot2(nib *[32]byte, lo, hi *[32]int8) (int32, int32) {
	var s0, s1, s2, s3 int32
	for l := 0; l < 32; l += 2 {
		v0, v1 := nib[l], nib[l+1]
		s0 += int32(v0&15) * int32(lo[l])
		s1 += int32(v0>>4) * int32(hi[l])
		s2 += int32(v1&15) * int32(lo[l+1])
		s3 += int32(v1>>4) * int32(hi[l+1])
	}
	return s0 + s2, s1 + s3
}

// q5Dot2 is nibbleDot2 with fifth bits: bit c of qh[l] for the low
// nibbles, bit c+1 for the high ones (Q5_K).
func q5Dot2(nib, qh *[32]byte, c uint, lo, hi *[32]int8) (int32, int32) {
	var s0, s1, s2, s3 int32
	for l := 0; l < 32; l += 2 {
		v0, v1 := nib[l], nib[l+1]
		h0, h1 := qh[l]>>c, qh[l+1]>>c
		s0 += int32(v0&15|(h0&1)<<4) * int32(lo[l])
		s1 += int32(v0>>4|(h0&2)<<3) * int32(hi[l])
		s2 += int32(v1&15|(h1&1)<<4) * int32(lo[l+1])
		s3 += int32(v1>>4|(h1&2)<<3) * int32(hi[l+1])
	}
	return s0 + s2, s1 + s3
}

// q6Dot covers 16 positions l of one half of a Q6_K super-block, for the
// four groups of 32 that share them (elements l, l+32, l+64, l+96); it
// returns Σ(q-32)·a per group.
func q6Dot(ql0, ql1, qh *[16]byte, a0, a1, a2, a3 *[16]int8) (s0, s1, s2, s3 int32) {
	for l, hb := range qh {
		v0, v1 := ql0[l], ql1[l]
		s0 += (int32(v0&15|(hb&3)<<4) - 32) * int32(a0[l])
		s1 += (int32(v1&15|(hb>>2&3)<<4) - 32) * int32(a1[l])
		s2 += (int32(v0>>4|(hb>>4&3)<<4) - 32) * int32(a2[l])
		s3 += (int32(v1>>4|(hb>>6)<<4) - 32) * int32(a3[l])
	}
	return
}

func dotQ4_0(w []byte, a *Act, n int) float32 {
	nb := n / 32
	w = w[:nb*18]
	qs, ds, ss := a.Qs[:nb*32], a.D[:nb], a.S[:nb]
	var sum float32
	for b := range ds {
		blk := (*[18]byte)(w[b*18:])
		s := nibbleDot((*[16]byte)(blk[2:]), (*[32]int8)(qs[b*32:]))
		// Σ(q-8)·a = Σq·a - 8·Σa, and S holds D·Σa.
		sum += f16At(blk[:]) * (ds[b]*float32(s) - 8*ss[b])
	}
	return sum
}

func dotQ4_1(w []byte, a *Act, n int) float32 {
	nb := n / 32
	w = w[:nb*20]
	qs, ds, ss := a.Qs[:nb*32], a.D[:nb], a.S[:nb]
	var sum float32
	for b := range ds {
		blk := (*[20]byte)(w[b*20:])
		s := nibbleDot((*[16]byte)(blk[4:]), (*[32]int8)(qs[b*32:]))
		sum += f16At(blk[:])*ds[b]*float32(s) + f16At(blk[2:])*ss[b]
	}
	return sum
}

func dotQ5_0(w []byte, a *Act, n int) float32 {
	nb := n / 32
	w = w[:nb*22]
	qs, ds, ss := a.Qs[:nb*32], a.D[:nb], a.S[:nb]
	var sum float32
	for b := range ds {
		blk := (*[22]byte)(w[b*22:])
		s := q5Dot((*[16]byte)(blk[6:]), binary.LittleEndian.Uint32(blk[2:]), (*[32]int8)(qs[b*32:]))
		sum += f16At(blk[:]) * (ds[b]*float32(s) - 16*ss[b])
	}
	return sum
}

func dotQ5_1(w []byte, a *Act, n int) float32 {
	nb := n / 32
	w = w[:nb*24]
	qs, ds, ss := a.Qs[:nb*32], a.D[:nb], a.S[:nb]
	var sum float32
	for b := range ds {
		blk := (*[24]byte)(w[b*24:])
		s := q5Dot((*[16]byte)(blk[8:]), binary.LittleEndian.Uint32(blk[4:]), (*[32]int8)(qs[b*32:]))
		sum += f16At(blk[:])*ds[b]*float32(s) + f16At(blk[2:])*ss[b]
	}
	return sum
}

func dotQ8_0(w []byte, a *Act, n int) float32 {
	nb := n / 32
	w = w[:nb*34]
	qs, ds := a.Qs[:nb*32], a.D[:nb]
	var sum float32
	for b := range ds {
		blk := (*[34]byte)(w[b*34:])
		s := i8Dot((*[32]byte)(blk[2:]), (*[32]int8)(qs[b*32:]))
		sum += f16At(blk[:]) * ds[b] * float32(s)
	}
	return sum
}

// kScaleMins decodes the eight 6-bit scales and mins of a Q4_K/Q5_K
// super-block at once.
func kScaleMins(p *[12]byte) (sc, mn [8]int32) {
	for j := 0; j < 4; j++ {
		sc[j] = int32(p[j] & 63)
		mn[j] = int32(p[j+4] & 63)
		sc[j+4] = int32(p[j+8]&15 | (p[j]>>6)<<4)
		mn[j+4] = int32(p[j+8]>>4 | (p[j+4]>>6)<<4)
	}
	return sc, mn
}

func dotQ4_K(w []byte, a *Act, n int) float32 {
	nsb := n / 256
	w = w[:nsb*144]
	qs, ds, ss := a.Qs[:nsb*256], a.D[:nsb*8], a.S[:nsb*8]
	var sum float32
	for sb := 0; sb < nsb; sb++ {
		blk := (*[144]byte)(w[sb*144:])
		sc, mn := kScaleMins((*[12]byte)(blk[4:]))
		d8 := (*[8]float32)(ds[sb*8:])
		s8 := (*[8]float32)(ss[sb*8:])
		q := (*[256]int8)(qs[sb*256:])
		var bsum, msum float32
		for c := 0; c < 4; c++ {
			s0, s1 := nibbleDot2((*[32]byte)(blk[16+32*c:]), (*[32]int8)(q[64*c:]), (*[32]int8)(q[64*c+32:]))
			bsum += d8[2*c]*float32(sc[2*c]*s0) + d8[2*c+1]*float32(sc[2*c+1]*s1)
			msum += s8[2*c]*float32(mn[2*c]) + s8[2*c+1]*float32(mn[2*c+1])
		}
		sum += f16At(blk[0:])*bsum - f16At(blk[2:])*msum
	}
	return sum
}

func dotQ5_K(w []byte, a *Act, n int) float32 {
	nsb := n / 256
	w = w[:nsb*176]
	qs, ds, ss := a.Qs[:nsb*256], a.D[:nsb*8], a.S[:nsb*8]
	var sum float32
	for sb := 0; sb < nsb; sb++ {
		blk := (*[176]byte)(w[sb*176:])
		sc, mn := kScaleMins((*[12]byte)(blk[4:]))
		qh := (*[32]byte)(blk[16:])
		d8 := (*[8]float32)(ds[sb*8:])
		s8 := (*[8]float32)(ss[sb*8:])
		q := (*[256]int8)(qs[sb*256:])
		var bsum, msum float32
		for c := 0; c < 4; c++ {
			s0, s1 := q5Dot2((*[32]byte)(blk[48+32*c:]), qh, uint(2*c), (*[32]int8)(q[64*c:]), (*[32]int8)(q[64*c+32:]))
			bsum += d8[2*c]*float32(sc[2*c]*s0) + d8[2*c+1]*float32(sc[2*c+1]*s1)
			msum += s8[2*c]*float32(mn[2*c]) + s8[2*c+1]*float32(mn[2*c+1])
		}
		sum += f16At(blk[0:])*bsum - f16At(blk[2:])*msum
	}
	return sum
}

func dotQ6_K(w []byte, a *Act, n int) float32 {
	nsb := n / 256
	w = w[:nsb*210]
	qs, ds := a.Qs[:nsb*256], a.D[:nsb*8]
	var sum float32
	for sb := 0; sb < nsb; sb++ {
		blk := (*[210]byte)(w[sb*210:])
		d8 := (*[8]float32)(ds[sb*8:])
		var bsum float32
		for h := 0; h < 2; h++ {
			sc := (*[8]byte)(blk[192+8*h:])
			q := (*[128]int8)(qs[sb*256+128*h:])
			// Each group of 32 has two scales, one per 16 positions.
			var isum [4]int32
			for sub := 0; sub < 2; sub++ {
				s0, s1, s2, s3 := q6Dot((*[16]byte)(blk[64*h+16*sub:]), (*[16]byte)(blk[64*h+32+16*sub:]),
					(*[16]byte)(blk[128+32*h+16*sub:]),
					(*[16]int8)(q[16*sub:]), (*[16]int8)(q[32+16*sub:]), (*[16]int8)(q[64+16*sub:]), (*[16]int8)(q[96+16*sub:]))
				isum[0] += int32(int8(sc[0+sub])) * s0
				isum[1] += int32(int8(sc[2+sub])) * s1
				isum[2] += int32(int8(sc[4+sub])) * s2
				isum[3] += int32(int8(sc[6+sub])) * s3
			}
			bsum += d8[4*h]*float32(isum[0]) + d8[4*h+1]*float32(isum[1]) +
				d8[4*h+2]*float32(isum[2]) + d8[4*h+3]*float32(isum[3])
		}
		sum += f16At(blk[208:]) * bsum
	}
	return sum
}
