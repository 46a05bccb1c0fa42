package kernels

import "unsafe"

// PrefetchKV asks the memory system for values [Off, Off+w) of rows
// 0..cnt-1 of r, ahead of their use: decode attention at long context
// streams a sequence's keys and values from memory once per token, and
// tile by tile the transposition's shuffles and the products would
// otherwise wait on each row's miss in turn (the tile decoders prefetch
// only the next few rows). It changes no value; without assembly (purego,
// other architectures) it only checks its rows, as everywhere.
func PrefetchKV(r *KVRows, w, cnt int) {
	if cnt <= 0 || w <= 0 {
		return
	}
	checkKVRows("PrefetchKV", nil, 1, r, w, cnt, 0)
	prefetchKV(r, w, cnt)
}

// prefetchKV is PrefetchKV on rows already checked (FlashTileKV's).
func prefetchKV(r *KVRows, w, cnt int) {
	if !prefetchAsm {
		return
	}
	if r.Col {
		// the head's words of the rows: a run of cnt words a column
		c0, n := colWords(r, w)
		prefetchRows((*byte)(unsafe.Pointer(&r.W[c0*r.Stride])), 2*r.Stride, 2*cnt, n)
		return
	}
	src, stride, ok := tileSrc(r, w)
	if !ok {
		return
	}
	n := 4 * w
	if r.T != KVF32 {
		n = 2 * r.T.Words(w)
	}
	prefetchRows(src, stride, n, cnt)
}
