package kernels

import "math"

// K-quant reference quantizers. They follow ggml's structure (per sub-block
// least-squares fit, then 6- or 8-bit quantization of the sub-block scales
// against one half-precision super-block scale, then requantization of the
// values against the scales actually stored) with a simpler search than
// ggml's make_qkx2_quants; the output is a valid block whatever the input.

// fitScaleMin fits x ≈ scale*L - mn with L in 0..nmax, scale >= 0, mn >= 0,
// minimising the error weighted by w. It tries a range of step sizes around
// (max-min)/nmax and refines each by weighted least squares.
func fitScaleMin(x, w []float32, nmax int32, L []uint8) (scale, mn float32) {
	lo, hi := minMax(x)
	lo = min(lo, 0) // the offset is stored as a non-negative min
	if hi <= lo {
		for i := range L {
			L[i] = 0
		}
		return 0, -lo
	}
	var aux [32]uint8
	Laux := aux[:len(x)]
	bestErr := float32(math.MaxFloat32)
	scale, mn = (hi-lo)/float32(nmax), -lo
	for step := 0; step <= 20; step++ {
		iscale := (float32(nmax) - 1 + 0.1*float32(step)) / (hi - lo)
		var sw, sl, sl2, sx, sxl float32
		for i, v := range x {
			l := min(max(nearestInt(iscale*(v-lo)), 0), nmax)
			Laux[i] = uint8(l)
			fl := float32(l)
			sw += w[i]
			sl += w[i] * fl
			sl2 += w[i] * fl * fl
			sx += w[i] * v
			sxl += w[i] * v * fl
		}
		det := sw*sl2 - sl*sl
		if det <= 0 {
			continue
		}
		s := (sw*sxl - sx*sl) / det
		m := (sl2*sx - sl*sxl) / det // value ≈ s*l + m
		if m > 0 {
			m = 0
			s = sxl / sl2
		}
		if s <= 0 {
			continue
		}
		// Σw(s·l + m - x)² expanded, less the constant Σw·x².
		e := s*s*sl2 + 2*s*m*sl + m*m*sw - 2*s*sxl - 2*m*sx
		if e < bestErr {
			bestErr = e
			scale, mn = s, -m
			copy(L, Laux)
		}
	}
	return scale, mn
}

// quantKScaleMin quantizes a 256-value super-block for Q4_K (nmax 15) or
// Q5_K (nmax 31): it writes d, dmin and the packed 6-bit scales/mins into
// head (16 bytes) and returns the levels in L.
func quantKScaleMin(x *[256]float32, nmax int32, head []byte, L *[256]uint8) {
	var scales, mins [8]float32
	var w [32]float32
	for j := 0; j < 8; j++ {
		sub := x[32*j : 32*j+32]
		var sum2 float32
		for _, v := range sub {
			sum2 += v * v
		}
		av := float32(math.Sqrt(float64(sum2 / 32)))
		for i, v := range sub {
			w[i] = av + abs32(v)
		}
		scales[j], mins[j] = fitScaleMin(sub, w[:], nmax, L[32*j:32*j+32])
	}
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		maxScale = max(maxScale, scales[j])
		maxMin = max(maxMin, mins[j])
	}
	invScale, invMin := float32(0), float32(0)
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	packed := (*[12]byte)(head[4:16])
	*packed = [12]byte{}
	var ls, lm [8]uint8
	for j := 0; j < 8; j++ {
		ls[j] = uint8(min(nearestInt(invScale*scales[j]), 63))
		lm[j] = uint8(min(nearestInt(invMin*mins[j]), 63))
	}
	for j := 0; j < 4; j++ {
		packed[j] = ls[j]
		packed[j+4] = lm[j]
	}
	for j := 4; j < 8; j++ {
		packed[j+4] = ls[j]&15 | (lm[j]&15)<<4
		packed[j-4] |= (ls[j] >> 4) << 6
		packed[j] |= (lm[j] >> 4) << 6
	}
	putF16(head[0:], maxScale/63)
	putF16(head[2:], maxMin/63)
	// Requantize against the scales as stored, so rounding of d, dmin and
	// the 6-bit scales does not bias the levels.
	d, dmin := f16At(head[0:]), f16At(head[2:])
	for j := 0; j < 8; j++ {
		sc, m := scaleMinK4(j, packed)
		dj := d * float32(sc)
		if dj == 0 {
			for i := 0; i < 32; i++ {
				L[32*j+i] = 0
			}
			continue
		}
		dm := dmin * float32(m)
		for i := 0; i < 32; i++ {
			l := nearestInt((x[32*j+i] + dm) / dj)
			L[32*j+i] = uint8(min(max(l, 0), nmax))
		}
	}
}

func quantQ4K(x *[256]float32, blk *[144]byte) {
	var L [256]uint8
	quantKScaleMin(x, 15, blk[:16], &L)
	for c := 0; c < 4; c++ {
		for l := 0; l < 32; l++ {
			blk[16+32*c+l] = L[64*c+l] | L[64*c+32+l]<<4
		}
	}
}

func quantQ5K(x *[256]float32, blk *[176]byte) {
	var L [256]uint8
	quantKScaleMin(x, 31, blk[:16], &L)
	qh := (*[32]byte)(blk[16:48])
	*qh = [32]byte{}
	for c := 0; c < 4; c++ {
		for l := 0; l < 32; l++ {
			l1, l2 := L[64*c+l], L[64*c+32+l]
			qh[l] |= (l1>>4)<<(2*c) | (l2>>4)<<(2*c+1)
			blk[48+32*c+l] = l1&15 | (l2&15)<<4
		}
	}
}

// fitSymmetric fits x ≈ scale*l with l in -nmax..nmax-1, weighting by x²
// (large values matter most), trying step sizes around max/nmax. The sign of
// scale follows the largest-magnitude value so that it maps to -nmax, which
// uses the full asymmetric range.
func fitSymmetric(x []float32, nmax int32) float32 {
	mx := signedAbsMax(x)
	if abs32(mx) < 1e-15 {
		return 0
	}
	best, scale := float32(-1), float32(0)
	for step := -9; step <= 9; step++ {
		iscale := -(float32(nmax) + 0.1*float32(step)) / mx
		var slx, sl2 float32
		for _, v := range x {
			l := float32(min(max(nearestInt(iscale*v), -nmax), nmax-1))
			w := v * v
			slx += w * v * l
			sl2 += w * l * l
		}
		if sl2 > 0 && slx*slx/sl2 > best {
			best = slx * slx / sl2
			scale = slx / sl2
		}
	}
	return scale
}

func quantQ6K(x *[256]float32, blk *[210]byte) {
	var scales [16]float32
	var maxScale, maxAbs float32
	for j := 0; j < 16; j++ {
		scales[j] = fitSymmetric(x[16*j:16*j+16], 32)
		if a := abs32(scales[j]); a > maxAbs {
			maxAbs, maxScale = a, scales[j]
		}
	}
	var L [256]uint8
	sc := blk[192:208]
	if maxAbs < 1e-15 {
		*blk = [210]byte{}
		for i := range L {
			L[i] = 32
		}
	} else {
		iscale := -128 / maxScale
		putF16(blk[208:], 1/iscale)
		for j := 0; j < 16; j++ {
			sc[j] = byte(int8(min(nearestInt(iscale*scales[j]), 127)))
		}
		d := f16At(blk[208:])
		for j := 0; j < 16; j++ {
			dj := d * float32(int8(sc[j]))
			for i := 0; i < 16; i++ {
				l := int32(0)
				if dj != 0 {
					l = min(max(nearestInt(x[16*j+i]/dj), -32), 31)
				}
				L[16*j+i] = uint8(l + 32)
			}
		}
	}
	for h := 0; h < 2; h++ {
		ql := blk[64*h : 64*h+64]
		qh := blk[128+32*h : 128+32*h+32]
		for l := 0; l < 32; l++ {
			q1, q2, q3, q4 := L[128*h+l], L[128*h+l+32], L[128*h+l+64], L[128*h+l+96]
			ql[l] = q1&15 | (q3&15)<<4
			ql[l+32] = q2&15 | (q4&15)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
	}
}
