package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"mistralrs/internal/kernels"
	"mistralrs/internal/testutil"
)

func TestStories260K(t *testing.T) {
	f, err := Open(testutil.SharedFile(t, "testdata", "real", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || len(f.KV) != 19 || len(f.Tensors) != 48 || f.Architecture() != "llama" {
		t.Fatalf("v%d, %d keys, %d tensors, arch %q", f.Version, len(f.KV), len(f.Tensors), f.Architecture())
	}
	for _, ti := range f.Tensors {
		if ti.Type != kernels.F32 || uint64(len(ti.Data)) != 4*ti.Elements() || !inside(f.maps[0], ti.Data) {
			t.Errorf("tensor %s: %s %v, %d bytes", ti.Name, ti.Type, ti.Dims, len(ti.Data))
		}
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 || emb.Dims[0] != 64 || emb.Dims[1] != 512 {
		t.Errorf("token_embd.weight: %v", emb)
	}
	if n, _ := f.Uint("llama.embedding_length"); n != 64 {
		t.Errorf("embedding_length %d", n)
	}
	if n, _ := f.Uint("llama.attention.head_count_kv"); n != 4 {
		t.Errorf("head_count_kv %d", n)
	}
	if eps, _ := f.Float("llama.attention.layer_norm_rms_epsilon"); eps < 0.9e-5 || eps > 1.1e-5 {
		t.Errorf("rms eps %v", eps)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	scores, _ := f.Float32s("tokenizer.ggml.scores")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	if len(toks) != 512 || len(scores) != 512 || len(types) != 512 {
		t.Errorf("vocab: %d tokens, %d scores, %d types", len(toks), len(scores), len(types))
	}
	if m, _ := f.String("tokenizer.ggml.model"); m != "llama" {
		t.Errorf("tokenizer model %q", m)
	}
}

// Every shared GGUF file parses and, written again by the Writer, comes out
// byte for byte the same.
func TestSharedFilesRoundTrip(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(testutil.SharedDir(t), "testdata", "*", "*.gguf"))
	if len(paths) == 0 {
		t.Skip("no shared GGUF files")
	}
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			t.Error(err)
			continue
		}
		if filepath.Base(filepath.Dir(p)) == "vocab" {
			if _, ok := f.Strings("tokenizer.ggml.tokens"); !ok || len(f.Tensors) != 0 {
				t.Errorf("%s: vocab file without tokens or with tensors", p)
			}
		}
		w := NewWriter()
		for _, kv := range f.KV {
			w.AddKV(kv.Key, kv.Value)
		}
		for _, ti := range f.Tensors {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
				t.Fatal(err)
			}
		}
		got := encode(t, w)
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: rewritten file differs (%d bytes, want %d)", p, len(got), len(want))
		}
		f.Close()
	}
}
