package kernels

// FlashAccumKV is FlashAccum with the values read in place from cache
// rows: o[i*ldo+d] += Σ_j p[i*ldp+j]·(value d of row j of r), for i < nq,
// d < vd, j < cnt in order, one fused multiply-add per term: the bits of
// VTile then FlashAccum over the same rows. Decode attention at depth
// spent a fifth of its time writing the decoded value tile and reading it
// back. It reports false, doing nothing, where the path has no kernel for
// the type or the shape (f16 and q8_0 rows on avx512, avx2 and neon, nq a
// multiple of 4, vd of 64; rows by row): the caller then decodes the tile.
func FlashAccumKV(o []float32, ldo int, p []float32, ldp int, r *KVRows, nq, cnt, vd int) bool {
	if nq <= 0 || cnt <= 0 || nq%4 != 0 || vd%64 != 0 || r.Col || int(r.T) >= len(accumKVNow) || accumKVNow[r.T] == nil {
		return false
	}
	if ldo < vd || ldp < cnt {
		panic("kernels: FlashAccumKV: ldo < vd or ldp < cnt")
	}
	checkKVRows("FlashAccumKV", nil, 1, r, vd, cnt, 0)
	_, _ = o[(nq-1)*ldo+vd-1], p[(nq-1)*ldp+cnt-1]
	src, stride, ok := tileSrc(r, vd)
	if !ok {
		return false
	}
	accumKVNow[r.T](&o[0], ldo, &p[0], ldp, src, stride, nq, cnt, vd)
	return true
}

// accumKVAsm is a FlashAccumKV kernel (shapes checked).
type accumKVAsm func(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)

// accumKVNow is the installed path's FlashAccumKV kernels by type (nil:
// none); installAccumKV sets it with the path.
var accumKVNow [NumKVTypes]accumKVAsm
