package loader_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mistralrs/internal/config"
	"mistralrs/internal/demo"
	"mistralrs/internal/engine"
	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
	"mistralrs/internal/sampler"
)

// isqConfig has rows that fit every block size (256), two layers, untied.
var isqConfig = model.RandomConfig{Arch: "llama", Layers: 2, Embd: 256, FF: 512, Heads: 4, KVHeads: 2, Vocab: 300, Seed: 7}

// writeRandom writes cfg with weight type t (same seed: same values) to dir.
func writeRandom(t *testing.T, dir string, cfg model.RandomConfig, typ kernels.Type) string {
	t.Helper()
	cfg.Type = typ
	w, err := demo.RandomModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("m-%s-%d-%v.gguf", typ, cfg.Embd, cfg.Tied))
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func openFile(t *testing.T, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// The weights ISQ makes are byte for byte those the GGUF writer stores for a
// model built with that type (the same values quantized by the same code),
// except the output matrix, which gets Q6_K as llama-quantize gives it (Q8_0
// for a Q8_0 target). Norms stay F32 and in the mapping. Rows that do not
// fit a K-quant (n_embd 96) fall back as llama.cpp does.
func TestISQMatchesWriter(t *testing.T) {
	dir := t.TempDir()
	small := isqConfig
	small.Embd, small.FF, small.Heads, small.KVHeads = 96, 160, 3, 3
	tied := isqConfig
	tied.Tied = true
	for _, cfg := range []model.RandomConfig{isqConfig, small, tied} {
		src := writeRandom(t, dir, cfg, kernels.F32)
		for _, name := range loader.ISQNames() {
			s, err := loader.ParseISQ(name)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("%s/embd%d/tied=%v", name, cfg.Embd, cfg.Tied), func(t *testing.T) {
				m, err := loader.Load(src, loader.Options{ISQ: name})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				ref := openFile(t, writeRandom(t, dir, cfg, s.Type))
				out := ref
				if s.Type != kernels.Q8_0 {
					out = openFile(t, writeRandom(t, dir, cfg, kernels.Q6_K))
				}
				plain := openFile(t, src)
				converted := 0
				for i := range m.File.Tensors {
					got := &m.File.Tensors[i]
					want, _ := ref.Tensor(got.Name)
					if got.Name == "output.weight" || (cfg.Tied && got.Name == "token_embd.weight") {
						want, _ = out.Tensor(got.Name)
					}
					if got.Type != want.Type || !bytes.Equal(got.Data, want.Data) {
						t.Errorf("%s: %s, %d bytes; the writer's %s, %d bytes (equal bytes: %v)",
							got.Name, got.Type, len(got.Data), want.Type, len(want.Data), bytes.Equal(got.Data, want.Data))
					}
					if len(got.Dims) == 1 {
						orig, _ := plain.Tensor(got.Name)
						if got.Type != kernels.F32 || !bytes.Equal(got.Data, orig.Data) {
							t.Errorf("%s: vector changed to %s", got.Name, got.Type)
						}
					} else {
						converted++
					}
				}
				if m.ISQ == nil || m.ISQ.Converted != converted || m.ISQ.Kept != 0 {
					t.Errorf("report %+v, want %d converted", m.ISQ, converted)
				}
				var heap int64
				for i := range m.File.Tensors {
					if len(m.File.Tensors[i].Dims) > 1 {
						heap += int64(len(m.File.Tensors[i].Data))
					}
				}
				if m.ISQ.HeapBytes != heap {
					t.Errorf("heap bytes %d, want %d", m.ISQ.HeapBytes, heap)
				}
			})
		}
	}
}

// greedy returns the first n greedy tokens of m after a fixed prompt.
func greedy(t *testing.T, m *loader.Model, n int) []int32 {
	t.Helper()
	eng, err := engine.New(m, config.DefaultEngineOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sp := sampler.DefaultParams()
	sp.Temperature = 0
	res, err := eng.Generate(context.Background(), &engine.Request{
		Prompt: []int32{1, 72, 101, 108, 108, 111}, MaxTokens: n, IgnoreEOS: true, Sampling: sp,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tokens
}

// Greedy decoding of an F32 model quantized at load is that of the
// pre-quantized file with the same tensors.
func TestISQGreedyEqualsPrequantized(t *testing.T) {
	dir := t.TempDir()
	src := writeRandom(t, dir, isqConfig, kernels.F32)
	for _, name := range []string{"q8_0", "q4k", "q6k"} {
		s, _ := loader.ParseISQ(name)
		// The pre-quantized file: the model written with the type, with the
		// output matrix of the model written in Q6_K (Q8_0 keeps its own).
		ref := openFile(t, writeRandom(t, dir, isqConfig, s.Type))
		out := openFile(t, writeRandom(t, dir, isqConfig, kernels.Q6_K))
		w := gguf.NewWriter()
		for _, kv := range ref.KV {
			w.AddKV(kv.Key, kv.Value)
		}
		for _, ti := range ref.Tensors {
			if ti.Name == "output.weight" && s.Type != kernels.Q8_0 {
				o, _ := out.Tensor(ti.Name)
				ti = *o
			}
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
				t.Fatal(err)
			}
		}
		pre := filepath.Join(dir, "pre-"+name+".gguf")
		if err := w.WriteFile(pre); err != nil {
			t.Fatal(err)
		}
		a, err := loader.Load(src, loader.Options{ISQ: name})
		if err != nil {
			t.Fatal(err)
		}
		b, err := loader.Load(pre, loader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ga, gb := greedy(t, a, 24), greedy(t, b, 24)
		if len(ga) != 24 || !slices.Equal(ga, gb) {
			t.Errorf("%s: greedy with ISQ %v, pre-quantized %v", name, ga, gb)
		}
		if plain := greedy(t, mustLoad(t, src), 24); name == "q4k" && slices.Equal(plain, ga) {
			t.Logf("%s: the F32 model decodes the same 24 tokens", name)
		}
		a.Close()
		b.Close()
	}
}

func mustLoad(t *testing.T, path string) *loader.Model {
	t.Helper()
	m, err := loader.Load(path, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// F16 and BF16 weights are quantized from their values; quantized weights
// are requantized only to a smaller type, and kept otherwise.
func TestISQSources(t *testing.T) {
	dir := t.TempDir()
	for _, src := range []kernels.Type{kernels.F16, kernels.BF16, kernels.Q8_0} {
		path := writeRandom(t, dir, isqConfig, src)
		plain := openFile(t, path)
		m, err := loader.Load(path, loader.Options{ISQ: "Q4_K"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range m.File.Tensors {
			got := &m.File.Tensors[i]
			if len(got.Dims) == 1 {
				continue
			}
			orig, _ := plain.Tensor(got.Name)
			want := kernels.Q4_K
			if got.Name == "output.weight" {
				want = kernels.Q6_K
			}
			n := int(orig.Elements())
			vals := make([]float32, n)
			kernels.Dequantize(orig.Type, orig.Data, vals)
			enc := make([]byte, want.RowSize(n))
			kernels.Quantize(want, vals, enc)
			if got.Type != want || !bytes.Equal(got.Data, enc) {
				t.Errorf("%s from %s: %s, want %s of its values", got.Name, src, got.Type, want)
			}
		}
		m.Close()
	}
	// Q4_K weights are smaller than Q6_K: --isq q6k keeps them all.
	path := writeRandom(t, dir, isqConfig, kernels.Q4_K)
	m, err := loader.Load(path, loader.Options{ISQ: "q6k"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.ISQ.Converted != 0 || m.ISQ.Kept != 16 || m.ISQ.HeapBytes != 0 {
		t.Errorf("q6k over Q4_K: %+v", m.ISQ)
	}
	for i := range m.File.Tensors {
		if ti := &m.File.Tensors[i]; len(ti.Dims) > 1 && ti.Type != kernels.Q4_K {
			t.Errorf("%s became %s", ti.Name, ti.Type)
		}
	}
}

func TestParseISQ(t *testing.T) {
	for name, want := range map[string]kernels.Type{
		"q4_0": kernels.Q4_0, "Q4_1": kernels.Q4_1, "q5_0": kernels.Q5_0, "Q5_1": kernels.Q5_1, "q8_0": kernels.Q8_0,
		"q4k": kernels.Q4_K, "Q4K": kernels.Q4_K, "Q4_K": kernels.Q4_K, "q5k": kernels.Q5_K, "q6_k": kernels.Q6_K,
		"4": kernels.Q4_K, "5": kernels.Q5_K, "6": kernels.Q6_K, "8": kernels.Q8_0,
	} {
		s, err := loader.ParseISQ(name)
		if err != nil || s.Type != want {
			t.Errorf("%q: %v %v, want %s", name, s.Type, err, want)
		}
	}
	for name, want := range map[string]string{
		"q3k":  `ISQ type "q3k" is not supported by this engine (choose one of q4_0, q4_1, q5_0, q5_1, q8_0, q4k, q5k, q6k)`,
		"hqq4": "not supported by this engine",
		"q7":   `unknown ISQ type "q7" (choose one of q4_0,`,
		"":     "unknown ISQ type",
	} {
		_, err := loader.ParseISQ(name)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want %q", name, err, want)
		}
	}
	// An unknown name fails the load with that one line.
	dir := t.TempDir()
	_, err := loader.Load(writeRandom(t, dir, isqConfig, kernels.F32), loader.Options{ISQ: "q9k"})
	if err == nil || !strings.HasPrefix(err.Error(), `unknown ISQ type "q9k"`) {
		t.Errorf("load with q9k: %v", err)
	}
}

// Without a terminal the progress is plain lines, then one summary line
// with the memory the quantized weights take.
func TestISQStatusLines(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	m, err := loader.Load(writeRandom(t, dir, isqConfig, kernels.F32), loader.Options{ISQ: "q8_0", ISQStatus: &buf})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(lines[0], "isq Q8_0: ") || !strings.Contains(lines[len(lines)-2], "100%") ||
		!strings.Contains(last, "isq Q8_0: 16 tensors quantized (16 Q8_0), 0 kept") || !strings.Contains(last, "MiB in memory") {
		t.Errorf("status:\n%s", buf.String())
	}
	if len(lines) > 13 {
		t.Errorf("%d lines: at most one a tenth", len(lines))
	}
}

// llama.cpp's Q4_K_M mixture (use_more_bits over the layers in number order,
// not name order: blk.10 comes after blk.9) is the one model.BuildRandom
// lays out for Mix "Q4_K_M".
func TestPlanQ4KM(t *testing.T) {
	dir := t.TempDir()
	cfg := isqConfig
	cfg.Layers = 13
	f := openFile(t, writeRandom(t, dir, cfg, kernels.F32))
	s, err := loader.ParseScheme("q4_k_m")
	if err != nil || s.FileType != 15 {
		t.Fatal(s, err)
	}
	cfg.Mix = "Q4_K_M"
	w, err := demo.RandomModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mixPath := filepath.Join(dir, "mix.gguf")
	if err := w.WriteFile(mixPath); err != nil {
		t.Fatal(err)
	}
	mix := openFile(t, mixPath)
	plan := s.Plan(f)
	six := 0
	for i, ti := range f.Tensors {
		want, _ := mix.Tensor(ti.Name)
		if plan[i] != want.Type {
			t.Errorf("%s: plan %s, mixture %s", ti.Name, plan[i], want.Type)
		}
		if plan[i] == kernels.Q6_K {
			six++
		}
	}
	if six != 1+2*6 { // output, and attn_v + ffn_down of layers 0, 3, 6, 9, 11, 12
		t.Errorf("%d Q6_K tensors", six)
	}
}

// Which tensors llama-quantize keeps, and its rules for 8-expert models,
// on a tensor list made up for the purpose.
func TestPlanKeptTensorsAndExperts(t *testing.T) {
	f := &gguf.File{KV: []gguf.KV{
		{Key: "general.architecture", Value: "qwen3moe"},
		{Key: "qwen3moe.block_count", Value: uint32(2)},
		{Key: "qwen3moe.expert_count", Value: uint32(8)},
	}}
	want := map[string][2]kernels.Type{} // name → Q4_0 plan, Q4_K_M plan
	add := func(name string, dims []uint64, q40, q4km kernels.Type) {
		f.Tensors = append(f.Tensors, gguf.TensorInfo{Name: name, Dims: dims, Type: kernels.F32})
		want[name] = [2]kernels.Type{q40, q4km}
	}
	F32, Q40, Q4K, Q5K, Q6K, Q8 := kernels.F32, kernels.Q4_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K, kernels.Q8_0
	add("token_embd.weight", []uint64{256, 300}, Q40, Q4K)
	add("output.weight", []uint64{256, 300}, Q6K, Q6K)
	add("output_norm.weight", []uint64{256}, F32, F32)
	add("position_embd.weight", []uint64{256, 64}, F32, F32)
	for _, l := range []string{"0", "1"} {
		p := "blk." + l + "."
		add(p+"attn_norm.weight", []uint64{256, 1}, F32, F32) // a trailing 1 is no dimension
		add(p+"ssm_norm.weight", []uint64{256, 4}, F32, F32)  // a 2-D norm
		add(p+"attn_q.weight", []uint64{256, 256}, Q40, Q4K)
		add(p+"attn_q.bias", []uint64{256, 2}, F32, F32) // not a weight
		add(p+"attn_k.weight", []uint64{256, 128}, Q8, Q8)
		add(p+"attn_v.weight", []uint64{256, 128}, Q8, Q8)
		add(p+"attn_output.weight", []uint64{256, 256}, Q40, Q5K)
		add(p+"ffn_gate_inp.weight", []uint64{256, 8}, F32, F32)
		add(p+"ffn_gate_exps.weight", []uint64{256, 64, 8}, Q40, Q4K)
		// use_more_bits picks layer 1 of 2 (Q6_K, whose rows of 64 fall back to Q8_0), not 0 (Q4_K: Q5_0).
		down := map[string]kernels.Type{"0": kernels.Q5_0, "1": Q8}[l]
		add(p+"ffn_down_exps.weight", []uint64{64, 256, 8}, Q40, down)
		add(p+"ffn_up_exps.weight", []uint64{250, 64, 8}, kernels.F16, kernels.F16) // 250 fits no block
	}
	for k, name := range []string{"Q4_0", "Q4_K_M"} {
		s, err := loader.ParseScheme(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, typ := range s.Plan(f) {
			n := f.Tensors[i].Name
			if typ != want[n][k] {
				t.Errorf("%s: %s gets %s, want %s", name, n, typ, want[n][k])
			}
		}
	}
}

// A file cut short before ISQ reads its weights (on the worker goroutines)
// is a load error naming it, not a SIGBUS.
func TestISQFileTruncated(t *testing.T) {
	path := writeRandom(t, t.TempDir(), isqConfig, kernels.F32)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Truncate(path, 8192); err != nil {
		t.Fatal(err)
	}
	_, err = loader.FromFile(f, loader.Options{ISQ: "q8_0"})
	var ce *gguf.ChangedError
	if !errors.As(err, &ce) || ce.Path != path || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v, want a *gguf.ChangedError for %s", err, path)
	}
}
