package kernels

// quantizeAct fills a.Qs, a.D and a.S from x (len(x) a multiple of 32) as
// ggml's quantize_row_q8_0 does, except that the block scale stays float32:
// it never touches memory in bulk, so the extra precision is free. The
// slices are reused when they have the capacity.
func quantizeAct(x []float32, a *Act) {
	n := len(x)
	nb := n / 32
	a.Qs = growInt8(a.Qs, n)
	a.D = growF32(a.D, nb)
	a.S = growF32(a.S, nb)
	qs, ds, ss := a.Qs[:nb*32], a.D[:nb], a.S[:nb]
	for b := 0; b < nb; b++ {
		blk := (*[32]float32)(x[b*32:])
		q := (*[32]int8)(qs[b*32:])
		var amax float32
		for _, v := range blk {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		id := inv(d)
		var sum int32
		for j, v := range blk {
			qi := roundf(v * id)
			q[j] = int8(qi)
			sum += qi
		}
		ds[b] = d
		ss[b] = d * float32(sum)
	}
}

func growInt8(s []int8, n int) []int8 {
	if cap(s) < n {
		return make([]int8, n)
	}
	return s[:n]
}

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
