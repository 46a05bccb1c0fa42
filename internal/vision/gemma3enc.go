package vision

import (
	"fmt"
	"math"

	"mistralrs/internal/kernels"
)

// unitFLOPs is about the most work one unit of an encoding does: a layer's
// rows are cut into chunks of about this much, so that the engine can stop
// between two of them (a real Gemma 3 image is some 4 TFLOPs; a half layer
// alone would be over 50 GFLOPs). A variable for the tests.
var unitFLOPs int64 = 1 << 30

// gemma3Run is one image's encoding state: the residual stream of every
// patch, the queries, keys and values of the current layer, and a chunk's
// scratch; allocated by the first unit and dropped after the last.
type gemma3Run struct {
	g      *gemma3
	planes []float32
	n      int // patches

	x, h, q, k, v, att []float32
	tmp                []float32 // a chunk's patches or FFN activations
	out                []float32
}

// span is a chunk of patch rows [lo, hi).
type span struct{ lo, hi int }

// chunks cuts n rows into balanced chunks of a multiple of four rows (so
// that the products group rows by four as they would over all n) of about
// unitFLOPs at perRow FLOPs a row.
func chunks(n int, perRow int64) []span {
	rows := max(int(unitFLOPs/max(perRow, 1)), 4)
	count := (n + rows - 1) / rows
	size := ((n+count-1)/count + 3) &^ 3
	var out []span
	for lo := 0; lo < n; lo += size {
		out = append(out, span{lo, min(lo+size, n)})
	}
	return out
}

// units lays the encoding out as the patch embedding, then per layer the
// queries, keys and values, the attention with its output projection, and
// the FFN, each cut into chunks of rows, and last the pooling and the
// projection.
func (g *gemma3) units(pr *Prepared) *Encoding {
	if pr == nil || len(pr.planes) != 3*g.size*g.size {
		// A programming error: the caller paired a projector with another's image.
		panic(fmt.Sprintf("vision: gemma3: Encode of an image not prepared by this projector (want %d values)", 3*g.size*g.size))
	}
	r := &gemma3Run{g: g, planes: pr.planes, n: g.grid * g.grid}
	n, c, f := int64(r.n), int64(g.width), int64(g.ff)
	var steps []unit
	add := func(perRow int64, run func(p *kernels.Pool, s span)) {
		for _, s := range chunks(r.n, perRow) {
			steps = append(steps, unit{flops: perRow * int64(s.hi-s.lo), run: func(p *kernels.Pool) { run(p, s) }})
		}
	}
	add(2*c*int64(3*g.patch*g.patch), r.patchEmbed)
	for i := range g.layers {
		l := &g.layers[i]
		add(6*c*c, func(p *kernels.Pool, s span) { r.qkv(p, l, s) })
		add(2*c*c+4*n*c, func(p *kernels.Pool, s span) { r.attention(p, l, s) })
		add(4*c*f, func(p *kernels.Pool, s span) { r.mlp(p, l, s) })
	}
	steps = append(steps, unit{flops: 2*int64(g.tokens())*c*int64(g.out) + 10*n*c, run: r.project})
	return newEncoding(steps, func() []float32 { return r.out }, r.free)
}

func (r *gemma3Run) alloc() {
	nc := r.n * r.g.width
	r.x, r.h = make([]float32, nc), make([]float32, nc)
	r.q, r.k, r.v, r.att = make([]float32, nc), make([]float32, nc), make([]float32, nc), make([]float32, nc)
}

// chunk returns a chunk's scratch of n values.
func (r *gemma3Run) chunk(n int) []float32 {
	if cap(r.tmp) < n {
		r.tmp = make([]float32, n)
	}
	return r.tmp[:n]
}

// free drops the scratch (the output stays).
func (r *gemma3Run) free() {
	r.x, r.h, r.q, r.k, r.v, r.att, r.tmp, r.planes = nil, nil, nil, nil, nil, nil, nil, nil
}

// rows returns rows s of a matrix of width w.
func rows(m []float32, s span, w int) []float32 { return m[s.lo*w : s.hi*w] }

// patchEmbed is the stride-patch convolution as a product, for the
// patches of s: each patch's pixels (channel, row, column; rounded to half,
// as llama.cpp's im2col is) times the half-precision kernel, plus the bias
// and the position embedding.
func (r *gemma3Run) patchEmbed(p *kernels.Pool, s span) {
	if r.x == nil {
		r.alloc()
	}
	g := r.g
	ps, size, grid, c := g.patch, g.size, g.grid, g.width
	kn := 3 * ps * ps
	cols := r.chunk((s.hi - s.lo) * kn)
	p.For(s.hi-s.lo, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			py, px := (s.lo+i)/grid, (s.lo+i)%grid
			row := cols[i*kn : (i+1)*kn]
			for ch := range 3 {
				for ky := range ps {
					src := r.planes[ch*size*size+(py*ps+ky)*size+px*ps:]
					copy(row[(ch*ps+ky)*ps:(ch*ps+ky+1)*ps], src[:ps])
				}
			}
			roundF16(row)
		}
	})
	x := rows(r.x, s, c)
	kernels.MatMul(p, x, g.patchW, cols, s.hi-s.lo)
	addBias(x, g.patchB)
	addInto(x, rows(g.pos, s, c))
	if s.hi == r.n {
		r.planes = nil
	}
}

// qkv computes the queries, keys and values of rows s: LN1, then the
// three projections of the normalised rows.
func (r *gemma3Run) qkv(p *kernels.Pool, l *vitLayer, s span) {
	c := r.g.width
	h := rows(r.h, s, c)
	layerNorm(p, h, rows(r.x, s, c), l.ln1W, l.ln1B, r.g.eps)
	roundFor(l.q.Type, h)
	q, k, v := rows(r.q, s, c), rows(r.k, s, c), rows(r.v, s, c)
	kernels.MatMuls(p, h, s.hi-s.lo,
		kernels.Product{Out: q, M: l.q}, kernels.Product{Out: k, M: l.k}, kernels.Product{Out: v, M: l.v})
	addBias(q, l.qB)
	addBias(k, l.kB)
	addBias(v, l.vB)
}

// attention finishes a layer's first half for rows s, once every row's
// keys and values are known: x += out(MHA), attention over every patch.
func (r *gemma3Run) attention(p *kernels.Pool, l *vitLayer, s span) {
	c := r.g.width
	r.mha(p, s)
	att, h := rows(r.att, s, c), rows(r.h, s, c)
	roundFor(l.o.Type, att)
	kernels.MatMul(p, h, l.o, att, s.hi-s.lo)
	addBias(h, l.oB)
	addInto(rows(r.x, s, c), h)
}

// mha is multi-head attention of the patches of s over every patch (no
// mask): softmax(q·kᵀ/√d)·v per head, four queries at a time.
func (r *gemma3Run) mha(p *kernels.Pool, s span) {
	c, n := r.g.width, r.n
	d := c / r.g.heads
	scale := float32(1 / math.Sqrt(float64(d)))
	groups := (s.hi - s.lo + 3) / 4
	p.For(r.g.heads*groups, func(lo, hi int) {
		var scores, qs, ys [4][]float32
		for j := range scores {
			scores[j] = make([]float32, n)
		}
		for it := lo; it < hi; it++ {
			h, i0 := it/groups, s.lo+(it%groups)*4
			k, v := r.k[h*d:], r.v[h*d:]
			if i0+4 <= s.hi {
				for j := range 4 {
					qs[j] = r.q[(i0+j)*c+h*d : (i0+j)*c+(h+1)*d]
					ys[j] = r.att[(i0+j)*c+h*d : (i0+j)*c+(h+1)*d]
					clear(ys[j])
				}
				kernels.Dots4(&scores, &qs, k, c, scale)
				for j := range 4 {
					kernels.Softmax(scores[j])
				}
				kernels.Axpys4(&ys, &scores, v, c)
				continue
			}
			for i := i0; i < s.hi; i++ {
				y := r.att[i*c+h*d : i*c+(h+1)*d]
				clear(y)
				kernels.Dots(scores[0], r.q[i*c+h*d:i*c+(h+1)*d], k, c, scale)
				kernels.Softmax(scores[0])
				kernels.Axpys(y, scores[0], v, c)
			}
		}
	})
}

// mlp is a layer's second half for rows s: x += down(GELU(up(LN2(x)))).
func (r *gemma3Run) mlp(p *kernels.Pool, l *vitLayer, s span) {
	g := r.g
	c, n := g.width, s.hi-s.lo
	h := rows(r.h, s, c)
	layerNorm(p, h, rows(r.x, s, c), l.ln2W, l.ln2B, g.eps)
	roundFor(l.up.Type, h)
	ff := r.chunk(n * g.ff)
	kernels.MatMul(p, ff, l.up, h, n)
	p.For(n, func(lo, hi int) {
		part := ff[lo*g.ff : hi*g.ff]
		addBias(part, l.upB)
		geluF16(part)
		roundFor(l.down.Type, part)
	})
	kernels.MatMul(p, h, l.down, ff, n)
	addBias(h, l.downB)
	addInto(rows(r.x, s, c), h)
}

// project is the head: the final LayerNorm, the average of each pool×pool
// block of patches (row-major tokens), RMSNorm times the soft-embedding
// norm, and the projection into the text model's width.
func (r *gemma3Run) project(p *kernels.Pool) {
	g := r.g
	c, k := g.width, g.pool
	layerNorm(p, r.h, r.x, g.postW, g.postB, g.eps)
	side := g.grid / k
	tokens := side * side
	pooled := r.q[:tokens*c]
	inv := float32(k * k)
	for t := range tokens {
		ty, tx := t/side, t%side
		out := pooled[t*c : (t+1)*c]
		clear(out)
		// ggml's average pool sums in float32, rows outer, then divides.
		for ky := range k {
			for kx := range k {
				src := r.h[((ty*k+ky)*g.grid+tx*k+kx)*c:][:c]
				for i, v := range src {
					out[i] += v
				}
			}
		}
		for i := range out {
			out[i] /= inv
		}
		kernels.RMSNorm(out, out, g.softNorm, g.eps)
	}
	roundFor(g.proj.Type, pooled)
	r.out = make([]float32, tokens*g.out)
	kernels.MatMul(p, r.out, g.proj, pooled, tokens)
}

// addInto adds y to x.
func addInto(x, y []float32) {
	y = y[:len(x)]
	for i, v := range y {
		x[i] += v
	}
}
