package kernels

import "encoding/binary"

// Fused pure-Go dot kernels of the quantized types against 8-bit
// activations: decode and multiply in one pass, integer sums per block of
// 32, one float scaling per block. Array-pointer conversions let the
// compiler drop the bounds checks of the inner loops.

func dotQ4_0(w []byte, a *Act, n int) float32 {
	nb := n / 32
	w = w[:nb*18]
	qs, ds := a.Qs[:nb*32], a.D[:nb]
	var sum float32
	for b := range ds {
		blk := (*[18]byte)(w[b*18:])
		nib := (*[16]byte)(blk[2:])
		lo, hi := (*[16]int8)(qs[b*32:]), (*[16]int8)(qs[b*32+16:])
		var s0, s1 int32
		for j, v := range nib {
			s0 += (int32(v&15) - 8) * int32(lo[j])
			s1 += (int32(v>>4) - 8) * int32(hi[j])
		}
		sum += f16At(blk[:]) * ds[b] * float32(s0+s1)
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
		nib := (*[16]byte)(blk[4:])
		lo, hi := (*[16]int8)(qs[b*32:]), (*[16]int8)(qs[b*32+16:])
		var s0, s1 int32
		for j, v := range nib {
			s0 += int32(v&15) * int32(lo[j])
			s1 += int32(v>>4) * int32(hi[j])
		}
		sum += f16At(blk[:])*ds[b]*float32(s0+s1) + f16At(blk[2:])*ss[b]
	}
	return sum
}

func dotQ5_0(w []byte, a *Act, n int) float32 {
	nb := n / 32
	w = w[:nb*22]
	qs, ds := a.Qs[:nb*32], a.D[:nb]
	var sum float32
	for b := range ds {
		blk := (*[22]byte)(w[b*22:])
		qh := binary.LittleEndian.Uint32(blk[2:])
		nib := (*[16]byte)(blk[6:])
		lo, hi := (*[16]int8)(qs[b*32:]), (*[16]int8)(qs[b*32+16:])
		var s0, s1 int32
		for j, v := range nib {
			s0 += (int32(v&15|byte(qh>>j&1)<<4) - 16) * int32(lo[j])
			s1 += (int32(v>>4|byte(qh>>(j+16)&1)<<4) - 16) * int32(hi[j])
		}
		sum += f16At(blk[:]) * ds[b] * float32(s0+s1)
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
		qh := binary.LittleEndian.Uint32(blk[4:])
		nib := (*[16]byte)(blk[8:])
		lo, hi := (*[16]int8)(qs[b*32:]), (*[16]int8)(qs[b*32+16:])
		var s0, s1 int32
		for j, v := range nib {
			s0 += int32(v&15|byte(qh>>j&1)<<4) * int32(lo[j])
			s1 += int32(v>>4|byte(qh>>(j+16)&1)<<4) * int32(hi[j])
		}
		sum += f16At(blk[:])*ds[b]*float32(s0+s1) + f16At(blk[2:])*ss[b]
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
		x := (*[32]byte)(blk[2:])
		q := (*[32]int8)(qs[b*32:])
		var s0, s1, s2, s3 int32
		for j := 0; j < 32; j += 4 {
			s0 += int32(int8(x[j])) * int32(q[j])
			s1 += int32(int8(x[j+1])) * int32(q[j+1])
			s2 += int32(int8(x[j+2])) * int32(q[j+2])
			s3 += int32(int8(x[j+3])) * int32(q[j+3])
		}
		sum += f16At(blk[:]) * ds[b] * float32(s0+s1+s2+s3)
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
		var bsum, msum float32
		for c := 0; c < 4; c++ {
			nib := (*[32]byte)(blk[16+32*c:])
			lo := (*[32]int8)(qs[sb*256+64*c:])
			hi := (*[32]int8)(qs[sb*256+64*c+32:])
			var s0, s1, s2, s3 int32
			for l := 0; l < 32; l += 2 {
				v0, v1 := nib[l], nib[l+1]
				s0 += int32(v0&15) * int32(lo[l])
				s1 += int32(v0>>4) * int32(hi[l])
				s2 += int32(v1&15) * int32(lo[l+1])
				s3 += int32(v1>>4) * int32(hi[l+1])
			}
			bsum += d8[2*c]*float32(sc[2*c]*(s0+s2)) + d8[2*c+1]*float32(sc[2*c+1]*(s1+s3))
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
		var bsum, msum float32
		for c := 0; c < 4; c++ {
			nib := (*[32]byte)(blk[48+32*c:])
			lo := (*[32]int8)(qs[sb*256+64*c:])
			hi := (*[32]int8)(qs[sb*256+64*c+32:])
			sl, sh := uint(2*c), uint(2*c+1)
			var s0, s1 int32
			for l, v := range nib {
				h := qh[l]
				s0 += int32(v&15|(h>>sl&1)<<4) * int32(lo[l])
				s1 += int32(v>>4|(h>>sh&1)<<4) * int32(hi[l])
			}
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
			// isum[k]: integer sum of the 32 elements of group k (elements
			// 32k..32k+31 of this half), each 16 scaled by its own scale.
			var isum [4]int32
			for sub := 0; sub < 2; sub++ {
				ql0 := (*[16]byte)(blk[64*h+16*sub:])
				ql1 := (*[16]byte)(blk[64*h+32+16*sub:])
				qh := (*[16]byte)(blk[128+32*h+16*sub:])
				base := sb*256 + 128*h + 16*sub
				a0 := (*[16]int8)(qs[base:])
				a1 := (*[16]int8)(qs[base+32:])
				a2 := (*[16]int8)(qs[base+64:])
				a3 := (*[16]int8)(qs[base+96:])
				var s0, s1, s2, s3 int32
				for l, hb := range qh {
					v0, v1 := ql0[l], ql1[l]
					s0 += (int32(v0&15|(hb&3)<<4) - 32) * int32(a0[l])
					s1 += (int32(v1&15|(hb>>2&3)<<4) - 32) * int32(a1[l])
					s2 += (int32(v0>>4|(hb>>4&3)<<4) - 32) * int32(a2[l])
					s3 += (int32(v1>>4|(hb>>6)<<4) - 32) * int32(a3[l])
				}
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
