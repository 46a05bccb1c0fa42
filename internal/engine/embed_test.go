package engine_test

import (
	"context"
	"math"
	"runtime"
	"sync"
	"testing"

	"mistralrs/internal/demo"
	"mistralrs/internal/engine"
	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
	"mistralrs/internal/sampler"
)

func f32Model(t *testing.T, pooling int) *loader.Model {
	t.Helper()
	w, err := demo.RandomModel(model.RandomConfig{Arch: "qwen3", Layers: 2, Embd: 128, FF: 256, Heads: 4, KVHeads: 2,
		Vocab: 300, ContextLen: 512, Type: kernels.F32, Seed: 5, PoolingType: pooling})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytesBuffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("embed", buf.b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := loader.FromFile(f, loader.Options{ID: "embed"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// refEmbedding pools the hidden states of one forward pass over the whole
// prompt in float64 and normalises.
func refEmbedding(t *testing.T, m *loader.Model, prompt []int32, pooling string) []float64 {
	t.Helper()
	c := m.Net.Config
	E := c.Embd
	h := make([]float32, len(prompt)*E)
	cache := kvcache.NewContiguousCache(c.KVShape(), len(prompt), false)
	if err := m.Net.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{{Tokens: prompt, Cache: cache, Hidden: h}}}); err != nil {
		t.Fatal(err)
	}
	v := make([]float64, E)
	switch pooling {
	case "mean":
		for i := range prompt {
			for d := range E {
				v[d] += float64(h[i*E+d]) / float64(len(prompt))
			}
		}
	case "cls":
		for d := range E {
			v[d] = float64(h[d])
		}
	case "last":
		for d := range E {
			v[d] = float64(h[(len(prompt)-1)*E+d])
		}
	}
	var n float64
	for _, x := range v {
		n += x * x
	}
	for d := range v {
		v[d] /= math.Sqrt(n)
	}
	return v
}

// Embeddings pool the final hidden states as the model's pooling type says
// and are L2-normalised; several inputs batched, in chunks, give what each
// gives alone.
func TestEmbed(t *testing.T) {
	prompts := [][]int32{promptOf(40), promptOf(7), promptOf(90)[3:], {5}}
	for pt, pooling := range map[int]string{0: "mean", 2: "cls", 3: "last"} {
		t.Run(pooling, func(t *testing.T) {
			m := f32Model(t, pt)
			if m.Net.Config.Pooling != pooling {
				t.Fatalf("pooling %q, want %q", m.Net.Config.Pooling, pooling)
			}
			for _, budget := range []int{4096, 16} { // 16: chunked prompts
				// f32 keys and values: the reference computes in float64.
				e, rec := newEngine(t, m, opts(func(o *engine.Options) { o.MaxNumBatchedTokens = budget; o.CacheType = "f32" }))
				got, err := e.Embed(context.Background(), prompts)
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range prompts {
					want := refEmbedding(t, m, p, pooling)
					var worst, norm float64
					for d, w := range want {
						worst = math.Max(worst, math.Abs(float64(got[i][d])-w))
						norm += float64(got[i][d]) * float64(got[i][d])
					}
					if worst > 1e-5 || math.Abs(norm-1) > 1e-5 {
						t.Errorf("budget %d, input %d: largest difference %g, squared norm %g", budget, i, worst, norm)
					}
				}
				rec.mu.Lock()
				if rec.blocksUsed != 0 || rec.completed["length"] != len(prompts) || rec.lookups != 0 {
					t.Errorf("blocks used %d, completed %v, lookups %d; want 0, all length (as mistral.rs), 0", rec.blocksUsed, rec.completed, rec.lookups)
				}
				rec.mu.Unlock()
			}
		})
	}
	m := f32Model(t, 0)
	e, _ := newEngine(t, m, opts(nil))
	for name, in := range map[string][][]int32{"none": nil, "empty input": {{}}, "token range": {{1, 300}}} {
		if _, err := e.Embed(context.Background(), in); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	rank := f32Model(t, 4)
	er, _ := newEngine(t, rank, opts(nil))
	if _, err := er.Embed(context.Background(), prompts[:1]); err == nil {
		t.Error("rank pooling made an embedding")
	}
}

// embedPrompts are n inputs of length tokens each, all different.
func embedPrompts(n, length int) [][]int32 {
	out := make([][]int32, n)
	for i := range out {
		p := promptOf(length + 1)[1:]
		p[0] = int32(1 + i%250)
		out[i] = p
	}
	return out
}

// A generation submitted while a large embeddings request is being
// computed finishes within a step or two of its token count, while the
// request is still running (issue 26: a 10-token chat waited 40.9 s
// behind 400 inputs of 500 tokens). The engine goes step by step through
// the stats sink's gate, so the test counts steps, not time.
func TestEmbedDoesNotStarveGeneration(t *testing.T) {
	const inputs, inputLen, maxTokens = 64, 200, 10
	m := f32Model(t, 0)
	e, rec := newEngine(t, m, opts(func(o *engine.Options) { o.MaxNumBatchedTokens = 256; o.CacheType = "f32" }))
	prompts := embedPrompts(inputs, inputLen)
	gate := make(chan struct{})
	rec.mu.Lock()
	rec.gate = gate
	rec.mu.Unlock()
	release := sync.OnceFunc(func() {
		rec.mu.Lock()
		rec.gate = nil
		rec.mu.Unlock()
		close(gate)
	})
	t.Cleanup(release) // before the engine closes
	type embedded struct {
		vecs [][]float32
		err  error
	}
	embedDone := make(chan embedded, 1)
	go func() {
		v, err := e.Embed(context.Background(), prompts)
		embedDone <- embedded{v, err}
	}()
	gate <- struct{}{} // the first step of the embeddings is computed
	st, err := e.Submit(context.Background(), &engine.Request{Prompt: promptOf(8), MaxTokens: maxTokens, IgnoreEOS: true,
		Sampling: sampler.Params{TopP: 1, RepetitionPenalty: 1}})
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for steps < 200 {
		for _, ok := st.Next(); ok; _, ok = st.Next() {
		}
		if st.Done() {
			break
		}
		select {
		case gate <- struct{}{}: // one more step
			steps++
		case <-st.Ready(): // the end may have come after the step
		}
	}
	select {
	case got := <-embedDone:
		t.Errorf("the embeddings finished before the generation (%d steps)", steps)
		embedDone <- got
	default:
	}
	release()
	// Its prompt step and one per token, and up to two steps already under
	// way when it arrived.
	if steps > maxTokens+3 {
		t.Errorf("the generation took %d steps for %d tokens", steps, maxTokens)
	}
	res, err := st.Result()
	if err != nil || res.CompletionTokens != maxTokens {
		t.Fatalf("generation: %+v, %v", res, err)
	}
	got := <-embedDone
	if got.err != nil {
		t.Fatal(got.err)
	}
	for _, i := range []int{0, inputs / 2, inputs - 1} {
		want := refEmbedding(t, m, prompts[i], "mean")
		for d, w := range want {
			if math.Abs(float64(got.vecs[i][d])-w) > 1e-5 {
				t.Fatalf("input %d, dimension %d: %g, want %g", i, d, got.vecs[i][d], w)
			}
		}
	}
	if err := e.CheckKV(); err != nil {
		t.Fatal(err)
	}
}

// An embeddings request allocates its step's hidden states, not every
// input's, and leaves nothing behind once it returns (issue 26: 2,048
// inputs of 500 tokens left 491 MB resident).
func TestEmbedMemory(t *testing.T) {
	const inputs, inputLen, budget = 256, 200, 1024
	m := f32Model(t, 0)
	e, _ := newEngine(t, m, opts(func(o *engine.Options) { o.MaxNumBatchedTokens, o.EmbeddingStepTokens = budget, budget }))
	prompts := embedPrompts(inputs, inputLen)
	if _, err := e.Embed(context.Background(), prompts); err != nil { // the model's own scratch grows here
		t.Fatal(err)
	}
	var before, after, idle runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	vecs, err := e.Embed(context.Background(), prompts)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	E := m.Net.Config.Embd
	// Per input: its tokens, its vector and its bookkeeping; per step: the
	// hidden states of the budget's tokens; and some KV blocks taken again
	// after the pool dropped their memory (past its warm mark).
	limit := uint64(inputs*(4*inputLen+4*E+4096) + 4*budget*E + 4<<20)
	// (The race detector's own allocations do not count.)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > limit && !raceEnabled {
		t.Errorf("%d inputs of %d tokens allocated %d bytes, want at most %d (one input's hidden states are %d)",
			inputs, inputLen, alloc, limit, 4*inputLen*E)
	}
	t.Logf("%d inputs of %d tokens: %d bytes allocated (limit %d)", inputs, inputLen, after.TotalAlloc-before.TotalAlloc, limit)
	runtime.KeepAlive(vecs)
	vecs = nil
	runtime.GC()
	runtime.ReadMemStats(&idle)
	if grown := int64(idle.HeapAlloc) - int64(before.HeapAlloc); grown > 1<<20 {
		t.Errorf("the heap grew by %d bytes after the request", grown)
	}
	// The KV blocks went back to the free ones, holding no prefix: no more
	// keep their memory than the pool keeps warm.
	if total, resident, cached := e.KVBlocks(); cached != 0 || resident > max(4, total/32) {
		t.Errorf("after the request: %d of %d blocks hold memory, %d a cached prefix", resident, total, cached)
	}
}
