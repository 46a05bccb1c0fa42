package kernels

import (
	"fmt"
	"strings"
	"testing"
)

// PrefetchKV reads nothing it is not given: rows of every type, up to the
// last byte of the last head (the assembly walks the lines of each row's
// bytes, so a slice cut just after them must do), and a slice too short
// for the rows asked for is refused as the tile decoders refuse it.
func TestPrefetchKV(t *testing.T) {
	const rows, n, w = 5, 256, 64
	for typ := range NumKVTypes {
		stride := typ.Words(n)
		words := make([]uint16, (rows-1)*stride+typ.Words(2*w)) // heads 0 and 1 of the last row
		r := KVRows{T: typ, W: words, Stride: stride, Off: w}
		if typ == KVF32 {
			f := make([]float32, (rows-1)*n+2*w)
			r = KVRows{T: typ, F32: f, Stride: n, Off: w}
		}
		PrefetchKV(&r, w, rows)
		if e, ok := outOfRange(func() { PrefetchKV(&r, w, rows+1) }); !ok {
			t.Errorf("%v: one row too many: %v, want an index out of range", typ, e)
		}
	}
	// by column: the head's word columns of rows words, the last ending
	// at the slice's end
	for _, typ := range []KVType{KVF16, KVQ8_0} {
		stride := rows + 3
		words := make([]uint16, (typ.Words(2*w)-1)*stride+rows)
		r := KVRows{T: typ, W: words, Stride: stride, Off: w, Col: true}
		PrefetchKV(&r, w, rows)
		if e, ok := outOfRange(func() { PrefetchKV(&r, w, rows+1) }); !ok {
			t.Errorf("%v by column: one row too many: %v, want an index out of range", typ, e)
		}
	}
}

// outOfRange runs f and returns what it panicked with, and whether that
// was an index out of range.
func outOfRange(f func()) (e any, ok bool) {
	defer func() {
		e = recover()
		ok = e != nil && strings.Contains(fmt.Sprint(e), "out of range")
	}()
	f()
	return nil, false
}
