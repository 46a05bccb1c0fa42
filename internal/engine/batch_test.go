package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"mistralrs/internal/config"
	"mistralrs/internal/demo"
	"mistralrs/internal/engine"
	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
	"mistralrs/internal/sampler"
)

// recorder is a StatsSink keeping everything the engine reports.
type recorder struct {
	mu          sync.Mutex
	tokens      int
	lookups     int
	hits        int
	evictions   int
	completed   map[string]int
	rejected    map[string]int
	capacity    int
	running     int
	waiting     int
	maxRunning  int
	blocksUsed  int
	blocksTotal int
	maxBlocks   int
	preempted   int
	pending     int
	encHits     int
	encMisses   int
	// speculative decoding
	specDrafts, specProposed, specAccepted, specDrops int
	specPerPos                                        []int

	gate chan struct{} // while set, the scheduler waits in a report of processed tokens
}

func newRecorder() *recorder {
	return &recorder{completed: map[string]int{}, rejected: map[string]int{}}
}

func (r *recorder) lock() func() { r.mu.Lock(); return r.mu.Unlock }

func (r *recorder) record(st engine.Stats) {
	r.mu.Lock()
	r.add(st)
	gate := r.gate
	r.mu.Unlock()
	if gate != nil && st.Tokens > 0 {
		<-gate
	}
}

func (r *recorder) add(st engine.Stats) {
	r.tokens += st.Tokens
	r.lookups += st.PrefixLookups
	r.hits += st.PrefixHits
	r.evictions += st.PrefixEvictions
	r.preempted += st.Preemptions
	r.encHits += st.EncoderHits
	r.encMisses += st.EncoderMisses
	for _, f := range st.Finished {
		if f.Rejected {
			r.rejected[f.Reason]++
		} else {
			r.completed[f.Reason]++
		}
	}
	r.specDrafts += st.SpecDrafts
	r.specProposed += st.SpecProposed
	r.specAccepted += st.SpecAccepted
	for i, n := range st.SpecAcceptedPerPos {
		if i >= len(r.specPerPos) {
			r.specPerPos = append(r.specPerPos, 0)
		}
		r.specPerPos[i] += n
	}
	r.specDrops += st.SpecStagedDrops
	if st.Measured&engine.LevelQueues != 0 {
		r.running, r.waiting = st.Running, st.Waiting
		r.maxRunning = max(r.maxRunning, st.Running)
	}
	if st.Measured&engine.LevelKV != 0 {
		r.blocksUsed, r.blocksTotal = st.KVBlocksUsed, st.KVBlocksTotal
		r.maxBlocks = max(r.maxBlocks, st.KVBlocksUsed)
	}
	if st.Measured&engine.LevelPending != 0 {
		r.pending = st.PendingAdmission
	}
	if st.Measured&engine.LevelCapacity != 0 {
		r.capacity = st.Capacity
	}
}

var (
	tinyOnce  sync.Once
	tinyModel *loader.Model
	tinyErr   error
)

// tiny returns a small random model whose weight type gives every row of a
// matrix product the same bits whatever the other rows of the batch (see
// invariantType), so that outputs must match exactly between batch shapes.
func tiny(t testing.TB) *loader.Model {
	t.Helper()
	tinyOnce.Do(func() {
		tinyModel, tinyErr = randomModel("tiny", model.RandomConfig{Arch: "llama", Layers: 2, Embd: 256, FF: 512, Heads: 4, KVHeads: 2,
			Vocab: 384, ContextLen: 2048, Seed: 7})
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyModel
}

// randomModel builds a random-weight model of cfg with a batch-invariant
// weight type, parsed from memory.
func randomModel(name string, cfg model.RandomConfig) (*loader.Model, error) {
	typ, ok := invariantType()
	if !ok {
		return nil, errors.New("no weight type has batch-invariant kernels: dot4 differs from dot in the last bits for every type, " +
			"so batched outputs cannot match single-sequence outputs bit for bit")
	}
	cfg.Type = typ
	w, err := demo.RandomModel(cfg)
	if err != nil {
		return nil, err
	}
	var buf bytesBuffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	f, err := gguf.Parse(name, buf.b)
	if err != nil {
		return nil, err
	}
	return loader.FromFile(f, loader.Options{ID: name})
}

// invariantType finds a weight type whose MatMul computes each row alike
// for any number of rows: the four-row kernel (dot4) must agree bit for bit
// with the one-row kernel (dot). The engine's batches, chunked prefills and
// recomputations are exact only then; otherwise they differ from a lone
// sequence in the last bits, which can flip a near-tie token. It tries the
// assembly kernels first, then the pure-Go ones (switching SIMD off for
// the test binary).
func invariantType() (kernels.Type, bool) {
	types := []kernels.Type{kernels.Q6_K, kernels.Q5_K, kernels.Q4_K, kernels.Q8_0, kernels.Q5_0, kernels.Q4_0, kernels.F16, kernels.F32}
	for _, simd := range []bool{true, false} {
		if !simd {
			kernels.SetSIMD(false)
		}
		for _, typ := range types {
			if rowInvariant(typ) {
				return typ, true
			}
		}
	}
	return 0, false
}

func rowInvariant(typ kernels.Type) bool {
	const rows, cols = 48, 512
	rng := rand.New(rand.NewPCG(5, 6))
	vals := make([]float32, cols)
	data := make([]byte, rows*typ.RowSize(cols))
	for r := range rows {
		for i := range vals {
			vals[i] = float32(rng.NormFloat64())
		}
		kernels.Quantize(typ, vals, data[r*typ.RowSize(cols):(r+1)*typ.RowSize(cols)])
	}
	m, err := kernels.NewMatrix(typ, rows, cols, data)
	if err != nil {
		return false
	}
	const n = 19
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	all := make([]float32, n*rows)
	kernels.MatMul(nil, all, m, x, n)
	one := make([]float32, rows)
	for i := range n {
		kernels.MatMul(nil, one, m, x[i*cols:(i+1)*cols], 1)
		if !slices.Equal(one, all[i*rows:(i+1)*rows]) {
			return false
		}
	}
	return true
}

type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

func newEngine(t testing.TB, m *loader.Model, o engine.Options) (*engine.Engine, *recorder) {
	t.Helper()
	if o.Threads == 0 {
		o.Threads = 2
	}
	e, err := engine.New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	rec := newRecorder()
	e.SetStatsSink(rec.record)
	return e, rec
}

func opts(mod func(*engine.Options)) engine.Options {
	o := config.DefaultEngineOptions()
	o.BlockSize = 16
	frac := o.MemoryFraction
	o.MemoryFraction = 0
	if mod != nil {
		mod(&o)
	}
	if o.ContextLen == 0 && o.MemoryMB == 0 && o.MemoryFraction == 0 {
		o.MemoryFraction = frac // no budget of the test's own: the default
	}
	return o
}

// requests are 16 prompts of different lengths, some sharing a long
// prefix, half greedy and half seeded sampling.
func requests(n, maxTokens, maxLen int) []*engine.Request {
	rng := rand.New(rand.NewPCG(3, 4))
	shared := make([]int32, 70)
	for i := range shared {
		shared[i] = int32(rng.IntN(256))
	}
	var reqs []*engine.Request
	for i := range n {
		var p []int32
		if i%3 == 0 {
			p = append(p, shared[:min(40+i, maxLen/2)]...)
		}
		for range 1 + rng.IntN(maxLen*(i+1)/n) {
			p = append(p, int32(rng.IntN(256)))
		}
		s := sampler.Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1}
		if i%2 == 1 {
			seed := uint64(i)
			s = sampler.Params{Temperature: 0.9, TopP: 0.95, TopK: 40, RepetitionPenalty: 1.1, Seed: &seed}
		}
		reqs = append(reqs, &engine.Request{Prompt: p, Sampling: s, MaxTokens: maxTokens, IgnoreEOS: true})
	}
	return reqs
}

// runConcurrently submits all requests at once and returns their results.
func runConcurrently(t testing.TB, e *engine.Engine, reqs []*engine.Request) []*engine.Result {
	t.Helper()
	res := make([]*engine.Result, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			var n int
			res[i], errs[i] = e.Generate(context.Background(), r, func(o engine.Output) error {
				n++
				if o.Time.IsZero() {
					return errors.New("output without a time")
				}
				return nil
			})
			if errs[i] == nil && n != res[i].CompletionTokens {
				errs[i] = fmt.Errorf("%d outputs for %d tokens", n, res[i].CompletionTokens)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	return res
}

// runTogether is runConcurrently with every request submitted before the
// scheduler's second step: its first step waits (in the stats sink) until all
// have arrived, so they share batches however the goroutines are scheduled.
func runTogether(t testing.TB, e *engine.Engine, rec *recorder, reqs []*engine.Request) []*engine.Result {
	t.Helper()
	gate := make(chan struct{})
	rec.mu.Lock()
	rec.gate = gate
	want := rec.lookups + len(reqs)
	rec.mu.Unlock()
	done := make(chan []*engine.Result)
	go func() { done <- runConcurrently(t, e, reqs) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec.mu.Lock()
		all := rec.lookups >= want
		rec.mu.Unlock()
		if all || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	rec.mu.Lock()
	rec.gate = nil
	rec.mu.Unlock()
	close(gate)
	return <-done
}

func runAlone(t testing.TB, e *engine.Engine, reqs []*engine.Request) []*engine.Result {
	t.Helper()
	var out []*engine.Result
	for _, r := range reqs {
		out = append(out, runConcurrently(t, e, []*engine.Request{r})...)
	}
	return out
}

// checkIdle verifies that an idle engine holds no KV block and its pool
// is consistent.
func checkIdle(t testing.TB, e *engine.Engine, rec *recorder) {
	t.Helper()
	if err := e.CheckKV(); err != nil {
		t.Fatal(err)
	}
	defer rec.lock()()
	if rec.running != 0 || rec.waiting != 0 || rec.blocksUsed != 0 {
		t.Errorf("idle engine: running %d waiting %d blocks used %d", rec.running, rec.waiting, rec.blocksUsed)
	}
	if used, _ := e.KVCacheBlocks(); used != 0 {
		t.Errorf("idle engine holds %d blocks", used)
	}
}

// The same requests give the same tokens alone and in a batch of 16, with
// chunked prefill, prefix-cache hits, preemptions, without paging and
// without a KV cache.
func TestBatchedOutputMatchesAlone(t *testing.T) {
	m := tiny(t)
	t.Logf("%s model, SIMD kernels %v", m.Net.Config.Arch, kernels.SIMD())
	// The race detector slows the pure-Go kernels tenfold: shorter prompts
	// and generations there.
	reqs := requests(16, 20, 200)
	if raceEnabled {
		reqs = requests(16, 6, 60)
	}
	ref, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1; o.PrefixCacheN = 0 }))
	want := runAlone(t, ref, reqs)
	// With keys and values stored as halves the tokens may differ from a
	// float32 cache, but not between alone and batched.
	// So with the other cache types (keys and values apart too).
	kvTypes := func(o engine.Options) string { return o.CacheType + "/" + o.CacheTypeK + "/" + o.CacheTypeV }
	wantTyped := map[string][]*engine.Result{}
	typed := func(ct, k, v string) func(o *engine.Options) {
		set := func(o *engine.Options) { o.CacheType, o.CacheTypeK, o.CacheTypeV = ct, k, v }
		ref, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxSeqs = 1; o.PrefixCacheN = 0; set(o) }))
		o := opts(set)
		wantTyped[kvTypes(o)] = runAlone(t, ref, reqs)
		return set
	}
	f16 := typed("f16", "", "")
	q8 := typed("q8_0", "", "")
	f8 := typed("f8e4m3", "", "")
	q4bf16 := typed("", "q4_0", "bf16")

	cases := []struct {
		name        string
		opts        engine.Options
		warm        bool // run every request alone first: the batch hits the prefix cache
		wantPreempt bool
	}{
		{name: "paged", opts: opts(nil)},
		{name: "paged-chunked-prefill", opts: opts(func(o *engine.Options) { o.MaxNumBatchedTokens = 40 })},
		{name: "paged-prefix-hits", opts: opts(nil), warm: true},
		{name: "paged-tiny-token-budget", opts: opts(func(o *engine.Options) { o.MaxNumBatchedTokens = 5 })},
		{name: "paged-preemption", opts: opts(func(o *engine.Options) { o.ContextLen = 400; o.MaxDecodeStepsBeforePrefill = 2 }), wantPreempt: true},
		{name: "paged-preemption-prefix-hits", opts: opts(func(o *engine.Options) { o.ContextLen = 400 }), warm: true, wantPreempt: true},
		{name: "contiguous", opts: opts(func(o *engine.Options) { o.PagedAttn = "off" })},
		{name: "contiguous-prefix-hits", opts: opts(func(o *engine.Options) { o.PagedAttn = "off"; o.MaxNumBatchedTokens = 64 }), warm: true},
		{name: "no-kv-cache", opts: opts(func(o *engine.Options) { o.NoKVCache = true })},
		{name: "f16-paged-preemption-prefix-hits", opts: opts(func(o *engine.Options) { f16(o); o.ContextLen = 400 }), warm: true, wantPreempt: true},
		{name: "f16-contiguous-prefix-hits", opts: opts(func(o *engine.Options) { f16(o); o.PagedAttn = "off"; o.MaxNumBatchedTokens = 64 }), warm: true},
		{name: "q8_0-paged-preemption-prefix-hits", opts: opts(func(o *engine.Options) { q8(o); o.ContextLen = 400 }), warm: true, wantPreempt: true},
		{name: "f8e4m3-paged-chunked-prefill-prefix-hits", opts: opts(func(o *engine.Options) { f8(o); o.MaxNumBatchedTokens = 40 }), warm: true},
		{name: "q4_0-bf16-paged-preemption", opts: opts(func(o *engine.Options) { q4bf16(o); o.ContextLen = 400; o.MaxDecodeStepsBeforePrefill = 2 }), wantPreempt: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reqs, want := reqs, want
			if w, ok := wantTyped[kvTypes(c.opts)]; ok {
				want = w
			}
			if c.opts.NoKVCache {
				// It recomputes every sequence for every token: keep it small.
				reqs, want = reqs[:5], want[:5]
			}
			e, rec := newEngine(t, m, c.opts)
			if c.warm {
				runAlone(t, e, reqs)
			}
			got := runTogether(t, e, rec, reqs)
			for i := range reqs {
				if !slices.Equal(got[i].Tokens, want[i].Tokens) {
					t.Errorf("request %d (prompt %d tokens): batched %v\nalone %v", i, len(reqs[i].Prompt), got[i].Tokens, want[i].Tokens)
				}
				if got[i].Text != want[i].Text || got[i].FinishReason != engine.FinishLength {
					t.Errorf("request %d: text %q reason %s, alone %q", i, got[i].Text, got[i].FinishReason, want[i].Text)
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
			if c.warm && rec.hits < len(reqs)/2 {
				t.Errorf("%d prefix-cache hits for %d repeated prompts", rec.hits, len(reqs))
			}
			if rec.completed[engine.FinishLength] != len(reqs)*(1+btoi(c.warm)) || rec.lookups != rec.completed[engine.FinishLength] {
				t.Errorf("completed %v, lookups %d", rec.completed, rec.lookups)
			}
			t.Logf("max running %d, preemptions %d, hits %d, evictions %d, max blocks %d/%d",
				rec.maxRunning, rec.preempted, rec.hits, rec.evictions, rec.maxBlocks, rec.blocksTotal)
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func longPrompt(n int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(rng.IntN(256))
	}
	return p
}

// A second request with the same long prompt reuses its KV blocks.
func TestPrefixCacheHit(t *testing.T) {
	for _, mode := range []string{"on", "off"} {
		t.Run("paged-"+mode, func(t *testing.T) {
			e, rec := newEngine(t, tiny(t), opts(func(o *engine.Options) { o.PagedAttn = mode }))
			plen := 600
			if raceEnabled {
				plen = 200
			}
			req := &engine.Request{Prompt: longPrompt(plen, 1), Sampling: greedy(), MaxTokens: 4, IgnoreEOS: true}
			first := runAlone(t, e, []*engine.Request{req})[0]
			rec.mu.Lock()
			tokens1, hits1 := rec.tokens, rec.hits
			rec.mu.Unlock()
			second := runAlone(t, e, []*engine.Request{req})[0]
			defer rec.lock()()
			if hits1 != 0 || rec.hits != 1 || rec.lookups != 2 {
				t.Errorf("hits %d then %d, lookups %d", hits1, rec.hits, rec.lookups)
			}
			want := (plen - 1) / 16 * 16 // whole blocks before the last token
			if mode == "off" {
				want = plen - 1
			}
			if second.CachedTokens != want || first.CachedTokens != 0 {
				t.Errorf("cached tokens %d then %d, want 0 then %d", first.CachedTokens, second.CachedTokens, want)
			}
			if !slices.Equal(first.Tokens, second.Tokens) {
				t.Errorf("tokens differ: %v vs %v", first.Tokens, second.Tokens)
			}
			processed := rec.tokens - tokens1
			wantProcessed := plen - want + 3
			if mode == "off" {
				wantProcessed = plen + 3 // the default scheduler counts the cached prefix too
			}
			if processed != wantProcessed {
				t.Errorf("second request processed %d tokens, want %d", processed, wantProcessed)
			}
			t.Logf("time to first token: %v, then %v with the prefix cached", first.PromptTime, second.PromptTime)
		})
	}
}

func TestPrefixCacheEvictions(t *testing.T) {
	t.Run("paged", func(t *testing.T) {
		e, rec := newEngine(t, tiny(t), opts(func(o *engine.Options) { o.ContextLen = 320 }))
		a := &engine.Request{Prompt: longPrompt(160, 1), Sampling: greedy(), MaxTokens: 8, IgnoreEOS: true}
		b := &engine.Request{Prompt: longPrompt(300, 2), Sampling: greedy(), MaxTokens: 4, IgnoreEOS: true}
		runAlone(t, e, []*engine.Request{a, b})
		// b needs 19 of the 20 blocks: it evicts 9 of a's 10 cached
		// blocks, the last ones first.
		rec.mu.Lock()
		if rec.evictions != 9 || rec.hits != 0 {
			t.Errorf("evictions %d hits %d, want 9 and 0", rec.evictions, rec.hits)
		}
		rec.mu.Unlock()
		// a finds its first block; its 10 others evict 9 of b's.
		runAlone(t, e, []*engine.Request{a})
		defer rec.lock()()
		if rec.evictions != 18 || rec.hits != 1 {
			t.Errorf("evictions %d hits %d, want 18 and 1", rec.evictions, rec.hits)
		}
	})
	t.Run("contiguous", func(t *testing.T) {
		e, rec := newEngine(t, tiny(t), opts(func(o *engine.Options) { o.PagedAttn = "off"; o.PrefixCacheN = 2 }))
		var reqs []*engine.Request
		for i := range 4 {
			reqs = append(reqs, &engine.Request{Prompt: longPrompt(20, uint64(i)), Sampling: greedy(), MaxTokens: 2, IgnoreEOS: true})
		}
		runAlone(t, e, reqs)
		defer rec.lock()()
		if rec.evictions != 2 || rec.hits != 0 {
			t.Errorf("evictions %d hits %d, want 2 and 0", rec.evictions, rec.hits)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		e, rec := newEngine(t, tiny(t), opts(func(o *engine.Options) { o.PrefixCacheN = 0 }))
		req := &engine.Request{Prompt: longPrompt(100, 1), Sampling: greedy(), MaxTokens: 2, IgnoreEOS: true}
		runAlone(t, e, []*engine.Request{req, req})
		defer rec.lock()()
		if rec.hits != 0 || rec.lookups != 2 {
			t.Errorf("hits %d lookups %d, want 0 and 2 (lookups count even when off)", rec.hits, rec.lookups)
		}
	})
}

func TestRejectPromptLongerThanPool(t *testing.T) {
	e, rec := newEngine(t, tiny(t), opts(func(o *engine.Options) { o.ContextLen = 320 }))
	_, err := e.Generate(context.Background(), &engine.Request{Prompt: longPrompt(321, 1), Sampling: greedy()}, nil)
	var re *engine.RequestError
	if !errors.As(err, &re) || re.Reason != engine.RejectOverCapacity {
		t.Fatalf("error %v, want a %s rejection", err, engine.RejectOverCapacity)
	}
	// A prompt that fits the pool exactly runs; it ends when the pool is full.
	res, err := e.Generate(context.Background(), &engine.Request{Prompt: longPrompt(318, 1), Sampling: greedy(), MaxTokens: 10, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.FinishReason != engine.FinishLength || res.CompletionTokens != 3 {
		t.Errorf("reason %s after %d tokens, want length after 3", res.FinishReason, res.CompletionTokens)
	}
	checkIdle(t, e, rec)
	defer rec.lock()()
	if rec.rejected[engine.RejectOverCapacity] != 1 || rec.lookups != 2 || rec.completed[engine.FinishLength] != 1 {
		t.Errorf("rejected %v lookups %d completed %v", rec.rejected, rec.lookups, rec.completed)
	}
}

func TestCancelFreesBlocks(t *testing.T) {
	e, rec := newEngine(t, tiny(t), opts(nil))
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	res, err := e.Generate(ctx, &engine.Request{Prompt: longPrompt(100, 1), Sampling: greedy(), MaxTokens: 1000, IgnoreEOS: true},
		func(engine.Output) error {
			n++
			if n == 5 {
				cancel()
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if res.FinishReason != engine.FinishCanceled || res.CompletionTokens != 5 || n != 5 {
		t.Errorf("reason %s, %d tokens, %d outputs; want canceled after 5", res.FinishReason, res.CompletionTokens, n)
	}
	checkIdle(t, e, rec)
	defer rec.lock()()
	if rec.completed[engine.FinishCanceled] != 1 {
		t.Errorf("completed %v", rec.completed)
	}
}

// Random arrivals, cancellations and preemptions on a small pool: every
// request ends, each is counted once, and the pool is whole afterwards.
func TestNoBlockLeaks(t *testing.T) {
	n, maxLen := 48, 200
	if raceEnabled {
		n, maxLen = 24, 60
	}
	rng := rand.New(rand.NewPCG(9, 9))
	m := tiny(t)
	for _, mode := range []string{"on", "off"} {
		t.Run("paged-"+mode, func(t *testing.T) {
			e, rec := newEngine(t, m, opts(func(o *engine.Options) {
				o.PagedAttn = mode
				o.ContextLen = 2 * maxLen
				o.MaxSeqs = 8
				o.MaxNumBatchedTokens = 96
				o.MaxDecodeStepsBeforePrefill = 3
			}))
			var wg sync.WaitGroup
			var mu sync.Mutex
			reasons := map[string]int{}
			for range n {
				delay := time.Duration(rng.IntN(30)) * time.Millisecond
				prompt := longPrompt(1+rng.IntN(maxLen), uint64(rng.IntN(6))) // some prompts repeat: prefix hits
				stopAfter := rng.IntN(40)                                     // 0: never cancel
				cancelCtx := rng.IntN(3) == 0
				req := &engine.Request{Prompt: prompt, Sampling: greedy(), MaxTokens: 1 + rng.IntN(30), IgnoreEOS: true}
				wg.Go(func() {
					time.Sleep(delay)
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					k := 0
					res, err := e.Generate(ctx, req, func(engine.Output) error {
						k++
						if k == stopAfter {
							if cancelCtx {
								cancel()
								return nil
							}
							return errors.New("client gone")
						}
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					reasons[res.FinishReason]++
					mu.Unlock()
				})
			}
			wg.Wait()
			checkIdle(t, e, rec)
			defer rec.lock()()
			total := 0
			for _, v := range rec.completed {
				total += v
			}
			if total != n || rec.lookups != n || rec.completed[engine.FinishCanceled] != reasons[engine.FinishCanceled] {
				t.Errorf("completed %v (callers saw %v), lookups %d, want %d each", rec.completed, reasons, rec.lookups, n)
			}
			t.Logf("completed %v, preemptions %d, hits %d, evictions %d, max running %d", rec.completed, rec.preempted, rec.hits, rec.evictions, rec.maxRunning)
		})
	}
}

func TestOptions(t *testing.T) {
	m := tiny(t)
	bad := []engine.Options{
		opts(func(o *engine.Options) { o.PagedAttn = "maybe" }),
		opts(func(o *engine.Options) { o.MemoryFraction = 1.5 }),
		opts(func(o *engine.Options) { o.MemoryMB = -1 }),
		opts(func(o *engine.Options) { o.PrefixCacheN = -1 }),
		opts(func(o *engine.Options) { o.CacheType = "q5_k" }),
		opts(func(o *engine.Options) { o.CacheTypeV = "f8" }),
		opts(func(o *engine.Options) { o.CacheType = "q8_0"; o.PagedAttn = "off" }), // the contiguous caches store f32 or f16
		opts(func(o *engine.Options) { o.CacheTypeK = "q4_0"; o.NoKVCache = true }),
		opts(func(o *engine.Options) { o.MaxSeqs = 0 }),
		opts(func(o *engine.Options) { o.MaxNumBatchedTokens = -1 }),
		opts(func(o *engine.Options) { o.MaxDecodeStepsBeforePrefill = 0 }),
		opts(func(o *engine.Options) { o.BlockSize = 0 }),
		{}, // no defaults here: config.DefaultEngineOptions fills them
		func() engine.Options { o := opts(nil); o.MemoryFraction = 0; return o }(), // paged with no budget
		opts(func(o *engine.Options) { o.MemoryMB = 100000000 }),                   // more than any machine here
		opts(func(o *engine.Options) { o.ContextLen = 1 << 30 }),
	}
	for i, o := range bad {
		if e, err := engine.New(m, o); err == nil {
			e.Close()
			t.Errorf("options %d accepted", i)
		}
	}
	// Budgets: fraction wins over context length wins over memory.
	e, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MemoryMB = 1; o.ContextLen = 160 }))
	if _, total := e.KVCacheBlocks(); total != 10 {
		t.Errorf("context budget of 160 tokens: %d blocks, want 10", total)
	}
	e, _ = newEngine(t, m, opts(func(o *engine.Options) { o.MemoryMB = 1; o.CacheType = "f32" }))
	// 2 layers × 16 positions × (128+128) floats × 4 bytes = 32 KiB per block
	if _, total := e.KVCacheBlocks(); total != 32 {
		t.Errorf("1 MB budget of floats: %d blocks, want 32", total)
	}
	e, _ = newEngine(t, m, opts(func(o *engine.Options) { o.MemoryMB = 1 }))
	if _, total := e.KVCacheBlocks(); total != 64 {
		t.Errorf("1 MB budget of the default type (f16): %d blocks, want 64", total)
	}
	e, _ = newEngine(t, m, opts(func(o *engine.Options) { o.MemoryMB = 1; o.CacheType = "f16" }))
	if _, total := e.KVCacheBlocks(); total != 64 {
		t.Errorf("1 MB budget of halves: %d blocks, want 64", total)
	}
	// The blocks' bytes follow the types: q8_0 and f8e4m3 34 bytes per 32
	// values, q4_0 18, f16 and bf16 2 a value.
	for _, c := range []struct {
		ct, k, v string
		want     int
	}{{"q8_0", "", "", 120}, {"f8e4m3", "", "", 120}, {"q4_0", "", "", 227}, {"bf16", "", "", 64}, {"", "q8_0", "f16", 83}, {"f16", "q8_0", "", 83}} {
		e, _ = newEngine(t, m, opts(func(o *engine.Options) { o.MemoryMB = 1; o.CacheType, o.CacheTypeK, o.CacheTypeV = c.ct, c.k, c.v }))
		if _, total := e.KVCacheBlocks(); total != c.want {
			t.Errorf("1 MB budget of %s/%s/%s: %d blocks, want %d", c.ct, c.k, c.v, total, c.want)
		}
		if want := fmt.Sprintf("KV cache: %d tokens (%d blocks of 16)", 16*c.want, c.want); !strings.HasPrefix(e.KVSummary(), want) {
			t.Errorf("summary %q, want it to start %q", e.KVSummary(), want)
		}
	}
	if _, err := engine.New(m, opts(func(o *engine.Options) { o.CacheType = "q5_k" })); err == nil || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "bf16, q8_0, q4_0, f8e4m3") {
		t.Errorf("unknown cache type: %v, want one line listing the types", err)
	}
	e, _ = newEngine(t, m, opts(func(o *engine.Options) { o.MemoryFraction = 0.9; o.MemoryMB = 1 }))
	if _, total := e.KVCacheBlocks(); total < 2048/16 || total > 2*32*2048/16 {
		t.Errorf("memory fraction 0.9: %d blocks, want one to 64 contexts of 128", total)
	}
	e, rec := newEngine(t, m, opts(func(o *engine.Options) { o.PagedAttn = "off" }))
	if _, total := e.KVCacheBlocks(); total != 0 || e.Paged() {
		t.Errorf("paged off: %d blocks", total)
	}
	if rec.capacity != 32 || e.Capacity() != 32 {
		t.Errorf("capacity %d", rec.capacity)
	}
}

func TestCloseEndsGenerations(t *testing.T) {
	m := tiny(t)
	e, err := engine.New(m, opts(nil))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		var once sync.Once
		_, err := e.Generate(context.Background(), &engine.Request{Prompt: longPrompt(10, 1), Sampling: greedy(), MaxTokens: 1500, IgnoreEOS: true},
			func(engine.Output) error { once.Do(func() { close(started) }); return nil })
		errc <- err
	}()
	<-started
	e.Close()
	if err := <-errc; !errors.Is(err, engine.ErrClosed) {
		t.Errorf("running generation got %v, want ErrClosed", err)
	}
	if _, err := e.Generate(context.Background(), &engine.Request{Prompt: []int32{1}, Sampling: greedy()}, nil); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("generation after close got %v", err)
	}
}
