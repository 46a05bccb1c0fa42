package engine_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
	"mistralrs/internal/sampler"
)

var (
	draftOnce  sync.Once
	draftModel *loader.Model
	draftErr   error
)

// tinyDraft is a one-layer model of tiny's vocabulary and seed (so, as the
// random weights are drawn, of its embeddings and first layer): a draft
// that agrees with tiny now and then.
func tinyDraft(t testing.TB) *loader.Model {
	t.Helper()
	draftOnce.Do(func() {
		draftModel, draftErr = randomModel("tiny-draft", model.RandomConfig{Arch: "llama", Layers: 1, Embd: 256, FF: 512, Heads: 4, KVHeads: 2,
			Vocab: 384, ContextLen: 2048, Seed: 7})
	})
	if draftErr != nil {
		t.Fatal(draftErr)
	}
	return draftModel
}

// greedyRequests are requests' prompts (some sharing prefixes), all greedy.
func greedyRequests(n, maxTokens, maxLen int) []*engine.Request {
	reqs := requests(n, maxTokens, maxLen)
	for _, r := range reqs {
		r.Sampling = greedy()
	}
	return reqs
}

func cloneRequests(reqs []*engine.Request) []*engine.Request {
	out := make([]*engine.Request, len(reqs))
	for i, r := range reqs {
		c := *r
		out[i] = &c
	}
	return out
}

// Greedy decoding gives the same tokens with and without speculation, for
// every proposer, batched, with prefix-cache hits, preemptions and guesses
// that do not fit the step.
func TestSpeculativeGreedyIdentical(t *testing.T) {
	m := tiny(t)
	reqs := greedyRequests(12, 40, 90)
	ref, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1 }))
	want := runConcurrently(t, ref, cloneRequests(reqs))

	cases := []struct {
		name  string
		mod   func(*engine.Options)
		check func(t *testing.T, rec *recorder)
	}{
		{"ngram", func(o *engine.Options) { o.SpecNgram = 3; o.SpecTokens = 4 }, nil},
		{"draft-itself", func(o *engine.Options) { o.Draft = m; o.SpecTokens = 5 }, func(t *testing.T, rec *recorder) {
			if rec.specAccepted != rec.specProposed {
				t.Errorf("the model as its own draft: %d of %d guesses accepted, want all", rec.specAccepted, rec.specProposed)
			}
		}},
		{"draft-other", func(o *engine.Options) { o.Draft = tinyDraft(t); o.SpecTokens = 3 }, func(t *testing.T, rec *recorder) {
			if rec.specAccepted == rec.specProposed {
				t.Errorf("another model as draft: all %d guesses accepted", rec.specProposed)
			}
		}},
		{"ngram-preemption", func(o *engine.Options) {
			o.SpecNgram = 2
			o.SpecTokens = 8
			o.ContextLen = 400
			o.MaxDecodeStepsBeforePrefill = 2
		}, func(t *testing.T, rec *recorder) {
			if rec.preempted == 0 || rec.hits == 0 {
				t.Errorf("preemptions %d, prefix hits %d: the case wants both", rec.preempted, rec.hits)
			}
		}},
		{"budget-drops", func(o *engine.Options) { o.Draft = m; o.SpecTokens = 4; o.MaxNumBatchedTokens = 4 }, func(t *testing.T, rec *recorder) {
			if rec.specDrops == 0 {
				t.Error("no staged drops with a budget smaller than the guesses")
			}
		}},
		// A quantized cache rolls back rejected guesses too (against
		// greedy decoding with the same cache type).
		{"draft-other-q8_0", func(o *engine.Options) { o.Draft = tinyDraft(t); o.SpecTokens = 3; o.CacheType = "q8_0" }, nil},
		{"ngram-preemption-q8_0", func(o *engine.Options) {
			o.SpecNgram, o.SpecTokens, o.ContextLen, o.MaxDecodeStepsBeforePrefill = 2, 8, 400, 2
			o.CacheType = "q8_0"
		}, func(t *testing.T, rec *recorder) {
			if rec.preempted == 0 || rec.hits == 0 {
				t.Errorf("preemptions %d, prefix hits %d: the case wants both", rec.preempted, rec.hits)
			}
		}},
	}
	wantQ8 := func() func() []*engine.Result {
		var w []*engine.Result
		return func() []*engine.Result {
			if w == nil {
				ref, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1; o.CacheType = "q8_0" }))
				w = runConcurrently(t, ref, cloneRequests(reqs))
			}
			return w
		}
	}()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := want
			if opts(c.mod).CacheType == "q8_0" {
				want = wantQ8()
			}
			e, rec := newEngine(t, m, opts(c.mod))
			got := runTogether(t, e, rec, cloneRequests(reqs))
			again := runConcurrently(t, e, cloneRequests(reqs)) // prefix-cache hits
			for i := range reqs {
				for _, g := range []*engine.Result{got[i], again[i]} {
					if !slices.Equal(g.Tokens, want[i].Tokens) || g.Text != want[i].Text || g.FinishReason != want[i].FinishReason {
						t.Fatalf("request %d: %v (%s)\nwant %v (%s)", i, g.Tokens, g.FinishReason, want[i].Tokens, want[i].FinishReason)
					}
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			t.Logf("drafts %d, proposed %d, accepted %d, per position %v, staged drops %d, preemptions %d, hits %d",
				rec.specDrafts, rec.specProposed, rec.specAccepted, rec.specPerPos, rec.specDrops, rec.preempted, rec.hits)
			if c.name != "budget-drops" && (rec.specDrafts == 0 || rec.specAccepted == 0) {
				t.Error("nothing verified or accepted")
			}
			if rec.specAccepted > rec.specProposed || (len(rec.specPerPos) > 0 && rec.specPerPos[0] > rec.specDrafts) {
				t.Errorf("inconsistent counts")
			}
			if sum := sumInts(rec.specPerPos); sum != rec.specAccepted {
				t.Errorf("accepted per position sums to %d, accepted %d", sum, rec.specAccepted)
			}
			if c.check != nil {
				c.check(t, rec)
			}
			if rec.blocksUsed != 0 {
				t.Errorf("%d KV blocks used when idle", rec.blocksUsed)
			}
			if err := e.CheckKV(); err != nil {
				t.Error(err)
			}
		})
	}
}

func sumInts(x []int) int {
	n := 0
	for _, v := range x {
		n += v
	}
	return n
}

// A stop string or the token limit landing inside an accepted run ends the
// answer there: no token past it is emitted or counted.
func TestSpeculativeStopInsideRun(t *testing.T) {
	m := tiny(t)
	ref, _ := newEngine(t, m, opts(nil))
	spec, rec := newEngine(t, m, opts(func(o *engine.Options) { o.Draft = m; o.SpecTokens = 6 }))
	base := greedyRequests(6, 60, 40)
	for i, r := range base {
		full := runConcurrently(t, ref, []*engine.Request{r})[0]
		var stop string
		if s := full.Text; len(s) > 24 && !strings.ContainsRune(s[17:20], '\uFFFD') {
			stop = s[17:20]
		}
		for _, limit := range []int{7, 13, 60} {
			req := *r
			req.MaxTokens = limit
			if stop != "" {
				req.Stop = []string{stop}
			}
			w := runConcurrently(t, ref, []*engine.Request{&req})[0]
			req2 := req
			g := runConcurrently(t, spec, []*engine.Request{&req2})[0]
			if g.Text != w.Text || !slices.Equal(g.Tokens, w.Tokens) || g.FinishReason != w.FinishReason || g.CompletionTokens != w.CompletionTokens {
				t.Fatalf("request %d, limit %d, stop %q: %q %v %s (%d)\nwant %q %v %s (%d)", i, limit, stop,
					g.Text, g.Tokens, g.FinishReason, g.CompletionTokens, w.Text, w.Tokens, w.FinishReason, w.CompletionTokens)
			}
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.specAccepted == 0 || rec.blocksUsed != 0 {
		t.Errorf("accepted %d, blocks used %d", rec.specAccepted, rec.blocksUsed)
	}
}

// Sampling with speculation keeps the requests' seeds reproducible and
// the per-request switch turns it off.
func TestSpeculativeSamplingAndOptOut(t *testing.T) {
	m := tiny(t)
	e, rec := newEngine(t, m, opts(func(o *engine.Options) { o.Draft = tinyDraft(t); o.SpecTokens = 4 }))
	seed := uint64(5)
	req := func() *engine.Request {
		return &engine.Request{Prompt: []int32{5, 6, 7, 8}, MaxTokens: 40, IgnoreEOS: true,
			Sampling: sampler.Params{Temperature: 0.8, TopP: 0.9, RepetitionPenalty: 1.1, Seed: &seed}}
	}
	a := runConcurrently(t, e, []*engine.Request{req()})[0]
	b := runConcurrently(t, e, []*engine.Request{req()})[0]
	if !slices.Equal(a.Tokens, b.Tokens) || len(a.Tokens) != 40 {
		t.Errorf("seeded sampling with speculation: %v then %v", a.Tokens, b.Tokens)
	}
	rec.mu.Lock()
	drafts := rec.specDrafts
	rec.mu.Unlock()
	if drafts == 0 {
		t.Fatal("no verification")
	}
	off := req()
	off.NoSpeculation = true
	runConcurrently(t, e, []*engine.Request{off})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.specDrafts != drafts {
		t.Errorf("a request that turned speculation off was verified (%d -> %d)", drafts, rec.specDrafts)
	}
}

// A draft of another vocabulary is refused, naming both files.
func TestSpeculativeDraftVocabulary(t *testing.T) {
	other, err := randomModel("other-vocab", model.RandomConfig{Arch: "llama", Layers: 1, Embd: 64, FF: 128, Heads: 2, KVHeads: 2,
		Vocab: 300, ContextLen: 256, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = engine.New(tiny(t), opts(func(o *engine.Options) { o.Draft = other }))
	if err == nil || !strings.Contains(err.Error(), "other-vocab") || !strings.Contains(err.Error(), "tiny") {
		t.Fatalf("error %v, want one naming both models", err)
	}
	for _, n := range []int{0, 17} {
		if _, err := engine.New(tiny(t), opts(func(o *engine.Options) { o.SpecNgram = 3; o.SpecTokens = n })); err == nil {
			t.Errorf("%d draft tokens per step accepted", n)
		}
	}
	_ = context.Background
}

// Long answers: guesses past the token slice's capacity (a regression: the
// step sliced the tokens for the guesses' positions).
func TestSpeculativeLongAnswer(t *testing.T) {
	m := tiny(t)
	ref, _ := newEngine(t, m, opts(nil))
	spec, _ := newEngine(t, m, opts(func(o *engine.Options) { o.Draft = m; o.SpecTokens = 8 }))
	req := func() *engine.Request {
		return &engine.Request{Prompt: []int32{3, 4, 5, 6}, Sampling: greedy(), MaxTokens: 400, IgnoreEOS: true}
	}
	want := runConcurrently(t, ref, []*engine.Request{req()})[0]
	got := runConcurrently(t, spec, []*engine.Request{req()})[0]
	if !slices.Equal(got.Tokens, want.Tokens) {
		t.Fatalf("%d tokens differ from the %d without speculation", len(got.Tokens), len(want.Tokens))
	}
}
