package engine_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"mistralrs/internal/engine"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
	"mistralrs/internal/model/modeltest"
	"mistralrs/internal/vision"
)

// The Pixtral fixture (internal/vision/testdata/pixtral, committed): a
// random-weight Mistral 3-style text model, a random pixtral mmproj, test
// images and llama.cpp's prompt chunks, greedy ids and per-step
// distributions. Here the images go through the real encoder
// (internal/vision), so the whole path is checked against llama.cpp.

const pixtralDir = "../vision/testdata/pixtral"

type pixtralFixture struct {
	m     *loader.Model
	proj  *vision.Projector
	cases map[string]*pixtralCase
}

type pixtralCase struct {
	visionCase
	Images []string `json:"images"`
}

func loadPixtralFixture(t *testing.T) *pixtralFixture {
	t.Helper()
	m, err := loader.Load(filepath.Join(pixtralDir, "text-f32.gguf"), loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	proj, err := vision.Load(filepath.Join(pixtralDir, "mmproj-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proj.Close() })
	raw, err := os.ReadFile(filepath.Join(pixtralDir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases map[string]*pixtralCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	return &pixtralFixture{m: m, proj: proj, cases: ref.Cases}
}

// request builds a case's prompt from llama.cpp's chunks: text ids, and
// per image as many positions as the encoder makes rows, encoded by the
// real projector.
func (f *pixtralFixture) request(t *testing.T, name string) *engine.Request {
	t.Helper()
	c := f.cases[name]
	if c == nil {
		t.Fatalf("no case %q in reference.json", name)
	}
	req := &engine.Request{MaxTokens: len(c.Greedy), IgnoreEOS: true}
	req.Sampling.TopP, req.Sampling.RepetitionPenalty = 1, 1
	img := 0
	for _, ch := range c.Chunks {
		if ch.ImageTokens == 0 {
			req.Prompt = append(req.Prompt, ch.Text...)
			continue
		}
		b, err := os.ReadFile(filepath.Join(pixtralDir, c.Images[img]))
		if err != nil {
			t.Fatal(err)
		}
		im, err := vision.Decode(b, vision.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := f.proj.Prepare(im, 0)
		if err != nil {
			t.Fatal(err)
		}
		if pr.Tokens != ch.ImageTokens || ch.NonCausal != f.proj.NonCausal() {
			t.Fatalf("case %s: image of %d rows (non-causal %v), llama.cpp %d (%v)", name, pr.Tokens, f.proj.NonCausal(), ch.ImageTokens, ch.NonCausal)
		}
		req.Images = append(req.Images, engine.Image{Pos: len(req.Prompt), Len: pr.Tokens, Key: pr.Hash, NonCausal: f.proj.NonCausal(),
			Encode: func() engine.Encoder { return f.proj.Encode(pr) }})
		req.Prompt = append(req.Prompt, make([]int32, pr.Tokens)...)
		img++
	}
	if len(req.Prompt) != c.Positions {
		t.Fatalf("case %s: %d positions, reference.json says %d", name, len(req.Prompt), c.Positions)
	}
	return req
}

// teacherForced runs the text model over the prompt (the images' rows from
// the real encoder) and llama.cpp's greedy ids, and returns the largest
// |Δ| of the log-probabilities at every step against the steps file.
func (f *pixtralFixture) teacherForced(t *testing.T, req *engine.Request, c *pixtralCase, steps []float32) float64 {
	t.Helper()
	net := f.m.Net
	V := net.Config.Vocab
	toks := slices.Concat(req.Prompt, c.Greedy[:len(c.Greedy)-1])
	in := &model.SeqInput{Tokens: toks, Cache: kvcache.NewContiguousCache(net.Config.KVShape(), len(toks), false),
		AllLogits: make([]float32, len(toks)*V)}
	for _, im := range req.Images {
		for j := range im.Len {
			toks[im.Pos+j] = -1 - int32(j)
		}
		enc := im.Encode()
		for !enc.Advance(nil, math.MaxInt64) {
		}
		in.Embeds = append(in.Embeds, model.Embeds{Off: im.Pos, Rows: enc.Embeddings(), NonCausal: im.NonCausal})
	}
	if err := net.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for k := range c.Greedy {
		lp := modeltest.LogSoftmax(in.AllLogits[(len(req.Prompt)-1+k)*V : (len(req.Prompt)+k)*V])
		for i, v := range lp {
			worst = max(worst, math.Abs(v-float64(steps[k*V+i])))
		}
	}
	return worst
}

// Every case of the Pixtral fixture through the engine with the real
// encoder: greedy ids are llama.cpp's (all steps before a near-tie), the
// log-probabilities along them and the teacher-forced distributions at
// every step are within 2e-2 of llama.cpp's (the Gemma 3 fixture's
// tolerance; measured here: at most 9e-4, README.md), and different images
// give different answers.
func TestPixtralVisionReference(t *testing.T) {
	f := loadPixtralFixture(t)
	if got := f.m.Tok.Encode("[IMG_END]Once upon a time", false, true); !slices.Equal(got, []int32{514, 403, 407, 261, 378}) {
		t.Errorf("\"[IMG_END]Once upon a time\" tokenizes to %v, llama.cpp [514 403 407 261 378]", got)
	}
	e, _ := newEngine(t, f.m, visionOpts(nil))
	answers := map[string][]int32{}
	for _, name := range []string{"square", "wide", "tall", "small", "text-before-image", "two-images", "text-only"} {
		t.Run(name, func(t *testing.T) {
			c := f.cases[name]
			req := f.request(t, name)
			req.Sampling.Logprobs, req.Sampling.TopLogprobs = true, 5
			res, outs := collect(t, e, req)
			if res.PromptTokens != len(req.Prompt) {
				t.Errorf("prompt tokens %d, want %d", res.PromptTokens, len(req.Prompt))
			}
			steps := modeltest.ReadF32(t, filepath.Join(pixtralDir, c.StepsFile))
			V := f.m.Net.Config.Vocab
			n := c.sure(steps, V)
			if !slices.Equal(res.Tokens[:n], c.Greedy[:n]) {
				t.Errorf("greedy ids %v\nllama.cpp  %v (first %d must match)", res.Tokens, c.Greedy, n)
			}
			engWorst := 0.0
			for k, o := range outs {
				if k >= len(c.Greedy) || o.Token != c.Greedy[k] {
					break
				}
				engWorst = max(engWorst, math.Abs(float64(o.Logprob.Logprob-steps[k*V+int(o.Token)])))
				for _, tl := range o.Logprob.Top {
					engWorst = max(engWorst, math.Abs(float64(tl.Logprob-steps[k*V+int(tl.Token)])))
				}
			}
			tf := f.teacherForced(t, req, c, steps)
			t.Logf("%s: greedy %d/%d ids equal (%d required); max |Δlogprob| engine top-5 %.2e, teacher-forced %.2e",
				name, countEqual(res.Tokens, c.Greedy), len(c.Greedy), n, engWorst, tf)
			if engWorst > 2e-2 || tf > 2e-2 {
				t.Errorf("log-probabilities off by %.3g (engine), %.3g (teacher-forced): tolerance 2e-2", engWorst, tf)
			}
			answers[name] = res.Tokens
		})
	}
	for _, pair := range [][2]string{{"square", "wide"}, {"square", "tall"}, {"wide", "tall"}, {"square", "small"}, {"square", "text-only"}} {
		if a, b := answers[pair[0]], answers[pair[1]]; a != nil && slices.Equal(a, b) {
			t.Errorf("%s and %s give the same answer %v", pair[0], pair[1], a)
		}
	}
}
