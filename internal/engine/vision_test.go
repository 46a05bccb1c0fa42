package engine_test

import (
	"crypto/sha256"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"mistralrs/internal/engine"
	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
	"mistralrs/internal/model/modeltest"
	"mistralrs/internal/sampler"
	"mistralrs/internal/testutil"
)

// The Gemma 3 vision fixture (../shared/testdata/vision): a random-weight
// gemma3 text model and llama.cpp's image embeddings, greedy ids and
// per-step distributions. The encoder here is a test double that hands out
// llama.cpp's embeddings after a number of Advance calls; the real one is
// internal/vision's.

type visionCase struct {
	Chunks []struct {
		Text        []int32 `json:"text"`
		ImageTokens int     `json:"image_tokens"`
		NonCausal   bool    `json:"non_causal"`
	} `json:"prompt_chunks"`
	Prompt    []int32 `json:"prompt_tokens"` // text-only: no chunks
	Positions int     `json:"n_prompt_positions"`
	Embds     []struct {
		File string `json:"file"`
	} `json:"image_embeddings"`
	Greedy    []int32   `json:"greedy_32_tokens"`
	Margin    []float64 `json:"greedy_step_margin"`
	StepsFile string    `json:"steps_logprobs_file"`
}

type visionFixture struct {
	dir   string
	m     *loader.Model
	cases map[string]*visionCase
	names []string // in the README's order
}

var (
	visionOnce sync.Once
	visionFix  *visionFixture
	visionErr  error
)

// loadVision loads the fixture once (skipping without ../shared).
func loadVision(t testing.TB) *visionFixture {
	t.Helper()
	path := testutil.SharedFile(t, "testdata", "vision", "text-f32.gguf")
	visionOnce.Do(func() {
		dir := filepath.Dir(path)
		m, err := loader.Load(path, loader.Options{})
		if err != nil {
			visionErr = err
			return
		}
		raw, err := os.ReadFile(filepath.Join(dir, "reference.json"))
		if err != nil {
			visionErr = err
			return
		}
		var ref struct {
			Cases map[string]*visionCase `json:"cases"`
		}
		if err := json.Unmarshal(raw, &ref); err != nil {
			visionErr = err
			return
		}
		visionFix = &visionFixture{dir: dir, m: m, cases: ref.Cases,
			names: []string{"square", "wide", "tall", "blocks-jpeg", "blocks-png", "text-before-image", "two-images", "square-mmproj-f16", "text-only"}}
	})
	if visionErr != nil {
		t.Fatal(visionErr)
	}
	return visionFix
}

// refEncoder is the test double of an image encoder: it returns its rows
// after units units of work, unit FLOPs each.
type refEncoder struct {
	rows        []float32
	units, done int
	unit        int64
	calls       *atomic.Int64 // Advance calls, shared by the encoders of a test
	onAdvance   func()
}

func (e *refEncoder) Cost() int64 { return int64(e.units-e.done) * e.unit }

func (e *refEncoder) Advance(_ *kernels.Pool, flops int64) bool {
	if e.calls != nil {
		e.calls.Add(1)
	}
	if e.onAdvance != nil {
		e.onAdvance()
	}
	e.done = min(e.units, e.done+int(max(1, flops/e.unit)))
	return e.done == e.units
}

func (e *refEncoder) Embeddings() []float32 { return slices.Clone(e.rows) }

// encoderSpec says how the test double of a request's images behaves.
type encoderSpec struct {
	units     int
	unit      int64
	calls     *atomic.Int64 // Advance calls
	starts    *atomic.Int64 // encodings started (cache misses)
	onAdvance func()
}

func (s encoderSpec) image(t testing.TB, rows []float32, key [32]byte, pos int) engine.Image {
	units, unit := max(s.units, 1), max(s.unit, 1)
	return engine.Image{Pos: pos, Len: 16, Key: key, NonCausal: true, Encode: func() engine.Encoder {
		if s.starts != nil {
			s.starts.Add(1)
		}
		return &refEncoder{rows: rows, units: units, unit: unit, calls: s.calls, onAdvance: s.onAdvance}
	}}
}

// request builds a case's prompt from its chunks: text ids, and 16
// positions per image whose rows are the case's embeddings files.
func (f *visionFixture) request(t testing.TB, name string, enc encoderSpec) *engine.Request {
	t.Helper()
	c := f.cases[name]
	if c == nil {
		t.Fatalf("no case %q in reference.json", name)
	}
	req := &engine.Request{Sampling: sampler.Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1}, MaxTokens: 32, IgnoreEOS: true}
	if len(c.Chunks) == 0 {
		req.Prompt = slices.Clone(c.Prompt)
		return req
	}
	img := 0
	for _, ch := range c.Chunks {
		if ch.ImageTokens == 0 {
			req.Prompt = append(req.Prompt, ch.Text...)
			continue
		}
		if ch.ImageTokens != 16 || !ch.NonCausal {
			t.Fatalf("case %s: image chunk of %d tokens, non-causal %v", name, ch.ImageTokens, ch.NonCausal)
		}
		file := c.Embds[img].File
		rows := modeltest.ReadF32(t, filepath.Join(f.dir, file))
		req.Images = append(req.Images, enc.image(t, rows, sha256.Sum256([]byte(file)), len(req.Prompt)))
		req.Prompt = append(req.Prompt, make([]int32, 16)...)
		img++
	}
	if c.Positions > 0 && len(req.Prompt) != c.Positions {
		t.Fatalf("case %s: %d positions, reference.json says %d", name, len(req.Prompt), c.Positions)
	}
	return req
}

// sure is the number of greedy steps a correct engine must reproduce: all
// before the first whose top-1/top-2 margin is below 0.03 (from the steps
// file where reference.json gives no margins: text-only).
func (c *visionCase) sure(steps []float32, vocab int) int {
	margins := c.Margin
	if margins == nil {
		for k := range c.Greedy {
			row := slices.Clone(steps[k*vocab : (k+1)*vocab])
			slices.Sort(row)
			margins = append(margins, float64(row[vocab-1]-row[vocab-2]))
		}
	}
	for i, m := range margins {
		if m < 0.03 {
			return i
		}
	}
	return len(c.Greedy)
}

// teacherForced runs the model directly over the prompt and llama.cpp's
// greedy ids, and returns the largest |Δ| of the log-probabilities at
// every step against the case's steps file.
func (f *visionFixture) teacherForced(t *testing.T, req *engine.Request, c *visionCase) float64 {
	t.Helper()
	net := f.m.Net
	V, E := net.Config.Vocab, net.Config.Embd
	toks := slices.Concat(req.Prompt, c.Greedy[:len(c.Greedy)-1])
	for _, im := range req.Images {
		for j := range im.Len {
			toks[im.Pos+j] = -1 - int32(j) // placeholders: any negative id
		}
	}
	in := &model.SeqInput{Tokens: toks, Cache: kvcache.NewContiguousCache(net.Config.KVShape(), len(toks), false),
		AllLogits: make([]float32, len(toks)*V)}
	for _, im := range req.Images {
		in.Embeds = append(in.Embeds, model.Embeds{Off: im.Pos, Rows: im.Encode().(*refEncoder).rows, NonCausal: true})
	}
	if err := net.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
		t.Fatal(err)
	}
	_ = E
	want := modeltest.ReadF32(t, filepath.Join(f.dir, c.StepsFile))
	worst := 0.0
	for k := range c.Greedy {
		row := in.AllLogits[(len(req.Prompt)-1+k)*V : (len(req.Prompt)+k)*V]
		lp := modeltest.LogSoftmax(row)
		for i, v := range lp {
			worst = max(worst, math.Abs(v-float64(want[k*V+i])))
		}
	}
	return worst
}

// visionOpts are the engine settings of the vision tests.
func visionOpts(mod func(*engine.Options)) engine.Options {
	return opts(func(o *engine.Options) {
		o.ContextLen = 512
		o.EncoderCacheBytes = 1 << 20
		if mod != nil {
			mod(o)
		}
	})
}

// Every case of the fixture: the engine's greedy ids are llama.cpp's (all
// steps before a near-tie), its log-probabilities along them match the
// steps files, and the model's teacher-forced distributions match them at
// every step.
func TestVisionReference(t *testing.T) {
	f := loadVision(t)
	e, rec := newEngine(t, f.m, visionOpts(nil))
	for _, name := range f.names {
		t.Run(name, func(t *testing.T) {
			c := f.cases[name]
			req := f.request(t, name, encoderSpec{})
			req.Sampling.Logprobs, req.Sampling.TopLogprobs = true, 5
			res, outs := collect(t, e, req)
			if res.PromptTokens != len(req.Prompt) {
				t.Errorf("prompt tokens %d, want %d", res.PromptTokens, len(req.Prompt))
			}
			steps := modeltest.ReadF32(t, filepath.Join(f.dir, c.StepsFile))
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
			tf := f.teacherForced(t, req, c)
			t.Logf("%s: greedy %d/%d ids equal (%d required); max |Δlogprob| engine top-5 %.2e, teacher-forced all %d steps %.2e",
				name, countEqual(res.Tokens, c.Greedy), len(c.Greedy), n, engWorst, len(c.Greedy), tf)
			if engWorst > 2e-2 || tf > 2e-2 {
				t.Errorf("log-probabilities off by %.3g (engine), %.3g (teacher-forced): tolerance 2e-2", engWorst, tf)
			}
		})
	}
	defer rec.lock()()
	if rec.encHits+rec.encMisses == 0 {
		t.Error("no encoder-cache lookup counted")
	}
}

func countEqual(a, b []int32) int {
	n := 0
	for n < min(len(a), len(b)) && a[n] == b[n] {
		n++
	}
	return n
}
