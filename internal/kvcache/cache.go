package kvcache

import "mistralrs/internal/kernels"

// Cache stores the keys and values of one sequence, per layer and
// position. Rows are written as float32 and stored as float32 or halves (an
// F16 cache: half the memory, rounded to nearest even), or in a paged pool
// as any Type: a key row has KDim elements (all KV heads), a value row VDim.
//
// It is shaped so that a paged (block-table) cache can implement it: rows are
// written one at a time with Put and read back as runs of consecutive
// positions (Span), one run per block. The forward pass knows it as
// Cache; Seq (paged) and ContiguousCache implement it.
type Cache interface {
	// Len is the number of positions stored.
	Len() int
	// Extend makes room for positions [Len(), n) and sets Len to n; the
	// caller then fills those rows of every layer with Put. It fails when
	// the cache cannot hold n positions. A paged cache allocates blocks here
	// (and copies a block it shares with another sequence before rows of it
	// are overwritten).
	Extend(n int) error
	// Truncate forgets positions [n, Len()); n > Len() is a no-op.
	Truncate(n int)
	// Put stores the key and value rows of position pos (< Len) of layer.
	Put(layer, pos int, k, v []float32)
	// Span returns the key and value rows of layer from position pos on,
	// as far as they lie contiguously in memory. Its N may reach past Len;
	// callers stop at Len.
	Span(layer, pos int) Span
}

// Span is a run of N cached rows of one layer, positions pos..pos+N-1:
// row j at K[j*KDim:] and V[j*VDim:] in a float32 cache, at K16 and V16 in
// an F16 cache (K and V are then nil). Keys (values) of the other types
// are at KQ[j*KW:] (VQ[j*VW:]), stored as KT (VT) and read with
// DecodeRows; K16 (V16) are then the keys (values) stored as F16 if
// either is. KCol > 0: K16 (f16) or KQ holds the keys by column, word c
// of row j at [c*KCol+j] (a paged pool's f16 keys, and its q8_0 keys where
// the kernels read them so: Pool).
type Span struct {
	K, V     []float32
	K16, V16 []uint16
	KQ, VQ   []uint16
	KT, VT   Type
	KW, VW   int
	KCol     int
	N        int
}

// KeyRows decodes values [off, off+w) of keys j0..j0+cnt-1 into dst
// (rows w apart), of keys of kdim values, whatever their type.
func (sp *Span) KeyRows(dst []float32, kdim, j0, cnt, off, w int) {
	if sp.KCol > 0 {
		r := sp.KeyCols()
		r.W, r.Off = r.W[j0:], off
		kernels.VTile(dst, w, &r, w, cnt)
		return
	}
	spanRows(dst, sp.K, sp.K16, sp.KQ, sp.KT, sp.KW, kdim, j0, cnt, off, w)
}

// KeyCols is the keys of a span stored by column (KCol > 0) as the
// kernels read them.
func (sp *Span) KeyCols() kernels.KVRows {
	w := sp.KQ
	if sp.KT == F16 {
		w = sp.K16
	}
	return kernels.KVRows{T: sp.KT.KV(), W: w, Stride: sp.KCol, Col: true}
}

// ValueRows is KeyRows of the values (of vdim values).
func (sp *Span) ValueRows(dst []float32, vdim, j0, cnt, off, w int) {
	spanRows(dst, sp.V, sp.V16, sp.VQ, sp.VT, sp.VW, vdim, j0, cnt, off, w)
}

func spanRows(dst, f32 []float32, f16, q []uint16, t Type, words, dim, j0, cnt, off, w int) {
	switch {
	case q != nil:
		DecodeRows(dst, t, q[j0*words:], words, off, w, cnt)
	case f16 != nil:
		kernels.F16RowsToF32(dst, f16[j0*dim+off:], dim, w, cnt)
	default:
		for j := range cnt {
			copy(dst[j*w:(j+1)*w], f32[(j0+j)*dim+off:])
		}
	}
}
