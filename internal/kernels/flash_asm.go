//go:build (amd64 || arm64) && !purego

package kernels

// The flash kernels of the avx2 and neon paths take pointers (the public
// functions have checked the shapes): asmFlash wraps a path's as its
// flashKernels, the same way for both. Their KV tile decoders take a
// head's first byte and the rows' stride in bytes; the generator's table
// lists them (<path>TileKernels in gen_asm_<arch>.go).

// asmFlash returns the flash kernels of a path from its assembly ones.
func asmFlash(
	scores func(s, q *float32, ldq int, kt *float32, nq, nk, hd int, scale float32),
	accum func(o *float32, ldo int, p, v *float32, nq, nk, vd int),
	expSum func(x *float32, n int, m float32) float32,
	rowMax func(x *float32, n int) float32,
	exp func(x float32) float32,
	softmax func(s *float32, nq int, m, l, o *float32, ldo, vd int),
	tiles func() (k, v [NumKVTypes]tileAsm),
) *flashKernels {
	k, v := tiles()
	return &flashKernels{
		scores: func(s, q []float32, ldq int, kt []float32, nq, nk, hd int, scale float32) {
			scores(&s[0], &q[0], ldq, &kt[0], nq, nk, hd, scale)
		},
		accum: func(o []float32, ldo int, p, v []float32, nq, nk, vd int) {
			accum(&o[0], ldo, &p[0], &v[0], nq, nk, vd)
		},
		expSum:  func(x []float32, m float32) float32 { return expSum(&x[0], len(x), m) },
		rowMax:  func(x []float32) float32 { return rowMax(&x[0], len(x)) },
		exp:     exp,
		softmax: asmSoftmax(softmax),
		kTile:   tileKernels(k),
		vTile:   tileKernels(v),
	}
}

// asmSoftmax wraps a path's FlashSoftmax kernel (nil: none, the path
// composes RowMax, Exp and ExpSum row by row); o may be empty when vd is 0.
func asmSoftmax(f func(s *float32, nq int, m, l, o *float32, ldo, vd int)) func(s []float32, nq int, m, l, o []float32, ldo, vd int) {
	if f == nil {
		return nil
	}
	return func(s []float32, nq int, m, l, o []float32, ldo, vd int) {
		var op *float32
		if vd > 0 {
			op = &o[0]
		}
		f(&s[0], nq, &m[0], &l[0], op, ldo, vd)
	}
}

// tileAsm is a tile decoder: cnt rows (a multiple of 16) of w values (whole
// blocks) from src, stride bytes apart, to dst (rows ld apart).
type tileAsm func(dst *float32, ld int, src *byte, stride, w, cnt int)

// tileKernels returns the flashKernels entries of the decoders in k.
func tileKernels(k [NumKVTypes]tileAsm) (out [NumKVTypes]func(dst []float32, ld int, r KVRows, w, cnt int) int) {
	for t, f := range k {
		if f == nil {
			continue
		}
		out[t] = func(dst []float32, ld int, r KVRows, w, cnt int) int {
			src, stride, ok := tileSrc(&r, w)
			if !ok {
				return 0
			}
			f(&dst[0], ld, src, stride, w, cnt)
			return cnt
		}
	}
	return out
}

// flashKVAsm are a path's flash kernels over the cache's rows in place, by
// KV type (nil: none), as the generator's table lists them (flashKVs in
// internal/gen; <path>FlashKV returns them).
type flashKVAsm struct {
	accum  [NumKVTypes]accumKVAsm
	scores [NumKVTypes]scoresColAsm
	col    [NumKVTypes]colAsm
	tile   [NumKVTypes][NumKVTypes]tileAsmKV
}

// scoresColAsm is a FlashScores kernel over 32 keys stored by column in
// place (flashScoresColF16AVX2).
type scoresColAsm func(s, q *float32, ldq int, k *uint16, kstride, nq, hd int, scale float32)

// colAsm is KTile of keys by column: blocks blocks of 32 values of cnt
// keys, the word columns stride bytes apart (kTileQ8ColAVX2).
type colAsm func(dst *float32, ld int, src *uint16, stride, blocks, cnt int)

// tileAsmKV is the signature of the FlashTileKV kernels: the runs' first
// words of the head, the strides in bytes.
type tileAsmKV func(s, q *float32, ldq int, k0, k1 *uint16, kstride int, v0, v1 *uint16, vstride int, m, l, o *float32, ldo int, scale float32, pk0, pk1, pv0, pv1 *uint16)
