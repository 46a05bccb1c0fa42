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

var _ = registerFlash("neon", asmFlash(flashScoresNEON, flashAccumNEON, expSumNEON, rowMaxNEON, expNEON, nil, neonTileKernels))

// expNEON is Exp: ExpSum's kernel on one vector of 16 (the array stays on
// the stack: the kernel does not keep its pointer).
func expNEON(x float32) float32 {
	b := [16]float32{x}
	expSumNEON(&b[0], 16, 0)
	return b[0]
}
