package engine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"mistralrs/internal/engine"
	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
	"mistralrs/internal/model/nn"
)

// f32Matrix is a rows × cols F32 matrix of normal values of deviation std.
func f32Matrix(rng *rand.Rand, rows, cols int, std float64) *kernels.Matrix {
	data := make([]byte, 4*rows*cols)
	for i := range rows * cols {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(rng.NormFloat64()*std)))
	}
	m, err := kernels.NewMatrix(kernels.F32, rows, cols, data)
	if err != nil {
		panic(err)
	}
	return m
}

// randomAdapter is a random adapter of the given rank over the weights
// blk.N.TARGET.weight of m for each target (attn_q, ffn_down, …), strong
// enough to change the greedy tokens: s·B·A has entries of about
// strength / sqrt(inputs).
func randomAdapter(t testing.TB, m *loader.Model, seed uint64, rank int, strength float64, targets ...string) *nn.Adapter {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	a := &nn.Adapter{Deltas: map[*kernels.Matrix]nn.LowRank{}}
	for l := range m.Net.Config.Layers {
		for _, target := range targets {
			name := fmt.Sprintf("blk.%d.%s.weight", l, target)
			w, ok := m.Net.Weight(name)
			if !ok {
				t.Fatalf("the model has no weight %s", name)
			}
			alpha := float32(2 * rank)
			b := f32Matrix(rng, w.Rows, rank, strength/math.Sqrt(float64(rank))/float64(alpha/float32(rank)))
			a.Deltas[w] = nn.LowRank{
				A:    f32Matrix(rng, rank, w.Cols, 1/math.Sqrt(float64(w.Cols))),
				B:    b,
				Rank: rank, Scale: alpha / float32(rank),
				BT: transposeF32(b),
			}
		}
	}
	return a
}

// transposeF32 is b's values transposed (nn.LowRank.BT, as lora.Load
// makes it).
func transposeF32(b *kernels.Matrix) []float32 {
	bt := make([]float32, b.Rows*b.Cols)
	row := make([]float32, b.Cols)
	for o := range b.Rows {
		b.Row(o, row)
		for k, v := range row {
			bt[k*b.Rows+o] = v
		}
	}
	return bt
}

var attnTargets = []string{"attn_q", "attn_k", "attn_v", "attn_output"}

// loraSet is the base model (nil) and four adapter settings over m: q, k,
// v, o at rank 8; the MLP at rank 16; v and down at rank 4 with a negative
// scale; and two adapters at once.
func loraSet(t testing.TB, m *loader.Model) []*engine.LoRA {
	attn := randomAdapter(t, m, 1, 8, 1.0, attnTargets...)
	mlp := randomAdapter(t, m, 2, 16, 1.0, "ffn_gate", "ffn_up", "ffn_down")
	mixed := randomAdapter(t, m, 3, 4, 1.0, "attn_v", "ffn_down")
	return []*engine.LoRA{
		nil,
		{Name: "attn8", Key: "attn8@1", Active: []model.Active{{Adapter: attn, Scale: 1}}},
		{Name: "mlp16", Key: "mlp16@1", Active: []model.Active{{Adapter: mlp, Scale: 1}}},
		{Name: "mixed4", Key: "mixed4@1:-1", Active: []model.Active{{Adapter: mixed, Scale: -1}}},
		{Name: "two", Key: "attn8@1:0.5+mlp16@1", Active: []model.Active{{Adapter: attn, Scale: 0.5}, {Adapter: mlp, Scale: 1}}},
	}
}

// withLoRA are copies of reqs, request i under set[i%len(set)].
func withLoRA(reqs []*engine.Request, set []*engine.LoRA) []*engine.Request {
	out := cloneRequests(reqs)
	for i, r := range out {
		r.LoRA = set[i%len(set)]
	}
	return out
}

// checkAdaptersMatter fails unless the adapted requests' tokens differ
// from the base model's for the same prompts (the adapters are applied).
func checkAdaptersMatter(t *testing.T, reqs []*engine.Request, adapted, base []*engine.Result) {
	t.Helper()
	n, same := 0, 0
	for i, r := range reqs {
		if r.LoRA == nil {
			continue
		}
		n++
		if slices.Equal(adapted[i].Tokens, base[i].Tokens) {
			same++
		}
	}
	if same > n/4 {
		t.Fatalf("%d of %d adapted requests give the base model's tokens: the adapters are not applied", same, n)
	}
}

// Sixteen streams over four adapters and the base model, batched in one
// engine, give each stream exactly the tokens it gets alone: with chunked
// prefill, preemptions in a tiny KV pool, prefix-cache hits (which must
// never cross adapters: several prompts share a prefix), a contiguous
// cache and no cache.
func TestLoRABatchedMatchesAlone(t *testing.T) {
	m := tiny(t)
	set := loraSet(t, m)
	base := requests(16, 20, 200)
	if raceEnabled {
		base = requests(16, 6, 60)
	}
	reqs := withLoRA(base, set)
	ref, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1; o.PrefixCacheN = 0 }))
	want := runAlone(t, ref, reqs)
	checkAdaptersMatter(t, reqs, want, runAlone(t, ref, base))

	cases := []struct {
		name        string
		opts        engine.Options
		warm        bool // run every request alone first: the batch hits the prefix cache
		wantPreempt bool
	}{
		{name: "paged", opts: opts(nil)},
		{name: "paged-chunked-prefill", opts: opts(func(o *engine.Options) { o.MaxNumBatchedTokens = 40 })},
		{name: "paged-prefix-hits", opts: opts(nil), warm: true},
		{name: "paged-preemption", opts: opts(func(o *engine.Options) { o.ContextLen = 400; o.MaxDecodeStepsBeforePrefill = 2 }), wantPreempt: true},
		{name: "paged-preemption-prefix-hits", opts: opts(func(o *engine.Options) { o.ContextLen = 400 }), warm: true, wantPreempt: true},
		{name: "contiguous-prefix-hits", opts: opts(func(o *engine.Options) { o.PagedAttn = "off"; o.MaxNumBatchedTokens = 64 }), warm: true},
		{name: "no-kv-cache", opts: opts(func(o *engine.Options) { o.NoKVCache = true })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reqs, want := reqs, want
			if c.opts.NoKVCache {
				reqs, want = reqs[:5], want[:5]
			}
			e, rec := newEngine(t, m, c.opts)
			if c.warm {
				runAlone(t, e, reqs)
			}
			got := runTogether(t, e, rec, reqs)
			for i := range reqs {
				if !slices.Equal(got[i].Tokens, want[i].Tokens) {
					t.Errorf("request %d (%s, prompt %d tokens): batched %v\nalone %v", i, loraName(reqs[i]), len(reqs[i].Prompt), got[i].Tokens, want[i].Tokens)
				}
			}
			checkIdle(t, e, rec)
			defer rec.lock()()
			if rec.maxRunning < 2 {
				t.Errorf("at most %d sequences ran at once", rec.maxRunning)
			}
			if c.wantPreempt != (rec.preempted > 0) {
				t.Errorf("%d preemptions", rec.preempted)
			}
			// (A pool of 400 positions keeps few warm prompts.)
			if c.warm && (rec.hits == 0 || !c.wantPreempt && rec.hits < len(reqs)/2) {
				t.Errorf("%d prefix-cache hits for %d repeated prompts", rec.hits, len(reqs))
			}
			t.Logf("max running %d, preemptions %d, hits %d", rec.maxRunning, rec.preempted, rec.hits)
		})
	}
}

func loraName(r *engine.Request) string {
	if r.LoRA == nil {
		return "base"
	}
	return r.LoRA.Name
}

// The prefix cache keeps a prompt's keys and values apart per adapter key:
// the same long prompt under another adapter, another scale of it, or the
// base model computes everything again (and gives what it gives with no
// cache at all); the same key hits.
func TestLoRAPrefixCacheSalted(t *testing.T) {
	m := tiny(t)
	set := loraSet(t, m)
	attnHalf := *set[1]
	attnHalf.Key, attnHalf.Active = "attn8@1:0.5", []model.Active{{Adapter: set[1].Active[0].Adapter, Scale: 0.5}}
	prompt := longPrompt(100, 11)
	steps := []struct {
		lora *engine.LoRA
		hit  bool
	}{
		{set[1], false}, {set[2], false}, {nil, false}, {set[1], true}, {&attnHalf, false}, {nil, true}, {set[2], true}, {&attnHalf, true},
	}
	ref, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1; o.PrefixCacheN = 0 }))
	for _, mode := range []string{"on", "off"} {
		t.Run("paged-"+mode, func(t *testing.T) {
			e, rec := newEngine(t, m, opts(func(o *engine.Options) { o.PagedAttn = mode }))
			var outs [][]int32
			for i, st := range steps {
				req := &engine.Request{Prompt: prompt, Sampling: greedy(), MaxTokens: 8, IgnoreEOS: true, LoRA: st.lora}
				rec.mu.Lock()
				hits := rec.hits
				rec.mu.Unlock()
				got := runConcurrently(t, e, []*engine.Request{req})[0]
				alone := runConcurrently(t, ref, []*engine.Request{req})[0]
				rec.mu.Lock()
				hit := rec.hits > hits
				rec.mu.Unlock()
				if hit != st.hit || (got.CachedTokens > 0) != st.hit {
					t.Errorf("step %d (%v): hit %v, %d cached tokens; want a hit: %v", i, keyOf(st.lora), hit, got.CachedTokens, st.hit)
				}
				if !slices.Equal(got.Tokens, alone.Tokens) {
					t.Errorf("step %d (%v): %v, without a cache %v", i, keyOf(st.lora), got.Tokens, alone.Tokens)
				}
				outs = append(outs, got.Tokens)
			}
			if slices.Equal(outs[0], outs[2]) || slices.Equal(outs[0], outs[4]) || slices.Equal(outs[1], outs[2]) {
				t.Errorf("adapters give the base model's tokens: %v", outs)
			}
			checkIdle(t, e, rec)
		})
	}
}

func keyOf(l *engine.LoRA) string {
	if l == nil {
		return "base"
	}
	return l.Key
}

// The choices of a request (N > 1) all decode under its adapters: from a
// fork of the prompt's cache, greedy, each gives the tokens of one choice
// alone.
func TestLoRAChoices(t *testing.T) {
	m := tiny(t)
	set := loraSet(t, m)
	for _, mode := range []string{"on", "off"} {
		e, _ := newEngine(t, m, opts(func(o *engine.Options) { o.PagedAttn = mode }))
		req := &engine.Request{Prompt: longPrompt(40, 3), Sampling: greedy(), MaxTokens: 10, IgnoreEOS: true, LoRA: set[4]}
		alone, err := e.Generate(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := *req
		n.N = 3
		res, err := e.GenerateAll(context.Background(), &n, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if !slices.Equal(r.Tokens, alone.Tokens) {
				t.Errorf("paged %s, choice %d: %v, alone %v", mode, i, r.Tokens, alone.Tokens)
			}
		}
	}
}

// Speculative decoding with adapters gives the greedy tokens of the
// adapted model without speculation: the n-gram proposer, and a draft
// model, which proposes without the adapters while the verification
// applies them. The model as its own draft shows it: without adapters
// every guess is accepted, with them some are not.
func TestLoRASpeculative(t *testing.T) {
	m := tiny(t)
	set := loraSet(t, m)
	reqs := withLoRA(greedyRequests(10, 30, 90), set)
	ref, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1 }))
	want := runConcurrently(t, ref, cloneRequests(reqs))
	for _, c := range []struct {
		name string
		mod  func(*engine.Options)
	}{
		{"ngram", func(o *engine.Options) { o.SpecNgram = 3; o.SpecTokens = 4 }},
		{"draft-itself", func(o *engine.Options) { o.Draft = m; o.SpecTokens = 4 }},
		{"draft-other", func(o *engine.Options) { o.Draft = tinyDraft(t); o.SpecTokens = 3 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, rec := newEngine(t, m, opts(c.mod))
			got := runTogether(t, e, rec, cloneRequests(reqs))
			for i := range reqs {
				if !slices.Equal(got[i].Tokens, want[i].Tokens) {
					t.Errorf("request %d (%s): %v\nwithout speculation %v", i, loraName(reqs[i]), got[i].Tokens, want[i].Tokens)
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			t.Logf("drafts %d, proposed %d, accepted %d", rec.specDrafts, rec.specProposed, rec.specAccepted)
			if rec.specDrafts == 0 || rec.specAccepted == 0 {
				t.Error("nothing verified or accepted")
			}
			if c.name == "draft-itself" && rec.specAccepted == rec.specProposed {
				t.Errorf("all %d guesses of the unadapted draft accepted by the adapted model", rec.specProposed)
			}
		})
	}
	// Base requests alone with the model as its own draft: all accepted.
	e, rec := newEngine(t, m, opts(func(o *engine.Options) { o.Draft = m; o.SpecTokens = 4 }))
	runConcurrently(t, e, greedyRequests(3, 20, 60))
	defer rec.lock()()
	if rec.specProposed == 0 || rec.specAccepted != rec.specProposed {
		t.Errorf("base model as its own draft: %d of %d accepted", rec.specAccepted, rec.specProposed)
	}
}

// Stats report the distinct adapter names of the running and the waiting
// sequences, sorted, with the queue lengths; none once idle.
func TestLoRAStatsLevels(t *testing.T) {
	m := tiny(t)
	set := loraSet(t, m)
	e, err := engine.New(m, opts(func(o *engine.Options) { o.MaxSeqs = 2; o.Threads = 2 }))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var mu sync.Mutex
	var reports int
	var bad []string
	seenRunning, seenWaiting := map[string]bool{}, map[string]bool{}
	var last engine.Stats
	rec := newRecorder()
	e.SetStatsSink(func(st engine.Stats) {
		defer rec.record(st) // (runTogether's gate)
		if st.Measured&engine.LevelLoRA == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		reports++
		if st.Measured&engine.LevelQueues == 0 {
			bad = append(bad, "LoRA levels without the queue lengths")
		}
		for _, l := range [][]string{st.RunningLoRA, st.WaitingLoRA} {
			if !slices.IsSorted(l) || len(slices.Compact(slices.Clone(l))) != len(l) {
				bad = append(bad, fmt.Sprintf("not sorted and distinct: %v", l))
			}
		}
		if len(st.RunningLoRA) > st.Running || len(st.WaitingLoRA) > st.Waiting {
			bad = append(bad, fmt.Sprintf("running %d %v, waiting %d %v", st.Running, st.RunningLoRA, st.Waiting, st.WaitingLoRA))
		}
		for _, n := range st.RunningLoRA {
			seenRunning[n] = true
		}
		for _, n := range st.WaitingLoRA {
			seenWaiting[n] = true
		}
		last = st
		last.RunningLoRA, last.WaitingLoRA = slices.Clone(st.RunningLoRA), slices.Clone(st.WaitingLoRA)
	})
	var reqs []*engine.Request
	for i, l := range []*engine.LoRA{set[1], set[2], nil, set[1], set[3], set[2]} {
		reqs = append(reqs, &engine.Request{Prompt: longPrompt(30, uint64(i)), Sampling: greedy(), MaxTokens: 12, IgnoreEOS: true, LoRA: l})
	}
	// All submitted before the second step: four of them wait.
	runTogether(t, e, rec, reqs)
	mu.Lock()
	defer mu.Unlock()
	for _, b := range bad {
		t.Error(b)
	}
	names := []string{"attn8", "mixed4", "mlp16"}
	if got := slices.Sorted(mapKeys(seenRunning)); !slices.Equal(got, names) {
		t.Errorf("running adapters seen %v, want %v", got, names)
	}
	if len(seenWaiting) == 0 {
		t.Error("no waiting adapter reported with 6 requests and 2 sequences at a time")
	}
	if last.Running != 0 || last.Waiting != 0 || len(last.RunningLoRA) != 0 || len(last.WaitingLoRA) != 0 {
		t.Errorf("idle engine's last report: running %d %v, waiting %d %v", last.Running, last.RunningLoRA, last.Waiting, last.WaitingLoRA)
	}
	if reports < 3 {
		t.Errorf("%d reports with LoRA levels", reports)
	}
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Adapters the forward pass cannot apply are refused before anything
// runs, with a RequestError naming the problem, for generation and
// embeddings alike.
func TestLoRARefused(t *testing.T) {
	m := tiny(t)
	good := loraSet(t, m)[1]
	a := good.Active[0].Adapter
	var q *kernels.Matrix
	for w := range a.Deltas {
		q = w
		break
	}
	misfit := &nn.Adapter{Deltas: map[*kernels.Matrix]nn.LowRank{q: {A: a.Deltas[q].B, B: a.Deltas[q].A, Rank: 8, Scale: 2}}}
	noB := &nn.Adapter{Deltas: map[*kernels.Matrix]nn.LowRank{q: {A: a.Deltas[q].A, Rank: 8, Scale: 2}}}
	nan := float32(math.NaN())
	e, _ := newEngine(t, m, opts(nil))
	for _, c := range []struct {
		lora *engine.LoRA
		want string
	}{
		{&engine.LoRA{Name: "x", Key: "x", Active: []model.Active{{Scale: 1}}}, "adapter 0 is missing"},
		{&engine.LoRA{Name: "x", Key: "x", Active: []model.Active{{Adapter: a, Scale: nan}}}, "scale NaN"},
		{&engine.LoRA{Name: "x", Key: "x", Active: []model.Active{{Adapter: a, Scale: float32(math.Inf(1))}}}, "scale +Inf"},
		{&engine.LoRA{Name: "x", Active: []model.Active{{Adapter: a, Scale: 1}}}, "without a prefix-cache key"},
		{&engine.LoRA{Name: "x", Key: "x", Active: []model.Active{{Adapter: misfit, Scale: 1}}}, "does not fit"},
		{&engine.LoRA{Name: "x", Key: "x", Active: []model.Active{{Adapter: noB, Scale: 1}}}, "without its A or B"},
	} {
		_, err := e.Submit(context.Background(), &engine.Request{Prompt: []int32{1, 2, 3}, Sampling: greedy(), LoRA: c.lora})
		var re *engine.RequestError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a RequestError saying %q", c.want, err, c.want)
		}
		_, err = e.EmbedLoRA(context.Background(), [][]int32{{1, 2}}, c.lora)
		if !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("embedding, %s: %v", c.want, err)
		}
	}
	// A LoRA without adapters needs no key.
	if _, err := e.Generate(context.Background(), &engine.Request{Prompt: []int32{1, 2, 3}, Sampling: greedy(), MaxTokens: 2,
		LoRA: &engine.LoRA{Name: "off"}}, nil); err != nil {
		t.Error(err)
	}
}

// An embedding under an adapter pools the adapted model's hidden states:
// what one forward pass with the adapter gives, not the base model's.
func TestEmbedLoRA(t *testing.T) {
	m := f32Model(t, 0)
	ad := randomAdapter(t, m, 4, 8, 1.0, append(attnTargets, "ffn_down")...)
	l := &engine.LoRA{Name: "e", Key: "e@1", Active: []model.Active{{Adapter: ad, Scale: 1}}}
	prompts := [][]int32{promptOf(40), promptOf(9)}
	e, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxNumBatchedTokens = 16; o.CacheType = "f32" }))
	got, err := e.EmbedLoRA(context.Background(), prompts, l)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := e.Embed(context.Background(), prompts)
	if err != nil {
		t.Fatal(err)
	}
	E := m.Net.Config.Embd
	for i, p := range prompts {
		h := make([]float32, len(p)*E)
		cache := kvcache.NewContiguousCache(m.Net.Config.KVShape(), len(p), false)
		if err := m.Net.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{{Tokens: p, Cache: cache, Hidden: h, LoRA: l.Active}}}); err != nil {
			t.Fatal(err)
		}
		want := make([]float64, E)
		var n float64
		for j := range p {
			for d := range E {
				want[d] += float64(h[j*E+d])
			}
		}
		for _, v := range want {
			n += v * v
		}
		var worst, moved float64
		for d := range E {
			worst = math.Max(worst, math.Abs(float64(got[i][d])-want[d]/math.Sqrt(n)))
			moved = math.Max(moved, math.Abs(float64(got[i][d]-plain[i][d])))
		}
		if worst > 1e-5 || moved < 1e-3 {
			t.Errorf("input %d: %g from the adapted forward pass, %g from the base model's embedding", i, worst, moved)
		}
	}
}

// Two adapters of one sequence that adapt the same weights add their terms
// in the sequence's order, whatever the other sequences of the step use:
// [X, Y] beside [Y] and [Y, X] gives what it gives alone, bit for bit (the
// log-probabilities of its top tokens at every step, not only the tokens).
func TestLoRAOverlappingAdapters(t *testing.T) {
	m := tiny(t)
	x := randomAdapter(t, m, 5, 8, 1.0, "attn_q", "attn_v", "ffn_down")
	y := randomAdapter(t, m, 6, 16, 1.0, "attn_q", "attn_output", "ffn_down")
	act := func(as ...*nn.Adapter) []model.Active {
		var out []model.Active
		for _, a := range as {
			out = append(out, model.Active{Adapter: a, Scale: 1})
		}
		return out
	}
	set := []*engine.LoRA{
		{Name: "y", Key: "y", Active: act(y)},
		{Name: "xy", Key: "x+y", Active: act(x, y)},
		{Name: "yx", Key: "y+x", Active: act(y, x)},
		{Name: "x", Key: "x", Active: act(x)},
	}
	reqs := withLoRA(greedyRequests(8, 16, 120), set)
	for _, r := range reqs {
		r.Sampling.Logprobs, r.Sampling.TopLogprobs = true, 5
	}
	ref, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1; o.PrefixCacheN = 0 }))
	want := make([][]float32, len(reqs))
	for i, r := range reqs {
		want[i] = topLogprobs(t, ref, r)
	}
	e, rec := newEngine(t, m, opts(func(o *engine.Options) { o.MaxNumBatchedTokens = 48 }))
	got := make([][]float32, len(reqs))
	var wg sync.WaitGroup
	gate := make(chan struct{})
	rec.mu.Lock()
	rec.gate = gate // the first step waits until all have arrived
	rec.mu.Unlock()
	for i, r := range reqs {
		wg.Go(func() { got[i] = topLogprobs(t, e, r) })
	}
	for {
		rec.mu.Lock()
		all := rec.lookups >= len(reqs)
		rec.mu.Unlock()
		if all {
			break
		}
		time.Sleep(time.Millisecond)
	}
	rec.mu.Lock()
	rec.gate = nil
	rec.mu.Unlock()
	close(gate)
	wg.Wait()
	for i := range reqs {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d (%s): batched log-probabilities %v\nalone %v", i, loraName(reqs[i]), got[i], want[i])
		}
	}
}

// topLogprobs runs r and returns its outputs' top log-probabilities,
// token by token.
func topLogprobs(t *testing.T, e *engine.Engine, r *engine.Request) []float32 {
	var lps []float32
	_, err := e.Generate(context.Background(), r, func(o engine.Output) error {
		if o.Logprob == nil {
			return errors.New("output without log-probabilities")
		}
		for _, tl := range o.Logprob.Top {
			lps = append(lps, tl.Logprob)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	return lps
}
