package kernels

// FlashTileKV is one step of flash attention over a whole tile for four
// query rows of a head of hd values: the FlashTile keys and values read in
// place, each in two runs of FlashTile/2 rows (k[h] and v[h] hold rows
// [32h, 32h+32) of the tile: keys by column, values by row, f16 both).
// It has the bits of
//
//	KTile(kt, FlashTile, &k[0], hd, 32); KTile(kt[32:], FlashTile, &k[1], hd, 32)
//	FlashScores(s, q, ldq, kt, 4, FlashTile, hd, scale)
//	FlashSoftmax(s, 4, m, l, o, ldo, hd)
//	FlashAccumKV(o, ldo, s, FlashTile, &v[0], 4, 32, hd); the same with s[32:] and v[1]
//
// in one call: decode at depth ran those for every tile of every KV head,
// and their calls, checks and the decoded tile cost as much as the
// arithmetic. It reports false, doing nothing, where the path has no
// kernel (avx512 only) or the rows or shapes are not its (hd 64, both
// runs of keys and of values the same stride): the caller then runs
// those.
func FlashTileKV(s, q []float32, ldq int, k, v *[2]KVRows, hd int, m, l, o []float32, ldo int, scale float32) bool {
	f := flashNow.tileF16
	if f == nil || hd != 64 || ldq < hd || ldo < hd || k[0].Stride != k[1].Stride || v[0].Stride != v[1].Stride {
		return false
	}
	for h := range 2 {
		if !k[h].Col || k[h].T != KVF16 || v[h].Col || v[h].T != KVF16 {
			return false
		}
		checkKVRows("FlashTileKV", nil, 1, &k[h], hd, FlashTile/2, 0)
		checkKVRows("FlashTileKV", nil, 1, &v[h], hd, FlashTile/2, 0)
	}
	_, _, _, _, _ = s[4*FlashTile-1], q[3*ldq+hd-1], m[3], l[3], o[3*ldo+hd-1]
	f(s, q, ldq, k, v, m, l, o, ldo, scale)
	return true
}
