//go:build arm64 && !purego

package kernels

// Flash attention's kernels on the neon path (simd_flash_arm64.s, and the
// KV tile decoders of simd_kvtile_arm64.s), which the dotprod and i8mm
// paths run too (installFlash).

//go:noescape
func flashScoresNEON(s, q *float32, ldq int, kt *float32, nq, nk, hd int, scale float32)

//go:noescape
func flashAccumNEON(o *float32, ldo int, p, v *float32, nq, nk, vd int)

//go:noescape
func expSumNEON(x *float32, n int, m float32) float32

var _ = registerFlash("neon", neonFlash())

func neonFlash() *flashKernels {
	k, v := neonTileKernels()
	return &flashKernels{
		scores: func(s, q []float32, ldq int, kt []float32, nq, nk, hd int, scale float32) {
			flashScoresNEON(&s[0], &q[0], ldq, &kt[0], nq, nk, hd, scale)
		},
		accum: func(o []float32, ldo int, p, v []float32, nq, nk, vd int) {
			flashAccumNEON(&o[0], ldo, &p[0], &v[0], nq, nk, vd)
		},
		expSum: func(x []float32, m float32) float32 { return expSumNEON(&x[0], len(x), m) },
		kTile:  tileKernels(k),
		vTile:  tileKernels(v),
	}
}
