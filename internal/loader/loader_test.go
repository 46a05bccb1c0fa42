package loader_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/demo"
	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
)

// tinyConfig is a one-layer llama with the demo's byte vocabulary.
var tinyConfig = model.RandomConfig{Arch: "llama", Layers: 1, Embd: 32, FF: 64, Heads: 2, Vocab: 259, Type: kernels.F32, Seed: 1}

// writeTiny writes the tiny model, changed by edit, to dir/name.
func writeTiny(t *testing.T, dir, name string, edit func(w *gguf.Writer)) string {
	t.Helper()
	w, err := demo.RandomModel(tinyConfig)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(w)
	}
	path := filepath.Join(dir, name)
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every kind of load error (file format, model, tokenizer, chat template)
// prints the model file's path exactly once, on one line, with the reason.
func TestLoadErrorsNamePathOnce(t *testing.T) {
	dir := t.TempDir()
	set := func(key string, v any) func(w *gguf.Writer) {
		return func(w *gguf.Writer) { w.AddKV(key, v) }
	}
	cases := []struct {
		name string
		edit func(w *gguf.Writer)
		want string
	}{
		{"tokens-ints", set("tokenizer.ggml.tokens", make([]int32, 259)),
			"tokenizer.ggml.tokens is an array of int32, expected an array of strings"},
		{"tokenizer-model", set("tokenizer.ggml.model", "xx"), `unsupported tokenizer model "xx"`},
		{"bos", set("tokenizer.ggml.bos_token_id", uint32(6500)), "bos_token_id = 6500 is outside the vocabulary"},
		{"arch", set("general.architecture", "foo"), `unsupported architecture "foo"`},
		{"context", set("llama.context_length", uint32(0)), "context_length 0"},
		{"template", set("tokenizer.chat_template", "{% for %}"), "tokenizer.chat_template"},
	}
	for _, c := range cases {
		path := writeTiny(t, dir, c.name+".gguf", c.edit)
		_, err := loader.Load(path, loader.Options{})
		checkOnce(t, c.name, path, err, c.want)
	}

	// A file cut short: the GGUF reader's error.
	path := writeTiny(t, dir, "cut.gguf", nil)
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	_, err := loader.Load(path, loader.Options{})
	checkOnce(t, "truncated", path, err, "cannot fit in the")
}

func checkOnce(t *testing.T, name, path string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: loaded", name)
		return
	}
	msg := err.Error()
	if n := strings.Count(msg, path); n != 1 {
		t.Errorf("%s: path appears %d times in %q", name, n, msg)
	}
	if !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
		t.Errorf("%s: error %q, want one line containing %q", name, msg, want)
	}
}

// A file cut short between opening and paging in the weights is a load
// error naming it, not a SIGBUS.
func TestFileTruncatedWhileLoading(t *testing.T) {
	path := writeTiny(t, t.TempDir(), "m.gguf", nil)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	_, err = loader.FromFile(f, loader.Options{Progress: func(done, total int64) {}})
	var ce *gguf.ChangedError
	if !errors.As(err, &ce) || ce.Path != path {
		t.Fatalf("error %v, want a *gguf.ChangedError for %s", err, path)
	}
}
