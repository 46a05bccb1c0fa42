package phi3_test

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
	"mistralrs/internal/model/modeltest"
	"mistralrs/internal/model/nn"
)

func TestMain(m *testing.M) { os.Exit(modeltest.Main(m)) }

// TestReferencesOnEveryPath runs this package's reference tests on every
// instruction-set path the CPU has (modeltest.ReferencesOnEveryPath).
func TestReferencesOnEveryPath(t *testing.T) {
	modeltest.ReferencesOnEveryPath(t, "TestPhi3Reference")
}

func TestPathChild(t *testing.T) { modeltest.PathChild(t) }

// TestPhi3Reference compares with llama.cpp on shared/.../phi3-f32.gguf:
// all 512 first-step log-probabilities within 1e-4, the same top-10 order
// and the same 32 greedy ids.
func TestPhi3Reference(t *testing.T) {
	dir, prompt, ref, want := modeltest.XrefLoad(t, "phi3-f32")
	m := modeltest.OpenModel(t, filepath.Join(dir, ref.File))
	pool := kernels.NewPool(2)
	defer pool.Close()
	gen, first := modeltest.Greedy(t, m, pool, prompt, len(ref.Greedy))
	lp := modeltest.LogSoftmax(first)
	d := modeltest.MaxAbsDiff(t, lp, want)
	t.Logf("max |Δlogprob| vs llama.cpp %.3g (tolerance 1e-4)", d)
	if d > 1e-4 {
		t.Errorf("max |Δlogprob| %.3g exceeds 1e-4", d)
	}
	order := make([]int32, len(lp))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		switch {
		case lp[a] > lp[b]:
			return -1
		case lp[a] < lp[b]:
			return 1
		}
		return 0
	})
	for i, e := range ref.Top10 {
		if order[i] != int32(e[0]) {
			t.Errorf("top-10 rank %d: id %d, llama.cpp %d", i, order[i], int32(e[0]))
		}
	}
	if !slices.Equal(gen, ref.Greedy) {
		t.Errorf("greedy ids (first %d equal)\n got %v\nwant %v", modeltest.XrefSameGreedy(gen, ref.Greedy), gen, ref.Greedy)
	}
}

// phi3Configs are the phi3 fixtures: rows of 256 so that K-quants apply
// everywhere; a sliding window (written, ignored as llama.cpp does) shorter
// than the test prompts.
func phi3Configs() map[string]model.RandomConfig {
	return map[string]model.RandomConfig{
		"phi3": {Arch: "phi3", Layers: 2, Embd: 256, FF: 256, Heads: 4, KVHeads: 2, Vocab: 96, SlidingWindow: 3, Seed: 11},
		// Phi-4-mini's partial rotary (3/4 of each head) with LongRoPE
		// factors: context 8192 over an original 2048 selects the long
		// factors and an attention factor of 1.087.
		"phi3-partial-long": {Arch: "phi3", Layers: 2, Embd: 256, FF: 512, Heads: 4, KVHeads: 1, Vocab: 80,
			RopeDim: 48, RopeFreqs: true, ContextLen: 8192, OrigCtx: 2048, Seed: 12},
		// Factors present, context not extended: the short factors, factor 1.
		"phi3-short": {Arch: "phi3", Layers: 2, Embd: 256, FF: 256, Heads: 8, KVHeads: 8, Vocab: 70,
			RopeFreqs: true, ContextLen: 4096, OrigCtx: 4096, RopeBase: 5e4, Tied: true, Seed: 13},
	}
}

// refPhi3 is the float64 phi3 forward pass, written from the architecture's
// description: fused q|k|v and gate|up outputs, NEOX rope over the first
// RopeDim dims of each head with LongRoPE factors (long when the context
// exceeds the original) and the attention factor on the rotated dims. It
// returns the logits of every position.
func refPhi3(t *testing.T, cfg model.RandomConfig, r *modeltest.Ref, tokens []int32) [][]float64 {
	c := cfg.WithDefaults()
	E, hd, V, F := c.Embd, c.HeadDim, c.Vocab, c.FF
	qd, kvd := c.Heads*hd, c.KVHeads*hd
	rd, orig := c.RopeDim, c.OrigCtx
	if rd == 0 {
		rd = hd
	}
	if orig == 0 {
		orig = c.ContextLen
	}
	var factors []float64
	af := 1.0
	if c.RopeFreqs {
		if c.ContextLen > orig {
			factors = r.Tensor(t, "rope_factors_long.weight")
			af = math.Sqrt(1 + math.Log(float64(c.ContextLen)/float64(orig))/math.Log(float64(orig)))
		} else {
			factors = r.Tensor(t, "rope_factors_short.weight")
		}
	}
	rope := func(h []float64, pos int) {
		for i := range rd / 2 {
			theta := float64(pos) * math.Pow(c.RopeBase, -2*float64(i)/float64(rd))
			if factors != nil {
				theta /= factors[i]
			}
			x0, x1 := h[i], h[i+rd/2]
			h[i] = af * (x0*math.Cos(theta) - x1*math.Sin(theta))
			h[i+rd/2] = af * (x0*math.Sin(theta) + x1*math.Cos(theta))
		}
	}
	eps := float64(c.RMSEps)
	T := len(tokens)
	emb := r.Tensor(t, "token_embd.weight")
	x := make([][]float64, T)
	for i, tok := range tokens {
		x[i] = slices.Clone(emb[int(tok)*E : (int(tok)+1)*E])
	}
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		wqkv, wo := r.Tensor(t, p+"attn_qkv.weight"), r.Tensor(t, p+"attn_output.weight")
		an, fn := r.Tensor(t, p+"attn_norm.weight"), r.Tensor(t, p+"ffn_norm.weight")
		wup, wd := r.Tensor(t, p+"ffn_up.weight"), r.Tensor(t, p+"ffn_down.weight")
		Q, K, Vv := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		for i := range T {
			qkv := modeltest.MatVec(wqkv, modeltest.RMSNorm(x[i], an, eps), qd+2*kvd)
			Q[i], K[i], Vv[i] = qkv[:qd], qkv[qd:qd+kvd], qkv[qd+kvd:]
			for h := range c.Heads {
				rope(Q[i][h*hd:(h+1)*hd], i)
			}
			for h := range c.KVHeads {
				rope(K[i][h*hd:(h+1)*hd], i)
			}
		}
		for i := range T {
			att := make([]float64, qd)
			for h := range c.Heads {
				g := h / (c.Heads / c.KVHeads)
				sc := make([]float64, i+1)
				mx := math.Inf(-1)
				for j := range sc {
					var s float64
					for d := range hd {
						s += Q[i][h*hd+d] * K[j][g*hd+d]
					}
					sc[j] = s / math.Sqrt(float64(hd))
					mx = math.Max(mx, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for d := range hd {
						att[h*hd+d] += sc[j] / sum * Vv[j][g*hd+d]
					}
				}
			}
			o := modeltest.MatVec(wo, att, E)
			for d := range E {
				x[i][d] += o[d]
			}
			gu := modeltest.MatVec(wup, modeltest.RMSNorm(x[i], fn, eps), 2*F)
			act := make([]float64, F)
			for d := range act {
				g := gu[d]
				act[d] = g / (1 + math.Exp(-g)) * gu[F+d]
			}
			dn := modeltest.MatVec(wd, act, E)
			for d := range E {
				x[i][d] += dn[d]
			}
		}
	}
	on := r.Tensor(t, "output_norm.weight")
	out := r.Maybe("output.weight")
	if out == nil {
		out = emb
	}
	logits := make([][]float64, T)
	for i := range T {
		logits[i] = modeltest.MatVec(out, modeltest.RMSNorm(x[i], on, eps), V)
	}
	return logits
}

// TestPhi3MatchesReference compares prefill and decode logits of the phi3
// fixtures with the float64 forward pass.
func TestPhi3MatchesReference(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	for name, cfg := range phi3Configs() {
		for _, typ := range []kernels.Type{kernels.F32, kernels.F16, kernels.Q8_0, kernels.Q4_K, kernels.Q6_K} {
			if (testing.Short() || modeltest.RaceEnabled) && typ != kernels.F32 && typ != kernels.Q4_K {
				continue
			}
			t.Run(name+"/"+typ.String(), func(t *testing.T) {
				cfg.Type = typ
				m, f := modeltest.LoadFixture(t, cfg)
				if rd := cmp.Or(cfg.RopeDim, cfg.Embd/cfg.Heads); m.Config.Arch != "phi3" || m.Config.RopeDim != rd {
					t.Fatalf("loaded %s with rope dims %d, want phi3 with %d", m.Config.Arch, m.Config.RopeDim, rd)
				}
				want := refPhi3(t, cfg, &modeltest.Ref{Cfg: cfg.WithDefaults(), F: f, Neox: true}, modeltest.FixtureTokens)
				V := m.Config.Vocab
				tol := modeltest.Tolerance(typ)
				var worst float64
				check := func(what string, pos int, got []float32) {
					t.Helper()
					d, s := modeltest.MaxDiff(got, want[pos])
					worst = math.Max(worst, d/math.Max(s, 1))
					if d > tol*math.Max(s, 1) {
						t.Errorf("%s at position %d: max |diff| %.3g (max |logit| %.3g), tolerance %.3g", what, pos, d, s, tol*math.Max(s, 1))
					}
				}
				cache := modeltest.NewContiguous(m.Config, 64)
				const prefill = 6
				all := make([]float32, prefill*V)
				err := m.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{{Tokens: modeltest.FixtureTokens[:prefill], Cache: cache, AllLogits: all}}})
				if err != nil {
					t.Fatal(err)
				}
				for i := range prefill {
					check("prefill", i, all[i*V:(i+1)*V])
				}
				last := make([]float32, V)
				for pos := prefill; pos < len(modeltest.FixtureTokens); pos++ {
					err := m.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{{Tokens: modeltest.FixtureTokens[pos : pos+1], Pos: pos, Cache: cache, Logits: last}}})
					if err != nil {
						t.Fatal(err)
					}
					check("decode", pos, last)
				}
				t.Logf("max |diff|/max(1,max |logit|) = %.3g (tolerance %.3g)", worst, tol)
			})
		}
	}
}

// TestPhi3BatchBits: sequences batched together (prefill next to decode)
// get the bits they get alone when the weight type's kernels compute each
// row alike whatever the number of rows (and logits within the oracle's
// tolerance otherwise), and grouped attention gives the bits of
// query-by-query attention.
func TestPhi3BatchBits(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	runs := []modeltest.SeqRun{
		{Tokens: []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49}, Steps: []int{7, 1, 1, 4}},
		{Tokens: []int32{2, 4, 6, 8, 10, 12, 14}, Steps: []int{3, 2, 1, 1}},
		{Tokens: []int32{3, 6, 9, 12, 15, 18}, Steps: []int{0, 0, 1, 5}},
	}
	compare := func(t *testing.T, what string, a, b [][][]float32, tol float64) {
		t.Helper()
		for i := range a {
			for s := range a[i] {
				for j := range a[i][s] {
					x, y := a[i][s][j], b[i][s][j]
					if (tol == 0 && math.Float32bits(x) != math.Float32bits(y)) || math.Abs(float64(x-y)) > tol*math.Max(1, math.Abs(float64(x))) {
						t.Fatalf("%s: sequence %d step %d logit %d: %v vs %v", what, i, s, j, x, y)
					}
				}
			}
		}
	}
	for _, name := range []string{"phi3", "phi3-partial-long"} {
		for _, typ := range []kernels.Type{kernels.F32, kernels.Q4_K} {
			t.Run(name+"/"+typ.String(), func(t *testing.T) {
				cfg := phi3Configs()[name]
				cfg.Type = typ
				m, _ := modeltest.LoadFixture(t, cfg)
				defer func(was int) { nn.AttnGroupMax = was }(nn.AttnGroupMax)
				nn.AttnGroupMax = 1
				alone := modeltest.RunBatched(t, m, pool, runs, false)
				batched := modeltest.RunBatched(t, m, pool, runs, true)
				var tol float64 // bits
				if !phi3RowInvariant(typ) {
					tol = modeltest.Tolerance(typ)
					t.Logf("%s kernels are not row-invariant here: batched within %.3g of alone", typ, tol)
				}
				compare(t, "alone vs batched", alone, batched, tol)
				nn.AttnGroupMax = 16
				grouped := modeltest.RunBatched(t, m, pool, runs, true)
				if most := modeltest.LargestGroup(m); most < 4 {
					t.Fatalf("the largest attention group of the last step has %d queries", most)
				}
				compare(t, "query by query vs grouped", batched, grouped, 0)
			})
		}
	}
}

// phi3RowInvariant reports whether MatMul gives each row of a multi-row
// product the bits of a one-row product for weights of type typ (the
// assembly kernels do for the types tested; the pure-Go four-row dot
// product does not).
func phi3RowInvariant(typ kernels.Type) bool {
	const rows, cols, n = 8, 256, 9
	rng := rand.New(rand.NewPCG(1, 2))
	vals := make([]float32, cols)
	data := make([]byte, rows*typ.RowSize(cols))
	for r := range rows {
		for i := range vals {
			vals[i] = float32(rng.NormFloat64())
		}
		kernels.Quantize(typ, vals, data[r*typ.RowSize(cols):(r+1)*typ.RowSize(cols)])
	}
	w, err := kernels.NewMatrix(typ, rows, cols, data)
	if err != nil {
		panic(err)
	}
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	all, one := make([]float32, n*rows), make([]float32, rows)
	kernels.MatMul(nil, all, w, x, n)
	for i := range n {
		kernels.MatMul(nil, one, w, x[i*cols:(i+1)*cols], 1)
		if !slices.Equal(one, all[i*rows:(i+1)*rows]) {
			return false
		}
	}
	return true
}

// TestPhi3LoadErrors: fused and separate projections are exclusive, the
// rope factors come in pairs, and a bad attention factor is named.
func TestPhi3LoadErrors(t *testing.T) {
	f := modeltest.BuildFixture(t, phi3Configs()["phi3-partial-long"])
	drop := func(name string) modeltest.Edit {
		return modeltest.Edit{Tensors: map[string]*gguf.TensorInfo{name: nil}}
	}
	for _, c := range []struct {
		name string
		e    modeltest.Edit
		msg  string
	}{
		{"no qkv", drop("blk.1.attn_qkv.weight"), "blk.1: need either attn_qkv.weight"},
		{"one factor tensor", drop("rope_factors_short.weight"), "only one of rope_factors_long.weight"},
		{"no ffn_up", drop("blk.0.ffn_up.weight"), "missing tensor blk.0.ffn_up.weight"},
		{"attn factor", modeltest.Edit{KV: map[string]any{"phi3.rope.scaling.attn_factor": float32(-1)}}, "phi3.rope.scaling.attn_factor = -1 is not a positive number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := model.Load(modeltest.Rewrite(t, f, c.e))
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %v, want one containing %q", err, c.msg)
			}
		})
	}
}

// TestDecodeAllocs checks that a steady-state phi3 decode step does not
// allocate in the model code.
func TestDecodeAllocs(t *testing.T) { modeltest.DecodeAllocs(t, phi3Configs()["phi3-partial-long"]) }
