package vision

import (
	"image"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// BenchmarkEncode times one image's encoding (img-square-224 through the
// fixture's F32 and F16 projectors) on a pool of all the CPUs, the
// preprocessing excluded.
func BenchmarkEncode(b *testing.B) {
	for _, mmproj := range []string{"mmproj-f32.gguf", "mmproj-f16.gguf"} {
		b.Run(mmproj, func(b *testing.B) {
			p := loadFixture(b, mmproj)
			pr, err := p.Prepare(decodeFile(b, fixture(b, "img-square-224.png")), 0)
			if err != nil {
				b.Fatal(err)
			}
			pool := kernels.NewPool(0)
			defer pool.Close()
			flops := p.Encode(pr).Cost()
			for b.Loop() {
				if e := p.Encode(pr); !e.Advance(pool, math.MaxInt64) {
					b.Fatal("not done")
				}
			}
			b.ReportMetric(float64(flops)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkPrepare times the preprocessing of an image that needs resizing.
func BenchmarkPrepare(b *testing.B) {
	p := loadFixture(b, "mmproj-f32.gguf")
	img := decodeFile(b, fixture(b, "img-wide-300x180.png"))
	for b.Loop() {
		if _, err := p.Prepare(img, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// randomGemma3 writes a gemma3 mmproj of random weights (matrices in F16,
// as real files have them) with the given widths, for benchmarks at the
// sizes of a real SigLIP encoder.
func randomGemma3(b *testing.B, width, ff, heads, layers, out int) string {
	b.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "clip"}, {"general.type", "mmproj"}, {"clip.projector_type", "gemma3"},
		{"clip.has_vision_encoder", true}, {"clip.use_gelu", true},
		{"clip.vision.image_size", uint32(224)}, {"clip.vision.patch_size", uint32(14)},
		{"clip.vision.embedding_length", uint32(width)}, {"clip.vision.feed_forward_length", uint32(ff)},
		{"clip.vision.block_count", uint32(layers)}, {"clip.vision.attention.head_count", uint32(heads)},
		{"clip.vision.attention.layer_norm_epsilon", float32(1e-6)}, {"clip.vision.projection_dim", uint32(out)},
		{"clip.vision.image_mean", []float32{0.5, 0.5, 0.5}}, {"clip.vision.image_std", []float32{0.5, 0.5, 0.5}},
	} {
		w.AddKV(kv.k, kv.v)
	}
	add := func(name string, t kernels.Type, scale float64, dims ...uint64) {
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * scale)
		}
		if strings.HasSuffix(name, "ln1.weight") || strings.HasSuffix(name, "ln2.weight") || strings.HasSuffix(name, "norm.weight") || strings.HasSuffix(name, "post_ln.weight") {
			for i := range v {
				v[i] += 1
			}
		}
		if err := w.AddTensorF32(name, t, dims, v); err != nil {
			b.Fatal(err)
		}
	}
	c, f := uint64(width), uint64(ff)
	add("v.patch_embd.weight", kernels.F16, 1/math.Sqrt(588), 14, 14, 3, c)
	add("v.patch_embd.bias", kernels.F32, 0.05, c)
	add("v.position_embd.weight", kernels.F32, 0.3, c, 256)
	for i := range layers {
		p := "v.blk." + strconv.Itoa(i) + "."
		for _, n := range []string{"ln1", "ln2"} {
			add(p+n+".weight", kernels.F32, 0.05, c)
			add(p+n+".bias", kernels.F32, 0.05, c)
		}
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			add(p+n+".weight", kernels.F16, 1/math.Sqrt(float64(c)), c, c)
			add(p+n+".bias", kernels.F32, 0.05, c)
		}
		add(p+"ffn_up.weight", kernels.F16, 1/math.Sqrt(float64(c)), c, f)
		add(p+"ffn_up.bias", kernels.F32, 0.05, f)
		add(p+"ffn_down.weight", kernels.F16, 1/math.Sqrt(float64(f)), f, c)
		add(p+"ffn_down.bias", kernels.F32, 0.05, c)
	}
	add("v.post_ln.weight", kernels.F32, 0.05, c)
	add("v.post_ln.bias", kernels.F32, 0.05, c)
	add("mm.soft_emb_norm.weight", kernels.F32, 0.05, c)
	add("mm.input_projection.weight", kernels.F16, 2/math.Sqrt(float64(c)), uint64(out), c)
	path := filepath.Join(b.TempDir(), "mmproj-random.gguf")
	if err := w.WriteFile(path); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkEncodeSigLIP times one layer of a SigLIP-400M-wide encoder
// (Gemma 3's: width 1152, FFN 4304, 16 heads) over a 224-pixel image's 256
// patches, plus the head into a 2560-wide text model: the products at the
// widths of a real file, where the fixture's are too small to show them.
func BenchmarkEncodeSigLIP(b *testing.B) {
	p, err := Load(randomGemma3(b, 1152, 4304, 16, 1, 2560))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	img := image.NewNRGBA(image.Rect(0, 0, 224, 224))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	pr, err := p.Prepare(img, 0)
	if err != nil {
		b.Fatal(err)
	}
	pool := kernels.NewPool(0)
	defer pool.Close()
	flops := p.Encode(pr).Cost()
	for b.Loop() {
		if e := p.Encode(pr); !e.Advance(pool, math.MaxInt64) {
			b.Fatal("not done")
		}
	}
	b.ReportMetric(float64(flops)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
