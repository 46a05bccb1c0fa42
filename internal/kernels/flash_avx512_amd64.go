//go:build amd64 && !purego

package kernels

// The avx512 path's flash kernels (simd_flash512_amd64.s,
// simd_kvtile512_amd64.s): AVX-512F and F16C, which the avx512 and
// avx512bw paths both have.

//go:noescape
func flashScores64AVX512(s, q *float32, ldq int, kt *float32, nq, hd int, scale float32)

//go:noescape
func flashAccumAVX512(o *float32, ldo int, p, v *float32, nq, nk, vd int)

//go:noescape
func expSumAVX512(x *float32, n int, m float32) float32

//go:noescape
func rowMaxAVX512(x *float32, n int) float32

//go:noescape
func flashSoftmaxAVX512(s *float32, nq int, m, l, o *float32, ldo, vd int)

//go:noescape
func kTileF32AVX512(dst *float32, ld int, src *byte, stride, w, cnt int)

//go:noescape
func kTileF16AVX512(dst *float32, ld int, src *byte, stride, w, cnt int)

//go:noescape
func kTileQ8AVX512(dst *float32, ld int, src *byte, stride, w, cnt int)

//go:noescape
func vTileF32AVX512(dst *float32, ld int, src *byte, stride, w, cnt int)

//go:noescape
func vTileF16AVX512(dst *float32, ld int, src *byte, stride, w, cnt int)

//go:noescape
func vTileQ8AVX512(dst *float32, ld int, src *byte, stride, w, cnt int)

// avx512Tiles are the path's tile decoders (the other types come from avx2,
// see installFlash), wrapped by tileKernels as every path's are.
var avx512Tiles = func() (t struct{ k, v [NumKVTypes]tileAsm }) {
	t.k[KVF32], t.v[KVF32] = kTileF32AVX512, vTileF32AVX512
	t.k[KVF16], t.v[KVF16] = kTileF16AVX512, vTileF16AVX512
	t.k[KVQ8_0], t.v[KVQ8_0] = kTileQ8AVX512, vTileQ8AVX512
	return t
}()

var flashAVX512 = &flashKernels{
	scores: func(s, q []float32, ldq int, kt []float32, nq, nk, hd int, scale float32) {
		if nk != FlashTile {
			flashScoresGo(s, q, ldq, kt, nq, nk, hd, scale)
			return
		}
		flashScores64AVX512(&s[0], &q[0], ldq, &kt[0], nq, hd, scale)
	},
	accum: func(o []float32, ldo int, p, v []float32, nq, nk, vd int) {
		flashAccumAVX512(&o[0], ldo, &p[0], &v[0], nq, nk, vd)
	},
	expSum:  func(x []float32, m float32) float32 { return expSumAVX512(&x[0], len(x), m) },
	rowMax:  func(x []float32) float32 { return rowMaxAVX512(&x[0], len(x)) },
	softmax: asmSoftmax(flashSoftmaxAVX512),
	exp:     expAVX512,
	kTile:   tileKernels(avx512Tiles.k),
	vTile:   tileKernels(avx512Tiles.v),
	tileF16: func(s, q []float32, ldq int, k, v, pk, pv *[2]KVRows, m, l, o []float32, ldo int, scale float32) {
		flashTileF16AVX512(&s[0], &q[0], ldq, &k[0].W[k[0].Off*k[0].Stride], &k[1].W[k[1].Off*k[1].Stride], 2*k[0].Stride,
			&v[0].W[v[0].Off], &v[1].W[v[1].Off], 2*v[0].Stride, &m[0], &l[0], &o[0], ldo, scale,
			&pk[0].W[pk[0].Off*pk[0].Stride], &pk[1].W[pk[1].Off*pk[1].Stride], &pv[0].W[pv[0].Off], &pv[1].W[pv[1].Off])
	},
}

var (
	_ = registerFlash("avx512", flashAVX512)
	_ = registerFlash("avx512bw", flashAVX512)
)

// expAVX512 is Exp: ExpSum's kernel on one vector of 16 (the array stays
// on the stack: the kernel does not keep its pointer).
func expAVX512(x float32) float32 {
	b := [16]float32{x}
	expSumAVX512(&b[0], 16, 0)
	return b[0]
}

//go:noescape
func flashTileF16AVX512(s, q *float32, ldq int, k0, k1 *uint16, kstride int, v0, v1 *uint16, vstride int, m, l, o *float32, ldo int, scale float32, pk0, pk1, pv0, pv1 *uint16)
