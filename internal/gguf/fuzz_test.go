package gguf

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/kernels"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the FuzzParse seed corpus in testdata/fuzz")

// seedFiles are small files made by the Writer: the fuzzer mutates them.
func seedFiles(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{"empty": encode(t, NewWriter())}

	w := NewWriter()
	for _, kv := range allValues {
		w.AddKV(kv.Key, kv.Value)
	}
	seeds["values"] = encode(t, w)

	w = NewWriter()
	w.AddKV("general.architecture", "llama")
	w.AddKV("tokenizer.ggml.tokens", []string{"<s>", "a", "b"})
	for _, typ := range []kernels.Type{kernels.F32, kernels.F16, kernels.Q4_0, kernels.Q8_0, kernels.Q4_K} {
		bs := uint64(typ.BlockSize())
		dims := []uint64{bs, 2}
		size, _ := tensorSize(typ, dims)
		if err := w.AddTensor("t."+typ.String(), typ, dims, bytes.Repeat([]byte{0x3c}, int(size))); err != nil {
			t.Fatal(err)
		}
	}
	seeds["tensors"] = encode(t, w)

	w = NewWriter()
	w.AddKV("general.alignment", uint32(64))
	w.AddKV("split.count", uint16(1))
	if err := w.AddTensor("x", kernels.F32, []uint64{1, 1, 1, 1}, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	seeds["aligned"] = encode(t, w)
	return seeds
}

// TestUpdateSeeds writes the seed corpus when run with -update-seeds.
func TestUpdateSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("run with -update-seeds to rewrite testdata/fuzz/FuzzParse")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seedFiles(t) {
		text := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzParse checks that parse never panics, that its errors are one line
// naming the file, and that whatever it accepts the Writer writes again in a
// stable form.
func FuzzParse(f *testing.F) {
	for _, b := range seedFiles(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := parse("fuzz.gguf", b)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz.gguf: ") || strings.Contains(msg, "\n") {
				t.Fatalf("bad error message %q", msg)
			}
			return
		}
		for _, ti := range file.Tensors {
			size, err := tensorSize(ti.Type, ti.Dims)
			if err != nil || uint64(len(ti.Data)) != size {
				t.Fatalf("tensor %q: %v, %d bytes, want %d", ti.Name, err, len(ti.Data), size)
			}
		}
		first := rewrite(t, file)
		again, err := parse("again.gguf", first)
		if err != nil {
			t.Fatalf("rewritten file does not parse: %v", err)
		}
		if second := rewrite(t, again); !bytes.Equal(first, second) {
			t.Fatal("rewriting is not stable")
		}
	})
}

func rewrite(t *testing.T, f *File) []byte {
	w := NewWriter()
	for _, kv := range f.KV {
		w.AddKV(kv.Key, kv.Value)
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
			t.Fatalf("writer refuses a parsed tensor: %v", err)
		}
	}
	return encode(t, w)
}
