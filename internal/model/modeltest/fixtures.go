// Package modeltest holds what the tests of internal/model and of its
// architecture packages share: random fixtures (built once per
// configuration), the float64 oracle of the llama family (Ref), greedy
// decoding and batched runs over a Model, llama.cpp's reference outputs in
// ../shared/testdata, and the run of the reference tests on every
// instruction-set path.
package modeltest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
)

// fixtureFiles caches fixture files across tests: building K-quant fixtures
// is the slowest part of the tests.
var fixtureFiles struct {
	sync.Mutex
	dir   string
	paths map[string]string
}

// Main runs a package's tests (call it from TestMain) and removes the
// fixture files.
func Main(m *testing.M) int {
	code := m.Run()
	if fixtureFiles.dir != "" {
		os.RemoveAll(fixtureFiles.dir)
	}
	return code
}

// BuildFixture writes a random model (once per configuration) and opens it.
func BuildFixture(t testing.TB, cfg model.RandomConfig) *gguf.File {
	t.Helper()
	key := fmt.Sprintf("%+v", cfg)
	fixtureFiles.Lock()
	path, ok := fixtureFiles.paths[key]
	if !ok {
		if fixtureFiles.dir == "" {
			dir, err := os.MkdirTemp("", "model-fixtures")
			if err != nil {
				fixtureFiles.Unlock()
				t.Fatal(err)
			}
			fixtureFiles.dir, fixtureFiles.paths = dir, map[string]string{}
		}
		path = filepath.Join(fixtureFiles.dir, fmt.Sprintf("model%d.gguf", len(fixtureFiles.paths)))
		w := gguf.NewWriter()
		err := model.BuildRandom(cfg, w)
		if err == nil {
			err = w.WriteFile(path)
		}
		if err != nil {
			fixtureFiles.Unlock()
			t.Fatal(err)
		}
		fixtureFiles.paths[key] = path
	}
	fixtureFiles.Unlock()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// LoadFixture builds (once) and loads a random model.
func LoadFixture(t testing.TB, cfg model.RandomConfig) (*model.Model, *gguf.File) {
	t.Helper()
	f := BuildFixture(t, cfg)
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return m, f
}

// FixtureConfigs are the architectures under test. Row lengths (Embd, FF,
// Heads*HeadDim) are multiples of 256 so that K-quants apply everywhere.
func FixtureConfigs() map[string]model.RandomConfig {
	return map[string]model.RandomConfig{
		// GQA, llama3 rope factors, linear rope scaling
		"llama": {Arch: "llama", Layers: 2, Embd: 256, FF: 512, Heads: 8, KVHeads: 2, Vocab: 96,
			RopeFreqs: true, RopeScale: 2, Seed: 1},
		"llama-tied": {Arch: "llama", Layers: 2, Embd: 256, FF: 256, Heads: 4, KVHeads: 4, Vocab: 80,
			Tied: true, RopeBase: 500000, Seed: 2},
		"qwen2": {Arch: "qwen2", Layers: 2, Embd: 256, FF: 512, Heads: 4, KVHeads: 2, Vocab: 70,
			RopeBase: 1e6, RMSEps: 1e-6, Seed: 3},
		// head_dim 64 while Embd/Heads is 32
		"qwen3": {Arch: "qwen3", Layers: 2, Embd: 256, FF: 256, Heads: 8, KVHeads: 4, HeadDim: 64, Vocab: 64,
			RopeBase: 1e6, RMSEps: 1e-6, Tied: true, Seed: 4},
	}
}

// AllTypes are the weight types the fixtures are built with.
var AllTypes = []kernels.Type{kernels.F32, kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_0, kernels.Q4_1,
	kernels.Q5_0, kernels.Q5_1, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K}

// Tolerance is the allowed max |logit difference| to the float64 oracle,
// relative to the largest reference logit. Quantized weight types quantize
// the activations to 8 bits in MatMul, which the oracle does not.
func Tolerance(t kernels.Type) float64 {
	switch {
	case kernels.FloatActivations(t):
		return 1e-5 // the kernels keep float activations for float weights
	case t == kernels.BF16:
		return 1e-2 // activations rounded to bfloat16 (AVX512-BF16's VDPBF16PS)
	}
	return 5e-2
}

// OpenModel loads the model file at path.
func OpenModel(t *testing.T, path string) *model.Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Greedy feeds prompt, then n argmax tokens one at a time, and returns the
// generated ids and the logits after the prompt.
func Greedy(t *testing.T, m *model.Model, p *kernels.Pool, prompt []int32, n int) ([]int32, []float32) {
	t.Helper()
	cache := NewContiguous(m.Config, len(prompt)+n)
	logits := make([]float32, m.Config.Vocab)
	if err := m.Forward(p, &model.Batch{Seqs: []*model.SeqInput{{Tokens: prompt, Cache: cache, Logits: logits}}}); err != nil {
		t.Fatal(err)
	}
	first := slices.Clone(logits)
	var out []int32
	for len(out) < n {
		tok := Argmax(logits)
		out = append(out, tok)
		if len(out) == n {
			break
		}
		err := m.Forward(p, &model.Batch{Seqs: []*model.SeqInput{{Tokens: []int32{tok}, Pos: cache.Len(), Cache: cache, Logits: logits}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out, first
}

// Edit describes a change to a fixture: metadata (nil value: delete; new keys are added) and
// tensors (nil: delete).
type Edit struct {
	KV      map[string]any
	Tensors map[string]*gguf.TensorInfo
}

// Rewrite copies f with the Edit applied and opens the copy.
func Rewrite(t *testing.T, f *gguf.File, e Edit) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		v, ok := e.KV[kv.Key]
		switch {
		case !ok:
			w.AddKV(kv.Key, kv.Value)
		case v != nil:
			w.AddKV(kv.Key, v)
		}
	}
	for k, v := range e.KV {
		if _, ok := f.Get(k); !ok && v != nil {
			w.AddKV(k, v)
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if repl, ok := e.Tensors[ti.Name]; ok {
			if repl == nil {
				continue
			}
			ti = repl
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "bad.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	out, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	return out
}
