package kernels

// FlashTileKV is one step of flash attention over a whole tile for four
// query rows of a head of hd values: the FlashTile keys and values read in
// place, each in two runs of FlashTile/2 rows (k[h] and v[h] hold rows
// [32h, 32h+32) of the tile: keys by column, values by row, f16 or q8_0
// each). It has the bits of
//
//	KTile(kt, FlashTile, &k[0], hd, 32); KTile(kt[32:], FlashTile, &k[1], hd, 32)
//	FlashScores(s, q, ldq, kt, 4, FlashTile, hd, scale)
//	FlashSoftmax(s, 4, m, l, o, ldo, hd)
//	FlashAccumKV(o, ldo, s, FlashTile, &v[0], 4, 32, hd); the same with s[32:] and v[1]
//
// in one call: decode at depth ran those for every tile of every KV head,
// and their calls, checks and the decoded tile cost as much as the
// arithmetic. Along the way it asks the memory system for the rows of pk
// and pv, the next call's keys and values (of the same layout; k and v
// where there is none): decode reads them from memory, and a prefetch
// of a whole tile's rows at once stalled the core until they were in
// flight. It reports false, doing nothing, where the path has no kernel
// (avx512, and avx2 with F16C) or the rows or shapes are not
// its (hd 64; keys of one type, f16 or q8_0, by column, all the same
// stride; values of one type by row, the same stride; pk and pv as k and
// v): the caller then runs those.
func FlashTileKV(s, q []float32, ldq int, k, v, pk, pv *[2]KVRows, hd int, m, l, o []float32, ldo int, scale float32) bool {
	kt, vt := k[0].T, v[0].T
	if kt >= NumKVTypes || vt >= NumKVTypes || hd != 64 || ldq < hd || ldo < hd {
		return false
	}
	f := flashNow.tile[kt][vt]
	if f == nil {
		return false
	}
	// the checks of checkKVRows, written out: decode at depth makes
	// this call for every tile of every KV head, and the general checks
	// took a tenth of the kernel's time
	const half = FlashTile / 2
	kw, ks, vw, vs := kt.Words(hd), k[0].Stride, vt.Words(hd), v[0].Stride
	if ks < half || vs < vw {
		return false
	}
	for h := range 2 {
		for _, r := range [...]*KVRows{&k[h], &pk[h]} {
			if !r.Col || r.T != kt || r.Stride != ks || r.Off%32 != 0 {
				return false
			}
			_ = r.W[(kt.Words(r.Off)+kw-1)*ks+half-1]
		}
		for _, r := range [...]*KVRows{&v[h], &pv[h]} {
			if r.Col || r.T != vt || r.Stride != vs || r.Off%32 != 0 {
				return false
			}
			_ = r.W[(half-1)*vs+vt.Words(r.Off)+vw-1]
		}
	}
	_, _, _, _, _ = s[4*FlashTile-1], q[3*ldq+hd-1], m[3], l[3], o[3*ldo+hd-1]
	f(s, q, ldq, k, v, pk, pv, m, l, o, ldo, scale)
	return true
}
