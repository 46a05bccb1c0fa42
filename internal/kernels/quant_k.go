package kernels

import "math"

// K-quant reference quantizers, in ggml's structure and operation order
// (so that, without an importance matrix, they write the blocks
// llama-quantize writes): a weighted least-squares fit per 32-value
// sub-block (fitScaleMin), 6-bit quantization of the sub-block scales and
// mins against half-precision super-block scales, then requantization of
// the values against the scales actually stored.

// fitScaleMin fits x ≈ scale*L - mn with L in 0..nmax and mn >= 0,
// minimising the error weighted by w: the levels of the plain step
// (max-min)/nmax first, then, for is in 0..nstep, the levels of the step
// (max-min')/(nmax + rmin + rdelta*is) from the best min' so far, each
// refined by weighted least squares and kept when its error is smaller.
// Sums and errors are formed in ggml's order, in float32, every product
// rounded (float32(a*b): Go may not fuse it into an add), which decides
// the close calls as llama-quantize does: on llama.cpp's own Q4_K_M and
// Q5_K_M files the blocks come out identical.
func fitScaleMin(x, w []float32, nmax int32, L []uint8, rmin, rdelta float32, nstep int) (scale, mn float32) {
	lo, hi := x[0], x[0]
	sumW := w[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < len(x); i++ {
		lo, hi = min(lo, x[i]), max(hi, x[i])
		sumW += w[i]
		sumX += float32(w[i] * x[i])
	}
	lo = min(lo, 0) // the offset is stored as a non-negative min
	if hi == lo {
		for i := range L {
			L[i] = 0
		}
		return 0, -lo
	}
	iscale := float32(nmax) / (hi - lo)
	scale = 1 / iscale
	var best float32
	for i, v := range x {
		l := min(max(nearestInt(iscale*(v-lo)), 0), nmax)
		L[i] = uint8(l)
		diff := float32(scale*float32(l)) + lo - v
		best += float32(w[i] * float32(diff*diff))
	}
	var aux [32]uint8
	Laux := aux[:len(x)]
	m0 := lo // the fitted value of level 0 (<= 0)
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + float32(nmax)) / (hi - m0)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := min(max(nearestInt(iscale*(v-m0)), 0), nmax)
			Laux[i] = uint8(l)
			wl := float32(w[i] * float32(l))
			sumL += wl
			sumL2 += float32(wl * float32(l))
			sumXL += float32(wl * v)
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D <= 0 {
			continue
		}
		s := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
		m := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
		if m > 0 {
			m = 0
			s = sumXL / sumL2
		}
		var e float32
		for i, v := range x {
			diff := float32(s*float32(Laux[i])) + m - v
			e += float32(w[i] * float32(diff*diff))
		}
		if e < best {
			copy(L, Laux)
			best, scale, m0 = e, s, m
		}
	}
	return scale, -m0
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
			sum2 += float32(v * v)
		}
		av := float32(math.Sqrt(float64(sum2 / 32)))
		for i, v := range sub {
			w[i] = av + abs32(v)
		}
		// ggml's search: Q4_K steps from nmax-1 by 0.1 (21 steps), Q5_K
		// from nmax-0.5 (16 steps).
		rmin, nstep := float32(-1), 20
		if nmax == 31 {
			rmin, nstep = -0.5, 15
		}
		scales[j], mins[j] = fitScaleMin(sub, w[:], nmax, L[32*j:32*j+32], rmin, 0.1, nstep)
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
			continue // the levels of the fit stay (they decode to -dm whatever they are)
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
// (large values matter most): first with the step max/nmax (the sign of
// scale follows the largest-magnitude value so that it maps to -nmax, which
// uses the full asymmetric range), then with 18 steps around it, keeping a
// step when it explains more of x (sumlx²/suml2 larger), compared as ggml
// compares (products rounded, no division) so that the blocks are
// llama-quantize's.
func fitSymmetric(x []float32, nmax int32) float32 {
	mx := signedAbsMax(x)
	if abs32(mx) < 1e-15 {
		return 0
	}
	sums := func(iscale float32) (slx, sl2 float32) {
		for _, v := range x {
			l := float32(min(max(nearestInt(iscale*v), -nmax), nmax-1))
			w := float32(v * v)
			slx += float32(float32(w*v) * l)
			sl2 += float32(float32(w*l) * l)
		}
		return slx, sl2
	}
	slx, sl2 := sums(-float32(nmax) / mx)
	scale := float32(0)
	if sl2 != 0 {
		scale = slx / sl2
	}
	best := float32(scale * slx)
	for step := -9; step <= 9; step++ {
		if step == 0 {
			continue
		}
		slx, sl2 := sums(-(float32(nmax) + float32(0.1*float32(step))) / mx)
		if sl2 > 0 && float32(slx*slx) > float32(best*sl2) {
			scale = slx / sl2
			best = float32(scale * slx)
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
