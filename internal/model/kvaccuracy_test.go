package model_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/model"
	"mistralrs/internal/model/modeltest"
	"mistralrs/internal/testutil"
)

// kvAccuracyGen is the number of next-token distributions compared per
// model and depth.
const kvAccuracyGen = 48

// kvBounds are the stated tolerances of TestKVTypeAccuracy, per group of
// models and type: the least greedy agreement with f32 (over the group's
// steps at one depth) and the largest mean KL divergence (nats) of the
// next-token distribution from f32's. Measured (docs/performance.md, "KV
// cache types") and set with margin: 3-10 times the measured KL, a few
// points under the measured agreement. The Q8_0-weight model quantizes
// its activations to 8 bits in every MatMul, which turns any change of
// attention's output into a KL of ~6e-4 even with f16: its bounds are
// that floor's.
var kvBounds = map[string]map[kvcache.Type]struct{ agree, kl float64 }{
	"f32 weights": {
		kvcache.F16:    {0.98, 1e-6},
		kvcache.BF16:   {0.97, 3e-5},
		kvcache.Q8_0:   {0.95, 3e-4},
		kvcache.F8E4M3: {0.93, 5e-3},
		kvcache.Q4_0:   {0.80, 5e-2},
	},
	"q8_0 weights": {
		kvcache.F16:    {0.80, 5e-3},
		kvcache.BF16:   {0.80, 5e-3},
		kvcache.Q8_0:   {0.80, 5e-3},
		kvcache.F8E4M3: {0.80, 1e-2},
		kvcache.Q4_0:   {0.75, 1e-1},
	},
}

// kvRefModel is a reference model and its prompt.
type kvRefModel struct {
	name, path, group string
	prompt            []int32
}

func kvRefModels(t *testing.T) []kvRefModel {
	var out []kvRefModel
	for _, set := range []struct {
		dir   string
		files []string
	}{
		{"reference", []string{"tiny-f32.gguf"}},
		{"reference-archs", []string{"llama-kq-q8_0.gguf", "qwen3moe-f32.gguf", "gemma3-f32.gguf", "phi3-f32.gguf"}},
	} {
		dir := testutil.SharedFile(t, "testdata", set.dir)
		raw, err := os.ReadFile(filepath.Join(dir, "reference.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ref struct {
			PromptTokens []int32 `json:"prompt_tokens"`
		}
		if err := json.Unmarshal(raw, &ref); err != nil {
			t.Fatal(err)
		}
		for _, f := range set.files {
			group := "f32 weights"
			if strings.Contains(f, "q8_0") {
				group = "q8_0 weights"
			}
			out = append(out, kvRefModel{strings.TrimSuffix(f, ".gguf"), filepath.Join(dir, f), group, ref.PromptTokens})
		}
	}
	return out
}

// teacherForced returns the next-token logits after the prompt and after
// each token of path (all but its last), with keys and values stored as
// kt/vt in a paged cache, after depth random tokens of context.
func teacherForced(t *testing.T, m *model.Model, pool *kernels.Pool, ctx []int32, path []int32, kt, vt kvcache.Type) [][]float32 {
	t.Helper()
	n := len(ctx) + len(path)
	cache := kvcache.NewTypedPool(m.Config.KVShape(), 32, (n+31)/32, kt, vt).NewSeq()
	var out [][]float32
	step := func(toks []int32, pos int) {
		logits := make([]float32, m.Config.Vocab)
		in := &model.SeqInput{Tokens: toks, Pos: pos, Cache: cache, Logits: logits}
		if err := m.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
			t.Fatal(err)
		}
		out = append(out, logits)
	}
	step(ctx, 0)
	for i, tok := range path[:len(path)-1] {
		step([]int32{tok}, len(ctx)+i)
	}
	return out
}

// kl is KL(p || q) of two distributions given as log-probabilities.
func kl(lp, lq []float64) float64 {
	var d float64
	for i := range lp {
		d += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return max(d, 0)
}

// TestKVTypeAccuracy measures each cache type against f32 on the reference
// models: teacher-forced along f32's greedy path of kvAccuracyGen tokens
// after the reference prompt (depth 0) and after 2000 random tokens and
// the prompt (depth 2k; 1988 for tiny-f32, whose context is 2048), the share of steps
// whose argmax is f32's greedy token and the mean KL divergence of the
// next-token distribution from f32's, checked against kvBounds.
func TestKVTypeAccuracy(t *testing.T) {
	models := kvRefModels(t)
	if testing.Short() {
		t.Skip("measures every cache type over the reference models")
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	types := []kvcache.Type{kvcache.F16, kvcache.BF16, kvcache.Q8_0, kvcache.F8E4M3, kvcache.Q4_0}
	for _, depth := range []int{0, 2000} {
		type key struct {
			group string
			typ   kvcache.Type
		}
		agree := map[key]int{}
		klSum := map[key]float64{}
		steps := map[string]int{}
		for _, rm := range models {
			m := modeltest.OpenModel(t, rm.path)
			rng := rand.New(rand.NewPCG(uint64(depth), 29))
			d := min(depth, m.Config.ContextLen-len(rm.prompt)-kvAccuracyGen) // tiny-f32: 1988
			ctx := make([]int32, 0, d+len(rm.prompt))
			for range d {
				ctx = append(ctx, int32(3+rng.IntN(m.Config.Vocab-3)))
			}
			ctx = append(ctx, rm.prompt...)
			// f32's greedy path, teacher-forced on itself
			path := make([]int32, 0, kvAccuracyGen)
			ref := teacherForcedGreedy(t, m, pool, ctx, &path)
			steps[rm.group] += len(ref)
			lref := make([][]float64, len(ref))
			for i := range ref {
				lref[i] = modeltest.LogSoftmax(ref[i])
			}
			for _, typ := range types {
				got := teacherForced(t, m, pool, ctx, path, typ, typ)
				a, k := 0, 0.0
				for i := range got {
					if modeltest.Argmax(got[i]) == path[i] {
						a++
					}
					k += kl(lref[i], modeltest.LogSoftmax(got[i]))
				}
				agree[key{rm.group, typ}] += a
				klSum[key{rm.group, typ}] += k
				t.Logf("depth %4d %-15s %-6s greedy agreement %2d/%d, mean KL %.2e", d, rm.name, typ, a, len(got), k/float64(len(got)))
			}
		}
		for group, bounds := range kvBounds {
			for _, typ := range types {
				n := float64(steps[group])
				a, k := float64(agree[key{group, typ}])/n, klSum[key{group, typ}]/n
				t.Logf("depth %4d %s: %-6s greedy agreement %.3f, mean KL %.2e", depth, group, typ, a, k)
				if b := bounds[typ]; a < b.agree || k > b.kl || k == 0 {
					t.Errorf("depth %d, %s, %s: greedy agreement %.3f (bound %.2f), mean KL %.2e (bound %.0e)", depth, group, typ, a, b.agree, k, b.kl)
				}
			}
		}
	}
}

// teacherForcedGreedy decodes kvAccuracyGen tokens greedily after ctx with
// a float32 cache, appending them to path, and returns the logits of each
// step.
func teacherForcedGreedy(t *testing.T, m *model.Model, pool *kernels.Pool, ctx []int32, path *[]int32) [][]float32 {
	t.Helper()
	cache := kvcache.NewTypedPool(m.Config.KVShape(), 32, (len(ctx)+kvAccuracyGen+31)/32, kvcache.F32, kvcache.F32).NewSeq()
	var out [][]float32
	toks, pos := ctx, 0
	for range kvAccuracyGen {
		logits := make([]float32, m.Config.Vocab)
		in := &model.SeqInput{Tokens: toks, Pos: pos, Cache: cache, Logits: logits}
		if err := m.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
			t.Fatal(err)
		}
		out = append(out, logits)
		next := modeltest.Argmax(logits)
		*path = append(*path, next)
		pos += len(toks)
		toks = []int32{next}
	}
	return out
}
