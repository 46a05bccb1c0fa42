package llama_test

import (
	"fmt"
	"math"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
	"mistralrs/internal/model/llama"
	"mistralrs/internal/model/modeltest"
)

// routing is a way of routing tokens to experts: how many are used and
// whether their weights are renormalised.
type routing struct {
	name string
	used int
	norm bool
}

// moeFamilies are random mixtures of experts in the llama package's layout,
// each with what its config must read, the oracle's routing (renormalised
// or not) and the routing mistakes the oracle must tell apart.
var moeFamilies = []struct {
	name     string
	cfg      model.RandomConfig
	neox     bool
	norm     bool
	config   func(c model.Config) bool
	mistakes []routing // wrong routings the oracle must tell apart
	check    func(t *testing.T, f *gguf.File)
}{
	{
		// mixtral: the llama layout (NORM rope, no q/k norms) with
		// llama.expert_count experts of width FF in place of the MLP.
		name: "mixtral",
		cfg: model.RandomConfig{Arch: "llama", Layers: 2, Embd: 256, FF: 256, Heads: 4, KVHeads: 2, Vocab: 64,
			Experts: 4, ExpertUsed: 2, Seed: 29},
		norm: true,
		config: func(c model.Config) bool {
			return c.Arch == "llama" && c.Experts == 4 && c.ExpertUsed == 2 && c.ExpertFF == 256 && c.ExpertNorm && !c.RopeNeox
		},
		mistakes: []routing{{"weights not renormalised", 2, false}, {"one expert", 1, true}},
	},
	{
		// qwen2moe: qwen2's attention (q/k/v biases, NEOX rope), 4 routed
		// experts (2 used, weights not renormalised) and a shared expert of
		// width FF behind a sigmoid gate.
		name: "qwen2moe",
		cfg: model.RandomConfig{Arch: "qwen2moe", Layers: 2, Embd: 256, FF: 256, Heads: 4, KVHeads: 2, Vocab: 64,
			Experts: 4, ExpertUsed: 2, ExpertFF: 256, Seed: 29},
		neox: true,
		config: func(c model.Config) bool {
			return c.Arch == "qwen2moe" && c.Experts == 4 && c.ExpertUsed == 2 && c.ExpertFF == 256 && c.FF == 256 && !c.ExpertNorm && c.RopeNeox
		},
		mistakes: []routing{{"renormalised weights", 2, true}},
		check: func(t *testing.T, f *gguf.File) {
			for l := range 2 {
				if _, ok := f.Tensor(fmt.Sprintf("blk.%d.ffn_gate_inp_shexp.weight", l)); !ok {
					t.Fatalf("fixture lacks the shared expert")
				}
			}
		},
	},
}

// TestLlamaMoEMatchesReference: prefill logits of random mixtral and
// qwen2moe models against the float64 oracle, which tells routing mistakes
// apart; decoding after a prefill gives the prefill's last logits.
func TestLlamaMoEMatchesReference(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, fam := range moeFamilies {
		for _, typ := range []kernels.Type{kernels.F32, kernels.Q8_0} {
			t.Run(fam.name+"/"+typ.String(), func(t *testing.T) {
				cfg := fam.cfg
				cfg.Type = typ
				m, f := modeltest.LoadFixture(t, cfg)
				if _, ok := m.Network().(*llama.MoEModel); !ok {
					t.Fatalf("loaded as %T", m.Network())
				}
				c := m.Config
				if !fam.config(c) {
					t.Fatalf("config %+v", c)
				}
				if fam.check != nil {
					fam.check(t, f)
				}
				rc := cfg.WithDefaults()
				if rc.ExpertFF == 0 {
					rc.ExpertFF = rc.FF // mixtral's experts have the width FF
				}
				ref := &modeltest.Ref{Cfg: rc, F: f, Neox: fam.neox}
				want, gap := moeRef(t, ref, modeltest.FixtureTokens, 2, fam.norm)
				if minGap := map[bool]float64{true: 1e-4, false: 1e-2}[typ == kernels.F32]; gap < minGap {
					t.Fatalf("the fixture has a near tie between experts (gap %.3g): choose another seed", gap)
				}
				V := c.Vocab
				all := make([]float32, len(modeltest.FixtureTokens)*V)
				if err := m.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{{Tokens: modeltest.FixtureTokens, Cache: modeltest.NewContiguous(c, 0), AllLogits: all}}}); err != nil {
					t.Fatal(err)
				}
				worst := func(want [][]float64) float64 {
					var w float64
					for pos := range modeltest.FixtureTokens {
						d, s := modeltest.MaxDiff(all[pos*V:(pos+1)*V], want[pos])
						w = math.Max(w, d/math.Max(s, 1))
					}
					return w
				}
				tol := modeltest.Tolerance(typ)
				w := worst(want)
				t.Logf("max |diff|/max(1,max |logit|) = %.3g (tolerance %.3g), smallest routing gap %.3g", w, tol, gap)
				if w > tol {
					t.Errorf("logits differ from the reference by %.3g, tolerance %.3g", w, tol)
				}
				if typ == kernels.F32 {
					for _, mut := range fam.mistakes {
						if bad, _ := moeRef(t, ref, modeltest.FixtureTokens, mut.used, mut.norm); worst(bad) <= 2*tol {
							t.Errorf("%s: the model is within %.3g of a wrong oracle", mut.name, worst(bad))
						}
					}
				}
				// Decoding token by token after a prefill gives the same last logits.
				cache := modeltest.NewContiguous(c, 0)
				last := make([]float32, V)
				n := len(modeltest.FixtureTokens)
				if err := m.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{{Tokens: modeltest.FixtureTokens[:n-3], Cache: cache}}}); err != nil {
					t.Fatal(err)
				}
				for pos := n - 3; pos < n; pos++ {
					if err := m.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{{Tokens: modeltest.FixtureTokens[pos : pos+1], Pos: pos, Cache: cache, Logits: last}}}); err != nil {
						t.Fatal(err)
					}
				}
				for j := range last {
					if !sameResult(all[(n-1)*V+j], last[j]) {
						t.Fatalf("logit %d: prefill %v, decode %v", j, all[(n-1)*V+j], last[j])
					}
				}
			})
		}
	}
}
