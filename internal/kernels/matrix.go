package kernels

import (
	"fmt"
	"sync"
	"unsafe"
)

// Matrix is a row-major weight matrix: Rows rows of Cols elements of Type;
// row r occupies Data[r*RowSize : (r+1)*RowSize] with RowSize =
// Type.RowSize(Cols). Data usually points into an mmap.
type Matrix struct {
	Type       Type
	Rows, Cols int
	Data       []byte

	pk *packed // the packed copy of Data, for the path that reads one (pack.go)
}

// NewMatrix checks that t is supported and that data holds exactly rows rows
// of cols elements of t.
func NewMatrix(t Type, rows, cols int, data []byte) (*Matrix, error) {
	return newMatrix(t, rows, cols, data, true)
}

// newMatrix is NewMatrix, packing the weights where the path reads them
// packed only if packs is set.
func newMatrix(t Type, rows, cols int, data []byte, packs bool) (*Matrix, error) {
	if !t.Known() {
		return nil, fmt.Errorf("kernels: unknown tensor type %d", uint32(t))
	}
	if !t.Supported() {
		return nil, fmt.Errorf("kernels: tensor type %s is not supported (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)", t)
	}
	if rows < 0 || cols <= 0 {
		return nil, fmt.Errorf("kernels: invalid %s matrix shape %dx%d", t, rows, cols)
	}
	if err := t.CheckRow(cols); err != nil {
		return nil, fmt.Errorf("kernels: %s matrix %dx%d: %v", t, rows, cols, err)
	}
	if need := rows * t.RowSize(cols); len(data) != need {
		return nil, fmt.Errorf("kernels: %s matrix %dx%d needs %d bytes, got %d", t, rows, cols, need, len(data))
	}
	m := &Matrix{Type: t, Rows: rows, Cols: cols, Data: data}
	if pk := packTable[t]; pk != nil && packs {
		m.pk = pack(m, pk.inter)
	}
	return m, nil
}

// NewLookupMatrix is NewMatrix for a matrix whose rows are only looked up
// (Row: an embedding table whose logits come from another matrix): it
// makes no packed copy, which only its products would read.
func NewLookupMatrix(t Type, rows, cols int, data []byte) (*Matrix, error) {
	return newMatrix(t, rows, cols, data, false)
}

// SubRows returns a view of rows [lo,hi) of m. It keeps m's packed copy
// when lo is a multiple of 16 (PackRows) and hi is too or is m.Rows.
func (m *Matrix) SubRows(lo, hi int) *Matrix {
	if lo < 0 || hi < lo || hi > m.Rows {
		panic(fmt.Sprintf("kernels: SubRows(%d, %d) of %d rows", lo, hi, m.Rows))
	}
	rb := m.RowBytes()
	s := &Matrix{Type: m.Type, Rows: hi - lo, Cols: m.Cols, Data: m.Data[lo*rb : hi*rb]}
	if p := m.pk; p != nil && lo%packRows == 0 && (hi%packRows == 0 || hi == m.Rows) && hi > lo {
		g0, g1 := lo/packRows, (hi+packRows-1)/packRows
		s.pk = &packed{nb: p.nb, groups: g1 - g0, qbytes: p.qbytes, gbytes: p.gbytes, inter: p.inter, data: p.data[g0*p.gbytes : g1*p.gbytes]}
	}
	return s
}

// PackRows is the number of rows the packed layouts group: views of a
// matrix (SubRows) that start on a multiple of it keep the packed copy.
const PackRows = packRows

// PackedSize returns the bytes of m's packed copy: 0 when the instruction
// path in use when m was made reads the file's layout directly.
func (m *Matrix) PackedSize() int {
	if m.pk == nil {
		return 0
	}
	return len(m.pk.data)
}

// RowBytes returns the bytes of one row.
func (m *Matrix) RowBytes() int { return m.Type.RowSize(m.Cols) }

// Row dequantizes row r into dst[:m.Cols] (embedding lookup).
func (m *Matrix) Row(r int, dst []float32) {
	if r < 0 || r >= m.Rows {
		panic(fmt.Sprintf("kernels: row %d out of range [0,%d)", r, m.Rows))
	}
	rb := m.RowBytes()
	Dequantize(m.Type, m.Data[r*rb:(r+1)*rb], dst[:m.Cols])
}

// tileBytes is the amount of weights one goroutine keeps hot in its L2
// cache while every input row passes over it (matrix-matrix products).
const tileBytes = 256 << 10

// serialWork is the number of multiply-adds below which a product runs on
// the calling goroutine: waking the workers costs about a microsecond.
const serialWork = 1 << 16

// matmulJob is one MatMul call's state; jobs are pooled so that a call does
// not allocate (the closure handed to Pool.For is built once per job).
type matmulJob struct {
	acts []Act
	qs   []int8
	d, s []float32
	is   []int32
	xb   []uint16 // the input in bfloat16, for pk.bf16 kernels
	// The input interleaved by block for a gemmT kernel (actInterleave).
	qi []int8
	di []float32
	si []int32
	pk *packKernels // the packed path's kernels, nil for the file layout

	m    *Matrix
	x    []float32
	n    int
	kern *typeKernels

	// The products sharing the input (one for MatMul), and the units
	// (packed groups or rows) of each in the parallel loop.
	prods [maxProducts]Product
	units [maxProducts]int
	np    int

	quantFn func(lo, hi int) // quantize input rows [lo,hi)
	multiFn func(lo, hi int) // units [lo,hi) of the products
}

var jobPool = sync.Pool{New: func() any {
	j := new(matmulJob)
	j.quantFn = j.quantize
	j.multiFn = j.multi
	return j
}}

// MatMul computes, for each input row i < n, out[i*m.Rows + r] = Σ_c
// W[r,c] * x[i*m.Cols + c]. Quantized types first quantize x to 8-bit blocks
// of 32 (as llama.cpp does), once per call. The work is split over weight
// rows on p (nil: the calling goroutine alone). Concurrent calls are safe as
// long as their outputs do not overlap.
func MatMul(p *Pool, out []float32, m *Matrix, x []float32, n int) {
	if n <= 0 || m.Rows == 0 {
		return
	}
	ps := [1]Product{{Out: out, M: m}}
	matmuls(p, x, n, ps[:])
}

// maxProducts is the most products one MatMuls call combines.
const maxProducts = 4

// Product is a weight matrix and its output, for MatMuls.
type Product struct {
	Out []float32
	M   *Matrix
}

// MatMuls computes MatMul(p, q.Out, q.M, x, n) for each product q of the
// same input (a layer's Q, K and V projections; gate and up): when the
// matrices have one type and width (and at most maxProducts of them), the
// input is quantized once and the work of all runs as one parallel loop,
// one wait for the workers instead of one per matrix. The results are
// MatMul's bits either way.
func MatMuls(p *Pool, x []float32, n int, ps ...Product) {
	if n <= 0 || len(ps) == 0 {
		return
	}
	same := len(ps) <= maxProducts
	for _, q := range ps {
		same = same && q.M.Rows > 0 && q.M.Type == ps[0].M.Type && q.M.Cols == ps[0].M.Cols && packLayout(q.M) == packLayout(ps[0].M)
	}
	if !same {
		for _, q := range ps {
			MatMul(p, q.Out, q.M, x, n)
		}
		return
	}
	matmuls(p, x, n, ps)
}

// packLayout is 0 for a matrix without a packed copy, 1 for the file
// order's groups and 2 for interleaved ones: products of one layout run
// as one job.
func packLayout(m *Matrix) int {
	switch {
	case m.pk == nil:
		return 0
	case m.pk.inter:
		return 2
	}
	return 1
}

// matmuls runs products of one type and width (at most maxProducts, each
// with rows) on the input quantized once: their rows, or packed groups,
// one after the other as one parallel loop.
func matmuls(p *Pool, x []float32, n int, ps []Product) {
	for _, q := range ps {
		checkArgs(q.Out, q.M, x, n)
	}
	j := prepare(p, ps[0].M, x, n)
	total, work := 0, 0
	for k, q := range ps {
		j.prods[k] = q
		j.units[k] = q.M.Rows
		if j.pk != nil {
			j.units[k] = q.M.pk.groups
		}
		total += j.units[k]
		work += n * q.M.Rows * q.M.Cols
	}
	j.np = len(ps)
	if work < serialWork {
		j.multi(0, total)
	} else {
		p.For(total, j.multiFn)
	}
	j.prods = [maxProducts]Product{}
	j.np = 0
	j.release()
}

// multi computes the units [lo,hi) of the job's products, the units of
// product k following those of product k-1.
func (j *matmulJob) multi(lo, hi int) {
	base := 0
	for k := range j.np {
		u := j.units[k]
		if a, b := max(lo-base, 0), min(hi-base, u); a < b {
			q := j.prods[k]
			if j.pk != nil {
				j.groups(q.M, q.Out, a, b)
			} else {
				j.rows(q.M, q.Out, a, b)
			}
		}
		base += u
	}
}

// checkArgs panics when x or out is too short for n rows through m.
func checkArgs(out []float32, m *Matrix, x []float32, n int) {
	if len(x) < n*m.Cols || len(out) < n*m.Rows {
		panic(fmt.Sprintf("kernels: MatMul %s %dx%d with n=%d: x has %d values (need %d), out %d (need %d)",
			m.Type, m.Rows, m.Cols, n, len(x), n*m.Cols, len(out), n*m.Rows))
	}
}

// prepare takes a job from the pool and makes the input ready for m's
// kernels (quantized once for the quantized types).
func prepare(p *Pool, m *Matrix, x []float32, n int) *matmulJob {
	kern := dotTable[m.Type]
	if kern == nil {
		panic(fmt.Sprintf("kernels: MatMul: type %s is not supported", m.Type))
	}
	j := jobPool.Get().(*matmulJob)
	j.m, j.x, j.n, j.kern = m, x, n, kern
	j.pk = nil
	if m.pk != nil {
		j.pk = packTable[m.Type]
		if j.pk != nil && j.pk.inter != m.pk.inter {
			// Packed on another path, in the other layout: the file's
			// kernels read it.
			j.pk = nil
		}
	}
	if cap(j.acts) < n {
		j.acts = make([]Act, n)
	}
	j.acts = j.acts[:n]
	cols := m.Cols
	if m.Type.BlockSize() == 1 {
		for i := range j.acts {
			j.acts[i].F = x[i*cols : (i+1)*cols]
		}
		if j.pk != nil && j.pk.bf16 {
			j.xb = grow(j.xb, n*cols)
			toBF16(j.xb, x[:n*cols])
		}
	} else {
		nb := cols / 32
		j.qs = grow(j.qs, n*cols)
		j.d = grow(j.d, n*nb)
		j.s = grow(j.s, n*nb)
		ni := 0 // integer sums per input row
		if j.pk != nil && j.pk.sumsPer > 0 {
			ni = cols / j.pk.sumsPer
			j.is = grow(j.is, n*ni)
		}
		for i := range j.acts {
			// Full slice expressions keep each row inside its own share.
			a := &j.acts[i]
			a.F = nil
			a.Qs = j.qs[i*cols : (i+1)*cols : (i+1)*cols]
			a.D = j.d[i*nb : (i+1)*nb : (i+1)*nb]
			a.S = j.s[i*nb : (i+1)*nb : (i+1)*nb]
			a.I = nil
			if ni > 0 {
				a.I = j.is[i*ni : (i+1)*ni : (i+1)*ni]
			}
		}
		if n >= 8 {
			p.For(n, j.quantFn)
		} else {
			j.quantize(0, n)
		}
		if j.smallParts() > 0 {
			j.actInterleave(nb)
		}
	}
	return j
}

// smallParts returns the number of gemmT passes that take the job's
// tokens, parts of at most maxSmallBatch tokens as even as possible
// (smallPart), each reading the weights once (from the cache after the
// first: groups walks them in tiles): 0 where the path has no such
// kernels, and for 1 token, which gemm1 takes. (4 tokens in gemmT4 cost
// what gemm42 does from memory, and less for a model in the L3: a
// verification of 3 guesses on the 26M speculative target, 1.81-1.85
// decodes against 2.08.)
func (j *matmulJob) smallParts() int {
	n := j.n
	if j.pk == nil || n < 2 || n > maxSmallParts*maxSmallBatch {
		return 0
	}
	parts := (n + maxSmallBatch - 1) / maxSmallBatch
	for p := range parts {
		if s, e := smallPart(n, parts, p); j.pk.gemmT[e-s] == nil {
			return 0
		}
	}
	return parts
}

// smallPart returns the tokens [s,e) of part p of n tokens in parts parts.
func smallPart(n, parts, p int) (s, e int) {
	return p * n / parts, (p + 1) * n / parts
}

// actInterleave lays the quantized input out for the gemmT kernels: part
// p of the tokens (smallPart: tokens [s,e), k = e-s) at quant s*cols and
// block s*nb, and within it block b of its token t's quants at
// 32*(k*b+t), its scale and its sum (Act.I, one per block: sumsPer 32)
// negated at k*b+t, so that the kernel reaches every token of a block at a
// constant offset and starts its integer sum there.
func (j *matmulJob) actInterleave(nb int) {
	n, cols := j.n, nb*32
	j.qi = grow(j.qi, n*cols)
	j.di = grow(j.di, n*nb)
	j.si = grow(j.si, n*nb)
	parts := j.smallParts()
	for p := range parts {
		s, e := smallPart(n, parts, p)
		k := e - s
		qi, di, si := j.qi[s*cols:e*cols], j.di[s*nb:e*nb], j.si[s*nb:e*nb]
		for t := range k {
			a := &j.acts[s+t]
			for b := range nb {
				copy(qi[32*(k*b+t):32*(k*b+t+1)], a.Qs[32*b:32*(b+1)])
				di[k*b+t] = a.D[b]
				if a.I != nil { // kernels that take no sums (sumsPer 0) have none
					si[k*b+t] = -a.I[b]
				}
			}
		}
	}
}

// release returns j to the pool.
func (j *matmulJob) release() {
	for i := range j.acts {
		j.acts[i].F = nil // do not keep the caller's input alive
	}
	j.m, j.x, j.kern, j.pk = nil, nil, nil, nil
	jobPool.Put(j)
}

func (j *matmulJob) quantize(lo, hi int) {
	cols := j.m.Cols
	// The assembly quantizer, where there is one, gives quantizeAct's exact
	// results; quantizeAct itself stays pure Go as the oracle.
	q := quantizeAct
	if quantizeActAsm != nil {
		q = quantizeActAsm
	}
	for i := lo; i < hi; i++ {
		q(j.x[i*cols:(i+1)*cols], &j.acts[i])
		if j.kern.sums16 {
			actSums16(&j.acts[i])
		}
		if j.acts[i].I != nil {
			actSums(&j.acts[i], j.pk.sumsPer, j.pk.sumsMul)
		}
	}
}

type dot4Args struct {
	a [4]*Act
	o [4]float32
}

func (j *matmulJob) rows(m *Matrix, out []float32, lo, hi int) {
	n := j.n
	rb := m.RowBytes()
	dot, dot4, dotRows, dot4Rows := j.kern.dot, j.kern.dot4, j.kern.dotRows, j.kern.dot4Rows
	tile := hi - lo
	if n >= 4 {
		tile = max(1, tileBytes/rb)
	}
	// Arguments of an indirect call escape: allocate them once per chunk.
	var g *dot4Args
	if dot4 != nil && n >= 4 {
		g = new(dot4Args)
	}
	for t0 := lo; t0 < hi; t0 += tile {
		t1 := min(t0+tile, hi)
		i := 0
		if g != nil {
			for ; i+4 <= n; i += 4 {
				g.a = [4]*Act{&j.acts[i], &j.acts[i+1], &j.acts[i+2], &j.acts[i+3]}
				if dot4Rows != nil {
					dot4Rows(m.Data[t0*rb:t1*rb], t1-t0, &g.a, m.Cols, out[i*m.Rows+t0:], m.Rows)
					continue
				}
				for r := t0; r < t1; r++ {
					dot4(m.Data[r*rb:(r+1)*rb], &g.a, m.Cols, &g.o)
					out[i*m.Rows+r] = g.o[0]
					out[(i+1)*m.Rows+r] = g.o[1]
					out[(i+2)*m.Rows+r] = g.o[2]
					out[(i+3)*m.Rows+r] = g.o[3]
				}
			}
		}
		for ; i < n; i++ {
			a := &j.acts[i]
			o := out[i*m.Rows : (i+1)*m.Rows]
			if dotRows != nil {
				dotRows(m.Data[t0*rb:t1*rb], t1-t0, a, m.Cols, o[t0:t1])
				continue
			}
			for r := t0; r < t1; r++ {
				o[r] = dot(m.Data[r*rb:(r+1)*rb], a, m.Cols)
			}
		}
	}
}

// groups computes packed groups [lo,hi) against all inputs: four inputs
// at a time, over tiles of groups that stay in the cache meanwhile.
func (j *matmulJob) groups(m *Matrix, out []float32, lo, hi int) {
	n, pk, k := j.n, m.pk, j.pk
	nb, cols := m.Cols/32, m.Cols // activation blocks of 32 per row
	if parts := j.smallParts(); parts > 0 {
		j.smallGroups(m, out, lo, hi, parts)
		return
	}
	tile := hi - lo
	if n > 1 {
		tile = max(1, tileBytes/pk.gbytes)
	}
	for t0 := lo; t0 < hi; t0 += tile {
		t1 := min(t0+tile, hi)
		mask := 0xffff
		if t1 == pk.groups && m.Rows%packRows != 0 {
			mask = 1<<(m.Rows%packRows) - 1
		}
		w := &pk.data[t0*pk.gbytes]
		for i := 0; i < n; {
			// Token i's input: its quants, block scales and sums, or its
			// float (bfloat16) values, which the float kernels take at qs.
			var qs *int8
			var d *float32
			var s unsafe.Pointer
			stride := cols
			switch {
			case m.Type.BlockSize() != 1:
				qs, d = &j.qs[i*cols], &j.d[i*nb]
				if k.sumsPer > 0 {
					s = unsafe.Pointer(&j.is[i*cols/k.sumsPer])
				} else {
					s = unsafe.Pointer(&j.s[i*nb])
				}
			case k.bf16:
				qs, stride = (*int8)(unsafe.Pointer(&j.xb[i*cols])), 2*cols
			default:
				qs, stride = (*int8)(unsafe.Pointer(&j.x[i*cols])), 4*cols
			}
			o := &out[i*m.Rows+t0*packRows]
			if i+4 <= n {
				// gemm42 takes the groups two at a time, gemm4 what is left.
				g, p := t1-t0, 0
				if k.gemm42 != nil {
					p = g &^ 1
				}
				if p > 0 {
					pmask := 0xffff
					if p == g {
						pmask = mask
					}
					k.gemm42(w, pk.nb, p, qs, stride, d, s, nb, o, m.Rows, pmask)
				}
				if p < g {
					k.gemm4(&pk.data[(t0+p)*pk.gbytes], pk.nb, g-p, qs, stride, d, s, nb, &out[i*m.Rows+(t0+p)*packRows], m.Rows, mask)
				}
				i += 4
			} else {
				k.gemm1(w, pk.nb, t1-t0, qs, stride, d, s, nb, o, m.Rows, mask)
				i++
			}
		}
	}
}

// smallGroups computes packed groups [lo,hi) against the job's tokens with
// the gemmT kernels, parts passes (smallParts) over tiles of groups that
// stay in the cache meanwhile (one pass needs no tiles).
func (j *matmulJob) smallGroups(m *Matrix, out []float32, lo, hi, parts int) {
	n, pk, k := j.n, m.pk, j.pk
	nb, cols := m.Cols/32, m.Cols
	tile := hi - lo
	if parts > 1 {
		tile = max(1, tileBytes/pk.gbytes)
	}
	for t0 := lo; t0 < hi; t0 += tile {
		t1 := min(t0+tile, hi)
		mask := 0xffff
		if t1 == pk.groups && m.Rows%packRows != 0 {
			mask = 1<<(m.Rows%packRows) - 1
		}
		for p := range parts {
			s, e := smallPart(n, parts, p)
			k.gemmT[e-s](&pk.data[t0*pk.gbytes], pk.nb, t1-t0, &j.qi[s*cols], 0, &j.di[s*nb], unsafe.Pointer(&j.si[s*nb]), 0,
				&out[s*m.Rows+t0*packRows], m.Rows, mask)
		}
	}
}
