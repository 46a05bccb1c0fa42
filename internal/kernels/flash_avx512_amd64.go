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

// flashAVX512 are the avx512 path's flash kernels: the tile decoders and
// kernels over the cache in place of the generator's table (the other
// types' decoders come from avx2, see installFlash).
var flashAVX512 = func() *flashKernels {
	tk, tv := avx512TileKernels()
	f := avx512FlashKV()
	k := &flashKernels{
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
		kTile:   tileKernels(tk),
		vTile:   tileKernels(tv),
		kColQ8:  colKernel(f.col[KVQ8_0]),
	}
	for kt := range f.tile {
		for vt, g := range f.tile[kt] {
			if g != nil {
				k.tile[kt][vt] = asmTileKV(g)
			}
		}
	}
	return k
}()

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

// colHead and rowHead are the first word of the head of rows r stored by
// column and by row (the FlashTileKV kernels' arguments).
func colHead(r *KVRows) *uint16 { return &r.W[r.T.Words(r.Off)*r.Stride] }
func rowHead(r *KVRows) *uint16 { return &r.W[r.T.Words(r.Off)] }

// asmTileKV turns a FlashTileKV kernel into its flashKernels entry.
func asmTileKV(f tileAsmKV) func(s, q []float32, ldq int, k, v, pk, pv *[2]KVRows, m, l, o []float32, ldo int, scale float32) {
	key, val := colHead, rowHead
	return func(s, q []float32, ldq int, k, v, pk, pv *[2]KVRows, m, l, o []float32, ldo int, scale float32) {
		f(&s[0], &q[0], ldq, key(&k[0]), key(&k[1]), 2*k[0].Stride, val(&v[0]), val(&v[1]), 2*v[0].Stride,
			&m[0], &l[0], &o[0], ldo, scale, key(&pk[0]), key(&pk[1]), val(&pv[0]), val(&pv[1]))
	}
}

// colKernel turns a KTile kernel of keys by column into flashKernels'
// kColQ8 (nil: none).
func colKernel(f colAsm) func(dst []float32, ld int, r KVRows, w, cnt int) int {
	if f == nil {
		return nil
	}
	return func(dst []float32, ld int, r KVRows, w, cnt int) int {
		f(&dst[0], ld, colHead(&r), 2*r.Stride, w/32, cnt)
		return cnt
	}
}
