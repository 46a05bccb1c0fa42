package engine_test

import (
	"context"
	"slices"
	"testing"

	"mistralrs/internal/engine"
	"mistralrs/internal/sampler"
)

// collectChoices runs req and returns every choice's result and its
// outputs by index.
func collectChoices(t *testing.T, e *engine.Engine, req *engine.Request) ([]*engine.Result, [][]int32) {
	t.Helper()
	st, err := e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	outs := make([][]int32, max(req.N, 1))
	readAll(t, st, func(o engine.Output) { outs[o.Index] = append(outs[o.Index], o.Token) })
	res, err := st.Results()
	if err != nil {
		t.Fatal(err)
	}
	return res, outs
}

// n choices: the prompt is computed once and shared; greedy choices are
// the single answer n times, seeded ones reproducible, each choice with its
// own random stream.
func TestChoicesShareThePrompt(t *testing.T) {
	m := tiny(t)
	for _, mode := range []string{"paged", "contiguous", "paged-one-slot", "paged-q8_0"} {
		t.Run(mode, func(t *testing.T) {
			e, rec := newEngine(t, m, opts(func(o *engine.Options) {
				switch mode {
				case "paged-q8_0": // the choices fork blocks of quantized rows
					o.CacheType = "q8_0"
					o.PrefixCacheN = 0
				case "contiguous":
					o.PagedAttn = "off"
					o.PrefixCacheN = 0
				case "paged-one-slot":
					o.MaxSeqs = 2 // the third choice waits and computes the prompt itself
					o.PrefixCacheN = 0
				default:
					o.PrefixCacheN = 0 // (else the single answer's blocks would serve the prompt)
				}
			}))
			prompt := promptOf(37)
			single := runConcurrently(t, e, []*engine.Request{{Prompt: prompt, Sampling: greedy(), MaxTokens: 12, IgnoreEOS: true}})[0]
			rec.mu.Lock()
			rec.tokens = 0
			rec.mu.Unlock()
			res, outs := collectChoices(t, e, &engine.Request{Prompt: prompt, Sampling: greedy(), MaxTokens: 12, IgnoreEOS: true, N: 3})
			for i, r := range res {
				if !slices.Equal(r.Tokens, single.Tokens) || !slices.Equal(outs[i], r.Tokens) || r.PromptTokens != 37 {
					t.Fatalf("choice %d: %v (outputs %v), want %v", i, r.Tokens, outs[i], single.Tokens)
				}
			}
			rec.mu.Lock()
			processed := rec.tokens
			used := rec.blocksUsed
			lookups := rec.lookups
			rec.mu.Unlock()
			if lookups != 1+3 {
				t.Errorf("prefix-cache lookups %d, want one per sequence: 1 + 3 choices", lookups)
			}
			// Paged and contiguous: the prompt once, then one token per
			// decode step of each choice; with one slot short, the last
			// choice computes the prompt again.
			want := 37 + 3*11
			if mode == "paged-one-slot" {
				want += 37
			}
			if processed != want || used != 0 {
				t.Errorf("tokens processed %d, want %d; blocks used %d", processed, want, used)
			}
			if err := e.CheckKV(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestChoicesSampled(t *testing.T) {
	e, _ := newEngine(t, tiny(t), opts(nil))
	seed := uint64(9)
	req := func(n int) *engine.Request {
		return &engine.Request{Prompt: promptOf(20), MaxTokens: 16, IgnoreEOS: true, N: n,
			Sampling: sampler.Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1, Seed: &seed}}
	}
	a, _ := collectChoices(t, e, req(4))
	b, _ := collectChoices(t, e, req(4))
	one, _ := collectChoices(t, e, req(1))
	distinct := map[string]bool{}
	for i := range a {
		if !slices.Equal(a[i].Tokens, b[i].Tokens) {
			t.Errorf("choice %d not reproducible with the seed", i)
		}
		distinct[string(encode(a[i].Tokens))] = true
	}
	if len(distinct) < 3 {
		t.Errorf("only %d distinct answers among 4 sampled choices: the choices share a random stream", len(distinct))
	}
	if !slices.Equal(one[0].Tokens, a[0].Tokens) {
		t.Errorf("the first choice differs from the single answer with the same seed")
	}
	if _, err := e.Submit(context.Background(), req(engine.MaxChoices+1)); err == nil {
		t.Errorf("%d choices accepted", engine.MaxChoices+1)
	}
}

func encode(t []int32) []byte {
	b := make([]byte, 0, 4*len(t))
	for _, v := range t {
		b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return b
}

// Cancelling a request of several choices ends them all, before and after
// the fork.
func TestChoicesCancel(t *testing.T) {
	e, rec := newEngine(t, tiny(t), opts(nil))
	for _, after := range []int{0, 3} {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := e.Submit(ctx, &engine.Request{Prompt: promptOf(30), Sampling: greedy(), MaxTokens: 1500, IgnoreEOS: true, N: 3})
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < after; {
			<-st.Ready()
			for {
				if _, ok := st.Next(); !ok {
					break
				}
				n++
			}
		}
		cancel()
		readAll(t, st, func(engine.Output) {})
		res, err := st.Results()
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.FinishReason != engine.FinishCanceled {
				t.Errorf("cancelled after %d outputs: choice %d finished with %s", after, i, r.FinishReason)
			}
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.completed["canceled"] != 6 || rec.blocksUsed != 0 {
		t.Errorf("completed %v, blocks used %d", rec.completed, rec.blocksUsed)
	}
}

func promptOf(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(1 + i*7%250)
	}
	return p
}
