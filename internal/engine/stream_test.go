package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"mistralrs/internal/engine"
)

// readAll reads a stream to its end the way the server does: wait on
// Ready, take what arrived.
func readAll(t *testing.T, st *engine.Stream, onOut func(engine.Output)) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !st.Done() {
		select {
		case <-st.Ready():
		case <-deadline:
			t.Fatal("stream never ended")
		}
		for {
			o, ok := st.Next()
			if !ok {
				break
			}
			onOut(o)
		}
	}
}

// A Stream read directly gives what Generate gives.
func TestSubmitStream(t *testing.T) {
	e := newDemo(t)
	req := func() *engine.Request {
		return &engine.Request{Prompt: e.Tokenizer().Encode("stream me", true, false), Sampling: greedy(), MaxTokens: 10, IgnoreEOS: true}
	}
	want, wantOuts := collect(t, e, req())
	st, err := e.Submit(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Result(); err == nil {
		t.Error("Result before the end succeeded")
	}
	var toks []int32
	readAll(t, st, func(o engine.Output) { toks = append(toks, o.Token) })
	got, err := st.Result()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tokens, want.Tokens) || got.Text != want.Text || len(toks) != len(wantOuts) || !slices.Equal(toks, got.Tokens) {
		t.Errorf("stream %v %q (outputs %v), Generate %v %q", got.Tokens, got.Text, toks, want.Tokens, want.Text)
	}
	if _, err := e.Submit(context.Background(), &engine.Request{}); err == nil {
		t.Error("empty prompt accepted")
	}
}

// Ending the context cancels the sequence: the engine lets it go (reason
// canceled, its KV blocks back in the pool), and the result holds what was
// read.
func TestSubmitContextCancels(t *testing.T) {
	e, rec := newEngine(t, tiny(t), opts(nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := e.Submit(ctx, &engine.Request{Prompt: []int32{1, 2, 3}, Sampling: greedy(), MaxTokens: 1500, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	var read []int32
	for len(read) < 3 {
		<-st.Ready()
		for {
			o, ok := st.Next()
			if !ok {
				break
			}
			read = append(read, o.Token)
		}
	}
	cancel()
	// The context's end reaches the stream asynchronously: an output or two
	// may still come, and the result holds exactly what was read.
	readAll(t, st, func(o engine.Output) { read = append(read, o.Token) })
	res, err := st.Result()
	if err != nil {
		t.Fatal(err)
	}
	if res.FinishReason != engine.FinishCanceled || !slices.Equal(res.Tokens, read) || res.CompletionTokens != len(read) {
		t.Errorf("result %s %v (%d), want canceled with the %d tokens read %v", res.FinishReason, res.Tokens, res.CompletionTokens, len(read), read)
	}
	rec.mu.Lock()
	completed := rec.completed["canceled"]
	rec.mu.Unlock()
	if used, _ := e.KVCacheBlocks(); completed != 1 || used != 0 {
		t.Errorf("completed canceled %d, blocks used %d; want 1 and 0", completed, used)
	}
	if err := e.CheckKV(); err != nil {
		t.Error(err)
	}
}
