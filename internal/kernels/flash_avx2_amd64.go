//go:build amd64 && !purego

package kernels

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

var _ = registerFlash("avx2", asmFlash(flashScoresAVX2, flashAccumAVX2, expSumAVX2, maxAVX2, expAVX2, flashSoftmaxAVX2, avx2TileKernels))

// expAVX2 is Exp: ExpSum's kernel on one vector of 16 (the array stays on
// the stack: the kernel does not keep its pointer).
func expAVX2(x float32) float32 {
	b := [16]float32{x}
	expSumAVX2(&b[0], 16, 0)
	return b[0]
}
