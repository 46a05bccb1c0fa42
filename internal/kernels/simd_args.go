//go:build (amd64 || arm64) && !purego

package kernels

// The argument checks of the Go wrappers of the assembly kernels
// (simd_wrap.go): the kernels of both architectures take the same
// arguments.

// checkRows4 checks the output of a dot4Rows call: four rows of at least
// rows values, stride apart.
func checkRows4(rows int, out []float32, stride int) {
	if stride < rows {
		panic("kernels: dot4Rows output stride shorter than its rows")
	}
	_ = out[3*stride+rows-1]
}

// fArgs4 checks four float activation rows of n elements (n > 0) and
// returns their pointers.
func fArgs4(a *[4]*Act, n int) (x [4]*float32) {
	for k := range a {
		_ = a[k].F[n-1]
		x[k] = &a[k].F[0]
	}
	return x
}

// The wrappers of the quantized kernels (simd_wrap.go) check their
// arguments with the functions below, so that the assembly stays inside the
// slices, and call the kernels directly (through asmDot and asmDot4): a call
// through a function value would make the arguments escape. The kernels take nb blocks of 32 elements, or
// super-blocks of 256 (nsub = 8 activation blocks each), of bsize bytes;
// tab is f16Table (they read the weight scales, halves, through it).

// qargs checks one activation row for nb blocks and returns its pointers.
func qargs(a *Act, nb int) (*int8, *float32) {
	_ = a.Qs[nb*32-1]
	_ = a.D[nb-1]
	return &a.Qs[0], &a.D[0]
}

// q4args does qargs for four rows.
func q4args(a *[4]*Act, nb int) (qs [4]*int8, d [4]*float32) {
	for k := range a {
		qs[k], d[k] = qargs(a[k], nb)
	}
	return
}

// dArgs checks rows rows of nb blocks against one activation row and
// returns the activation pointers; ok is false (out cleared) when there is
// nothing to compute.
func dArgs(w []byte, rows int, a *Act, nb, nsub, bsize int, out []float32) (qs *int8, d *float32, ok bool) {
	if nb == 0 || rows == 0 {
		clear(out[:rows])
		return nil, nil, false
	}
	_ = w[rows*nb*bsize-1]
	_ = out[rows-1]
	qs, d = qargs(a, nb*nsub)
	return qs, d, true
}

// sArgs is dArgs for kernels that also take the activation sums S.
func sArgs(w []byte, rows int, a *Act, nb, nsub, bsize int, out []float32) (qs *int8, d, s *float32, ok bool) {
	if qs, d, ok = dArgs(w, rows, a, nb, nsub, bsize, out); !ok {
		return nil, nil, nil, false
	}
	_ = a.S[nb*nsub-1]
	return qs, d, &a.S[0], true
}

// d4Args is dArgs for four activation rows, whose results go to out
// stride apart.
func d4Args(w []byte, rows int, a *[4]*Act, nb, nsub, bsize int, out []float32, stride int) (qs [4]*int8, d [4]*float32, ok bool) {
	if rows == 0 {
		return qs, d, false
	}
	checkRows4(rows, out, stride)
	if nb == 0 {
		clearRows4(rows, out, stride)
		return qs, d, false
	}
	_ = w[rows*nb*bsize-1]
	qs, d = q4args(a, nb*nsub)
	return qs, d, true
}

// s4Args is d4Args for kernels that also take the activation sums S.
func s4Args(w []byte, rows int, a *[4]*Act, nb, nsub, bsize int, out []float32, stride int) (qs [4]*int8, d, s [4]*float32, ok bool) {
	if qs, d, ok = d4Args(w, rows, a, nb, nsub, bsize, out, stride); !ok {
		return qs, d, s, false
	}
	for k := range a {
		_ = a[k].S[nb*nsub-1]
		s[k] = &a[k].S[0]
	}
	return qs, d, s, true
}

// b4Args returns the four activation rows' sums of 16 quants (Act.B) over
// nsb super-blocks of 256; ok is false when a row has none.
func b4Args(a *[4]*Act, nsb int) (b [4]*int16, ok bool) {
	for k := range a {
		if len(a[k].B) < nsb*16 {
			return b, false
		}
		b[k] = &a[k].B[0]
	}
	return b, true
}

// sums16Of returns the activations' sums of 16 quants over nsb Q6_K
// super-blocks: a.B as MatMul fills it, else computed into buf (or a new
// slice when longer).
func sums16Of(a *Act, nsb int, buf *[1024]int16) []int16 {
	if len(a.B) >= nsb*16 {
		return a.B
	}
	c := Act{Qs: a.Qs[:nsb*256], B: buf[:0]}
	actSums16(&c)
	return c.B
}
