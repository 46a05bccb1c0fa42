//go:build amd64 && !purego

package kernels

// Flash attention's kernels on the avx2 path (simd_flash_amd64.s, and the
// KV tile decoders of simd_kvtile_amd64.s): FMA and AVX2, which the path
// has (and F16C for F16 keys); the paths above it without kernels of their
// own run these (installFlash).

//go:noescape
func flashScoresAVX2(s, q *float32, ldq int, kt *float32, nq, nk, hd int, scale float32)

//go:noescape
func flashAccumAVX2(o *float32, ldo int, p, v *float32, nq, nk, vd int)

//go:noescape
func expSumAVX2(x *float32, n int, m float32) float32

var _ = registerFlash("avx2", avx2Flash())

func avx2Flash() *flashKernels {
	k, v := avx2TileKernels()
	return &flashKernels{
		scores: func(s, q []float32, ldq int, kt []float32, nq, nk, hd int, scale float32) {
			flashScoresAVX2(&s[0], &q[0], ldq, &kt[0], nq, nk, hd, scale)
		},
		accum: func(o []float32, ldo int, p, v []float32, nq, nk, vd int) {
			flashAccumAVX2(&o[0], ldo, &p[0], &v[0], nq, nk, vd)
		},
		expSum: func(x []float32, m float32) float32 { return expSumAVX2(&x[0], len(x), m) },
		kTile:  tileKernels(k),
		vTile:  tileKernels(v),
	}
}
