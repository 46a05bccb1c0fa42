package kernels

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// packedRow dequantizes row r of a packed matrix from the packed layout
// alone: the inverse of packing, checked against Dequantize of the file's
// row on every machine.
func packedRow(t Type, p *packed, r, cols int) []float32 {
	f := packFormats[t]
	out := make([]float32, cols)
	grp := p.group(r / packRows)
	rr := r % packRows
	half := func(b []byte) float32 { return FP16ToFP32(uint16(b[0]) | uint16(b[1])<<8) }
	for b := 0; b < p.nb; b++ {
		q, sc := p.block(grp, f, b)
		// byte i of column group k of this row in a 64-byte chunk.
		at := func(chunk, i int) byte { return q[64*chunk+4*rr+i] }
		switch t {
		case Q8_0:
			for e := 0; e < 32; e++ {
				out[b*32+e] = half(sc[2*rr:]) * float32(int(at(e/4, e%4))-128)
			}
		case F16, BF16:
			for c := 0; c < 4; c++ {
				h := uint16(q[32*c+2*rr]) | uint16(q[32*c+2*rr+1])<<8
				if t == F16 {
					out[b*4+c] = FP16ToFP32(h)
				} else {
					out[b*4+c] = BF16ToFP32(h)
				}
			}
		case Q4_0, Q4_1, Q5_0, Q5_1:
			d := half(sc[2*rr:])
			for e := 0; e < 32; e++ {
				k := e / 4 // chunk k: register Zk, elements 4k..4k+3
				v := at(k%4, e%4)
				if k >= 4 {
					v >>= 4
				}
				v &= 15
				if t == Q5_0 || t == Q5_1 {
					v |= (at(4, e%4) >> k & 1) << 4
				}
				switch t {
				case Q4_0:
					out[b*32+e] = d * float32(int(v)-8)
				case Q5_0:
					out[b*32+e] = d * float32(int(v)-16)
				default:
					out[b*32+e] = d*float32(v) + half(sc[32+2*rr:])
				}
			}
		case Q4_K, Q5_K:
			d, dmin := half(sc[256+2*rr:]), half(sc[288+2*rr:])
			for c := 0; c < 4; c++ {
				for e := 0; e < 32; e++ {
					v := at(8*c+e/4, e%4)
					for h, nib := range []byte{v & 15, v >> 4} {
						j := 2*c + h
						if t == Q5_K {
							nib |= (at(32+e/4, e%4) >> j & 1) << 4
						}
						out[b*256+64*c+32*h+e] = d*float32(sc[16*j+rr])*float32(nib) - dmin*float32(sc[128+16*j+rr])
					}
				}
			}
		case Q6_K:
			d := half(sc[256+2*rr:])
			for e := 0; e < 256; e++ {
				blk, l := e/32, e%32 // block 4h+q
				h, qq := blk/4, blk%4
				v := at(8*(2*h+qq%2)+l/4, l%4)
				if qq >= 2 {
					v >>= 4
				}
				hb := at(8*(4+h)+l/4, l%4) >> (2 * qq) & 3
				u := int(v&15 | hb<<4)
				out[b*256+e] = d * (float32(int8(sc[16*(e/16)+rr])) * float32(u-32))
			}
		}
	}
	return out
}

// TestPackLayout packs matrices of every packed type and odd row counts,
// in the file order's groups and interleaved ones, and reads each row back
// out of the groups; padding rows are zero.
func TestPackLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 30))
	for ty := range packFormats {
		for _, rows := range []int{1, 15, 16, 17, 40} {
			for i, blocks := range []int{1, 3, 8} {
				cols := blocks * packBlock(ty)
				data := quantized(ty, randRow(r, rows*cols))
				m := &Matrix{Type: ty, Rows: rows, Cols: cols, Data: data}
				p := pack(m, (rows+i)%2 == 1) // both layouts
				if p.groups != (rows+15)/16 || p.gbytes != blocks*(packFormats[ty].qbytes+packFormats[ty].sbytes) {
					t.Fatalf("%s %dx%d: %d groups of %d bytes", ty, rows, cols, p.groups, p.gbytes)
				}
				want := make([]float32, rows*cols)
				Dequantize(ty, data, want)
				for i := 0; i < p.groups*packRows; i++ {
					got := packedRow(ty, p, i, cols)
					for e, v := range got {
						w := float32(0)
						if i < rows {
							w = want[i*cols+e]
						}
						if v != w {
							t.Fatalf("%s %dx%d: row %d element %d unpacks to %g, want %g", ty, rows, cols, i, e, v, w)
						}
					}
				}
			}
		}
	}
}

// TestAlignedBytes: packed copies start on a cache line, and those of a
// huge page or more on a huge page (where the kernel may back them with
// one), with exactly the bytes asked for, zeroed.
func TestAlignedBytes(t *testing.T) {
	for _, n := range []int{1, 100, hugePage - 1, hugePage, 3*hugePage + 5} {
		b := alignedBytes(n)
		if len(b) != n || cap(b) != n {
			t.Fatalf("alignedBytes(%d): len %d cap %d", n, len(b), cap(b))
		}
		align := uintptr(64)
		if n >= hugePage {
			align = hugePage
		}
		if a := uintptr(unsafe.Pointer(&b[0])); a%align != 0 {
			t.Errorf("alignedBytes(%d) at %#x, not a multiple of %d", n, a, align)
		}
		for i := 0; i < n; i += 4093 {
			if b[i] != 0 {
				t.Fatalf("alignedBytes(%d)[%d] = %d", n, i, b[i])
			}
		}
	}
}

// TestActInterleave: the gemmT kernels find, in part p of the tokens
// (smallPart: [s,e), k = e-s), block b of token t's quants at quant
// s*cols + 32*(k*b+t-s) and its scale and negated sum at block s*nb +
// k*b+t-s; 11 tokens are two parts, of 5 and 6.
func TestActInterleave(t *testing.T) {
	const n, nb = 11, 4
	pk := &packKernels{}
	for k := 2; k <= maxSmallBatch; k++ {
		pk.gemmT[k] = func(*byte, int, int, *int8, int, *float32, unsafe.Pointer, int, *float32, int, int) {}
	}
	j := &matmulJob{n: n, pk: pk, acts: make([]Act, n)}
	if got := j.smallParts(); got != 2 {
		t.Fatalf("%d tokens in %d parts, want 2", n, got)
	}
	for i := range j.acts {
		a := &j.acts[i]
		a.Qs = make([]int8, 32*nb)
		a.D = make([]float32, nb)
		a.I = make([]int32, nb)
		for b := range nb {
			for e := range 32 {
				a.Qs[32*b+e] = int8(10*i + b + e)
			}
			a.D[b] = float32(100*i + b)
			a.I[b] = int32(1000*i + b)
		}
	}
	j.actInterleave(nb)
	for p, want := range [][2]int{{0, 5}, {5, 11}} {
		s, e := smallPart(n, 2, p)
		if s != want[0] || e != want[1] {
			t.Fatalf("part %d is tokens [%d,%d), want [%d,%d)", p, s, e, want[0], want[1])
		}
		k := e - s
		for i := s; i < e; i++ {
			for b := range nb {
				at := s*nb + k*b + i - s
				for c := range 32 {
					if got, want := j.qi[32*at+c], int8(10*i+b+c); got != want {
						t.Fatalf("token %d block %d quant %d = %d, want %d", i, b, c, got, want)
					}
				}
				if j.di[at] != float32(100*i+b) || j.si[at] != -int32(1000*i+b) {
					t.Fatalf("token %d block %d: scale %g sum %d", i, b, j.di[at], j.si[at])
				}
			}
		}
	}
}
