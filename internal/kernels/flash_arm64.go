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

//go:noescape
func rowMaxNEON(x *float32, n int) float32

var _ = registerFlash("neon", asmFlash(flashScoresNEON, flashAccumNEON, expSumNEON, rowMaxNEON, neonTileKernels))
