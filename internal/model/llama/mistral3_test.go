package llama_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/demo"
	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
	"mistralrs/internal/model/modeltest"
)

var mistral3Write = flag.String("mistral3.write", "", "write the mistral3 fixture models into this directory (for llama.cpp)")

// mistral3Cases are the random mistral3 models that testdata/mistral3
// holds llama.cpp's outputs for. "temp-yarn" has every mistral3 key: the
// attention temperature over floors of 8 positions (so the 31-token prompt
// and 32 greedy steps cross 7 floors) and YaRN scaling with betas and a
// log multiplier whose ramp and magnitude differ from the defaults'
// (rope base 1000, original context 8: the ramp runs over pairs 2 to 8 of
// 16). "plain" has none of them, and an attn_output bias (oBias).
var mistral3Cases = []struct {
	name  string
	cfg   model.RandomConfig
	oBias bool
}{
	{"temp-yarn", model.RandomConfig{Arch: "mistral3", Layers: 2, Embd: 128, FF: 128, Heads: 4, KVHeads: 2,
		Vocab: 512, ContextLen: 512, RopeBase: 1000, Type: kernels.F32, Seed: 71,
		RopeScale: 4, RopeScaling: "yarn", OrigCtx: 8, AttnTempScale: 0.3,
		YarnBetaFast: 0.5, YarnBetaSlow: 0.05, YarnLogMul: 0.5}, false},
	{"plain", model.RandomConfig{Arch: "mistral3", Layers: 2, Embd: 128, FF: 128, Heads: 4, KVHeads: 2,
		Vocab: 512, ContextLen: 512, RopeBase: 1e6, Type: kernels.F32, Seed: 72}, true},
}

// mistral3Prompt is the reference prompt: the ids of "Once upon a time,
// there was a little girl named Lily. She loved to play in the park with
// her friends." in the stories260K vocabulary, BOS first (as
// ../shared/testdata/reference-archs/reference.json lists them).
var mistral3Prompt = []int32{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 322, 265, 282, 295, 433, 335, 311, 374, 419, 426}

// mistral3Model writes a fixture model: the random weights of cfg, the
// stories260K tokenizer, the output rows of tokens 0-258 (unknown, BOS,
// EOS, bytes) scaled by 0.25 so that greedy runs do not pick them
// (llama-server drops the probabilities of a step that ends inside a UTF-8
// sequence) and the output norm's gains by 8, which spreads the logits as
// a trained model's are spread. With oBias each block gets an attn_output
// bias of 0.5·sin(1 + i + 7·block).
func mistral3Model(name string, cfg model.RandomConfig, oBias bool) ([]byte, error) {
	w := gguf.NewWriter()
	if err := model.BuildRandom(cfg, w); err != nil {
		return nil, err
	}
	for l := 0; oBias && l < cfg.Layers; l++ {
		b := make([]byte, 4*cfg.Embd)
		for i := range cfg.Embd {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(0.5*math.Sin(float64(1+i+7*l)))))
		}
		if err := w.AddTensor(fmt.Sprintf("blk.%d.attn_output.bias", l), kernels.F32, []uint64{uint64(cfg.Embd)}, b); err != nil {
			return nil, err
		}
	}
	w.AddKV("general.name", "random mistral3 fixture "+name)
	stories, err := gguf.Parse("stories260K", demo.GGUF())
	if err != nil {
		return nil, err
	}
	for _, kv := range stories.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			w.AddKV(kv.Key, kv.Value)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	f, err := gguf.Parse(name, b)
	if err != nil {
		return nil, err
	}
	out, ok1 := f.Tensor("output.weight")
	norm, ok2 := f.Tensor("output_norm.weight")
	if !ok1 || !ok2 || out.Type != kernels.F32 || norm.Type != kernels.F32 {
		return nil, fmt.Errorf("%s: no F32 output.weight and output_norm.weight", name)
	}
	n := int(out.Dims[0])
	scaleF32(out.Data[:259*4*n], 0.25)
	scaleF32(norm.Data, 8)
	return b, nil
}

// scaleF32 multiplies the little-endian float32 values of b by k in place.
func scaleF32(b []byte, k float32) {
	for i := 0; i+4 <= len(b); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v*k))
	}
}

// mistral3Ref is what testdata/mistral3/NAME.json holds (see its README).
type mistral3Ref struct {
	Model struct {
		Bytes  int    `json:"bytes"`
		SHA256 string `json:"sha256"`
	} `json:"model"`
	Prompt []int32 `json:"prompt"`
	// FirstStepLogprobs: llama.cpp's log-probabilities after the prompt, by id.
	FirstStepLogprobs []float32 `json:"first_step_logprobs"`
	Greedy            []int32   `json:"greedy_ids"`
	// GreedyTop2 is, per greedy step, the two most probable [id, logprob].
	GreedyTop2 [][2][2]float64 `json:"greedy_top2"`
}

// TestMistral3FixtureWrite writes the fixture models with -mistral3.write.
func TestMistral3FixtureWrite(t *testing.T) {
	if *mistral3Write == "" {
		t.Skip("-mistral3.write DIR writes the fixture models")
	}
	for _, c := range mistral3Cases {
		b, err := mistral3Model(c.name, c.cfg, c.oBias)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(*mistral3Write, "mistral3-"+c.name+".gguf")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		t.Logf("%s: %d bytes, sha256 %s", path, len(b), hex.EncodeToString(sum[:]))
	}
}

// loadMistral3 regenerates case c, checks it is the model llama.cpp ran and
// loads it.
func loadMistral3(t *testing.T, name string, cfg model.RandomConfig, oBias bool) (*model.Model, *gguf.File, mistral3Ref) {
	t.Helper()
	var ref mistral3Ref
	raw, err := os.ReadFile(filepath.Join("testdata", "mistral3", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	b, err := mistral3Model(name, cfg, oBias)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != ref.Model.SHA256 || len(b) != ref.Model.Bytes {
		t.Fatalf("the generator no longer makes the model llama.cpp ran (%d bytes, sha256 %x; want %d, %s)", len(b), sum, ref.Model.Bytes, ref.Model.SHA256)
	}
	f, err := gguf.Parse(name, b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return m, f, ref
}

// mistral3Run is greedy decoding of ref's prompt for len(ref.Greedy)
// steps: the ids and the logits before each step.
func mistral3Run(t *testing.T, m *model.Model, p *kernels.Pool, prompt []int32, n int) ([]int32, [][]float32) {
	t.Helper()
	cache := modeltest.NewContiguous(m.Config, len(prompt)+n)
	V := m.Config.Vocab
	var ids []int32
	var steps [][]float32
	toks := prompt
	for range n {
		logits := make([]float32, V)
		err := m.Forward(p, &model.Batch{Seqs: []*model.SeqInput{{Tokens: toks, Pos: cache.Len(), Cache: cache, Logits: logits}}})
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, logits)
		ids = append(ids, modeltest.Argmax(logits))
		toks = ids[len(ids)-1:]
	}
	return ids, steps
}

// mistral3Diff is the largest |logprob difference| to llama.cpp's: over
// the whole first-step distribution and the two most probable ids of each
// greedy step.
func mistral3Diff(ref mistral3Ref, steps [][]float32) float64 {
	var worst float64
	for i, v := range modeltest.LogSoftmax(steps[0]) {
		worst = math.Max(worst, math.Abs(v-float64(ref.FirstStepLogprobs[i])))
	}
	for k, top := range ref.GreedyTop2 {
		if k >= len(steps) {
			break
		}
		lp := modeltest.LogSoftmax(steps[k])
		for _, e := range top {
			worst = math.Max(worst, math.Abs(lp[int(e[0])]-e[1]))
		}
	}
	return worst
}

// mistral3Tol is the reference-archs README's tolerance for F32 models
// against llama.cpp's log-probabilities.
const mistral3Tol = 1e-4

// TestMistral3LlamaCpp: random mistral3 models give llama.cpp's greedy ids
// and log-probabilities; without the temperature, or with the default YaRN
// correction range or magnitude, they do not.
func TestMistral3LlamaCpp(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, c := range mistral3Cases {
		t.Run(c.name, func(t *testing.T) {
			m, f, ref := loadMistral3(t, c.name, c.cfg, c.oBias)
			if len(ref.Prompt) != len(mistral3Prompt) || len(ref.FirstStepLogprobs) != m.Config.Vocab || len(ref.GreedyTop2) != len(ref.Greedy) {
				t.Fatalf("reference: %d prompt ids, %d logprobs, %d greedy ids, %d top-2 steps", len(ref.Prompt), len(ref.FirstStepLogprobs), len(ref.Greedy), len(ref.GreedyTop2))
			}
			ids, steps := mistral3Run(t, m, pool, ref.Prompt, len(ref.Greedy))
			if n := modeltest.XrefSameGreedy(ids, ref.Greedy); n != len(ref.Greedy) {
				t.Errorf("greedy ids differ from llama.cpp's from step %d:\n got %v\nwant %v", n, ids, ref.Greedy)
			}
			d := mistral3Diff(ref, steps)
			t.Logf("max |Δlogprob| vs llama.cpp %.3g (tolerance %g)", d, mistral3Tol)
			if d > mistral3Tol {
				t.Errorf("log-probabilities differ from llama.cpp's by %.3g, tolerance %g", d, mistral3Tol)
			}
			// The reference tells each mistral3 key's effect, and the
			// bias's, apart.
			type mutation struct {
				what string
				edit modeltest.Edit
			}
			var muts []mutation
			if c.cfg.AttnTempScale != 0 {
				muts = append(muts,
					mutation{"no attention temperature", modeltest.Edit{KV: map[string]any{"mistral3.attention.temperature_scale": nil}}},
					mutation{"default YaRN betas", modeltest.Edit{KV: map[string]any{"mistral3.rope.scaling.yarn_beta_fast": nil, "mistral3.rope.scaling.yarn_beta_slow": nil}}},
					mutation{"no YaRN log multiplier", modeltest.Edit{KV: map[string]any{"mistral3.rope.scaling.yarn_log_multiplier": nil}}})
			}
			if c.oBias {
				muts = append(muts, mutation{"no attn_output bias", modeltest.Edit{Tensors: map[string]*gguf.TensorInfo{
					"blk.0.attn_output.bias": nil, "blk.1.attn_output.bias": nil}}})
			}
			for _, mut := range muts {
				bad, err := model.Load(modeltest.Rewrite(t, f, mut.edit))
				if err != nil {
					t.Fatal(err)
				}
				_, badSteps := mistral3Run(t, bad, pool, ref.Prompt, len(ref.Greedy))
				if d := mistral3Diff(ref, badSteps); d <= 100*mistral3Tol {
					t.Errorf("%s: within %.3g of llama.cpp", mut.what, d)
				} else {
					t.Logf("%s: %.3g from llama.cpp", mut.what, d)
				}
			}
		})
	}
}

// TestMistral3Config: mistral3's keys land in the config, and what we
// cannot compute as llama.cpp does is refused with the key or tensor named.
func TestMistral3Config(t *testing.T) {
	c := mistral3Cases[0]
	b, err := mistral3Model(c.name, c.cfg, c.oBias)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(c.name, b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	got := m.Config
	if got.AttnTempScale != float64(float32(0.3)) || got.AttnTempFloor != 8 || got.RopeOrigCtx != 8 || got.RopeScaling != "yarn" ||
		got.RopeScale != 4 || got.YarnBetaFast != 0.5 || got.YarnBetaSlow != float64(float32(0.05)) || got.YarnLogMul != 0.5 || got.RopeNeox {
		t.Fatalf("config %+v", got)
	}
	plain, _ := modeltest.LoadFixture(t, mistral3Cases[1].cfg)
	if pc := plain.Config; pc.AttnTempScale != 0 || pc.AttnTempFloor != 0 || pc.RopeScaling != "none" || pc.YarnBetaFast != 32 || pc.YarnBetaSlow != 1 {
		t.Fatalf("plain config %+v", pc)
	}
	for _, bad := range []struct {
		edit modeltest.Edit
		want string
	}{
		{modeltest.Edit{KV: map[string]any{"mistral3.rope.scaling.original_context_length": uint32(0)}}, "original_context_length"},
		{modeltest.Edit{KV: map[string]any{"mistral3.attention.temperature_scale": float32(math.NaN())}}, "temperature_scale"},
		{modeltest.Edit{KV: map[string]any{"mistral3.rope.scaling.yarn_beta_fast": float32(0)}}, "yarn_beta_fast"},
		{modeltest.Edit{KV: map[string]any{"mistral3.rope.scaling.yarn_log_multiplier": float32(-1)}}, "yarn_log_multiplier"},
		{modeltest.Edit{KV: map[string]any{"mistral3.rope.scaling.attn_factor": float32(1.5)}}, "attn_factor"},
		{modeltest.Edit{KV: map[string]any{"mistral3.rope.dimension_count": uint32(16)}}, "rope.dimension_count"},
		{modeltest.Edit{KV: map[string]any{"mistral3.expert_count": uint32(4)}}, "expert_count"},
	} {
		e := bad.edit
		_, err := model.Load(modeltest.Rewrite(t, f, e))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: error %v, want one naming %s", e.KV, err, bad.want)
		}
	}
	// A per-block tensor llama.cpp's mistral3 reads differently is refused.
	norm, _ := f.Tensor("blk.0.attn_norm.weight")
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		w.AddKV(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddTensor("blk.1.ffn_up.bias", kernels.F32, []uint64{128}, norm.Data); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	extra, err := gguf.Parse("extra", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(extra); err == nil || !strings.Contains(err.Error(), "blk.1.ffn_up.bias") {
		t.Errorf("an MLP bias: error %v", err)
	}
}

// TestMistral3Random: the random builder refuses what mistral3 lacks.
func TestMistral3Random(t *testing.T) {
	base := mistral3Cases[1].cfg
	for _, bad := range []func(c *model.RandomConfig){
		func(c *model.RandomConfig) { c.Experts = 4 },
		func(c *model.RandomConfig) { c.YarnBetaFast = 4 }, // without yarn scaling
	} {
		cfg := base
		bad(&cfg)
		if err := model.BuildRandom(cfg, gguf.NewWriter()); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// TestMistral3Batched: with the attention temperature, sequences at
// different positions in one step get the logits they get alone (each
// token's factor is its own position's).
func TestMistral3Batched(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	c := mistral3Cases[0]
	m, _, _ := loadMistral3(t, c.name, c.cfg, c.oBias)
	runs := []modeltest.SeqRun{
		{Tokens: mistral3Prompt, Steps: []int{5, 9, 1, 12, 1, 3}},
		{Tokens: mistral3Prompt[3:], Steps: []int{13, 0, 7, 1, 2, 1}},
	}
	alone := modeltest.RunBatched(t, m, pool, runs, false)
	together := modeltest.RunBatched(t, m, pool, runs, true)
	for i := range runs {
		for s := range alone[i] {
			for j, v := range alone[i][s] {
				if !sameResult(v, together[i][s][j]) {
					t.Fatalf("sequence %d, step %d, logit %d: alone %v, batched %v", i, s, j, v, together[i][s][j])
				}
			}
		}
	}
}
