package model

import "math"

// rmsnorm sets out = in / rms(in) * w, row by row (rows of len(w)); out may
// be in. The sum of squares is accumulated in float64 as ggml does.
func rmsnorm(out, in, w []float32, eps float32) {
	n := len(w)
	for r := 0; r+n <= len(in); r += n {
		x, o := in[r:r+n], out[r:r+n]
		var sum float64
		for _, v := range x {
			sum += float64(v * v)
		}
		scale := 1 / sqrt32(float32(sum/float64(n))+eps)
		for i, v := range x {
			o[i] = v * scale * w[i]
		}
	}
}

// addRows adds bias to each row of x (rows of len(bias)); nil bias is a no-op.
func addRows(x, bias []float32) {
	n := len(bias)
	if n == 0 {
		return
	}
	for r := 0; r+n <= len(x); r += n {
		row := x[r : r+n]
		for i, b := range bias {
			row[i] += b
		}
	}
}

// add sets x += y.
func add(x, y []float32) {
	y = y[:len(x)]
	for i := range x {
		x[i] += y[i]
	}
}

// softmax normalises x in place.
func softmax(x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// dot returns Σ a[i]*b[i] with four accumulators (len(b) >= len(a)).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy sets y += a*x.
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }
