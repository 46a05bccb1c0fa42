package kernels

import "math"

// Element-wise operations of the model's forward pass (swiglu, attention's
// softmax, RMS norm), in assembly where the dot kernels are (SIMD) and in
// the Go loops below otherwise. exp is Cephes' single-precision exp in both
// (as ggml's vectorised expf, within 2 ulp rather than math.Exp's 1), at a
// fraction of math.Exp's cost: silu's exp was about a tenth of prefill.
//
// The assembly works on groups of 8 and runs a short rest through the same
// code padded to 8, so an element's result depends only on its value, not
// on its position or the length of the slice (batch invariance).

// SiLUMul sets g[i] = silu(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i]
// over len(g) (swiglu's gate times up); u must be at least as long.
func SiLUMul(g, u []float32) {
	u = u[:len(g)]
	if siluMulSIMD(g, u) {
		return
	}
	for i, v := range g {
		g[i] = v / (1 + expGo(-v)) * u[i]
	}
}

// Softmax sets x to exp(x - max x) / Σ exp(x - max x) (len(x) > 0); the
// sum is accumulated in float64.
func Softmax(x []float32) {
	if softmaxSIMD(x) {
		return
	}
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		e := expGo(v - mx)
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// RMSNorm sets out = in / rms(in) * w over len(w) values (one row); out may
// be in. The squares are summed in float64 as ggml does, and each value is
// scaled, then multiplied by its weight (two roundings, as ggml's rms_norm
// followed by mul).
func RMSNorm(out, in, w []float32, eps float32) {
	n := len(w)
	in, out = in[:n], out[:n]
	sum, ok := sumSqSIMD(in)
	if !ok {
		for _, v := range in {
			sum += float64(v * v)
		}
	}
	scale := 1 / float32(math.Sqrt(float64(float32(sum/float64(n))+eps)))
	if mulScaleSIMD(out, in, w, scale) {
		return
	}
	for i, v := range in {
		out[i] = v * scale * w[i]
	}
}

// Cephes expf's constants: log2(e), ln 2 in two parts (c1 exact in few
// bits), the polynomial of e^r on |r| <= ln(2)/2, and the range where
// 2^n is a normal float.
const (
	expLog2e = 1.44269504088896341
	expC1    = 0.693359375
	expC2    = -2.12194440e-4
	expP0    = 1.9875691500e-4
	expP1    = 1.3981999507e-3
	expP2    = 8.3334519073e-3
	expP3    = 4.1665795894e-2
	expP4    = 1.6666665459e-1
	expP5    = 5.0000001201e-1
	expHi    = 88.3762626647949
	expLo    = -87.3365478515625
)

// expGo is the assembly's exp on one value (without fused multiply-adds).
func expGo(x float32) float32 {
	switch {
	case x != x:
		return x
	case x < expLo:
		return 0
	case x > expHi:
		return float32(math.Inf(1))
	}
	// Adding 1.5·2^23 rounds to an integer (to nearest even).
	k := (x*expLog2e + 0x1.8p23) - 0x1.8p23
	r := x - k*expC1
	r -= k * expC2
	y := float32(expP0)
	y = y*r + expP1
	y = y*r + expP2
	y = y*r + expP3
	y = y*r + expP4
	y = y*r + expP5
	y *= r
	y = y*r + r
	y++
	return y * math.Float32frombits(uint32(int32(k)+127)<<23)
}

// Dots sets out[j] = DotF32(q, k[j*stride:]) * scale for j < len(out):
// attention's scores over a span of cached keys (stride apart), in one call.
func Dots(out, q, k []float32, stride int, scale float32) {
	if len(out) == 0 {
		return
	}
	_ = k[(len(out)-1)*stride+len(q)-1]
	if dotsSIMD(out, q, k, stride, scale) {
		return
	}
	for j := range out {
		out[j] = DotF32(q, k[j*stride:]) * scale
	}
}

// Axpys sets y += w[j] * x[j*stride:][:len(y)] for each j < len(w) in turn
// (Axpy's operations): attention's weighted sum of a span of cached values.
func Axpys(y, w, x []float32, stride int) {
	if len(w) == 0 {
		return
	}
	_ = x[(len(w)-1)*stride+len(y)-1]
	if axpysSIMD(y, w, x, stride) {
		return
	}
	for j, a := range w {
		Axpy(a, x[j*stride:], y)
	}
}

// DotsF16 is Dots over rows of halves (an F16 KV cache), converted as they
// are read: the bits of Dots over the converted rows.
func DotsF16(out, q []float32, k []uint16, stride int, scale float32) {
	if len(out) == 0 {
		return
	}
	_ = k[(len(out)-1)*stride+len(q)-1]
	if dotsF16SIMD(out, q, k, stride, scale) {
		return
	}
	row := make([]float32, len(q))
	for j := range out {
		F16ToF32s(row, k[j*stride:j*stride+len(q)])
		out[j] = DotF32(q, row) * scale
	}
}

// AxpysF16 is Axpys over rows of halves: the bits of Axpys over the
// converted rows.
func AxpysF16(y, w []float32, x []uint16, stride int) {
	if len(w) == 0 {
		return
	}
	_ = x[(len(w)-1)*stride+len(y)-1]
	if axpysF16SIMD(y, w, x, stride) {
		return
	}
	row := make([]float32, len(y))
	for j, a := range w {
		F16ToF32s(row, x[j*stride:j*stride+len(y)])
		Axpy(a, row, y)
	}
}

// Dots4 is Dots for four queries against the same keys, each row of k read
// once for the four: out[g][j] = (q[g] · k[j*stride:]) * scale for j <
// len(out[0]), with Dots' operations for each query (the same bits as four
// Dots calls). The queries have one length, the outputs another.
func Dots4(out, q *[4][]float32, k []float32, stride int, scale float32) {
	cnt, hd := len(out[0]), len(q[0])
	for g := range 4 {
		if len(out[g]) != cnt || len(q[g]) != hd {
			panic("kernels: Dots4: queries or outputs of different lengths")
		}
	}
	if cnt == 0 {
		return
	}
	_ = k[(cnt-1)*stride+hd-1]
	if dots4SIMD(out, q, k, stride, scale) {
		return
	}
	for g := range 4 {
		Dots(out[g], q[g], k, stride, scale)
	}
}

// Axpys4 is Axpys for four outputs weighting the same rows, each row of x
// read once for the four: y[g] += w[g][j] * x[j*stride:][:len(y[g])] for
// each j < len(w[0]) in turn, with Axpys' operations for each output.
func Axpys4(y, w *[4][]float32, x []float32, stride int) {
	cnt, hd := len(w[0]), len(y[0])
	for g := range 4 {
		if len(w[g]) != cnt || len(y[g]) != hd {
			panic("kernels: Axpys4: outputs or weights of different lengths")
		}
	}
	if cnt == 0 || hd == 0 {
		return
	}
	_ = x[(cnt-1)*stride+hd-1]
	if axpys4SIMD(y, w, x, stride) {
		return
	}
	for g := range 4 {
		Axpys(y[g], w[g], x, stride)
	}
}

// Rope rotates the first 2*len(cos) values of each head of x (heads of hd
// values) by the angles whose cos and sin are given, pairing (i, i+half)
// when neox, else (2i, 2i+1): x' = a*c - b*s, b' = a*s + b*c (each product
// rounded: the conversions keep the compiler from fusing them, so the Go
// loop and the assembly agree bit for bit).
func Rope(x []float32, hd int, cos, sin []float32, neox bool) {
	half := len(cos)
	sin = sin[:half]
	if ropeSIMD(x, hd, half, cos, sin, neox) {
		return
	}
	for h := 0; h+hd <= len(x); h += hd {
		head := x[h : h+hd]
		if neox {
			for i := range half {
				a, b := head[i], head[i+half]
				head[i] = float32(a*cos[i]) - float32(b*sin[i])
				head[i+half] = float32(a*sin[i]) + float32(b*cos[i])
			}
		} else {
			for i := range half {
				a, b := head[2*i], head[2*i+1]
				head[2*i] = float32(a*cos[i]) - float32(b*sin[i])
				head[2*i+1] = float32(a*sin[i]) + float32(b*cos[i])
			}
		}
	}
}

// Hadamard multiplies each run of n values of x (n a power of two) by the
// orthonormal Walsh-Hadamard matrix of order n (Sylvester's: H_2n = [[H_n,
// H_n], [H_n, -H_n]] / sqrt 2): n·log2(n) additions in stages h = 1, 2, 4,
// ... (each pair (j, j+h) becomes (a+b, a-b)), then one multiplication by
// 1/sqrt(n). It is the rotation of a quantized KV cache (nn's rotate.go),
// which runs it on every query, key, value and attention output of every
// layer: in the Go loop it took about a millisecond of each decoded token
// at 1.2B. The assembly keeps the stages' order, so its bits are the loop's.
func Hadamard(x []float32, n int) {
	if n <= 0 || n&(n-1) != 0 {
		panic("kernels: Hadamard: order not a power of two")
	}
	scale := float32(1 / math.Sqrt(float64(n)))
	if hadamardSIMD(x, n, scale) {
		return
	}
	for c := 0; c+n <= len(x); c += n {
		y := x[c : c+n]
		for h := 1; h < n; h *= 2 {
			for i := 0; i < n; i += 2 * h {
				for j := i; j < i+h; j++ {
					a, b := y[j], y[j+h]
					y[j], y[j+h] = a+b, a-b
				}
			}
		}
		for j := range y {
			y[j] *= scale
		}
	}
}
