//go:build (amd64 || arm64) && !purego

package kernels

import "fmt"

// The Go wrappers of the assembly dot kernels, written once for every type
// and path: an asmKernel names a type's kernels on a path, its methods
// check the arguments (so that the assembly stays inside the slices), take
// the one-row and one-input cases and the lengths the assembly does not,
// and call the kernels through asmDot and asmDot4, which the generator
// writes per architecture from its table (gen_asm_<arch>.go): they call
// each kernel directly, as a call through a function value would make the
// arguments escape (and the four-input ones' pointer arrays with them).

// asmPath is a path's set of assembly kernels (gen_asm_<arch>.go names
// them); asmNone is none.
type asmPath uint8

const asmNone asmPath = 0

// asmKind is what the kernels of a type take, by the table's kinds.
type asmKind uint8

const (
	kindFloat asmKind = iota // float weights against float activations (Act.F)
	kindQD                   // activation quants and block scales (Act.Qs, D)
	kindQDS                  // also the block sums (Act.S)
	kindQDB                  // also the sums of 16 quants (Act.B; Q6_K)
)

// asmKernel is a type's assembly kernels: the one-input ones of path one,
// the four-input ones of path four (and, when four takes weight rows in
// pairs, those of path odd on an odd last row).
type asmKernel struct {
	t     Type
	kind  asmKind
	size  int // bytes per element (float) or per block
	elems int // elements per block (1 for floats)
	one   asmPath
	four  asmPath
	odd   asmPath
}

// asmKernelsOf returns the kernels of types ts on paths one, four and odd.
func asmKernelsOf(one, four, odd asmPath, ts ...Type) map[Type]typeKernels {
	m := map[Type]typeKernels{}
	for _, t := range ts {
		m[t] = asmTypes[t].on(one, four, odd).kernels()
	}
	return m
}

// on returns k's kernels on paths one, four and odd.
func (k asmKernel) on(one, four, odd asmPath) asmKernel {
	k.one, k.four, k.odd = one, four, odd
	return k
}

func (k asmKernel) kernels() typeKernels {
	return typeKernels{dot: k.dot, dot4: k.dot4, dotRows: k.dotRows, dot4Rows: k.dot4Rows, sums16: k.kind == kindQDB}
}

func noAsm(p asmPath, t Type) string {
	return fmt.Sprintf("kernels: no assembly kernel of %v on path %d", t, p)
}

// floatTail is Σ w·x over the elements past the floats kernels' multiple
// of 8.
func (k asmKernel) floatTail(w []byte, x []float32) float32 {
	switch k.t {
	case F16:
		return tailF16(w, x)
	case BF16:
		return tailBF16(w, x)
	}
	return tailF32(w, x)
}

func (k asmKernel) dot(w []byte, a *Act, n int) float32 {
	if k.kind != kindFloat {
		var o [1]float32
		k.dotRows(w, 1, a, n, o[:])
		return o[0]
	}
	m := n &^ 7
	var s float32
	if m > 0 {
		_ = w[k.size*n-1]
		_ = a.F[n-1]
		asmDot(k.one, k.t, &w[0], &a.F[0], nil, nil, nil, nil, m, 1, &s)
	}
	if m < n {
		s += k.floatTail(w[k.size*m:], a.F[m:n])
	}
	return s
}

// dotRows: the float kernels need rows of a multiple of 8 elements (the
// assembly walks the weights straight through); other lengths loop over
// dot (as dot4Rows over dot4; dotRowsOf and dot4RowsOf would take them as
// function values, and the arguments would escape).
func (k asmKernel) dotRows(w []byte, rows int, a *Act, n int, out []float32) {
	if k.kind == kindFloat {
		if n%8 != 0 || rows == 0 {
			rb := k.size * n
			for r := range out[:rows] {
				out[r] = k.dot(w[r*rb:(r+1)*rb], a, n)
			}
			return
		}
		_ = w[rows*k.size*n-1]
		_ = a.F[n-1]
		_ = out[rows-1]
		asmDot(k.one, k.t, &w[0], &a.F[0], nil, nil, nil, nil, n, rows, &out[0])
		return
	}
	nb, sub := n/k.elems, k.elems/32
	if k.kind == kindQDS {
		if qs, d, s, ok := sArgs(w, rows, a, nb, sub, k.size, out); ok {
			asmDot(k.one, k.t, &w[0], nil, qs, d, s, nil, nb, rows, &out[0])
		}
		return
	}
	qs, d, ok := dArgs(w, rows, a, nb, sub, k.size, out)
	if !ok {
		return
	}
	if k.kind == kindQD {
		asmDot(k.one, k.t, &w[0], nil, qs, d, nil, nil, nb, rows, &out[0])
		return
	}
	var buf [1024]int16
	b := sums16Of(a, nb, &buf)
	_ = b[nb*16-1]
	asmDot(k.one, k.t, &w[0], nil, qs, d, nil, &b[0], nb, rows, &out[0])
}

func (k asmKernel) dot4(w []byte, a *[4]*Act, n int, out *[4]float32) {
	if k.kind != kindFloat {
		k.dot4Rows(w, 1, a, n, out[:], 1)
		return
	}
	m := n &^ 7
	*out = [4]float32{}
	if m > 0 {
		_ = w[k.size*n-1]
		x := fArgs4(a, n)
		k.call4(w, k.size*n, &x, nil, nil, nil, nil, m, 1, out[:], 1)
	}
	if m < n {
		for i := range a {
			out[i] += k.floatTail(w[k.size*m:], a[i].F[m:n])
		}
	}
}

func (k asmKernel) dot4Rows(w []byte, rows int, a *[4]*Act, n int, out []float32, stride int) {
	if k.kind == kindFloat {
		if n%8 != 0 || rows == 0 {
			rb := k.size * n
			var o [4]float32
			for r := 0; r < rows; r++ {
				k.dot4(w[r*rb:(r+1)*rb], a, n, &o)
				for i, v := range o {
					out[i*stride+r] = v
				}
			}
			return
		}
		checkRows4(rows, out, stride)
		_ = w[rows*k.size*n-1]
		x := fArgs4(a, n)
		k.call4(w, k.size*n, &x, nil, nil, nil, nil, n, rows, out, stride)
		return
	}
	nb, sub, rb := n/k.elems, k.elems/32, n/k.elems*k.size
	if k.kind == kindQDS {
		if qs, d, s, ok := s4Args(w, rows, a, nb, sub, k.size, out, stride); ok {
			k.call4(w, rb, nil, &qs, &d, &s, nil, nb, rows, out, stride)
		}
		return
	}
	qs, d, ok := d4Args(w, rows, a, nb, sub, k.size, out, stride)
	if !ok {
		return
	}
	if k.kind == kindQD {
		k.call4(w, rb, nil, &qs, &d, nil, nil, nb, rows, out, stride)
		return
	}
	// Without the activations' sums of 16 quants (Act.B, which MatMul
	// fills) the one-input kernel runs per activation row (the same
	// results): it computes them.
	b, ok := b4Args(a, nb)
	if !ok {
		for i := range a {
			k.dotRows(w, rows, a[i], n, out[i*stride:i*stride+rows])
		}
		return
	}
	k.call4(w, rb, nil, &qs, &d, nil, &b, nb, rows, out, stride)
}

// call4 runs the four-input kernel on rows weight rows of rb bytes (w and
// out checked; n elements or blocks a row): a pairs path's on the even
// rows and path odd's (the same bits) on an odd last row.
func (k asmKernel) call4(w []byte, rb int, x *[4]*float32, qs *[4]*int8, d, s *[4]*float32, b *[4]*int16, n, rows int, out []float32, stride int) {
	if k.odd == asmNone {
		asmDot4(k.four, k.t, &w[0], x, qs, d, s, b, n, rows, &out[0], stride)
		return
	}
	if p := rows &^ 1; p > 0 {
		asmDot4(k.four, k.t, &w[0], x, qs, d, s, b, n, p, &out[0], stride)
	}
	if rows&1 != 0 {
		asmDot4(k.odd, k.t, &w[(rows-1)*rb], x, qs, d, s, b, n, 1, &out[rows-1], stride)
	}
}
