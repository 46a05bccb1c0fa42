package kernels

import "math"

// quantizeAct fills a.Qs, a.D and a.S from x (len(x) a multiple of 32) as
// llama.cpp quantizes activations for its dot products on x86
// (quantize_row_q8_0, AVX2): q = x·(127/amax) rounded to nearest even, and
// the block scale d = amax/127 rounded to fp16, as a block_q8_0 stores it.
// The products then agree with llama.cpp's to float rounding (the
// unrounded scale would differ from it by up to 2^-11 relative per block).
// The slices are reused when they have the capacity.
func quantizeAct(x []float32, a *Act) {
	n := len(x)
	nb := n / 32
	a.Qs = grow(a.Qs, n)
	a.D = grow(a.D, nb)
	a.S = grow(a.S, nb)
	qs, ds, ss := a.Qs[:nb*32], a.D[:nb], a.S[:nb]
	for b := 0; b < nb; b++ {
		blk := (*[32]float32)(x[b*32:])
		q := (*[32]int8)(qs[b*32:])
		var amax float32
		for _, v := range blk {
			amax = max(amax, abs32(v))
		}
		d := FP16ToFP32(FP32ToFP16(amax / 127))
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		var sum int32
		for j, v := range blk {
			qi := int32(math.RoundToEven(float64(v * id)))
			q[j] = int8(qi)
			sum += qi
		}
		ds[b] = d
		ss[b] = d * float32(sum)
	}
}

// grow returns s with length n, reallocated when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
