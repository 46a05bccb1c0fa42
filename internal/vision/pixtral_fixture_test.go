package vision_test

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/demo"
	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
)

// The Pixtral fixture (testdata/pixtral) is a random-weight Mistral 3-style
// text model, a random-weight pixtral mmproj and a few images, all made by
// pixtralFixtureFiles; llama.cpp's outputs on them were saved next to them
// (see testdata/pixtral/README.md). TestPixtralFixtureReproducible checks
// that the generator still makes the committed bytes; -pixtral.write
// rewrites them (and then the llama.cpp references must be made again).
var writePixtral = flag.Bool("pixtral.write", false, "rewrite the generated files of testdata/pixtral")

const pixtralDir = "testdata/pixtral"

// pixtralText is the text model: a llama (llama.cpp's Mistral Small 3.1
// GGUFs are stored as llama) with Mistral's rope base, small and F32
// (quantized matrices would quantize the activations, whose rounding ties
// llama.cpp and an engine can break differently), untied (tied random
// embeddings make a model repeat its input token).
var pixtralText = model.RandomConfig{
	Arch: "llama", Layers: 2, Embd: 128, FF: 128, Heads: 4, KVHeads: 2,
	Vocab: 512 + len(pixtralTokens), ContextLen: 4096, RopeBase: 1e9, RMSEps: 1e-5,
	Type: kernels.F32, Seed: 63,
}

// pixtralOutputScale multiplies the output norm's gains: it spreads the
// logits (as a trained model's are spread) so that greedy steps have
// clear winners.
var pixtralOutputScale float32 = 8

// pixtralTokens are Mistral's image control tokens, appended to the
// stories260K vocabulary as ids 512, 513, 514.
var pixtralTokens = []string{"[IMG]", "[IMG_BREAK]", "[IMG_END]"}

// pixtralProj is the shape of the projector: a 2-layer ViT of width 64 on
// 16x16 patches, 2x2 patch merging, projected to the text width.
var pixtralProj = struct {
	ImageSize, Patch, Merge, Embd, FF, Heads, Layers int
	Seed                                             uint64
}{ImageSize: 512, Patch: 16, Merge: 2, Embd: 64, FF: 128, Heads: 2, Layers: 2, Seed: 29}

func TestPixtralFixtureReproducible(t *testing.T) {
	files, err := pixtralFixtureFiles()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		path := filepath.Join(pixtralDir, name)
		if *writePixtral {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s differs from what the generator makes now (%d vs %d bytes); rerun with -pixtral.write and remake the llama.cpp references", path, len(got), len(data))
		}
	}
}

// pixtralFixtureFiles returns the generated files by name.
func pixtralFixtureFiles() (map[string][]byte, error) {
	text, err := pixtralTextModel()
	if err != nil {
		return nil, err
	}
	brk, err := tokenRow(text, 513)
	if err != nil {
		return nil, err
	}
	proj, err := pixtralMMProj(brk)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"text-f32.gguf": text, "mmproj-f32.gguf": proj}
	for _, im := range pixtralImages {
		var buf bytes.Buffer
		if err := png.Encode(&buf, im.draw()); err != nil {
			return nil, err
		}
		files[im.name] = buf.Bytes()
	}
	return files, nil
}

// pixtralTextModel writes the text model with the stories260K vocabulary
// plus pixtralTokens as control tokens. Its output rows of the unknown,
// BOS, EOS, byte and image tokens are scaled by 0.25, so that
// greedy runs practically never pick them (llama-server drops the
// probabilities of a step that ends in an incomplete UTF-8 sequence), and
// its output norm's gains by pixtralOutputScale.
func pixtralTextModel() ([]byte, error) {
	w := gguf.NewWriter()
	if err := model.BuildRandom(pixtralText, w); err != nil {
		return nil, err
	}
	w.AddKV("general.name", "random mistral3-style text model (pixtral fixture)")
	if err := addStoriesVocab(w); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	f, err := gguf.Parse("pixtral text", b)
	if err != nil {
		return nil, err
	}
	emb, ok1 := f.Tensor("output.weight")
	norm, ok2 := f.Tensor("output_norm.weight")
	if !ok1 || !ok2 || emb.Type != kernels.F32 || norm.Type != kernels.F32 {
		return nil, fmt.Errorf("pixtral text: no F32 output.weight and output_norm.weight")
	}
	n := int(emb.Dims[0])
	for id := range pixtralText.Vocab {
		if id <= 258 || id >= 512 {
			scaleF32(emb.Data[id*4*n:(id+1)*4*n], 0.25)
		}
	}
	scaleF32(norm.Data, pixtralOutputScale)
	return b, nil
}

// scaleF32 multiplies the little-endian float32 values of b by k in place.
func scaleF32(b []byte, k float32) {
	for i := 0; i+4 <= len(b); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v*k))
	}
}

// addStoriesVocab copies the stories260K tokenizer and appends
// pixtralTokens as control tokens (type 3, score 0).
func addStoriesVocab(w *gguf.Writer) error {
	f, err := gguf.Parse("stories260K", demo.GGUF())
	if err != nil {
		return err
	}
	for _, kv := range f.KV {
		if !strings.HasPrefix(kv.Key, "tokenizer.") {
			continue
		}
		v := kv.Value
		switch kv.Key {
		case "tokenizer.ggml.tokens":
			v = append(append([]string(nil), v.([]string)...), pixtralTokens...)
		case "tokenizer.ggml.scores":
			v = append(append([]float32(nil), v.([]float32)...), make([]float32, len(pixtralTokens))...)
		case "tokenizer.ggml.token_type":
			types := append([]int32(nil), v.([]int32)...)
			for range pixtralTokens {
				types = append(types, 3)
			}
			v = types
		}
		w.AddKV(kv.Key, v)
	}
	return nil
}

// tokenRow returns row id of the text model's token_embd as float32.
func tokenRow(text []byte, id int) ([]float32, error) {
	f, err := gguf.Parse("pixtral text", text)
	if err != nil {
		return nil, err
	}
	t, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, fmt.Errorf("pixtral text: no token_embd.weight")
	}
	n := int(t.Dims[0])
	rb := t.Type.RowSize(n)
	row := make([]float32, n)
	kernels.Dequantize(t.Type, t.Data[id*rb:(id+1)*rb], row)
	return row, nil
}

// pixtralMMProj writes the projector in the layout of llama.cpp's Mistral
// Small 3.1 mmproj files (projector_type pixtral with a patch merger),
// every tensor F32. imgBreak is the text model's [IMG_BREAK] embedding,
// which the converter copies into the mmproj as v.token_embd.img_break.
func pixtralMMProj(imgBreak []float32) ([]byte, error) {
	p := pixtralProj
	c, ff, t := p.Embd, p.FF, pixtralText.Embd
	rng := rand.New(rand.NewPCG(p.Seed, p.Seed^0x5bd1e995))
	uniform := func(n int, lo, hi float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(lo + (hi-lo)*rng.Float64())
		}
		return v
	}
	unit := func(in, out int) []float32 { b := math.Sqrt(3 / float64(in)); return uniform(in*out, -b, b) }
	gain := func(n int) []float32 { return uniform(n, 0.9, 1.1) }

	w := gguf.NewWriter()
	w.AddKV("general.architecture", "clip")
	w.AddKV("general.type", "mmproj")
	w.AddKV("general.name", "random pixtral projector (pixtral fixture)")
	w.AddKV("general.file_type", uint32(0))
	w.AddKV("clip.projector_type", "pixtral")
	w.AddKV("clip.has_vision_encoder", true)
	w.AddKV("clip.use_silu", true)
	w.AddKV("clip.vision.image_size", uint32(p.ImageSize))
	w.AddKV("clip.vision.patch_size", uint32(p.Patch))
	w.AddKV("clip.vision.embedding_length", uint32(c))
	w.AddKV("clip.vision.feed_forward_length", uint32(ff))
	w.AddKV("clip.vision.block_count", uint32(p.Layers))
	w.AddKV("clip.vision.projection_dim", uint32(t))
	w.AddKV("clip.vision.attention.head_count", uint32(p.Heads))
	w.AddKV("clip.vision.attention.layer_norm_epsilon", float32(1e-5))
	w.AddKV("clip.vision.spatial_merge_size", uint32(p.Merge))
	w.AddKV("clip.vision.image_mean", []float32{0.48145466, 0.4578275, 0.40821073})
	w.AddKV("clip.vision.image_std", []float32{0.26862954, 0.26130258, 0.27577711})

	var err error
	add := func(name string, values []float32, dims ...uint64) {
		if err == nil {
			err = w.AddTensorF32(name, kernels.F32, dims, values)
		}
	}
	u := func(n int) uint64 { return uint64(n) }
	add("v.patch_embd.weight", unit(3*p.Patch*p.Patch, c), u(p.Patch), u(p.Patch), 3, u(c))
	add("v.pre_ln.weight", gain(c), u(c))
	for l := range p.Layers {
		b := fmt.Sprintf("v.blk.%d.", l)
		add(b+"ln1.weight", gain(c), u(c))
		for _, m := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			add(b+m+".weight", unit(c, c), u(c), u(c))
		}
		add(b+"ln2.weight", gain(c), u(c))
		add(b+"ffn_gate.weight", unit(c, ff), u(c), u(ff))
		add(b+"ffn_up.weight", unit(c, ff), u(c), u(ff))
		add(b+"ffn_down.weight", unit(ff, c), u(ff), u(c))
	}
	mm := p.Merge * p.Merge * c
	add("mm.input_norm.weight", gain(c), u(c))
	add("mm.patch_merger.weight", unit(mm, c), u(mm), u(c))
	add("mm.1.weight", unit(c, t), u(c), u(t))
	add("mm.1.bias", uniform(t, -0.05, 0.05), u(t))
	add("mm.2.weight", unit(t, t), u(t), u(t))
	add("mm.2.bias", uniform(t, -0.05, 0.05), u(t))
	add("v.token_embd.img_break", imgBreak, u(t))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fixtureImage is a test image drawn in code: smooth colour waves and a
// disc, different per image.
type fixtureImage struct {
	name          string
	w, h          int
	fx, fy, phase float64
	cx, cy, r     float64
	disc          color.RGBA
}

// pixtralImages: one on the merge grid (no resize), a wide and a tall one
// that are resized and padded, and a small one that is enlarged to the
// projector's minimum of 8 tokens.
var pixtralImages = []fixtureImage{
	{name: "img-square-128.png", w: 128, h: 128, fx: 0.07, fy: 0.05, phase: 0.3, cx: 0.35, cy: 0.6, r: 0.22, disc: color.RGBA{230, 40, 60, 255}},
	{name: "img-wide-200x90.png", w: 200, h: 90, fx: 0.03, fy: 0.11, phase: 1.7, cx: 0.7, cy: 0.4, r: 0.3, disc: color.RGBA{20, 200, 90, 255}},
	{name: "img-tall-70x150.png", w: 70, h: 150, fx: 0.13, fy: 0.02, phase: 2.9, cx: 0.5, cy: 0.3, r: 0.35, disc: color.RGBA{250, 220, 30, 255}},
	{name: "img-small-40x40.png", w: 40, h: 40, fx: 0.2, fy: 0.17, phase: 4.1, cx: 0.45, cy: 0.45, r: 0.3, disc: color.RGBA{40, 60, 240, 255}},
}

func (f fixtureImage) draw() *image.RGBA {
	im := image.NewRGBA(image.Rect(0, 0, f.w, f.h))
	for y := range f.h {
		for x := range f.w {
			fx, fy := float64(x), float64(y)
			c := color.RGBA{
				R: wave(fx*f.fx + fy*f.fy + f.phase),
				G: wave(fx*f.fy - fy*f.fx + 2*f.phase),
				B: wave(0.5*(fx+fy)*(f.fx+f.fy) + 3*f.phase),
				A: 255,
			}
			dx, dy := fx/float64(f.w)-f.cx, fy/float64(f.h)-f.cy
			if dx*dx+dy*dy < f.r*f.r {
				c = f.disc
			}
			im.SetRGBA(x, y, c)
		}
	}
	return im
}

func wave(a float64) uint8 { return uint8(math.Round(127.5 + 120*math.Sin(a))) }
