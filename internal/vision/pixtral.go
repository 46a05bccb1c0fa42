package vision

import (
	"fmt"
	"math"
	"strconv"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

func init() { register("pixtral", kind{load: loadPixtral}) }

// pixtral is the projector of Pixtral and Mistral 3 (Mistral Small 3.1 and
// later), as llama.cpp runs it: a ViT over the image at its own aspect
// ratio (RMSNorm, SwiGLU FFN, 2-D RoPE instead of learned positions),
// then optionally an RMSNorm and an m×m patch merger (Mistral 3), then a
// two-layer GELU MLP into the text model. One [IMG_BREAK] row follows each
// row of output tokens but the last; the text model adds [IMG_END].
type pixtral struct {
	imageSize, patch int
	merge            int // patches per side of one output token (1: no merger)
	width, ff, heads int
	eps              float32
	mean, std        [3]float32
	out              int // output width (the text model's n_embd)
	minTok, maxTok   int // llama.cpp's token bounds of one image

	patchW    *kernels.Matrix // width rows of 3·patch² (kernel rounded to half)
	patchB    []float32
	preLN     []float32
	layers    []pixtralLayer
	postLN    []float32
	mergeNorm []float32
	merger    *kernels.Matrix // width rows of merge²·width
	mm1, mm2  *kernels.Matrix
	mm1B      []float32
	mm2B      []float32
	imgBreak  []float32 // nil: no row breaks
}

// pixtralLayer is one pre-norm encoder layer (RMSNorm, no biases in the
// released files; llama.cpp adds them when present, so do we).
type pixtralLayer struct {
	ln1, ln2        []float32
	q, k, v, o      *kernels.Matrix
	qB, kB, vB, oB  []float32
	gate, up, down  *kernels.Matrix
	gateB, upB, dnB []float32
}

// pixtralRopeBase is llama.cpp's fixed 2-D RoPE base for pixtral.
const pixtralRopeBase = 10000

// llama.cpp's bounds of one pixtral image, in output tokens (merged
// patches); the preprocessing scales an image into them.
const (
	pixtralMinTokens = 8
	pixtralMaxTokens = 1024
)

func loadPixtral(f *gguf.File) (model, error) {
	r := &reader{f: f}
	x := &pixtral{
		imageSize: r.uint("clip.vision.image_size"),
		patch:     r.uint("clip.vision.patch_size"),
		width:     r.uint("clip.vision.embedding_length"),
		ff:        r.uint("clip.vision.feed_forward_length"),
		heads:     r.uint("clip.vision.attention.head_count"),
		eps:       r.float("clip.vision.attention.layer_norm_epsilon", 1e-5),
		mean:      r.triple("clip.vision.image_mean"),
		std:       r.triple("clip.vision.image_std"),
		merge:     1,
		minTok:    pixtralMinTokens,
		maxTok:    pixtralMaxTokens,
	}
	layers := r.uint("clip.vision.block_count")
	if v, ok := f.Uint("clip.vision.spatial_merge_size"); ok {
		x.merge = int(v)
	}
	if silu, ok := f.Bool("clip.use_silu"); !ok || !silu {
		r.fail("clip.use_silu is not true: the pixtral projector needs the SiLU-gated FFN (other activations are not supported)")
	}
	if kv, ok := f.Uint("clip.vision.attention.head_count_kv"); ok && r.err == nil && int(kv) != x.heads {
		r.fail("clip.vision.attention.head_count_kv %d differs from head_count %d (not supported)", kv, x.heads)
	}
	if r.err != nil {
		return nil, r.err
	}
	if err := x.checkShape(f.Path); err != nil {
		return nil, err
	}
	x.loadWeights(r, layers)
	if r.err != nil {
		return nil, r.err
	}
	return x, nil
}

// checkShape refuses sizes the encoder cannot run.
func (x *pixtral) checkShape(path string) error {
	hd := 0
	if x.heads > 0 {
		hd = x.width / x.heads
	}
	switch {
	case x.merge <= 0 || x.merge > 8:
		return fmt.Errorf("%s: clip.vision.spatial_merge_size %d is out of range", path, x.merge)
	case x.width%x.heads != 0:
		return fmt.Errorf("%s: width %d is not a multiple of %d heads", path, x.width, x.heads)
	case hd%4 != 0:
		return fmt.Errorf("%s: head width %d is not a multiple of 4 (the 2-D RoPE rotates pairs in two halves)", path, hd)
	case x.patch > 256 || x.imageSize > 1<<14:
		return fmt.Errorf("%s: patch size %d or image size %d is too large", path, x.patch, x.imageSize)
	}
	for c := range 3 {
		if !(x.std[c] > 0) {
			return fmt.Errorf("%s: clip.vision.image_std has a value %v that is not positive", path, x.std[c])
		}
	}
	return nil
}

func (x *pixtral) loadWeights(r *reader, layers int) {
	c, p := x.width, x.patch
	if kernel := r.floats("v.patch_embd.weight", false, p, p, 3, c); kernel != nil {
		// llama.cpp's convolution multiplies half-precision patches with
		// the kernel rounded to half.
		var err error
		if x.patchW, err = f16Matrix(kernel, c, 3*p*p); err != nil {
			r.fail("tensor v.patch_embd.weight: %v", err)
		}
	}
	x.patchB = r.bias("v.patch_embd.bias", c)
	x.preLN = r.floats("v.pre_ln.weight", true, c)
	x.layers = make([]pixtralLayer, layers)
	for i := range x.layers {
		x.layers[i] = x.loadLayer(r, "v.blk."+strconv.Itoa(i)+".")
	}
	x.postLN = r.floats("v.post_ln.weight", true, c)
	if _, ok := r.f.Tensor("mm.patch_merger.weight"); ok {
		x.mergeNorm = r.vec("mm.input_norm.weight", c)
		x.merger = r.matrix("mm.patch_merger.weight", x.merge*x.merge*c, c)
	} else if x.merge != 1 && r.err == nil {
		r.fail("clip.vision.spatial_merge_size is %d but there is no mm.patch_merger.weight", x.merge)
	}
	if t, ok := r.f.Tensor("mm.2.weight"); ok && len(t.Dims) == 2 {
		x.out = int(t.Dims[1])
	}
	if x.out == 0 {
		r.fail("missing tensor mm.2.weight with 2 dims")
		return
	}
	hidden := 0
	if t, ok := r.f.Tensor("mm.1.weight"); ok && len(t.Dims) == 2 {
		hidden = int(t.Dims[1])
	}
	x.mm1, x.mm1B = r.matrix("mm.1.weight", c, hidden), r.bias("mm.1.bias", hidden)
	x.mm2, x.mm2B = r.matrix("mm.2.weight", hidden, x.out), r.bias("mm.2.bias", x.out)
	x.imgBreak = r.floats("v.token_embd.img_break", true, x.out)
	if d, ok := r.f.Uint("clip.vision.projection_dim"); ok && int(d) != x.out && r.err == nil {
		r.fail("clip.vision.projection_dim is %d but mm.2.weight gives %d", d, x.out)
	}
}

func (x *pixtral) loadLayer(r *reader, pre string) pixtralLayer {
	c, f := x.width, x.ff
	l := pixtralLayer{
		ln1: r.vec(pre+"ln1.weight", c), ln2: r.vec(pre+"ln2.weight", c),
		q: r.matrix(pre+"attn_q.weight", c, c), qB: r.bias(pre+"attn_q.bias", c),
		k: r.matrix(pre+"attn_k.weight", c, c), kB: r.bias(pre+"attn_k.bias", c),
		v: r.matrix(pre+"attn_v.weight", c, c), vB: r.bias(pre+"attn_v.bias", c),
		o: r.matrix(pre+"attn_out.weight", c, c), oB: r.bias(pre+"attn_out.bias", c),
		gate: r.matrix(pre+"ffn_gate.weight", c, f), gateB: r.bias(pre+"ffn_gate.bias", f),
		up: r.matrix(pre+"ffn_up.weight", c, f), upB: r.bias(pre+"ffn_up.bias", f),
		down: r.matrix(pre+"ffn_down.weight", f, c), dnB: r.bias(pre+"ffn_down.bias", c),
	}
	if r.err == nil && (l.k.Type != l.q.Type || l.v.Type != l.q.Type) {
		r.fail("tensors %sattn_q/k/v have different types (%s, %s, %s)", pre, l.q.Type, l.k.Type, l.v.Type)
	}
	if r.err == nil && l.up.Type != l.gate.Type {
		r.fail("tensors %sffn_gate/up have different types (%s, %s)", pre, l.gate.Type, l.up.Type)
	}
	return l
}

func (x *pixtral) embd() int { return x.out }

// nonCausal: llama.cpp decodes a pixtral image's rows causally
// (mtmd_decode_use_non_causal is false for it).
func (x *pixtral) nonCausal() bool { return false }

// markers: nothing before the image, [IMG_END] after it; the row breaks
// are rows of the embeddings.
func (x *pixtral) markers() (string, string) { return "", "[IMG_END]" }

// align is the side in pixels of one output token.
func (x *pixtral) align() int { return x.patch * x.merge }

// prepare scales the image to a multiple of the token side within the
// token bounds (llama.cpp's dynamic size), resizing with llama.cpp's
// bilinear filter into that size with the aspect kept and black bars, and
// normalises it. An image whose longer side exceeds maxEdge (0: the file's
// image_size) is sized as if scaled down to it first; its pixels are
// resampled once, from the original.
func (x *pixtral) prepare(img *rgbImage, maxEdge int) (*Prepared, error) {
	if maxEdge == 0 {
		maxEdge = x.imageSize
	}
	vw, vh := capEdge(img.w, img.h, maxEdge)
	a := x.align()
	tw, th := pixtralSize(vw, vh, a, x.minTok*a*a, x.maxTok*a*a)
	if tw != img.w || th != img.h {
		w, h := fitSize(img.w, img.h, tw, th)
		img = padCenter(resizeBilinear(img, w, h), tw, th)
	}
	gx, gy := tw/a, th/a
	tokens := gx * gy
	if x.imgBreak != nil {
		tokens += gy - 1
	}
	return &Prepared{Tokens: tokens, w: img.w, h: img.h, pix: img.pix, planes: normalize(img, x.mean, x.std)}, nil
}

// capEdge scales w × h down so that its longer side is at most edge
// (aspect kept, sides rounded, at least 1); a smaller image is unchanged.
func capEdge(w, h, edge int) (int, int) {
	if edge <= 0 || max(w, h) <= edge {
		return w, h
	}
	s := float64(edge) / float64(max(w, h))
	return max(1, int(math.Round(float64(w)*s))), max(1, int(math.Round(float64(h)*s)))
}

// pixtralSize is llama.cpp's size of a w × h image for a dynamic-size
// projector (calc_size_preserved_ratio): each side rounded to a multiple
// of align, then, when the area leaves [minPix, maxPix], both sides scaled
// by the same factor (down: floored to align; up: ceiled). float32
// arithmetic, as there.
func pixtralSize(w, h, align, minPix, maxPix int) (int, int) {
	f := float32(align)
	round := func(v float32) int { return int(math.Round(float64(float32(v/f)))) * align }
	floor := func(v float32) int { return int(math.Floor(float64(float32(v/f)))) * align }
	ceil := func(v float32) int { return int(math.Ceil(float64(float32(v/f)))) * align }
	wb := max(align, round(float32(w)))
	hb := max(align, round(float32(h)))
	switch {
	case maxPix > 0 && wb*hb > maxPix:
		beta := float32(math.Sqrt(float64(float32(float32(h)*float32(w)) / float32(maxPix))))
		hb = max(align, floor(float32(h)/beta))
		wb = max(align, floor(float32(w)/beta))
	case minPix > 0 && wb*hb < minPix:
		beta := float32(math.Sqrt(float64(float32(minPix) / float32(float32(h)*float32(w)))))
		hb = ceil(float32(float32(h) * beta))
		wb = ceil(float32(float32(w) * beta))
	}
	return wb, hb
}

// units lays out the encoding of pr: the patch embedding, per layer the
// attention inputs and then attention and FFN, each cut into chunks of
// patches (chunks), and last the merger and projection.
func (x *pixtral) units(pr *Prepared) *Encoding {
	if pr == nil || pr.w%(x.align()) != 0 || pr.h%(x.align()) != 0 || len(pr.planes) != 3*pr.w*pr.h {
		// A programming error: the caller paired a projector with another's image.
		panic("vision: pixtral: Encode of an image not prepared by this projector")
	}
	s := x.newState(pr)
	n, c, f := int64(s.n), int64(x.width), int64(x.ff)
	var steps []unit
	add := func(perRow int64, run func(p *kernels.Pool, sp span)) {
		for _, sp := range chunks(s.n, perRow) {
			steps = append(steps, unit{flops: perRow * int64(sp.hi-sp.lo), run: func(p *kernels.Pool) { run(p, sp) }})
		}
	}
	add(2*c*int64(3*x.patch*x.patch), s.embed)
	for l := range x.layers {
		ly := &x.layers[l]
		add(6*c*c, func(p *kernels.Pool, sp span) { s.qkv(p, ly, sp) })
		add(2*c*c+4*n*c+6*c*f, func(p *kernels.Pool, sp span) { s.attnFFN(p, ly, sp) })
	}
	mm, hidden := int64(x.merge*x.merge)*c, int64(x.mm1.Rows)
	tail := int64(s.tokens)*(2*mm*c+2*c*hidden+2*hidden*int64(x.out)) + 4*n*c
	steps = append(steps, unit{flops: tail, run: s.project})
	return newEncoding(steps, func() []float32 { return s.result }, s.free)
}

// pixtralState is one image's encoding in progress.
type pixtralState struct {
	x        *pixtral
	gx, gy   int // patch grid
	n        int // patches
	tokens   int // merged tokens (rows of output before the breaks)
	planes   []float32
	imgW     int
	h        []float32 // n × width: the residual stream
	q, k, v  []float32 // n × width
	cos, sin []float32 // n × head/2: the 2-D RoPE angles of each patch
	result   []float32
}

func (x *pixtral) newState(pr *Prepared) *pixtralState {
	gx, gy := pr.w/x.patch, pr.h/x.patch
	return &pixtralState{x: x, gx: gx, gy: gy, n: gx * gy, tokens: (gx / x.merge) * (gy / x.merge),
		planes: pr.planes, imgW: pr.w}
}

// ropeAngles returns the cos and sin of the 2-D RoPE of each patch of a
// gx × gy grid, head/2 per patch: the first half of a head's pairs turns
// with the patch's row, the second half with its column at frequencies
// offset by half a step (llama.cpp's build_rope_2d: two normal ropes over
// the halves, the second with freq_scale base^(−2/head)). Angles are
// computed as ggml's rope cache does, in float32.
func (x *pixtral) ropeAngles(gx, gy int) (cos, sin []float32) {
	hd := x.width / x.heads
	quarter := hd / 4
	thetaScale := float32(math.Pow(pixtralRopeBase, -2/float64(hd/2)))
	oddScale := float32(math.Pow(pixtralRopeBase, float64(float32(-2)/float32(hd))))
	cos, sin = make([]float32, gx*gy*hd/2), make([]float32, gx*gy*hd/2)
	for i := range gx * gy {
		c, s := cos[i*hd/2:(i+1)*hd/2], sin[i*hd/2:(i+1)*hd/2]
		row, col := float32(i/gx), float32(i%gx)
		tr, tc := row, col
		for j := range quarter {
			a := float64(tr)
			b := float64(float32(oddScale * tc))
			c[j], s[j] = float32(math.Cos(a)), float32(math.Sin(a))
			c[quarter+j], s[quarter+j] = float32(math.Cos(b)), float32(math.Sin(b))
			tr *= thetaScale
			tc *= thetaScale
		}
	}
	return cos, sin
}

// embed is the patch embedding of the patches of sp (a stride-patch
// convolution; llama.cpp rounds the pixels to half for it), its bias and
// the pre-norm; the first chunk allocates the state.
func (s *pixtralState) embed(p *kernels.Pool, sp span) {
	x, c, ps := s.x, s.x.width, s.x.patch
	if s.h == nil {
		s.h, s.q, s.k, s.v = make([]float32, s.n*c), make([]float32, s.n*c), make([]float32, s.n*c), make([]float32, s.n*c)
		s.cos, s.sin = x.ropeAngles(s.gx, s.gy)
	}
	k := 3 * ps * ps
	n := sp.hi - sp.lo
	cols := make([]float32, n*k)
	plane := len(s.planes) / 3
	p.For(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			py, px := (sp.lo+i)/s.gx, (sp.lo+i)%s.gx
			row := cols[i*k : (i+1)*k]
			for ch := range 3 {
				for ky := range ps {
					src := s.planes[ch*plane+(py*ps+ky)*s.imgW+px*ps:]
					copy(row[(ch*ps+ky)*ps:(ch*ps+ky+1)*ps], src[:ps])
				}
			}
			roundF16(row)
		}
	})
	h := s.h[sp.lo*c : sp.hi*c]
	kernels.MatMul(p, h, x.patchW, cols, n)
	addBias(h, x.patchB)
	if x.preLN != nil {
		rmsRows(p, h, h, x.preLN, x.eps)
	}
	if sp.hi == s.n {
		s.planes = nil
	}
}

// qkv computes the queries, keys and values of the patches of sp for
// layer ly, with their 2-D RoPE.
func (s *pixtralState) qkv(p *kernels.Pool, ly *pixtralLayer, sp span) {
	x, c := s.x, s.x.width
	lo, hi := sp.lo, sp.hi
	n := hi - lo
	xn := make([]float32, n*c)
	rmsRows(p, xn, s.h[lo*c:hi*c], ly.ln1, x.eps)
	roundFor(ly.q.Type, xn)
	q, k, v := s.q[lo*c:hi*c], s.k[lo*c:hi*c], s.v[lo*c:hi*c]
	kernels.MatMuls(p, xn, n, kernels.Product{Out: q, M: ly.q}, kernels.Product{Out: k, M: ly.k}, kernels.Product{Out: v, M: ly.v})
	addBias(q, ly.qB)
	addBias(k, ly.kB)
	addBias(v, ly.vB)
	hd := c / x.heads
	half := hd / 2
	for i := range n {
		cs, sn := s.cos[(lo+i)*half:(lo+i+1)*half], s.sin[(lo+i)*half:(lo+i+1)*half]
		kernels.Rope(q[i*c:(i+1)*c], hd, cs, sn, false)
		kernels.Rope(k[i*c:(i+1)*c], hd, cs, sn, false)
	}
}

// attnFFN runs attention over every patch for the queries of sp in layer
// ly, adds its projection to the residual stream, then the SwiGLU FFN.
func (s *pixtralState) attnFFN(p *kernels.Pool, ly *pixtralLayer, sp span) {
	x, c := s.x, s.x.width
	lo, hi := sp.lo, sp.hi
	n := hi - lo
	hd := c / x.heads
	att := make([]float32, n*c)
	scale := float32(1 / math.Sqrt(float64(hd)))
	p.For(n*x.heads, func(a, b int) {
		scores := make([]float32, s.n)
		for j := a; j < b; j++ {
			i, h := j/x.heads, j%x.heads
			q := s.q[(lo+i)*c+h*hd : (lo+i)*c+(h+1)*hd]
			kernels.Dots(scores, q, s.k[h*hd:], c, scale)
			kernels.Softmax(scores)
			kernels.Axpys(att[i*c+h*hd:i*c+(h+1)*hd], scores, s.v[h*hd:], c)
		}
	})
	res := s.h[lo*c : hi*c]
	o := make([]float32, n*c)
	roundFor(ly.o.Type, att)
	kernels.MatMul(p, o, ly.o, att, n)
	addBias(o, ly.oB)
	addInto(res, o)
	xn := att
	rmsRows(p, xn, res, ly.ln2, x.eps)
	roundFor(ly.gate.Type, xn)
	f := x.ff
	g, u := make([]float32, n*f), make([]float32, n*f)
	kernels.MatMuls(p, xn, n, kernels.Product{Out: g, M: ly.gate}, kernels.Product{Out: u, M: ly.up})
	addBias(g, ly.gateB)
	addBias(u, ly.upB)
	kernels.SiLUMul(g, u)
	roundFor(ly.down.Type, g)
	kernels.MatMul(p, o, ly.down, g, n)
	addBias(o, ly.dnB)
	addInto(res, o)
}

// project runs the final norm, the patch merger and the MLP, and lays the
// rows out with an [IMG_BREAK] row after each row of tokens but the last.
func (s *pixtralState) project(p *kernels.Pool) {
	x, c := s.x, s.x.width
	hcur := s.h
	if x.postLN != nil {
		rmsRows(p, hcur, hcur, x.postLN, x.eps)
	}
	in := hcur
	if x.merger != nil {
		rmsRows(p, hcur, hcur, x.mergeNorm, x.eps)
		in = s.unfold(hcur)
		roundFor(x.merger.Type, in)
		merged := make([]float32, s.tokens*c)
		kernels.MatMul(p, merged, x.merger, in, s.tokens)
		in = merged
	}
	hidden := x.mm1.Rows
	mid := make([]float32, s.tokens*hidden)
	roundFor(x.mm1.Type, in)
	kernels.MatMul(p, mid, x.mm1, in, s.tokens)
	addBias(mid, x.mm1B)
	geluF16(mid)
	out := make([]float32, s.tokens*x.out)
	roundFor(x.mm2.Type, mid)
	kernels.MatMul(p, out, x.mm2, mid, s.tokens)
	addBias(out, x.mm2B)
	s.result = s.withBreaks(out)
}

// unfold gathers each merge × merge block of the patch grid into one row,
// as llama.cpp's im2col does: value (channel ch, block row ky, column kx)
// at ch·m² + ky·m + kx; blocks in row-major order.
func (s *pixtralState) unfold(h []float32) []float32 {
	c, m := s.x.width, s.x.merge
	tx := s.gx / m
	out := make([]float32, s.tokens*m*m*c)
	for t := range s.tokens {
		by, bx := t/tx, t%tx
		row := out[t*m*m*c : (t+1)*m*m*c]
		for ky := range m {
			for kx := range m {
				src := h[((by*m+ky)*s.gx+bx*m+kx)*c:][:c]
				for ch, v := range src {
					row[ch*m*m+ky*m+kx] = v
				}
			}
		}
	}
	return out
}

// withBreaks inserts the [IMG_BREAK] row after each row of tokens but the
// last (none when the file has no break embedding).
func (s *pixtralState) withBreaks(out []float32) []float32 {
	x := s.x
	if x.imgBreak == nil {
		return out
	}
	tx, ty := s.gx/x.merge, s.gy/x.merge
	d := x.out
	res := make([]float32, 0, (s.tokens+ty-1)*d)
	for r := range ty {
		res = append(res, out[r*tx*d:(r+1)*tx*d]...)
		if r < ty-1 {
			res = append(res, x.imgBreak...)
		}
	}
	return res
}

// free drops the scratch once the embeddings are out.
func (s *pixtralState) free() {
	s.h, s.q, s.k, s.v, s.cos, s.sin, s.planes = nil, nil, nil, nil, nil, nil, nil
}

// rmsRows sets out = x / rms(x) · w for each row of x (width len(w)), as
// ggml's rms_norm and mul.
func rmsRows(p *kernels.Pool, out, x, w []float32, eps float32) {
	n := len(w)
	p.For(len(x)/n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			kernels.RMSNorm(out[r*n:(r+1)*n], x[r*n:(r+1)*n], w, eps)
		}
	})
}
