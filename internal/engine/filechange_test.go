package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mistralrs/internal/demo"
	"mistralrs/internal/engine"
	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
)

// A model file truncated while it is served (its weights are read from a
// memory map) fails the generations that touch it with a clear error, and
// every later one, instead of killing the process with SIGBUS.
func TestModelFileTruncatedWhileServing(t *testing.T) {
	cfg := model.RandomConfig{Arch: "llama", Layers: 2, Embd: 64, FF: 128, Heads: 4, Vocab: 259, Type: kernels.Q8_0, Seed: 7}
	w, err := demo.RandomModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m, err := loader.Load(path, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	e := newEng(t, m, 2) // one kernel worker besides the runner
	req := &engine.Request{Prompt: e.Tokenizer().Encode("hello there", true, false), Sampling: greedy(), MaxTokens: 4, IgnoreEOS: true}
	if _, err := e.Generate(context.Background(), req, nil); err != nil {
		t.Fatalf("before the change: %v", err)
	}

	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	if err := m.File.Check(); err == nil {
		t.Error("Check: no error after truncation")
	}
	for i := range 3 {
		// A new prompt each time: no prefix-cache hit spares the weights.
		req := &engine.Request{Prompt: e.Tokenizer().Encode(strings.Repeat("x", i+20), true, false), Sampling: greedy(), MaxTokens: 4, IgnoreEOS: true}
		_, err := e.Generate(context.Background(), req, nil)
		var ce *gguf.ChangedError
		if !errors.As(err, &ce) || ce.Path != path {
			t.Fatalf("generation %d after truncation: error %v, want a *gguf.ChangedError for %s", i, err, path)
		}
		if msg := err.Error(); !strings.Contains(msg, "changed on disk while in use") || !strings.Contains(msg, "reload the model") {
			t.Errorf("message %q", msg)
		}
	}
}

// A model file rewritten in place to the same length cannot fault, but
// its weights are no longer the model's: the next request that arrives
// finds the change and fails with the same error.
func TestModelFileRewrittenSameLength(t *testing.T) {
	cfg := model.RandomConfig{Arch: "llama", Layers: 2, Embd: 64, FF: 128, Heads: 4, Vocab: 259, Type: kernels.Q8_0, Seed: 7}
	w, err := demo.RandomModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m, err := loader.Load(path, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	e := newEng(t, m, 2)
	gen := func(prompt string) error {
		req := &engine.Request{Prompt: e.Tokenizer().Encode(prompt, true, false), Sampling: greedy(), MaxTokens: 4, IgnoreEOS: true}
		_, err := e.Generate(context.Background(), req, nil)
		return err
	}
	if err := gen("before"); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 1024), 2048); err != nil {
		t.Fatal(err)
	}
	f.Close()
	later := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(path, later, later); err != nil { // a coarse clock must not hide the write
		t.Fatal(err)
	}
	var ce *gguf.ChangedError
	if err := gen("after"); !errors.As(err, &ce) || e.Broken() == nil {
		t.Fatalf("after an in-place rewrite: %v (broken: %v)", err, e.Broken())
	}
}
