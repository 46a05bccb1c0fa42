package vision

import (
	"fmt"
	"math"
	"strconv"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

func init() { register("gemma3", kind{load: loadGemma3}) }

// gemma3 is Gemma 3's projector: a SigLIP ViT (patch embedding, learned
// positions, pre-norm layers with LayerNorm and tanh GELU, a final
// LayerNorm), k×k average pooling of the patch grid, an RMSNorm and a
// linear projection into the text model. Images are resized to a fixed
// square, aspect kept, padded with black.
type gemma3 struct {
	size, patch  int // image side and patch side, in pixels
	grid         int // patches per side
	pool         int // patches per side of one output token
	width, ff    int // vision width and FFN width
	heads        int
	eps          float32
	mean, std    [3]float32
	out          int // output width (the text model's n_embd)
	patchW       *kernels.Matrix
	patchB       []float32
	pos          []float32 // grid² × width
	layers       []vitLayer
	postW, postB []float32
	softNorm     []float32
	proj         *kernels.Matrix // out rows of width values
}

// vitLayer is one pre-norm encoder layer.
type vitLayer struct {
	ln1W, ln1B     []float32
	q, k, v, o     *kernels.Matrix
	qB, kB, vB, oB []float32
	ln2W, ln2B     []float32
	up, down       *kernels.Matrix
	upB, downB     []float32
}

func loadGemma3(f *gguf.File) (model, error) {
	r := &reader{f: f}
	g := &gemma3{
		size:  r.uint("clip.vision.image_size"),
		patch: r.uint("clip.vision.patch_size"),
		width: r.uint("clip.vision.embedding_length"),
		ff:    r.uint("clip.vision.feed_forward_length"),
		heads: r.uint("clip.vision.attention.head_count"),
		eps:   r.float("clip.vision.attention.layer_norm_epsilon", 1e-6),
		mean:  r.triple("clip.vision.image_mean"),
		std:   r.triple("clip.vision.image_std"),
		pool:  4, // llama.cpp's value for every Gemma 3; the key below overrides it
	}
	layers := r.uint("clip.vision.block_count")
	if v, ok := f.Uint("clip.vision.projector.scale_factor"); ok {
		g.pool = int(v)
	}
	if gelu, ok := f.Bool("clip.use_gelu"); !ok || !gelu {
		r.fail("clip.use_gelu is not true: the gemma3 projector needs the tanh GELU (quick GELU is not supported)")
	}
	if r.err != nil {
		return nil, r.err
	}
	if err := g.checkShape(f.Path); err != nil {
		return nil, err
	}
	g.loadWeights(r, layers)
	if r.err != nil {
		return nil, r.err
	}
	return g, nil
}

// checkShape refuses sizes the encoder cannot tile.
func (g *gemma3) checkShape(path string) error {
	switch {
	case g.size%g.patch != 0:
		return fmt.Errorf("%s: image size %d is not a multiple of the patch size %d", path, g.size, g.patch)
	case g.pool <= 0 || (g.size/g.patch)%g.pool != 0:
		return fmt.Errorf("%s: %d patches per side do not pool by %d", path, g.size/g.patch, g.pool)
	case g.width%g.heads != 0:
		return fmt.Errorf("%s: width %d is not a multiple of %d heads", path, g.width, g.heads)
	case g.size > 8192:
		return fmt.Errorf("%s: image size %d is too large", path, g.size)
	}
	for c := range 3 {
		if !(g.std[c] > 0) {
			return fmt.Errorf("%s: clip.vision.image_std has a value %v that is not positive", path, g.std[c])
		}
	}
	g.grid = g.size / g.patch
	return nil
}

func (g *gemma3) loadWeights(r *reader, layers int) {
	c, p := g.width, g.patch
	kernel := r.floats("v.patch_embd.weight", false, p, p, 3, c)
	if kernel != nil {
		// llama.cpp's convolution multiplies half-precision patches with the
		// kernel rounded to half.
		var err error
		if g.patchW, err = f16Matrix(kernel, c, 3*p*p); err != nil {
			r.fail("tensor v.patch_embd.weight: %v", err)
		}
	}
	g.patchB = r.bias("v.patch_embd.bias", c)
	g.pos = r.floats("v.position_embd.weight", false, c, g.grid*g.grid)
	g.layers = make([]vitLayer, layers)
	for i := range g.layers {
		g.layers[i] = g.loadLayer(r, "v.blk."+strconv.Itoa(i)+".")
	}
	g.postW = r.vec("v.post_ln.weight", c)
	g.postB = r.bias("v.post_ln.bias", c)
	g.softNorm = r.vec("mm.soft_emb_norm.weight", c)
	if t, ok := r.f.Tensor("mm.input_projection.weight"); ok && len(t.Dims) == 2 {
		g.out = int(t.Dims[0])
	}
	if g.out == 0 {
		r.fail("missing tensor mm.input_projection.weight with 2 dims")
		return
	}
	g.proj = r.transposed("mm.input_projection.weight", g.out, c)
	if d, ok := r.f.Uint("clip.vision.projection_dim"); ok && int(d) != g.out && r.err == nil {
		r.fail("clip.vision.projection_dim is %d but mm.input_projection.weight gives %d", d, g.out)
	}
}

func (g *gemma3) loadLayer(r *reader, pre string) vitLayer {
	c, f := g.width, g.ff
	l := vitLayer{
		ln1W: r.vec(pre+"ln1.weight", c), ln1B: r.bias(pre+"ln1.bias", c),
		q: r.matrix(pre+"attn_q.weight", c, c), qB: r.bias(pre+"attn_q.bias", c),
		k: r.matrix(pre+"attn_k.weight", c, c), kB: r.bias(pre+"attn_k.bias", c),
		v: r.matrix(pre+"attn_v.weight", c, c), vB: r.bias(pre+"attn_v.bias", c),
		o: r.matrix(pre+"attn_out.weight", c, c), oB: r.bias(pre+"attn_out.bias", c),
		ln2W: r.vec(pre+"ln2.weight", c), ln2B: r.bias(pre+"ln2.bias", c),
	}
	if r.err == nil && (l.k.Type != l.q.Type || l.v.Type != l.q.Type) {
		r.fail("tensors %sattn_q/k/v have different types (%s, %s, %s)", pre, l.q.Type, l.k.Type, l.v.Type)
	}
	// Legacy files name the FFN's matrices the other way round: llama.cpp
	// swaps them when ffn_down reads the vision width.
	upName, downName := pre+"ffn_up", pre+"ffn_down"
	if t, ok := r.f.Tensor(downName + ".weight"); ok && len(t.Dims) == 2 && t.Dims[0] == uint64(c) {
		upName, downName = downName, upName
	}
	l.up, l.upB = r.matrix(upName+".weight", c, f), r.bias(upName+".bias", f)
	l.down, l.downB = r.matrix(downName+".weight", f, c), r.bias(downName+".bias", c)
	return l
}

func (g *gemma3) embd() int { return g.out }

func (g *gemma3) nonCausal() bool { return true }

func (g *gemma3) markers() (string, string) { return "<start_of_image>", "<end_of_image>" }

// tokens is the number of output rows per image.
func (g *gemma3) tokens() int { n := g.grid / g.pool; return n * n }

// prepare fits the image in the fixed square (aspect kept, llama.cpp's
// bilinear resize), pads it with black and normalises it. maxEdge does
// not apply: the size is fixed.
func (g *gemma3) prepare(img *rgbImage, _ int) (*Prepared, error) {
	if img.w != g.size || img.h != g.size {
		w, h := fitSize(img.w, img.h, g.size, g.size)
		img = padCenter(resizeBilinear(img, w, h), g.size, g.size)
	}
	return &Prepared{Tokens: g.tokens(), w: img.w, h: img.h, pix: img.pix, planes: normalize(img, g.mean, g.std)}, nil
}

// layerNorm sets out = (x − mean) / sqrt(var + eps) · w + b for each of
// the rows of x (width len(w)), as ggml's norm, mul and add do (sums in
// float64).
func layerNorm(p *kernels.Pool, out, x, w, b []float32, eps float32) {
	n := len(w)
	p.For(len(x)/n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			in, o := x[r*n:(r+1)*n], out[r*n:(r+1)*n]
			var sum float64
			for _, v := range in {
				sum += float64(v)
			}
			mean := float32(sum / float64(n))
			var sq float64
			for i, v := range in {
				d := v - mean
				o[i] = d
				sq += float64(d * d)
			}
			scale := 1 / float32(math.Sqrt(float64(float32(sq/float64(n))+eps)))
			for i := range o {
				o[i] = float32(o[i]*scale) * w[i]
			}
			if b != nil {
				for i := range o {
					o[i] += b[i]
				}
			}
		}
	})
}

// addBias adds b to each row of x (nothing when b is nil).
func addBias(x, b []float32) {
	if b == nil {
		return
	}
	n := len(b)
	for r := 0; r+n <= len(x); r += n {
		row := x[r : r+n]
		for i, v := range b {
			row[i] += v
		}
	}
}
