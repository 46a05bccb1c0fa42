package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"mistralrs/internal/engine"
	"mistralrs/internal/model/modeltest"
)

// slowUnit makes every Advance call do one unit of work: a step's leftover
// budget is worth far fewer FLOPs.
const slowUnit = int64(1) << 50

// checkEncoderIdle verifies that an idle engine holds no image embeddings
// besides what its cache keeps, and at most its budget of those.
func checkEncoderIdle(t testing.TB, e *engine.Engine) {
	t.Helper()
	u := e.EncoderUsage()
	if u.PinnedBytes != 0 || u.InFlightBytes != 0 || u.InFlight != 0 || u.CachedBytes > e.Options().EncoderCacheBytes {
		t.Errorf("idle engine's encoder memory %+v (budget %d)", u, e.Options().EncoderCacheBytes)
	}
}

// waitFor polls cond (the engine runs on its own goroutine) for up to a
// minute; it is a wait for a state, not a measure of speed.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Two image requests and a text request decoding together give the ids
// each gives alone, whatever the batch shapes: chunked prefill (the
// engine fails a step that would split an image), contiguous caches, no
// KV cache, and a pool small enough to preempt (encoder cache off: the
// embeddings are encoded again on re-admission).
func TestVisionBatched(t *testing.T) {
	f := loadVision(t)
	names := []string{"square", "two-images", "text-only", "text-before-image"}
	mk := func() []*engine.Request {
		var reqs []*engine.Request
		for _, n := range names {
			reqs = append(reqs, f.request(t, n, encoderSpec{units: 3}))
		}
		return reqs
	}
	ref, _ := newEngine(t, f.m, visionOpts(func(o *engine.Options) { o.MaxSeqs = 1; o.PrefixCacheN = 0 }))
	want := runAlone(t, ref, mk())
	for i, n := range names {
		c := f.cases[n]
		k := c.sure(modeltest.ReadF32(t, f.dir+"/"+c.StepsFile), f.m.Net.Config.Vocab)
		if !slices.Equal(want[i].Tokens[:k], c.Greedy[:k]) {
			t.Fatalf("%s alone: %v\nllama.cpp %v", n, want[i].Tokens, c.Greedy)
		}
	}
	for _, c := range []struct {
		name string
		opts engine.Options
	}{
		{"paged", visionOpts(nil)},
		{"chunked-prefill-6", visionOpts(func(o *engine.Options) { o.MaxNumBatchedTokens = 6 })},
		{"chunked-prefill-20", visionOpts(func(o *engine.Options) { o.MaxNumBatchedTokens = 20 })},
		{"contiguous", visionOpts(func(o *engine.Options) { o.PagedAttn = "off"; o.MaxNumBatchedTokens = 10 })},
		{"no-kv-cache", visionOpts(func(o *engine.Options) { o.NoKVCache = true })},
		{"preemption", visionOpts(func(o *engine.Options) { o.ContextLen = 96; o.EncoderCacheBytes = 0; o.MaxDecodeStepsBeforePrefill = 2 })},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, rec := newEngine(t, f.m, c.opts)
			got := runTogether(t, e, rec, mk())
			for i := range names {
				if !slices.Equal(got[i].Tokens, want[i].Tokens) {
					t.Errorf("%s: batched %v\nalone %v", names[i], got[i].Tokens, want[i].Tokens)
				}
			}
			checkIdle(t, e, rec)
			checkEncoderIdle(t, e)
			defer rec.lock()()
			if rec.maxRunning < 2 {
				t.Errorf("at most %d sequences ran at once", rec.maxRunning)
			}
			if c.name == "preemption" {
				if rec.preempted == 0 {
					t.Error("no preemption")
				}
				if u := e.EncoderUsage(); u.CachedBytes != 0 {
					t.Errorf("encoder cache off but %d bytes kept", u.CachedBytes)
				}
			}
			// square, square and wide, square: at least a miss per image
			// and a lookup per image of each request
			if rec.encMisses < 2 || rec.encHits+rec.encMisses < 4 {
				t.Errorf("encoder cache: %d hits, %d misses", rec.encHits, rec.encMisses)
			}
		})
	}
}

// The prefix cache over images: the same image after the same text is a
// hit (identical output, the image not looked up again when the hit
// covers it); a hit that ends inside the image computes the rest of it
// with the whole image in view (the output is a fresh engine's); another
// image after the same text hits only the text.
func TestVisionPrefixCache(t *testing.T) {
	f := loadVision(t)
	var starts atomic.Int64
	spec := encoderSpec{units: 2, starts: &starts}
	a := f.request(t, "text-before-image", spec) // text [0,16), image [16,32), text [32,37); blocks of 12
	if a.Images[0].Pos != 16 || len(a.Prompt) != 37 {
		t.Fatalf("image at %d of %d positions", a.Images[0].Pos, len(a.Prompt))
	}
	b := f.request(t, "text-before-image", spec)
	b.Prompt[32] = 403 // the same image, then other text: a hit of 2 blocks of 12, into the image
	other := f.request(t, "text-before-image", spec)
	wide := f.request(t, "wide", spec)
	other.Images[0].Key, other.Images[0].Encode = wide.Images[0].Key, wide.Images[0].Encode

	fresh, _ := newEngine(t, f.m, visionOpts(func(o *engine.Options) { o.BlockSize = 12; o.PrefixCacheN = 0 }))
	wantB, _ := collect(t, fresh, b)
	wantOther, _ := collect(t, fresh, other)
	if slices.Equal(wantB.Tokens, wantOther.Tokens) {
		t.Fatal("another image gives the same answer")
	}

	e, rec := newEngine(t, f.m, visionOpts(func(o *engine.Options) { o.BlockSize = 12 }))
	starts.Store(0)
	first, _ := collect(t, e, a)
	again, _ := collect(t, e, a)
	if again.CachedTokens != 36 || !slices.Equal(again.Tokens, first.Tokens) {
		t.Errorf("same image and text again: %d cached tokens (want 36), tokens %v\nfirst %v", again.CachedTokens, again.Tokens, first.Tokens)
	}
	got, _ := collect(t, e, b)
	if got.CachedTokens != 24 || !slices.Equal(got.Tokens, wantB.Tokens) {
		t.Errorf("hit into the image: %d cached tokens (want 24), tokens %v\nfresh engine %v", got.CachedTokens, got.Tokens, wantB.Tokens)
	}
	got, _ = collect(t, e, other)
	if got.CachedTokens != 12 || !slices.Equal(got.Tokens, wantOther.Tokens) {
		t.Errorf("another image: %d cached tokens (want 12: the text's block), tokens %v\nfresh engine %v", got.CachedTokens, got.Tokens, wantOther.Tokens)
	}
	checkIdle(t, e, rec)
	checkEncoderIdle(t, e)
	defer rec.lock()()
	// a: miss; a again: covered by the prefix, no lookup; b: hit (the rest
	// of the image); other: miss.
	if rec.encMisses != 2 || rec.encHits != 1 || starts.Load() != 2 {
		t.Errorf("encoder cache: %d hits, %d misses, %d encodings; want 1, 2, 2", rec.encHits, rec.encMisses, starts.Load())
	}
}

// The encoder cache keeps what its byte budget allows, least recently
// used out first; a hit gives the same output as a miss.
func TestVisionEncoderCacheLRU(t *testing.T) {
	f := loadVision(t)
	const image = 16 * 192 * 4
	e, rec := newEngine(t, f.m, visionOpts(func(o *engine.Options) { o.PrefixCacheN = 0; o.EncoderCacheBytes = 2 * image }))
	var starts atomic.Int64
	answers := map[string][]int32{}
	for i, step := range []struct {
		name string
		miss bool
	}{
		{"square", true}, {"wide", true}, {"tall", true}, // square out
		{"wide", false},   // tall, wide
		{"square", true},  // tall out
		{"tall", true},    // wide out
		{"square", false}, // tall, square
		{"wide", true},    // tall out
	} {
		before := starts.Load()
		res, _ := collect(t, e, f.request(t, step.name, encoderSpec{starts: &starts}))
		if missed := starts.Load() > before; missed != step.miss {
			t.Errorf("request %d (%s): miss %v, want %v", i, step.name, missed, step.miss)
		}
		if prev, ok := answers[step.name]; ok && !slices.Equal(prev, res.Tokens) {
			t.Errorf("request %d (%s): %v, before %v", i, step.name, res.Tokens, prev)
		}
		answers[step.name] = res.Tokens
		if u := e.EncoderUsage(); u.CachedBytes != min(int64(i+1), 2)*image || u.PinnedBytes != 0 {
			t.Errorf("after request %d: %+v", i, u)
		}
	}
	defer rec.lock()()
	if rec.encHits != 2 || rec.encMisses != 6 {
		t.Errorf("%d hits, %d misses; want 2, 6", rec.encHits, rec.encMisses)
	}
}

// Cancelling a request whose image is being encoded drops the encoding
// and gives back its KV blocks; another sequence sharing the encoding
// keeps it and finishes with the right answer.
func TestVisionCancelFreesEncoderMemory(t *testing.T) {
	f := loadVision(t)
	e, rec := newEngine(t, f.m, visionOpts(func(o *engine.Options) { o.EncoderCacheBytes = 0 }))
	var starts, calls atomic.Int64
	slow := encoderSpec{units: 1 << 30, unit: slowUnit, starts: &starts, calls: &calls}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := e.Submit(ctx, f.request(t, "square", slow))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the encoding to start", func() bool { return calls.Load() > 2 })
	if u := e.EncoderUsage(); u.InFlight != 1 || u.InFlightBytes != 16*192*4 {
		t.Errorf("while encoding: %+v", u)
	}
	cancel()
	waitFor(t, "the stream to end", st.Done)
	res, err := st.Result()
	if err != nil || res.FinishReason != engine.FinishCanceled {
		t.Fatalf("result %+v, %v", res, err)
	}
	waitFor(t, "the encoder memory to go", func() bool { u := e.EncoderUsage(); return u.InFlight == 0 && u.InFlightBytes == 0 })
	checkIdle(t, e, rec)

	// Two sequences share one encoding; cancelling one leaves it to the other.
	fast := encoderSpec{units: 20000, unit: slowUnit, starts: &starts, calls: &calls}
	starts.Store(0)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	st, err = e.Submit(ctx, f.request(t, "square", fast))
	if err != nil {
		t.Fatal(err)
	}
	calls.Store(0)
	waitFor(t, "the encoding to start", func() bool { return calls.Load() > 2 })
	done := make(chan *engine.Result)
	go func() {
		r, _ := e.Generate(context.Background(), f.request(t, "square", fast), nil)
		done <- r
	}()
	waitFor(t, "the second request to share the encoding", func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return rec.encHits == 1 })
	cancel()
	r := <-done
	if r == nil || !slices.Equal(r.Tokens, f.cases["square"].Greedy) {
		t.Errorf("the sequence left with the encoding: %v", r)
	}
	if starts.Load() != 1 {
		t.Errorf("%d encodings for one image", starts.Load())
	}
	waitFor(t, "the stream to end", st.Done)
	checkIdle(t, e, rec)
	checkEncoderIdle(t, e)
}

// A slow encoding runs a slice per step beside a decoding sequence: the
// decode gets a token in every step of the encoding.
func TestVisionSlowEncoderInterleaves(t *testing.T) {
	f := loadVision(t)
	e, rec := newEngine(t, f.m, visionOpts(nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	text := f.request(t, "text-only", encoderSpec{})
	text.MaxTokens = 400
	st, err := e.Submit(ctx, text)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the text request to decode", func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return rec.tokens > len(text.Prompt) })
	const units = 20
	var seen []int // tokens processed when each Advance call came
	spec := encoderSpec{units: units, unit: slowUnit, onAdvance: func() {
		rec.mu.Lock()
		seen = append(seen, rec.tokens)
		rec.mu.Unlock()
	}}
	res, _ := collect(t, e, f.request(t, "square", spec))
	if !slices.Equal(res.Tokens, f.cases["square"].Greedy) {
		t.Errorf("image request: %v", res.Tokens)
	}
	if len(seen) != units {
		t.Fatalf("%d Advance calls for %d units", len(seen), units)
	}
	for i := 1; i < units; i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("no token computed between encoding slices %d and %d (tokens seen %v)", i-1, i, seen)
		}
	}
	if st.Done() {
		t.Fatal("the text request ended before the encoding did")
	}
	cancel()
	waitFor(t, "the text request to end", st.Done)
	checkIdle(t, e, rec)
	checkEncoderIdle(t, e)
}

// A request with images never speculates; its answer is unchanged.
func TestVisionNoSpeculation(t *testing.T) {
	f := loadVision(t)
	e, rec := newEngine(t, f.m, visionOpts(func(o *engine.Options) { o.SpecNgram = 3; o.SpecTokens = 4 }))
	res, _ := collect(t, e, f.request(t, "tall", encoderSpec{}))
	if n := 26; !slices.Equal(res.Tokens[:n], f.cases["tall"].Greedy[:n]) {
		t.Errorf("tokens %v", res.Tokens)
	}
	rec.mu.Lock()
	drafts := rec.specDrafts
	rec.mu.Unlock()
	if drafts != 0 {
		t.Errorf("%d speculative verifications for a request with images", drafts)
	}
	// (The same engine speculates on text: the test would see it.)
	collect(t, e, f.request(t, "text-only", encoderSpec{}))
	defer rec.lock()()
	if rec.specDrafts == 0 {
		t.Error("no speculation on text either: the check above proves nothing")
	}
}

// Bad images are refused before they run; embeddings take no images.
func TestVisionBadRequests(t *testing.T) {
	f := loadVision(t)
	e, _ := newEngine(t, f.m, visionOpts(nil))
	for _, c := range []struct {
		mod  func(r *engine.Request)
		want string
	}{
		{func(r *engine.Request) { r.Images[0].Len = 0 }, "has 0 positions"},
		{func(r *engine.Request) { r.Images[0].Pos = 30 }, "covers positions [30, 46) of a prompt of 42"},
		{func(r *engine.Request) { r.Images[1].Pos = r.Images[0].Pos + 3 }, "overlaps"},
		{func(r *engine.Request) { r.Images[0], r.Images[1] = r.Images[1], r.Images[0] }, "overlaps or precedes"},
		{func(r *engine.Request) { r.Images[0].Encode = nil }, "has no encoder"},
		{func(r *engine.Request) { r.Prompt[1] = -4 }, "prompt token -4 outside the vocabulary"},
		{func(r *engine.Request) { r.Images = r.Images[:1]; r.Prompt[len(r.Prompt)-10] = -4 }, "prompt token -4 outside"},
	} {
		req := f.request(t, "two-images", encoderSpec{})
		c.mod(req)
		_, err := e.Submit(context.Background(), req)
		var re *engine.RequestError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want a RequestError with %q", err, c.want)
		}
	}
	// The prompt's placeholders are the engine's: any value the caller put
	// there is fine, and the caller's prompt is left as it was.
	req := f.request(t, "square", encoderSpec{})
	for i := range 16 {
		req.Prompt[req.Images[0].Pos+i] = int32(-1 - i)
	}
	before := slices.Clone(req.Prompt)
	res, _ := collect(t, e, req)
	if !slices.Equal(res.Tokens, f.cases["square"].Greedy) || !slices.Equal(req.Prompt, before) {
		t.Errorf("tokens %v; prompt changed: %v", res.Tokens, !slices.Equal(req.Prompt, before))
	}
	// An encoder whose embeddings do not fit the image fails the request.
	req = f.request(t, "square", encoderSpec{})
	req.Images[0].Encode = func() engine.Encoder { return &refEncoder{rows: make([]float32, 10), units: 1, unit: 1} }
	req.Images[0].Key[0] ^= 0xff // (not the square's cached embeddings)
	if _, err := e.Generate(context.Background(), req, nil); err == nil || !strings.Contains(err.Error(), "image encoder gave 10 values") {
		t.Errorf("short embeddings: %v", err)
	}
	checkEncoderIdle(t, e)
	_, err := e.Embed(context.Background(), [][]int32{{1, -5, 3}})
	if err == nil || !strings.Contains(err.Error(), "not images") {
		t.Errorf("Embed with a placeholder id: %v", err)
	}
}

// The choices of a request with images share its prompt (computed once,
// the image encoded once): greedy choices all give llama.cpp's ids.
func TestVisionChoices(t *testing.T) {
	f := loadVision(t)
	e, rec := newEngine(t, f.m, visionOpts(nil))
	var starts atomic.Int64
	req := f.request(t, "two-images", encoderSpec{starts: &starts})
	req.N = 3
	res, err := e.GenerateAll(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !slices.Equal(r.Tokens, f.cases["two-images"].Greedy) {
			t.Errorf("choice %d: %v", i, r.Tokens)
		}
	}
	if starts.Load() != 2 {
		t.Errorf("%d encodings for two images", starts.Load())
	}
	checkIdle(t, e, rec)
	checkEncoderIdle(t, e)
}
