package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// The KV cache's row formats and their decoders: one head's values of a run
// of cached rows, as float32, either transposed (KTile: the keys of a flash
// tile, a row per value of the head) or row-major (VTile: its values, and
// the cache's own reads). Decoding is exact (a half or an E4M3 code is a
// float32, a block's value is its code times its scale, one rounding), so
// the assembly decoders give the Go decoders' bits.

// KVType is how a KV cache stores rows: kvcache.Type's values, in its order.
//   - KVF32: float32 rows.
//   - KVF16, KVBF16: one 16-bit word a value.
//   - KVQ8_0, KVQ4_0: llama.cpp's blocks of 32 values (a half scale, then 32
//     int8s, or 16 bytes of 4-bit pairs: low nibbles values 0-15, high 16-31).
//   - KVF8E4M3: blocks of 32 values, a half scale and 32 OCP E4M3 codes.
//
// Every type but KVF32 is kept in 16-bit words (little-endian bytes).
type KVType uint8

// The KV types.
const (
	KVF32 KVType = iota
	KVF16
	KVBF16
	KVQ8_0
	KVQ4_0
	KVF8E4M3
	NumKVTypes
)

// BlockLen is the number of values t stores together (32 or 1).
func (t KVType) BlockLen() int {
	switch t {
	case KVQ8_0, KVQ4_0, KVF8E4M3:
		return 32
	}
	return 1
}

// Words is the number of 16-bit words n values (a multiple of BlockLen)
// take (KVF32: two a value).
func (t KVType) Words(n int) int {
	switch t {
	case KVF32:
		return 2 * n
	case KVQ8_0, KVF8E4M3:
		return n / 32 * 17
	case KVQ4_0:
		return n / 32 * 9
	}
	return n
}

// KVRows is a run of cached rows of one type, and the head to read in them.
type KVRows struct {
	T      KVType
	F32    []float32 // the rows of a KVF32 cache
	W      []uint16  // the rows of the other types (or KVF32's, as pairs of words)
	Stride int       // from one row to the next: values (KVF32) or words
	Off    int       // the head's first value in a row
	// Col: the rows are stored by column of words: word c of a row's
	// head (KVF32 excepted; the head on whole blocks) at
	// W[(T.Words(Off)+c)*Stride+j] for row j, Stride now from one word
	// column to the next: the transpose of the rows' words, so that a
	// half, or a q8_0 block's scale and each pair of its codes, of
	// consecutive rows lie together. A paged cache keeps its f16 keys so
	// within a block, and its q8_0 keys where the path reads them so
	// (KeysByColumn; kvcache), so that a tile's keys come as runs of a
	// row of the transposed tile.
	Col bool
}

// KTile writes values [Off, Off+w) of rows 0..cnt-1 of r transposed:
// dst[d*ld+j] = value d of row j, for d < w, j < cnt (ld >= cnt: the
// width of the tile, whose columns a caller fills from several runs by
// offsetting dst). Other elements of dst are left alone.
func KTile(dst []float32, ld int, r *KVRows, w, cnt int) {
	if cnt <= 0 || w <= 0 {
		return
	}
	checkKVRows("KTile", dst, ld, r, w, cnt, (w-1)*ld+cnt)
	if r.Col {
		kTileCol(dst, ld, r, w, cnt)
		return
	}
	j := 0
	if f := flashNow.kTile[r.T]; f != nil && w%16 == 0 && cnt >= 16 {
		j = f(dst, ld, *r, w, cnt&^15)
	}
	if j == cnt {
		return
	}
	kTileRows(dst, ld, r, w, j, cnt)
}

// kTileRows is KTile's Go decoder: rows j0..cnt-1 one at a time.
func kTileRows(dst []float32, ld int, r *KVRows, w, j0, cnt int) {
	var buf [256]float32
	row := buf[:0]
	if w > len(buf) {
		row = make([]float32, w)
	}
	row = row[:w]
	for j := j0; j < cnt; j++ {
		decodeKVRow(row, r, j, w)
		for d, v := range row {
			dst[d*ld+j] = v
		}
	}
}

// KeysByColumn reports whether keys of type t are best stored by column
// (KVRows.Col) for the path in use: f16 always (KTile then copies runs
// where it would transpose), q8_0 where the path has its kernels for such
// rows (avx512, and avx2 with F16C: KTile's and FlashTileKV's), which
// read them as fast as f16's; by row elsewhere, where KTile would decode
// them in Go.
func KeysByColumn(t KVType) bool {
	return t == KVF16 || t == KVQ8_0 && flashNow.kColQ8 != nil
}

// kTileCol is KTile of rows stored by column. f16: the tile's row d is
// the run of value d of the rows, so the path's VTile decoder does it
// with rows and values swapped (w of its rows, of cnt values, a multiple
// of 16 of them). q8_0: the path's kernel where it has one. The Go
// decoder does the rest.
func kTileCol(dst []float32, ld int, r *KVRows, w, cnt int) {
	j := 0
	switch {
	case r.T == KVF16:
		if f := flashNow.vTile[KVF16]; f != nil && w%16 == 0 && cnt >= 16 {
			t := KVRows{T: r.T, W: r.W, Stride: r.Stride, Off: r.Off * r.Stride}
			if f(dst, ld, t, cnt&^15, w) == w {
				j = cnt &^ 15
			}
		}
		for d := range w {
			col := r.W[(r.Off+d)*r.Stride:]
			for k := j; k < cnt; k++ {
				dst[d*ld+k] = f16Table[col[k]]
			}
		}
	case r.T == KVQ8_0 && r.Off%32 == 0 && w%32 == 0:
		if f := flashNow.kColQ8; f != nil && cnt >= 16 {
			j = f(dst, ld, *r, w, cnt&^15)
		}
		kTileColQ8(dst, ld, r, w, j, cnt)
	default:
		kTileRows(dst, ld, r, w, 0, cnt)
	}
}

// kTileColQ8 is kTileCol's Go decoder of q8_0 rows j0..cnt-1 by column:
// each block's scale column, then its 16 columns of code pairs (the low
// byte the even value).
func kTileColQ8(dst []float32, ld int, r *KVRows, w, j0, cnt int) {
	s := r.Stride
	for b := range w / 32 {
		col := r.W[(r.T.Words(r.Off)+17*b)*s:]
		for j := j0; j < cnt; j++ {
			d := f16Table[col[j]]
			for p := range 16 {
				c := col[(1+p)*s+j]
				dst[(32*b+2*p)*ld+j] = float32(int8(c)) * d
				dst[(32*b+2*p+1)*ld+j] = float32(int8(c>>8)) * d
			}
		}
	}
}

// VTile writes values [Off, Off+w) of rows 0..cnt-1 of r row-major:
// dst[j*ld+d] = value d of row j, for d < w, j < cnt (ld >= w).
func VTile(dst []float32, ld int, r *KVRows, w, cnt int) {
	if cnt <= 0 || w <= 0 {
		return
	}
	checkKVRows("VTile", dst, ld, r, w, cnt, (cnt-1)*ld+w)
	j := 0
	if f := flashNow.vTile[r.T]; f != nil && w%16 == 0 && cnt >= 16 {
		j = f(dst, ld, *r, w, cnt&^15)
	}
	for ; j < cnt; j++ {
		decodeKVRow(dst[j*ld:j*ld+w], r, j, w)
	}
}

// checkKVRows panics (a caller's bug) unless dst holds need values and r
// holds cnt rows of the head.
func checkKVRows(name string, dst []float32, ld int, r *KVRows, w, cnt, need int) {
	if r.T >= NumKVTypes || ld <= 0 || len(dst) < need || r.Col && (r.T == KVF32 || r.Stride < cnt) {
		panic(fmt.Sprintf("kernels: %s: type %d (by column %v, stride %d), ld %d, %d values for %d rows of %d", name, r.T, r.Col, r.Stride, ld, len(dst), cnt, w))
	}
	if r.Col {
		c0, n := colWords(r, w)
		_ = r.W[(c0+n-1)*r.Stride+cnt-1]
		return
	}
	if r.T == KVF32 && r.F32 != nil {
		_ = r.F32[(cnt-1)*r.Stride+r.Off+w-1]
		return
	}
	bl := r.T.BlockLen()
	end := (r.Off + w + bl - 1) / bl * bl
	_ = r.W[(cnt-1)*r.Stride+r.T.Words(end)-1]
}

// decodeKVRow decodes values [Off, Off+w) of row j of r into out.
func decodeKVRow(out []float32, r *KVRows, j, w int) {
	if r.Col {
		// the row's words of the blocks that hold the head, gathered from
		// their columns, decoded as a row of them
		c0, n := colWords(r, w)
		var buf [256]uint16
		ws := buf[:0]
		if n > len(buf) {
			ws = make([]uint16, n)
		}
		ws = ws[:n]
		for c := range ws {
			ws[c] = r.W[(c0+c)*r.Stride+j]
		}
		row := KVRows{T: r.T, W: ws, Stride: n, Off: r.Off % r.T.BlockLen()}
		decodeKVRow(out, &row, 0, w)
		return
	}
	if r.T == KVF32 && r.F32 != nil {
		copy(out, r.F32[j*r.Stride+r.Off:j*r.Stride+r.Off+w])
		return
	}
	row := r.W[j*r.Stride:]
	bl := r.T.BlockLen()
	if r.Off%bl == 0 && w%bl == 0 {
		first := r.T.Words(r.Off)
		DecodeKV(r.T, row[first:first+r.T.Words(w)], out[:w])
		return
	}
	// a head inside a block (heads narrower than 32): decode the blocks
	// that overlap it
	var buf [32]float32
	bw := r.T.Words(bl)
	for i := r.Off; i < r.Off+w; {
		b := i / bl
		DecodeKV(r.T, row[b*bw:(b+1)*bw], buf[:bl])
		i += copy(out[i-r.Off:w], buf[i-b*bl:bl])
	}
}

// colWords returns the first word column and the number of columns of
// the blocks that hold values [Off, Off+w) of rows r stored by column.
func colWords(r *KVRows, w int) (c0, n int) {
	bl := r.T.BlockLen()
	b0, end := r.Off/bl*bl, (r.Off+w+bl-1)/bl*bl
	return r.T.Words(b0), r.T.Words(end) - r.T.Words(b0)
}

// DecodeKV decodes whole blocks of t from src into dst (len(dst) values,
// a multiple of t's block).
func DecodeKV(t KVType, src []uint16, dst []float32) {
	switch t {
	case KVF32:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(src[2*i]) | uint32(src[2*i+1])<<16)
		}
	case KVF16:
		F16ToF32s(dst, src[:len(dst)])
	case KVBF16:
		for i, h := range src[:len(dst)] {
			dst[i] = BF16ToFP32(h)
		}
	case KVQ8_0:
		bs := kvBytes(src[:len(dst)/32*17])
		for b := 0; b < len(dst); b += 32 {
			blk, y := (*[34]byte)(bs[b/32*34:]), (*[32]float32)(dst[b:])
			d := FP16ToFP32(uint16(blk[0]) | uint16(blk[1])<<8)
			for j, c := range (*[32]byte)(blk[2:]) {
				y[j] = float32(int8(c)) * d
			}
		}
	case KVQ4_0:
		for b := 0; b < len(dst); b += 32 {
			blk, y := (*[9]uint16)(src[b/32*9:]), (*[32]float32)(dst[b:])
			d := FP16ToFP32(blk[0])
			for j, w := range blk[1:] {
				lo, hi := byte(w), byte(w>>8)
				y[2*j] = float32(int32(lo&15)-8) * d
				y[2*j+1] = float32(int32(hi&15)-8) * d
				y[2*j+16] = float32(int32(lo>>4)-8) * d
				y[2*j+17] = float32(int32(hi>>4)-8) * d
			}
		}
	case KVF8E4M3:
		bs := kvBytes(src[:len(dst)/32*17])
		for b := 0; b < len(dst); b += 32 {
			blk, y := (*[34]byte)(bs[b/32*34:]), (*[32]float32)(dst[b:])
			d := FP16ToFP32(uint16(blk[0]) | uint16(blk[1])<<8)
			for j, c := range (*[32]byte)(blk[2:]) {
				y[j] = e4m3Values[c] * d
			}
		}
	default:
		panic(fmt.Sprintf("kernels: DecodeKV: type %d", t))
	}
}

// kvBytes views words as their little-endian bytes, the layout of the
// blocks (the machines this runs on are little-endian).
func kvBytes(w []uint16) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 2*len(w))
}

// E4M3Max is the largest finite E4M3 value (code 0x7e).
const E4M3Max = 448

// E4M3ToFP32 is the value of an E4M3 code: 1 sign, 4 exponent bits of bias
// 7, 3 mantissa bits, no infinities; the NaN codes 0x7f and 0xff read as
// ±448 (a cache's encoder never writes them).
func E4M3ToFP32(c byte) float32 { return e4m3Values[c] }

var e4m3Values = func() (t [256]float32) {
	for c := range t {
		e, m := (c&0x7f)>>3, c&7
		v := float32(E4M3Max)
		switch {
		case c&0x7f == 0x7f:
		case e == 0:
			v = float32(m) / 8 * (1.0 / 64) // subnormal: m/8 · 2^-6
		default:
			v = (1 + float32(m)/8) * float32(math.Ldexp(1, e-7))
		}
		if c&0x80 != 0 {
			v = -v
		}
		t[c] = v
	}
	return t
}()

// tileSrc returns the first byte of r's head in its first row and the
// rows' stride in bytes; ok is false for what the decoders do not take:
// KVF32 rows given as words, a head that does not start or end at a block
// boundary, rows by column. The caller has checked that r holds the rows.
func tileSrc(r *KVRows, w int) (src *byte, stride int, ok bool) {
	if r.Col {
		return nil, 0, false
	}
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
