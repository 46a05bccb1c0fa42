//go:build (amd64 || arm64) && !purego

package kernels

import "unsafe"

// The assembly KV tile decoders of the avx2 and neon paths take a head's
// first byte and the rows' stride in bytes: tileKernels wraps a path's
// (from the generator's table: <path>TileKernels in gen_asm_<arch>.go) as
// flashKernels' kTile and vTile entries.

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

// tileSrc returns the first byte of r's head in its first row and the
// rows' stride in bytes; ok is false for what the decoders do not take:
// KVF32 rows given as words, a head that does not start or end at a block
// boundary. The caller has checked that r holds the rows.
func tileSrc(r *KVRows, w int) (src *byte, stride int, ok bool) {
	if r.T == KVF32 {
		if r.F32 == nil {
			return nil, 0, false
		}
		return (*byte)(unsafe.Pointer(&r.F32[r.Off])), 4 * r.Stride, true
	}
	if bl := r.T.BlockLen(); r.Off%bl != 0 || w%bl != 0 {
		return nil, 0, false
	}
	return (*byte)(unsafe.Pointer(&r.W[r.T.Words(r.Off)])), 2 * r.Stride, true
}
