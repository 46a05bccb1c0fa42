package vision

import (
	"fmt"
	"math"

	"mistralrs/internal/kernels"
)

// gemma3Run is one image's encoding state: the residual stream of every
// patch and the scratch of one layer, allocated by the first unit and
// dropped after the last.
type gemma3Run struct {
	g      *gemma3
	planes []float32
	n      int // patches

	x, h, q, k, v, att, ff []float32
	out                    []float32
}

// units lays the encoding out as the patch embedding, two units per layer
// (attention, FFN) and the pooling and projection.
func (g *gemma3) units(pr *Prepared) *Encoding {
	if pr == nil || len(pr.planes) != 3*g.size*g.size {
		panic(fmt.Sprintf("vision: gemma3: a prepared image of another projector (%d values, want %d)", len(pr.planes), 3*g.size*g.size))
	}
	r := &gemma3Run{g: g, planes: pr.planes, n: g.grid * g.grid}
	n, c, f := int64(r.n), int64(g.width), int64(g.ff)
	steps := []unit{{flops: 2 * n * c * int64(3*g.patch*g.patch), run: r.patchEmbed}}
	for i := range g.layers {
		l := &g.layers[i]
		steps = append(steps,
			unit{flops: 8*n*c*c + 4*n*n*c, run: func(p *kernels.Pool) { r.attention(p, l) }},
			unit{flops: 4 * n * c * f, run: func(p *kernels.Pool) { r.mlp(p, l) }})
	}
	steps = append(steps, unit{flops: 2*int64(g.tokens())*c*int64(g.out) + 2*n*c, run: r.project})
	return newEncoding(steps, func() []float32 { return r.out }, r.free)
}

func (r *gemma3Run) alloc() {
	nc := r.n * r.g.width
	r.x, r.h = make([]float32, nc), make([]float32, nc)
	r.q, r.k, r.v, r.att = make([]float32, nc), make([]float32, nc), make([]float32, nc), make([]float32, nc)
	r.ff = make([]float32, r.n*max(r.g.ff, 3*r.g.patch*r.g.patch))
}

// free drops the scratch (the output stays).
func (r *gemma3Run) free() {
	r.x, r.h, r.q, r.k, r.v, r.att, r.ff, r.planes = nil, nil, nil, nil, nil, nil, nil, nil
}

// patchEmbed is the stride-patch convolution as a product: each patch's
// pixels (channel, row, column; rounded to half, as llama.cpp's im2col
// is) times the half-precision kernel, plus the bias and the position
// embedding.
func (r *gemma3Run) patchEmbed(p *kernels.Pool) {
	r.alloc()
	g := r.g
	ps, s, grid, c := g.patch, g.size, g.grid, g.width
	kn := 3 * ps * ps
	cols := r.ff[:r.n*kn]
	p.For(r.n, func(lo, hi int) {
		for pi := lo; pi < hi; pi++ {
			py, px := pi/grid, pi%grid
			row := cols[pi*kn : (pi+1)*kn]
			for ch := range 3 {
				for ky := range ps {
					src := r.planes[ch*s*s+(py*ps+ky)*s+px*ps:]
					copy(row[(ch*ps+ky)*ps:(ch*ps+ky+1)*ps], src[:ps])
				}
			}
			roundF16(row)
		}
	})
	kernels.MatMul(p, r.x, g.patchW, cols, r.n)
	addBias(r.x, g.patchB)
	for i, v := range g.pos[:r.n*c] {
		r.x[i] += v
	}
	r.planes = nil
}

// attention is a layer's first half: x += out(MHA(LN1(x))), attention over
// every patch.
func (r *gemma3Run) attention(p *kernels.Pool, l *vitLayer) {
	g := r.g
	layerNorm(p, r.h, r.x, l.ln1W, l.ln1B, g.eps)
	roundFor(l.q.Type, r.h)
	kernels.MatMuls(p, r.h, r.n,
		kernels.Product{Out: r.q, M: l.q}, kernels.Product{Out: r.k, M: l.k}, kernels.Product{Out: r.v, M: l.v})
	addBias(r.q, l.qB)
	addBias(r.k, l.kB)
	addBias(r.v, l.vB)
	r.mha(p)
	roundFor(l.o.Type, r.att)
	kernels.MatMul(p, r.h, l.o, r.att, r.n)
	addBias(r.h, l.oB)
	addInto(r.x, r.h)
}

// mha is multi-head attention of every patch over every patch (no mask):
// softmax(q·kᵀ/√d)·v per head, four queries at a time.
func (r *gemma3Run) mha(p *kernels.Pool) {
	c, n := r.g.width, r.n
	d := c / r.g.heads
	scale := float32(1 / math.Sqrt(float64(d)))
	groups := (n + 3) / 4
	p.For(r.g.heads*groups, func(lo, hi int) {
		var scores, qs, ys [4][]float32
		for j := range scores {
			scores[j] = make([]float32, n)
		}
		for it := lo; it < hi; it++ {
			h, i0 := it/groups, (it%groups)*4
			k, v := r.k[h*d:], r.v[h*d:]
			if i0+4 <= n {
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
			for i := i0; i < n; i++ {
				y := r.att[i*c+h*d : i*c+(h+1)*d]
				clear(y)
				kernels.Dots(scores[0], r.q[i*c+h*d:i*c+(h+1)*d], k, c, scale)
				kernels.Softmax(scores[0])
				kernels.Axpys(y, scores[0], v, c)
			}
		}
	})
}

// mlp is a layer's second half: x += down(GELU(up(LN2(x)))).
func (r *gemma3Run) mlp(p *kernels.Pool, l *vitLayer) {
	g := r.g
	layerNorm(p, r.h, r.x, l.ln2W, l.ln2B, g.eps)
	roundFor(l.up.Type, r.h)
	ff := r.ff[:r.n*g.ff]
	kernels.MatMul(p, ff, l.up, r.h, r.n)
	p.For(r.n, func(lo, hi int) {
		rows := ff[lo*g.ff : hi*g.ff]
		addBias(rows, l.upB)
		geluF16(rows)
		roundFor(l.down.Type, rows)
	})
	kernels.MatMul(p, r.h, l.down, ff, r.n)
	addBias(r.h, l.downB)
	addInto(r.x, r.h)
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
