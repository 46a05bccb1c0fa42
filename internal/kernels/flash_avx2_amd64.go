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

var _ = registerFlash("avx2", asmFlash(flashScoresAVX2, flashAccumAVX2, expSumAVX2, maxAVX2, avx2TileKernels))
