package kernels

// Float vector helpers for the model's attention (scores and the weighted
// sum of values). DotF32 and Axpy use assembly where the dot kernels do
// (SIMD) and these loops otherwise.

// dotF32Go returns Σ a[i]*b[i] over len(a).
func dotF32Go(a, b []float32) float32 {
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

// axpyGo sets y[i] += alpha*x[i] over len(y).
func axpyGo(alpha float32, x, y []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += alpha * x[i]
	}
}
