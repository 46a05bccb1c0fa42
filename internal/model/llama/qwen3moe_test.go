package llama_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
	"mistralrs/internal/model/llama"
	"mistralrs/internal/model/modeltest"
	"mistralrs/internal/testutil"
)

// topIDs returns the ids of the n largest values, largest first.
func topIDs(x []float64, n int) []int {
	ids := make([]int, len(x))
	for i := range ids {
		ids[i] = i
	}
	sort.SliceStable(ids, func(a, b int) bool { return x[ids[a]] > x[ids[b]] })
	return ids[:n]
}

// TestQwen3MoEReferenceArchs compares with llama.cpp's outputs on the
// qwen3moe models of shared/testdata/reference-archs (see its README for
// the tolerances).
func TestQwen3MoEReferenceArchs(t *testing.T) {
	dir := testutil.SharedFile(t, "testdata", "reference-archs")
	raw, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		File      string       `json:"file"`
		Top10     [][2]float64 `json:"first_step_top10_logprob"`
		Logprobs  string       `json:"first_step_logprobs_file"`
		Greedy    []int32      `json:"greedy_32_tokens"`
		MarginRaw any          `json:"greedy_step_margin"`
	}
	var ref struct {
		PromptTokens []int32          `json:"prompt_tokens"`
		Models       map[string]entry `json:"models"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, name := range []string{"qwen3moe-f32", "qwen3moe-q8_0"} {
		t.Run(name, func(t *testing.T) {
			r, ok := ref.Models[name]
			if !ok {
				t.Fatalf("reference.json has no %s", name)
			}
			margins := parseFloats(t, r.MarginRaw)
			m := modeltest.OpenModel(t, filepath.Join(dir, r.File))
			if c := m.Config; c.Experts != 4 || c.ExpertUsed != 2 || c.ExpertFF != 64 || !c.ExpertNorm || !c.RopeNeox {
				t.Fatalf("config %+v", c)
			}
			want := modeltest.ReadF32(t, filepath.Join(dir, r.Logprobs))
			gen, logits := modeltest.Greedy(t, m, pool, ref.PromptTokens, len(r.Greedy))
			got := modeltest.LogSoftmax(logits)
			d := modeltest.MaxAbsDiff(t, got, want)
			same := 0
			for same < len(gen) && gen[same] == r.Greedy[same] {
				same++
			}
			t.Logf("max |logprob diff| vs llama.cpp %.3g; greedy: first %d of %d ids equal", d, same, len(gen))
			refTop := make([]int, len(r.Top10))
			for i, e := range r.Top10 {
				refTop[i] = int(e[0])
			}
			if name == "qwen3moe-f32" {
				if d > 1e-4 {
					t.Errorf("max |logprob diff| %.3g exceeds 1e-4", d)
				}
				if top := topIDs(got, 10); !slices.Equal(top, refTop) {
					t.Errorf("top-10 %v, llama.cpp %v", top, refTop)
				}
				if !slices.Equal(gen, r.Greedy) {
					t.Errorf("greedy ids\n got %v\nwant %v", gen, r.Greedy)
				}
			} else {
				// F32 activations against llama.cpp's quantized ones.
				if d > 0.25 {
					t.Errorf("max |logprob diff| %.3g exceeds 0.25", d)
				}
				if top := topIDs(got, 1)[0]; top != refTop[0] {
					t.Errorf("first-step top-1 %d, llama.cpp %d", top, refTop[0])
				}
				firstClose := len(margins)
				for i, mg := range margins {
					if mg < 0.3 {
						firstClose = i
						break
					}
				}
				if firstClose == 0 || firstClose > len(gen) {
					t.Fatalf("no usable greedy margins (first below 0.3 at step %d)", firstClose)
				}
				if !slices.Equal(gen[:firstClose], r.Greedy[:firstClose]) {
					t.Errorf("greedy ids before step %d\n got %v\nwant %v", firstClose, gen[:firstClose], r.Greedy[:firstClose])
				}
			}
			if name != "qwen3moe-f32" {
				return
			}
			// The fixture catches routing mistakes (README: 0.78 without
			// renormalisation, 3.95 with one expert): so must this test.
			for _, mut := range []struct {
				name string
				set  func(c *model.Config)
			}{
				{"weights not renormalised", func(c *model.Config) { c.ExpertNorm = false }},
				{"one expert instead of two", func(c *model.Config) { c.ExpertUsed = 1 }},
			} {
				was := m.Config
				mut.set(&m.Config)
				_, logits := modeltest.Greedy(t, m, pool, ref.PromptTokens, 1)
				m.Config = was
				d := modeltest.MaxAbsDiff(t, modeltest.LogSoftmax(logits), want)
				t.Logf("%s: max |logprob diff| %.3g", mut.name, d)
				if d < 0.1 {
					t.Errorf("%s: logprobs still within %.3g of llama.cpp's", mut.name, d)
				}
			}
		})
	}
}

func parseFloats(t *testing.T, v any) []float64 {
	t.Helper()
	var out []float64
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			f, ok := e.(float64)
			if !ok {
				t.Fatalf("margin %v is not a number", e)
			}
			out = append(out, f)
		}
	case string: // a JSON list stored as a string
		if err := json.Unmarshal([]byte(x), &out); err != nil {
			t.Fatalf("greedy_step_margin: %v", err)
		}
	default:
		t.Fatalf("greedy_step_margin has type %T", v)
	}
	return out
}

// moeFixture is a small qwen3moe of 4 experts, 2 used. Rows are multiples
// of 256 where the weight type needs it.
var moeFixture = model.RandomConfig{Arch: "qwen3moe", Layers: 2, Embd: 256, FF: 512, Heads: 4, KVHeads: 2, HeadDim: 64,
	Vocab: 96, RopeBase: 1e6, RMSEps: 1e-6, Experts: 4, ExpertUsed: 2, ExpertFF: 256, Seed: 19}

// moeRef is the float64 forward pass of a mixture-of-experts model:
// modeltest.Ref's decoder with, in each block, the experts (top used of the
// softmax over the router, weights renormalised when norm) and, when the
// file has one (qwen2moe), the shared expert behind its sigmoid gate. It
// returns every position's logits and the smallest gap between the
// used-th and the next expert probability of any routing decision.
func moeRef(t testing.TB, r *modeltest.Ref, tokens []int32, used int, norm bool) ([][]float64, float64) {
	c := r.Cfg
	E, X, XF := c.Embd, c.Experts, c.ExpertFF
	gap := math.Inf(1)
	logits := r.Forward(t, tokens, func(p string) func(h []float64) []float64 {
		router := r.Tensor(t, p+"ffn_gate_inp.weight")
		wg, wu, wd := r.Tensor(t, p+"ffn_gate_exps.weight"), r.Tensor(t, p+"ffn_up_exps.weight"), r.Tensor(t, p+"ffn_down_exps.weight")
		shInp, shG, shU, shD := r.Maybe(p+"ffn_gate_inp_shexp.weight"), r.Maybe(p+"ffn_gate_shexp.weight"), r.Maybe(p+"ffn_up_shexp.weight"), r.Maybe(p+"ffn_down_shexp.weight")
		// mlp is down(silu(gate·h) ⊙ up·h) of width n.
		mlp := func(g, u, d []float64, n int, h []float64) []float64 {
			gg, uu := modeltest.MatVec(g, h, n), modeltest.MatVec(u, h, n)
			for j := range gg {
				gg[j] = gg[j] / (1 + math.Exp(-gg[j])) * uu[j]
			}
			return modeltest.MatVec(d, gg, E)
		}
		return func(h []float64) []float64 {
			out := make([]float64, E)
			prob := modeltest.MatVec(router, h, X)
			mx := slices.Max(prob)
			var sum float64
			for e := range prob {
				prob[e] = math.Exp(prob[e] - mx)
				sum += prob[e]
			}
			order := make([]int, X)
			for e := range order {
				prob[e] /= sum
				order[e] = e
			}
			sort.SliceStable(order, func(a, b int) bool { return prob[order[a]] > prob[order[b]] })
			if used < X {
				gap = math.Min(gap, prob[order[used-1]]-prob[order[used]])
			}
			var wsum float64
			for _, e := range order[:used] {
				wsum += prob[e]
			}
			for _, e := range order[:used] {
				w := prob[e]
				if norm {
					w /= wsum
				}
				dn := mlp(wg[e*XF*E:(e+1)*XF*E], wu[e*XF*E:(e+1)*XF*E], wd[e*E*XF:(e+1)*E*XF], XF, h)
				for d := range E {
					out[d] += w * dn[d]
				}
			}
			if shInp != nil { // qwen2moe's shared expert, gated by a sigmoid
				var z float64
				for d := range E {
					z += shInp[d] * h[d]
				}
				gate := 1 / (1 + math.Exp(-z))
				dn := mlp(shG, shU, shD, c.FF, h)
				for d := range E {
					out[d] += gate * dn[d]
				}
			}
			return out
		}
	})
	return logits, gap
}

// TestQwen3MoEMatchesReference compares prefill and decode logits of
// random qwen3moe models with the float64 oracle, and checks that the
// oracle tells routing mistakes apart at that tolerance.
func TestQwen3MoEMatchesReference(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, tied := range []bool{false, true} {
		for _, typ := range []kernels.Type{kernels.F32, kernels.Q8_0, kernels.Q4_K} {
			// Tied output only in F32: it changes the random weights, and the
			// routing of this seed then has a near tie (gap 1.4e-3), fine for
			// F32 but not for quantized activations.
			if tied && typ != kernels.F32 || (testing.Short() || modeltest.RaceEnabled) && typ == kernels.Q4_K {
				continue
			}
			t.Run(fmt.Sprintf("%s/tied=%v", typ, tied), func(t *testing.T) {
				cfg := moeFixture
				cfg.Type, cfg.Tied = typ, tied
				m, f := modeltest.LoadFixture(t, cfg)
				if _, ok := m.Network().(*llama.MoEModel); !ok {
					t.Fatalf("loaded as %T", m.Network())
				}
				if m.Config.TiedOutput != tied {
					t.Errorf("TiedOutput %v", m.Config.TiedOutput)
				}
				ref := &modeltest.Ref{Cfg: cfg.WithDefaults(), F: f, Neox: true}
				want, gap := moeRef(t, ref, modeltest.FixtureTokens, 2, true)
				t.Logf("smallest gap between the 2nd and 3rd expert probability: %.3g", gap)
				// Quantized weights move the router's input a little: a
				// near tie would route differently from the oracle.
				if minGap := map[bool]float64{true: 1e-4, false: 1e-2}[typ == kernels.F32]; gap < minGap {
					t.Fatalf("the fixture has a near tie between experts (gap %.3g): choose another seed", gap)
				}
				V := m.Config.Vocab
				tol := modeltest.Tolerance(typ)
				cache := modeltest.NewContiguous(m.Config, 0)
				const prefill = 6
				all := make([]float32, prefill*V)
				err := m.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{{Tokens: modeltest.FixtureTokens[:prefill], Cache: cache, AllLogits: all}}})
				if err != nil {
					t.Fatal(err)
				}
				got := make([][]float32, len(modeltest.FixtureTokens))
				for i := range prefill {
					got[i] = all[i*V : (i+1)*V]
				}
				for pos := prefill; pos < len(modeltest.FixtureTokens); pos++ {
					got[pos] = make([]float32, V)
					err := m.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{{Tokens: modeltest.FixtureTokens[pos : pos+1], Pos: pos, Cache: cache, Logits: got[pos]}}})
					if err != nil {
						t.Fatal(err)
					}
				}
				// worst is max |diff| / max(1, max |logit|) over all positions.
				worst := func(want [][]float64) float64 {
					var w float64
					for pos := range got {
						d, s := modeltest.MaxDiff(got[pos], want[pos])
						w = math.Max(w, d/math.Max(s, 1))
					}
					return w
				}
				w := worst(want)
				t.Logf("max |diff|/max(1,max |logit|) = %.3g (tolerance %.3g)", w, tol)
				if w > tol {
					t.Errorf("logits differ from the reference by %.3g, tolerance %.3g", w, tol)
				}
				// At F32's tolerance the comparison fails for an oracle that
				// routes differently.
				if typ != kernels.F32 {
					return
				}
				for _, mut := range []struct {
					name string
					used int
					norm bool
				}{{"weights not renormalised", 2, false}, {"one expert", 1, true}} {
					bad, _ := moeRef(t, ref, modeltest.FixtureTokens, mut.used, mut.norm)
					if w := worst(bad); w <= 2*tol {
						t.Errorf("%s: the model is within %.3g of a wrong oracle", mut.name, w)
					}
				}
			})
		}
	}
}

// sameResult compares a token's result alone and in a batch: the same bits
// where MatMul computes every row alike whatever the batch (the assembly
// kernels, all types); the pure-Go F32 kernels sum a row in a different
// order when they take four rows together, so there only within 1e-5.
func sameResult(alone, batched float32) bool {
	if kernels.SIMD() {
		return math.Float32bits(alone) == math.Float32bits(batched)
	}
	return math.Abs(float64(alone-batched)) <= 1e-5*math.Max(1, math.Abs(float64(alone)))
}

// TestQwen3MoEBatchBits: a token's logits have the same bits whether it is
// decoded alone or goes through the experts with other tokens (prefill
// chunks, several sequences in one batch): grouping tokens by expert
// changes no operation of any one token.
func TestQwen3MoEBatchBits(t *testing.T) {
	t.Logf("assembly kernels %v: bits compared %v", kernels.SIMD(), kernels.SIMD())
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, typ := range []kernels.Type{kernels.F32, kernels.Q8_0} {
		t.Run(typ.String(), func(t *testing.T) {
			cfg := moeFixture
			cfg.Type = typ
			m, _ := modeltest.LoadFixture(t, cfg)
			V := m.Config.Vocab
			seqs := [][]int32{
				{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41},
				{2, 4, 6, 8, 10, 12, 14, 16},
				{3, 6, 9, 12, 15, 18, 21, 24, 27},
			}
			// Alone, one token per step: every position's logits.
			alone := make([][]float32, len(seqs))
			for i, toks := range seqs {
				cache := modeltest.NewContiguous(m.Config, 64)
				alone[i] = make([]float32, len(toks)*V)
				for pos := range toks {
					err := m.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{{Tokens: toks[pos : pos+1], Pos: pos, Cache: cache, Logits: alone[i][pos*V : (pos+1)*V]}}})
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			// Together, in chunks of these sizes per step (0: idle).
			steps := [][]int{{5, 1, 4, 1}, {3, 3, 1, 1}, {0, 6, 2, 1}}
			caches := make([]model.KVCache, len(seqs))
			pos := make([]int, len(seqs))
			for i := range seqs {
				caches[i] = modeltest.NewContiguous(m.Config, 64)
			}
			most := 0
			for s := range steps[0] {
				var b model.Batch
				var outs [][]float32
				for i, toks := range seqs {
					n := steps[i][s]
					if n == 0 {
						continue
					}
					out := make([]float32, n*V)
					b.Seqs = append(b.Seqs, &model.SeqInput{Tokens: toks[pos[i] : pos[i]+n], Pos: pos[i], Cache: caches[i], AllLogits: out})
					outs = append(outs, out)
				}
				if err := m.Forward(pool, &b); err != nil {
					t.Fatal(err)
				}
				most = max(most, modeltest.StepTokens(m))
				for j, sq := range b.Seqs {
					i := slices.IndexFunc(caches, func(c model.KVCache) bool { return c == sq.Cache })
					for k := range sq.Tokens {
						p := sq.Pos + k
						for v := range V {
							a, g := alone[i][p*V+v], outs[j][k*V+v]
							if !sameResult(a, g) {
								t.Fatalf("sequence %d position %d logit %d: alone %v, batched %v", i, p, v, a, g)
							}
						}
					}
					pos[i] += len(sq.Tokens)
				}
			}
			if most < 8 {
				t.Errorf("largest step had %d tokens", most)
			}
		})
	}
}

// TestQwen3MoEBadFiles: missing or misshapen expert tensors and bad expert
// counts give one error naming the file and the tensor or key.
func TestQwen3MoEBadFiles(t *testing.T) {
	cfg := moeFixture
	cfg.Type = kernels.F32
	f := modeltest.BuildFixture(t, cfg)
	if _, err := model.Load(f); err != nil {
		t.Fatal(err)
	}
	gate, _ := f.Tensor("blk.1.ffn_gate_exps.weight")
	short := *gate
	short.Dims = []uint64{gate.Dims[0], gate.Dims[1], 3}
	short.Data = gate.Data[:len(gate.Data)/4*3]
	// A shared expert's gate (qwen2moe's), in place of the optional output matrix.
	shexp := gguf.TensorInfo{Name: "blk.0.ffn_gate_shexp.weight", Type: kernels.F32,
		Dims: []uint64{uint64(cfg.Embd), uint64(cfg.FF)}, Data: make([]byte, 4*cfg.Embd*cfg.FF)}
	cases := []struct {
		name string
		e    modeltest.Edit
		want []string // in the error, besides the file's path
	}{
		{"no expert_count", modeltest.Edit{KV: map[string]any{"qwen3moe.expert_count": nil}}, []string{"qwen3moe.expert_count"}},
		{"expert_count 0", modeltest.Edit{KV: map[string]any{"qwen3moe.expert_count": uint32(0)}}, []string{"qwen3moe.expert_count", "0"}},
		{"expert_count absurd", modeltest.Edit{KV: map[string]any{"qwen3moe.expert_count": uint32(1 << 30)}}, []string{"qwen3moe.expert_count"}},
		{"used > count", modeltest.Edit{KV: map[string]any{"qwen3moe.expert_used_count": uint32(5)}}, []string{"qwen3moe.expert_used_count", "5"}},
		{"no expert width", modeltest.Edit{KV: map[string]any{"qwen3moe.expert_feed_forward_length": nil}}, []string{"expert_feed_forward_length"}},
		{"count differs from tensors", modeltest.Edit{KV: map[string]any{"qwen3moe.expert_count": uint32(8)}}, []string{"blk.0.ffn_gate_inp.weight", "shape"}},
		{"missing expert tensor", modeltest.Edit{Tensors: map[string]*gguf.TensorInfo{"blk.1.ffn_down_exps.weight": nil}}, []string{"blk.1.ffn_down_exps.weight", "missing"}},
		{"wrong expert shape", modeltest.Edit{Tensors: map[string]*gguf.TensorInfo{"blk.1.ffn_gate_exps.weight": &short}}, []string{"blk.1.ffn_gate_exps.weight", "shape"}},
		{"shared expert", modeltest.Edit{Tensors: map[string]*gguf.TensorInfo{"output.weight": &shexp}}, []string{"blk.0", "shared-expert"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := modeltest.Rewrite(t, f, c.e)
			_, err := model.Load(bad)
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			t.Log(msg)
			for _, w := range append(c.want, bad.Path) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not name %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error of several lines: %q", msg)
			}
		})
	}
}

// moeBenchConfigs are a qwen3moe of realistic shape (12 layers, 768 wide,
// 8 experts of width 768, 2 used) and the dense llama with the same active
// parameters (an MLP of width 2×768), both Q8_0.
var moeBenchConfigs = []struct {
	name string
	cfg  model.RandomConfig
}{
	{"qwen3moe-8x768-top2", model.RandomConfig{Arch: "qwen3moe", Layers: 12, Embd: 768, FF: 1536, Heads: 12, KVHeads: 4, HeadDim: 64,
		Vocab: 4096, Experts: 8, ExpertUsed: 2, ExpertFF: 768, Type: kernels.Q8_0, Seed: 5}},
	{"llama-dense-ff1536", model.RandomConfig{Arch: "llama", Layers: 12, Embd: 768, FF: 1536, Heads: 12, KVHeads: 4, HeadDim: 64,
		Vocab: 4096, Type: kernels.Q8_0, Seed: 5}},
}

// moePhases are the measured workloads, each returning the tokens it
// processed and the time they took: prefill of 64 tokens (pp64), decoding
// 32 tokens one at a time after them (tg32), and 16 steps decoding 8
// sequences together (tg8x16).
var moePhases = []struct {
	name string
	run  func(tb testing.TB, m *model.Model, pool *kernels.Pool) (int, time.Duration)
}{
	{"pp64", func(tb testing.TB, m *model.Model, pool *kernels.Pool) (int, time.Duration) {
		prompt := benchPrompt(m)
		cache := modeltest.NewContiguous(m.Config, 128)
		t0 := time.Now()
		benchForward(tb, m, pool, &model.Batch{Seqs: []*model.SeqInput{{Tokens: prompt, Cache: cache, Logits: make([]float32, m.Config.Vocab)}}})
		return len(prompt), time.Since(t0)
	}},
	{"tg32", func(tb testing.TB, m *model.Model, pool *kernels.Pool) (int, time.Duration) {
		return benchDecode(tb, m, pool, 1, 32)
	}},
	{"tg8x16", func(tb testing.TB, m *model.Model, pool *kernels.Pool) (int, time.Duration) {
		return benchDecode(tb, m, pool, 8, 16)
	}},
}

func benchPrompt(m *model.Model) []int32 {
	prompt := make([]int32, 64)
	for i := range prompt {
		prompt[i] = int32((i*37 + 11) % m.Config.Vocab)
	}
	return prompt
}

func benchForward(tb testing.TB, m *model.Model, pool *kernels.Pool, b *model.Batch) {
	if err := m.Forward(pool, b); err != nil {
		tb.Fatal(err)
	}
}

// benchDecode prefills seqs sequences (not timed) and decodes steps greedy
// tokens for each of them together.
func benchDecode(tb testing.TB, m *model.Model, pool *kernels.Pool, seqs, steps int) (int, time.Duration) {
	prompt := benchPrompt(m)
	var batch model.Batch
	for s := range seqs {
		cache := modeltest.NewContiguous(m.Config, 128)
		logits := make([]float32, m.Config.Vocab)
		benchForward(tb, m, pool, &model.Batch{Seqs: []*model.SeqInput{{Tokens: prompt[s:], Cache: cache, Logits: logits}}})
		batch.Seqs = append(batch.Seqs, &model.SeqInput{Tokens: []int32{0}, Pos: len(prompt) - s, Cache: cache, Logits: logits})
	}
	t0 := time.Now()
	for range steps {
		for _, seq := range batch.Seqs {
			seq.Tokens[0] = modeltest.Argmax(seq.Logits)
		}
		benchForward(tb, m, pool, &batch)
		for _, seq := range batch.Seqs {
			seq.Pos++
		}
	}
	return seqs * steps, time.Since(t0)
}

// BenchmarkMoE measures the phases with 2 threads for the MoE model and its
// dense peer, one after the other (tok/s over the timed parts: a decode
// phase's prefill is not timed).
func BenchmarkMoE(b *testing.B) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, bc := range moeBenchConfigs {
		m, _ := modeltest.LoadFixture(b, bc.cfg)
		for _, ph := range moePhases {
			b.Run(bc.name+"/"+ph.name, func(b *testing.B) {
				tokens, took := 0, time.Duration(0)
				for b.Loop() {
					n, d := ph.run(b, m, pool)
					tokens, took = tokens+n, took+d
				}
				b.ReportMetric(float64(tokens)/took.Seconds(), "tok/s")
			})
		}
	}
}

// BenchmarkMoEVersusDense runs each phase on the MoE model and on the dense
// one in turn, b.N times, and reports the best tokens/s of each and the MoE
// model's time per token relative to the dense model's (best against best:
// other processes on a shared machine only ever slow a run down).
func BenchmarkMoEVersusDense(b *testing.B) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	var models [2]*model.Model
	for i, bc := range moeBenchConfigs {
		models[i], _ = modeltest.LoadFixture(b, bc.cfg)
	}
	for _, ph := range moePhases {
		b.Run(ph.name, func(b *testing.B) {
			var best [2]float64 // tokens/s
			for b.Loop() {
				for i, m := range models {
					n, d := ph.run(b, m, pool)
					best[i] = max(best[i], float64(n)/d.Seconds())
				}
			}
			b.ReportMetric(best[0], "moe-tok/s")
			b.ReportMetric(best[1], "dense-tok/s")
			b.ReportMetric(best[1]/best[0], "moe/dense-time")
		})
	}
}

// TestDecodeAllocs checks that a steady-state qwen3moe decode step does not
// allocate in the model code.
func TestDecodeAllocs(t *testing.T) { modeltest.DecodeAllocs(t, moeFixture) }
