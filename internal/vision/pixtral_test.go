package vision

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model/modeltest"
)

// The pixtral fixture's files are committed (testdata/pixtral, made by
// pixtral_fixture_test.go and llama.cpp; see its README.md).
const pixtralData = "testdata/pixtral"

// pixtralEmbdTol bounds |ours − llama.cpp's| on the image embeddings
// (RMS ≈ 0.6). Both sum in float32 in different orders (1e-5 apart), but
// the projector's GELU goes through llama.cpp's half-precision table: an
// input within rounding of a half-precision boundary lands in the next
// bin on one side, a step of one half ulp of the output (up to 2e-3),
// which mm.2 (weights up to 0.15) spreads as up to 3e-4 over a row. Our
// own SIMD and generic paths differed by 1.5e-4 for that reason; llama.cpp
// and we differ by at most 1.7e-4 on the four images. A real
// mistake moves values by 1e-2 or more (README.md).
const pixtralEmbdTol = 1e-3

// pixtralEmbdMeanTol bounds the mean |Δ|, which isolated bin flips hardly
// move (measured 4e-8 to 7e-6): without llama.cpp's half-precision
// roundings (the convolution's inputs, the GELU table) it is 1.1e-4 and
// more.
const pixtralEmbdMeanTol = 2e-5

type pixtralRef struct {
	Images map[string]struct {
		File             string  `json:"file"`
		Tokens           int     `json:"tokens"`
		NEmbd            int     `json:"n_embd"`
		Preprocessed     string  `json:"preprocessed"`
		PreprocessedSize [2]int  `json:"preprocessed_size"`
		ByteRoundtripErr float64 `json:"byte_roundtrip_max_err"`
	} `json:"images"`
}

func loadPixtralRef(t *testing.T) *pixtralRef {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(pixtralData, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r pixtralRef
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Images) == 0 {
		t.Fatal("reference.json lists no images")
	}
	return &r
}

func openPixtral(t *testing.T) *Projector {
	t.Helper()
	p, err := Load(filepath.Join(pixtralData, "mmproj-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func readPNG(t *testing.T, path string) *rgbImage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return toRGB(img)
}

func prepareFile(t *testing.T, p *Projector, name string, maxEdge int) *Prepared {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(pixtralData, name))
	if err != nil {
		t.Fatal(err)
	}
	img, err := Decode(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Prepare(img, maxEdge)
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

func TestPixtralProjector(t *testing.T) {
	p := openPixtral(t)
	if p.Type() != "pixtral" || p.Embd() != 128 || p.NonCausal() {
		t.Errorf("type %q embd %d nonCausal %v; want pixtral, 128, false", p.Type(), p.Embd(), p.NonCausal())
	}
	if before, after := p.Markers(); before != "" || after != "[IMG_END]" {
		t.Errorf("markers %q, %q; want \"\", \"[IMG_END]\"", before, after)
	}
}

// TestPixtralPrepareMatchesLlamaCpp: the resized, padded image is the one
// llama.cpp's encoder saw, byte for byte, and the token count is mtmd's.
func TestPixtralPrepareMatchesLlamaCpp(t *testing.T) {
	p := openPixtral(t)
	for name, want := range loadPixtralRef(t).Images {
		t.Run(name, func(t *testing.T) {
			if want.ByteRoundtripErr > 0.01 {
				t.Fatalf("reference %s: llama.cpp's input does not map back to bytes (%g)", want.Preprocessed, want.ByteRoundtripErr)
			}
			pr := prepareFile(t, p, name, 0)
			ref := readPNG(t, filepath.Join(pixtralData, want.Preprocessed))
			if pr.w != want.PreprocessedSize[0] || pr.h != want.PreprocessedSize[1] || pr.w != ref.w || pr.h != ref.h {
				t.Fatalf("preprocessed to %dx%d, llama.cpp %dx%d", pr.w, pr.h, ref.w, ref.h)
			}
			if !bytes.Equal(pr.pix, ref.pix) {
				diff := 0
				for i := range pr.pix {
					if pr.pix[i] != ref.pix[i] {
						diff++
					}
				}
				t.Errorf("%d of %d preprocessed bytes differ from llama.cpp's", diff, len(pr.pix))
			}
			if pr.Tokens != want.Tokens {
				t.Errorf("%d tokens, llama.cpp %d", pr.Tokens, want.Tokens)
			}
		})
	}
}

// TestPixtralEmbeddingsMatchLlamaCpp runs each image's encoding one unit
// at a time (as the engine slices it) and compares with llama.cpp's.
func TestPixtralEmbeddingsMatchLlamaCpp(t *testing.T) {
	p := openPixtral(t)
	brk := pixtralBreak(t, p)
	pool := kernels.NewPool(2)
	defer pool.Close()
	for name, want := range loadPixtralRef(t).Images {
		t.Run(name, func(t *testing.T) {
			pr := prepareFile(t, p, name, 0)
			ref := modeltest.ReadF32(t, filepath.Join(pixtralData, want.File))
			e := p.Encode(pr)
			units, last := 0, e.Cost()
			for !e.Advance(pool, 1) {
				units++
				if c := e.Cost(); c >= last || c <= 0 {
					t.Fatalf("cost %d after unit %d, was %d: not decreasing", c, units, last)
				} else {
					last = c
				}
			}
			got := e.Embeddings()
			if units < 3 || e.Cost() != 0 {
				t.Errorf("encoding took %d units, cost left %d", units+1, e.Cost())
			}
			if len(got) != len(ref) || len(got) != pr.Tokens*p.Embd() {
				t.Fatalf("%d values, llama.cpp %d, Tokens×Embd %d", len(got), len(ref), pr.Tokens*p.Embd())
			}
			worst, at := 0.0, 0
			for i := range got {
				if d := math.Abs(float64(got[i] - ref[i])); d > worst || math.IsNaN(d) {
					worst, at = d, i
				}
			}
			if !(worst <= pixtralEmbdTol) {
				t.Errorf("max |Δ| %.3g at row %d col %d (ours %g, llama.cpp %g), tolerance %g", worst, at/p.Embd(), at%p.Embd(), got[at], ref[at], pixtralEmbdTol)
			}
			mean := meanAbsDiff(got, ref)
			if !(mean <= pixtralEmbdMeanTol) {
				t.Errorf("mean |Δ| %.3g, tolerance %g", mean, pixtralEmbdMeanTol)
			}
			t.Logf("%d rows, max |Δ| %.3g, mean |Δ| %.3g", pr.Tokens, worst, mean)
			// The break rows are the mmproj's [IMG_BREAK] embedding.
			d := p.Embd()
			tx := pr.w / 32
			for r := tx; r < pr.Tokens; r += tx + 1 {
				if !equalF32(got[r*d:(r+1)*d], brk) {
					t.Errorf("row %d is not the [IMG_BREAK] embedding", r)
				}
			}
		})
	}
}

func pixtralBreak(t *testing.T, p *Projector) []float32 {
	t.Helper()
	ti, ok := p.f.Tensor("v.token_embd.img_break")
	if !ok {
		t.Fatal("no v.token_embd.img_break")
	}
	out := make([]float32, ti.Elements())
	kernels.Dequantize(ti.Type, ti.Data, out)
	return out
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPixtralEncodeSlicing: rows cut into chunks and any slicing of the
// work give the bits of one whole run.
func TestPixtralEncodeSlicing(t *testing.T) {
	p := openPixtral(t)
	pr := prepareFile(t, p, "img-wide-200x90.png", 0)
	one := p.Encode(pr)
	whole := len(one.steps)
	if !one.Advance(nil, math.MaxInt64) {
		t.Fatal("not done after an unbounded Advance")
	}
	saved := unitFLOPs
	defer func() { unitFLOPs = saved }()
	unitFLOPs = 300_000 // 72 patches in chunks of 4 to 28 rows
	sliced := p.Encode(pr)
	if len(sliced.steps) < 3*whole {
		t.Fatalf("%d units chunked, %d whole", len(sliced.steps), whole)
	}
	budget := sliced.Cost() / 7
	n := 0
	for !sliced.Advance(nil, budget) {
		n++
	}
	if n < 3 || !equalF32(one.Embeddings(), sliced.Embeddings()) {
		t.Errorf("sliced in %d Advance calls; equal results: %v", n+1, equalF32(one.Embeddings(), sliced.Embeddings()))
	}
	if sliced.Advance(nil, 1) != true || sliced.Embeddings() == nil {
		t.Error("Advance after done must report done and keep the embeddings")
	}
}

func TestPixtralSize(t *testing.T) {
	for _, c := range []struct{ w, h, align, minPix, maxPix, ww, wh int }{
		{128, 128, 32, 8 << 10, 1 << 20, 128, 128}, // on the grid
		{200, 90, 32, 8 << 10, 1 << 20, 192, 96},   // sides rounded to the grid
		{70, 150, 32, 8 << 10, 1 << 20, 64, 160},
		{40, 40, 32, 8 << 10, 1 << 20, 96, 96},           // under 8 tokens: scaled up, ceiled
		{1, 1, 32, 8 << 10, 1 << 20, 96, 96},             // one pixel
		{2000, 1000, 28, 8 * 784, 1024 * 784, 1260, 616}, // over 1024 tokens: scaled down, floored
		{1540, 1540, 28, 8 * 784, 1024 * 784, 896, 896},  // Mistral Small 3.1 at image_size
		{10000, 10, 28, 8 * 784, 1024 * 784, 9996, 28},   // thin: the short side stays one token
	} {
		if w, h := pixtralSize(c.w, c.h, c.align, c.minPix, c.maxPix); w != c.ww || h != c.wh {
			t.Errorf("pixtralSize(%d, %d, align %d) = %dx%d, want %dx%d", c.w, c.h, c.align, w, h, c.ww, c.wh)
		}
	}
}

// TestPixtralMaxEdge: maxEdge (and by default the file's image_size)
// caps the longer side before the sizing.
func TestPixtralMaxEdge(t *testing.T) {
	p := openPixtral(t)
	pr := prepareFile(t, p, "img-wide-200x90.png", 100)
	// 200x90 sized as 100x45: 96x32 is under 8 tokens, scaled up to 160x64.
	if pr.w != 160 || pr.h != 64 || pr.Tokens != 5*2+1 {
		t.Errorf("maxEdge 100: %dx%d, %d tokens; want 160x64, 11", pr.w, pr.h, pr.Tokens)
	}
	big := &rgbImage{w: 1200, h: 600, pix: make([]uint8, 3*1200*600)}
	pr, err := p.m.prepare(big, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's image_size 512: sized as 512x256, on the grid.
	if pr.w != 512 || pr.h != 256 {
		t.Errorf("1200x600 with the default cap: %dx%d, want 512x256", pr.w, pr.h)
	}
	if w, h := capEdge(300, 100, 0); w != 300 || h != 100 {
		t.Errorf("capEdge without a cap changed the size: %dx%d", w, h)
	}
}

// TestPixtralLoadErrors: files llama.cpp would run differently (or not at
// all) are refused with one line naming the file.
func TestPixtralLoadErrors(t *testing.T) {
	src, err := gguf.Open(filepath.Join(pixtralData, "mmproj-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, c := range []struct {
		name, want string
		kv         map[string]any
		drop       string
	}{
		{"no-silu", "clip.use_silu", map[string]any{"clip.use_silu": false}, ""},
		{"no-merger", "no mm.patch_merger.weight", nil, "mm.patch_merger.weight"},
		{"odd-heads", "multiple of 4", map[string]any{"clip.vision.attention.head_count": uint32(32)}, ""},
		{"no-mm2", "mm.2.weight", nil, "mm.2.weight"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := gguf.NewWriter()
			for _, kv := range src.KV {
				w.AddKV(kv.Key, kv.Value)
			}
			for k, v := range c.kv {
				w.AddKV(k, v)
			}
			for _, ti := range src.Tensors {
				if ti.Name != c.drop {
					if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
						t.Fatal(err)
					}
				}
			}
			path := filepath.Join(t.TempDir(), c.name+".gguf")
			if err := w.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			p, err := Load(path)
			if err == nil {
				p.Close()
				t.Fatal("loaded")
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line naming the file and %q", msg, c.want)
			}
		})
	}
}
