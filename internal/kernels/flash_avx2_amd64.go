//go:build amd64 && !purego

package kernels

import "unsafe"

// Flash attention's kernels on the avx2 path (simd_flash_amd64.s, and the
// KV tile decoders of simd_kvtile_amd64.s): FMA and AVX2, which the path
// has (and F16C for F16 keys); the paths above it without kernels of their
// own run these (installFlash). RowMax is Softmax's maxAVX2
// (simd_elem_amd64.s).

//go:noescape
func flashScoresAVX2(s, q *float32, ldq int, kt *float32, nq, nk, hd int, scale float32)

//go:noescape
func flashAccumAVX2(o *float32, ldo int, p, v *float32, nq, nk, vd int)

//go:noescape
func expSumAVX2(x *float32, n int, m float32) float32

//go:noescape
func flashSoftmaxAVX2(s *float32, nq int, m, l, o *float32, ldo, vd int)

var _ = registerFlash("avx2", func() *flashKernels {
	k := asmFlash(flashScoresAVX2, flashAccumAVX2, expSumAVX2, maxAVX2, expAVX2, flashSoftmaxAVX2, avx2TileKernels)
	// keys by column that the scores kernels read, values by row that the
	// accum kernels add (f16 and q8_0, with F16C)
	f := avx2FlashKV()
	for kt, scores := range f.scores {
		for vt, accum := range f.accum {
			if scores != nil && accum != nil {
				k.tile[kt][vt] = tileAVX2(scores, accum)
			}
		}
	}
	k.kColQ8 = colKernel(f.col[KVQ8_0])
	return k
}())

// tileAVX2 is FlashTileKV on the avx2 path for keys by column that scores
// reads and values by row that accum adds, in five calls (sixteen
// registers do not hold the four rows' 64 scores): each run's scores from
// the keys decoded as loaded, the tile's softmax step, each run's values
// added from the rows in place; the next keys, then values, asked for
// before each half. A decode at depth 8000 had spent a third of its
// attention writing and reading back the decoded key and value tiles.
func tileAVX2(scores scoresColAsm, accum accumKVAsm) func(s, q []float32, ldq int, k, v, pk, pv *[2]KVRows, m, l, o []float32, ldo int, scale float32) {
	return func(s, q []float32, ldq int, k, v, pk, pv *[2]KVRows, m, l, o []float32, ldo int, scale float32) {
		const half, hd = FlashTile / 2, 64
		for h := range 2 {
			prefetchKV(&pk[h], hd, half)
		}
		for h := range 2 {
			scores(&s[half*h], &q[0], ldq, colHead(&k[h]), 2*k[h].Stride, 4, hd, scale)
		}
		for h := range 2 {
			prefetchKV(&pv[h], hd, half)
		}
		flashSoftmaxAVX2(&s[0], 4, &m[0], &l[0], &o[0], ldo, hd)
		for h := range 2 {
			accum(&o[0], ldo, &s[half*h], FlashTile, (*byte)(unsafe.Pointer(rowHead(&v[h]))), 2*v[h].Stride, 4, half, hd)
		}
	}
}

// expAVX2 is Exp: ExpSum's kernel on one vector of 16 (the array stays on
// the stack: the kernel does not keep its pointer).
func expAVX2(x float32) float32 {
	b := [16]float32{x}
	expSumAVX2(&b[0], 16, 0)
	return b[0]
}
