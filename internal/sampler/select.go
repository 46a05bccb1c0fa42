package sampler

import (
	"math"
	"slices"
)

// topK returns in dst the ids of the k largest values of x, largest first (ties: lower id first),
// NaNs skipped. It runs a size-k min-heap over x: O(len(x)) when k is small, with no sort of the
// whole vocabulary.
func topK(x []float32, k int, dst []int32) []int32 {
	h := dst[:0]
	less := func(a, b int32) bool { // a ranks below b
		va, vb := x[a], x[b]
		return va < vb || (va == vb && a > b)
	}
	down := func(i int) {
		n := len(h)
		for {
			c := 2*i + 1
			if c >= n {
				return
			}
			if c+1 < n && less(h[c+1], h[c]) {
				c++
			}
			if !less(h[c], h[i]) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	i := 0
	for ; i < len(x) && len(h) < k; i++ {
		if !math.IsNaN(float64(x[i])) {
			h = append(h, int32(i))
		}
	}
	for j := len(h)/2 - 1; j >= 0; j-- {
		down(j)
	}
	if len(h) == 0 {
		return h
	}
	root := x[h[0]]
	for ; i < len(x); i++ {
		// Ids come in increasing order, so an equal value never outranks the root.
		if v := x[i]; v > root {
			h[0] = int32(i)
			down(0)
			root = x[h[0]]
		}
	}
	slices.SortFunc(h, func(a, b int32) int {
		switch {
		case x[a] > x[b]:
			return -1
		case x[a] < x[b]:
			return 1
		}
		return int(a - b)
	})
	return h
}

// nucleus reorders ids so that its first n entries are the n most likely (by w[id], ties by
// lower id) and returns the smallest n whose weights add up to at least target (at least 1, at
// most len(ids)). It is a quickselect that follows the cumulative weight: O(len(ids)) expected,
// where a sort would be O(n log n).
func nucleus(ids []int32, w []float32, target float64) int {
	if len(ids) == 0 {
		return 0
	}
	before := func(a, b int32) bool { // a ranks before b
		return w[a] > w[b] || (w[a] == w[b] && a < b)
	}
	lo, hi := 0, len(ids)
	var acc float64 // weight of ids[:lo], all ranked before ids[lo:hi]
	for hi-lo > 16 {
		// Median of three as pivot, moved to lo.
		m := lo + (hi-lo)/2
		a, b, c := ids[lo], ids[m], ids[hi-1]
		switch {
		case before(a, b) == before(b, c):
			ids[lo], ids[m] = ids[m], ids[lo]
		case before(a, c) == before(c, b):
			ids[lo], ids[hi-1] = ids[hi-1], ids[lo]
		}
		pivot := ids[lo]
		// Move the ids ranked before the pivot to ids[lo+1:p+1], summing their weight.
		p := lo
		var mass float64
		for i := lo + 1; i < hi; i++ {
			if before(ids[i], pivot) {
				p++
				ids[p], ids[i] = ids[i], ids[p]
				mass += float64(w[ids[p]])
			}
		}
		ids[lo], ids[p] = ids[p], ids[lo]
		// Now ids[lo:p] rank before the pivot at p, and ids[p+1:hi] after it.
		switch {
		case acc+mass >= target:
			hi = p
		case acc+mass+float64(w[pivot]) >= target:
			return p + 1
		default:
			acc += mass + float64(w[pivot])
			lo = p + 1
		}
	}
	part := ids[lo:hi]
	slices.SortFunc(part, func(a, b int32) int {
		if before(a, b) {
			return -1
		}
		return 1
	})
	for i, id := range part {
		acc += float64(w[id])
		if acc >= target {
			return lo + i + 1
		}
	}
	return max(hi, 1)
}

// fastExp is e^x in float32 (Cephes expf: range reduction by ln 2 and a degree-6 polynomial),
// accurate to about 2 ulp and several times faster than math.Exp; sampling computes one per
// vocabulary entry.
func fastExp(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		c1    = 0.693359375
		c2    = -2.12194440e-4
	)
	if !(x > -87.33654) { // underflow, -Inf; NaN stays NaN
		if x != x {
			return x
		}
		return 0
	}
	if x > 88.72283 {
		return float32(math.Inf(1))
	}
	// Each product is converted explicitly: that forbids FMA fusion (which some platforms would
	// otherwise use) and keeps results identical everywhere.
	fx := float32(x*log2e) + 0.5
	n := int32(fx)
	if float32(n) > fx {
		n--
	}
	fn := float32(n)
	x = x - float32(fn*c1) - float32(fn*c2)
	z := float32(x * x)
	y := float32(1.9875691500e-4 * x)
	y = float32((y + 1.3981999507e-3) * x)
	y = float32((y + 8.3334519073e-3) * x)
	y = float32((y + 4.1665795894e-2) * x)
	y = float32((y + 1.6666665459e-1) * x)
	y = float32((y+5.0000001201e-1)*z) + x + 1
	// y * 2^n, in two steps so that n = -127 (results near the underflow limit) stays in range.
	if n < -126 {
		return y * math.Float32frombits(uint32(n+1+127)<<23) * 0.5
	}
	return y * math.Float32frombits(uint32(n+127)<<23)
}
