package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// unpackRow rebuilds row r of a packed matrix in the type's own layout:
// the inverse of packing, which the portable test checks on every machine.
func unpackRow(t Type, p *packed, r int) []byte {
	f := packFormats[t]
	bs := t.TypeSize()
	row := make([]byte, p.nb*bs)
	g, rr := r/packRows, r%packRows
	grp := p.group(g)
	quants, scales := grp[:p.nb*f.qbytes], grp[p.nb*f.qbytes:]
	for b := 0; b < p.nb; b++ {
		q := quants[b*f.qbytes:]
		dst := row[b*bs:]
		copy(dst[:2], scales[b*32+2*rr:])
		switch t {
		case Q8_0:
			for k := 0; k < 8; k++ {
				for i := 0; i < 4; i++ {
					dst[2+4*k+i] = q[64*k+4*rr+i] ^ 0x80
				}
			}
		case Q4_0:
			for j := 0; j < 4; j++ {
				copy(dst[2+4*j:2+4*j+4], q[64*j+4*rr:])
			}
		}
	}
	return row
}

// TestPackLayout packs matrices of every packed type and odd row counts
// and reads each row back out of the groups; padding rows are zero
// weights with zero scales.
func TestPackLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 30))
	for ty := range packFormats {
		for _, rows := range []int{1, 15, 16, 17, 40} {
			for _, cols := range []int{32, 96, 256} {
				data := quantized(ty, randRow(r, rows*cols))
				m := &Matrix{Type: ty, Rows: rows, Cols: cols, Data: data}
				p := pack(m)
				if p.groups != (rows+15)/16 || len(p.data) != p.groups*16*m.RowBytes() {
					t.Fatalf("%s %dx%d: %d groups of %d bytes, want %d groups of %d", ty, rows, cols, p.groups, p.gbytes, (rows+15)/16, 16*m.RowBytes())
				}
				rb := m.RowBytes()
				for i := 0; i < p.groups*packRows; i++ {
					got := unpackRow(ty, p, i)
					want := make([]byte, rb)
					if i < rows {
						want = data[i*rb : (i+1)*rb]
					} else {
						for b := 0; b < cols/32; b++ {
							for k := 2; k < ty.TypeSize(); k++ {
								want[b*ty.TypeSize()+k] = packPad[ty] ^ map[Type]byte{Q8_0: 0x80, Q4_0: 0}[ty]
							}
						}
					}
					if string(got) != string(want) {
						t.Fatalf("%s %dx%d: row %d unpacks to %x, want %x", ty, rows, cols, i, got[:min(16, len(got))], want[:min(16, len(want))])
					}
				}
			}
		}
	}
}

// TestPackedMatMul compares the packed kernels of the avx512 path with the
// avx2 path's kernels on the file layout: the same bits for every output,
// for token counts that use the four-token and one-token kernels, rows
// that leave a partial group and threads that split the groups; and with
// the float64 oracle (testMatrix.check).
func TestPackedMatMul(t *testing.T) {
	for _, name := range []string{"avx2", "avx512"} {
		if why := pathMissing(name); why != "" {
			t.Skipf("path %s: %s", name, why)
		}
	}
	prev, err := setPath("avx512")
	if err != nil {
		t.Fatal(err)
	}
	defer setPath(prev)
	r := rand.New(rand.NewPCG(31, 31))
	p := NewPool(2)
	defer p.Close()
	for ty := range vnniPackKernels {
		for _, shape := range [][2]int{{1, 32}, {15, 64}, {16, 96}, {17, 256}, {33, 800}, {130, 768}, {256, 2048}} {
			rows, cols := shape[0], shape[1]
			for _, n := range []int{1, 2, 3, 4, 5, 8, 13, 64} {
				setPath("avx512")
				tm := newTestMatrix(t, r, ty, rows, cols, n)
				if tm.m.pk == nil {
					t.Fatalf("%s: NewMatrix on the avx512 path did not pack", ty)
				}
				tm.reference(n)
				what := fmt.Sprintf("%s %dx%d n=%d", ty, rows, cols, n)
				for _, pool := range []*Pool{nil, p} {
					setPath("avx512")
					got := make([]float32, n*rows+7)
					MatMul(pool, got, tm.m, tm.input, n)
					setPath("avx2")
					want := make([]float32, n*rows+7)
					MatMul(pool, want, tm.m, tm.input, n)
					for k := range got {
						if got[k] != want[k] {
							t.Fatalf("%s: out[%d] = %g (packed), %g (avx2)", what, k, got[k], want[k])
						}
					}
					tm.check(t, got[:n*rows], n, what)
				}
			}
		}
	}
}

// TestSubRows: a view of rows keeps the packed copy when it starts on a
// group, and gives the full matrix's bits for its rows either way.
func TestSubRows(t *testing.T) {
	if why := pathMissing("avx512"); why != "" {
		t.Skip("path avx512:", why)
	}
	prev, err := setPath("avx512")
	if err != nil {
		t.Fatal(err)
	}
	defer setPath(prev)
	r := rand.New(rand.NewPCG(32, 32))
	const rows, cols, n = 75, 96, 5
	tm := newTestMatrix(t, r, Q8_0, rows, cols, n)
	full := make([]float32, n*rows)
	MatMul(nil, full, tm.m, tm.input, n)
	for _, c := range []struct {
		lo, hi int
		packed bool
	}{{0, 16, true}, {16, 75, true}, {32, 48, true}, {64, 75, true}, {3, 16, false}, {16, 40, false}, {0, 0, false}} {
		s := tm.m.SubRows(c.lo, c.hi)
		if (s.pk != nil) != c.packed {
			t.Errorf("SubRows(%d, %d): packed %v, want %v", c.lo, c.hi, s.pk != nil, c.packed)
		}
		got := make([]float32, n*s.Rows)
		MatMul(nil, got, s, tm.input, n)
		for i := 0; i < n; i++ {
			for k := 0; k < s.Rows; k++ {
				if got[i*s.Rows+k] != full[i*rows+c.lo+k] {
					t.Fatalf("SubRows(%d, %d): input %d row %d = %g, full matrix %g", c.lo, c.hi, i, k, got[i*s.Rows+k], full[i*rows+c.lo+k])
				}
			}
		}
	}
}
