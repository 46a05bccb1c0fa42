package main

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"mistralrs/internal/config"
	"mistralrs/internal/demo"
	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
	"mistralrs/internal/testutil"
)

func openGGUF(t *testing.T, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func writeRandomModel(t *testing.T, cfg model.RandomConfig, path string) string {
	t.Helper()
	w, err := demo.RandomModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// quantize -type Q4_K_M of an F32 model writes the model that
// model.BuildRandom lays out as llama.cpp's Q4_K_M (Mix "Q4_K_M"), tensor for
// tensor and byte for byte, with the input's metadata and llama.cpp's
// file-type number.
func TestQuantizeQ4KMMatchesMixture(t *testing.T) {
	dir := t.TempDir()
	cfg := model.RandomConfig{Arch: "llama", Layers: 10, Embd: 256, FF: 512, Heads: 4, KVHeads: 2, Vocab: 300, Seed: 3, Type: kernels.F32}
	in := writeRandomModel(t, cfg, filepath.Join(dir, "f32.gguf"))
	cfg.Mix = "Q4_K_M"
	ref := openGGUF(t, writeRandomModel(t, cfg, filepath.Join(dir, "mix.gguf")))
	out := filepath.Join(dir, "out.gguf")
	_, stderr, err := execute(t, "", "quantize", "-f", in, "-o", out, "--type", "q4_k_m")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "quantize Q4_K_M: "+in+" -> "+out+": 72 tensors converted (11 Q6_K, 61 Q4_K), 21 kept") {
		t.Errorf("stderr: %s", stderr)
	}
	got, src := openGGUF(t, out), openGGUF(t, in)
	if len(got.Tensors) != len(ref.Tensors) {
		t.Fatalf("%d tensors, want %d", len(got.Tensors), len(ref.Tensors))
	}
	for _, ti := range got.Tensors {
		want, _ := ref.Tensor(ti.Name)
		if ti.Type != want.Type || !bytes.Equal(ti.Data, want.Data) {
			t.Errorf("%s: %s, the mixture has %s (bytes equal: %v)", ti.Name, ti.Type, want.Type, bytes.Equal(ti.Data, want.Data))
		}
	}
	for _, kv := range src.KV {
		v, _ := got.Get(kv.Key)
		if kv.Key != "general.file_type" && !reflect.DeepEqual(v, kv.Value) {
			t.Errorf("%s = %v, want %v", kv.Key, v, kv.Value)
		}
	}
	if ft, _ := got.Get("general.file_type"); ft != uint32(15) {
		t.Errorf("general.file_type %v (%T), want uint32 15", ft, ft)
	}
	if qv, _ := got.Get("general.quantization_version"); qv != uint32(2) {
		t.Errorf("general.quantization_version %v", qv)
	}
	// The quantized file loads and runs.
	m, err := loader.Load(out, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

// blockStats compares two tensors of type typ block by block: the fraction
// of identical blocks and the largest difference of the dequantized values.
func blockStats(typ kernels.Type, a, b []byte) (same float64, maxDiff float64) {
	bs, n := typ.TypeSize(), typ.BlockSize()
	va, vb := make([]float32, n), make([]float32, n)
	blocks, equal := len(a)/bs, 0
	for i := 0; i < blocks; i++ {
		x, y := a[i*bs:(i+1)*bs], b[i*bs:(i+1)*bs]
		if bytes.Equal(x, y) {
			equal++
			continue
		}
		kernels.Dequantize(typ, x, va)
		kernels.Dequantize(typ, y, vb)
		for j := range va {
			maxDiff = max(maxDiff, math.Abs(float64(va[j]-vb[j])))
		}
	}
	return float64(equal) / float64(blocks), maxDiff
}

// llama.cpp's own K-quant files of the llama-kq model (reference-archs):
// made by llama-quantize from an F32 file that is llama-kq-q8_0.gguf
// dequantized. Dequantizing the Q8_0 file with quantize --type F32, then
// quantizing it, gives llama-quantize's tensor types, and its bytes where
// our quantizers choose the same scales.
func TestQuantizeLlamaCppReference(t *testing.T) {
	dir := testutil.SharedFile(t, "testdata", "reference-archs")
	tmp := t.TempDir()
	f32 := filepath.Join(tmp, "llama-kq-f32.gguf")
	q8 := filepath.Join(dir, "llama-kq-q8_0.gguf")
	if _, _, err := execute(t, "", "quantize", "-f", q8, "-o", f32, "--type", "F32"); err != nil {
		t.Fatal(err)
	}
	// Dequantization: every Q8_0 matrix becomes its values in F32.
	src, deq := openGGUF(t, q8), openGGUF(t, f32)
	for _, ti := range src.Tensors {
		d, _ := deq.Tensor(ti.Name)
		vals := make([]float32, ti.Elements())
		kernels.Dequantize(ti.Type, ti.Data, vals)
		enc := make([]byte, 4*len(vals))
		kernels.Quantize(kernels.F32, vals, enc)
		if d.Type != kernels.F32 || !bytes.Equal(d.Data, enc) {
			t.Errorf("%s: %s after --type F32", ti.Name, d.Type)
		}
	}
	for _, c := range []struct {
		typ, file string
		ftype     uint32
	}{
		{"Q4_K_M", "llama-kq-q4_k_m.gguf", 15},
		{"Q5_K_M", "llama-kq-q5_k_m.gguf", 17},
		{"Q6_K", "llama-kq-q6_k.gguf", 18},
	} {
		out := filepath.Join(tmp, c.typ+".gguf")
		if _, _, err := execute(t, "", "quantize", "-f", f32, "-o", out, "--type", c.typ); err != nil {
			t.Fatal(err)
		}
		got, ref := openGGUF(t, out), openGGUF(t, filepath.Join(dir, c.file))
		if ft, _ := ref.Uint("general.file_type"); ft != uint64(c.ftype) {
			t.Errorf("%s: llama.cpp's file_type %d", c.file, ft)
		}
		if ft, _ := got.Uint("general.file_type"); ft != uint64(c.ftype) {
			t.Errorf("%s: file_type %d, want %d", c.typ, ft, c.ftype)
		}
		if len(got.Tensors) != len(ref.Tensors) {
			t.Errorf("%s: %d tensors, llama.cpp %d", c.typ, len(got.Tensors), len(ref.Tensors))
		}
		for _, r := range ref.Tensors {
			g, ok := got.Tensor(r.Name)
			if !ok {
				t.Errorf("%s: no tensor %s", c.typ, r.Name)
				continue
			}
			if g.Type != r.Type || !reflect.DeepEqual(g.Dims, r.Dims) {
				t.Errorf("%s: %s is %s %v, llama.cpp's %s %v", c.typ, r.Name, g.Type, g.Dims, r.Type, r.Dims)
				continue
			}
			if len(r.Dims) == 1 {
				if !bytes.Equal(g.Data, r.Data) {
					t.Errorf("%s: vector %s changed", c.typ, r.Name)
				}
				continue
			}
			// The K-quant scale searches are ggml's, in its operation order
			// (internal/kernels/quant_k.go): every block is llama-quantize's.
			same, diff := blockStats(r.Type, g.Data, r.Data)
			orig, _ := deq.Tensor(r.Name)
			ours, theirs := sqError(orig, g), sqError(orig, &r)
			t.Logf("%s %-24s %s: %5.1f%% of blocks identical, max |dequantized difference| %.3g, squared error %.4g (llama.cpp %.4g)",
				c.typ, r.Name, r.Type, 100*same, diff, ours, theirs)
			if ours > 1.02*theirs {
				t.Errorf("%s: %s quantizes with error %.4g, llama.cpp %.4g", c.typ, r.Name, ours, theirs)
			}
			if same != 1 {
				t.Errorf("%s: %s: only %.1f%% of the %s blocks are llama.cpp's", c.typ, r.Name, 100*same, r.Type)
			}
		}
	}
}

// sqError is the squared difference between the values of an F32 tensor and
// of its quantized version.
func sqError(orig, q *gguf.TensorInfo) float64 {
	a, b := make([]float32, orig.Elements()), make([]float32, q.Elements())
	kernels.Dequantize(orig.Type, orig.Data, a)
	kernels.Dequantize(q.Type, q.Data, b)
	var e float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		e += d * d
	}
	return e
}

// Bad input: one line naming the problem, exit status 1, no output file.
func TestQuantizeBadInput(t *testing.T) {
	dir := t.TempDir()
	cfg := model.RandomConfig{Arch: "llama", Layers: 1, Embd: 64, FF: 128, Heads: 2, Vocab: 300, Seed: 1, Type: kernels.Q8_0}
	good := writeRandomModel(t, cfg, filepath.Join(dir, "q8.gguf"))
	text := filepath.Join(dir, "notes.gguf")
	if err := os.WriteFile(text, []byte("hello, not a model\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", good, "-o", out, "--type", "Q3_K_M"}, `unknown quantization type "Q3_K_M" (choose one of F32, F16, BF16, Q4_0,`},
		{[]string{"-f", good, "-o", out}, "--type is required"},
		{[]string{"-f", filepath.Join(dir, "missing.gguf"), "-o", out, "--type", "Q4_0"}, "missing.gguf: no such file or directory"},
		{[]string{"-f", text, "-o", out, "--type", "Q4_0"}, text + ": not a GGUF file"},
		{[]string{"-f", good, "-o", filepath.Join(dir, "nodir", "x.gguf"), "--type", "F16"}, "x.gguf: no such file or directory"},
		{[]string{"-f", good, "-o", good, "--type", "F16"}, "the output must not be the input file"},
		{[]string{"-f", good, "-o", out, "--type", "Q4_K_M"}, "tensor token_embd.weight is already Q8_0; requantizing it to Q5_0 needs --allow-requantize"},
		{[]string{"-f", good, "-o", out, "--type", "Q4_0", "extra"}, "unknown command"},
	} {
		cmd := exec.Command(os.Args[0], append([]string{"quantize"}, c.args...)...)
		cmd.Env = append(os.Environ(), "MISTRALRS_TEST_MAIN=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		msg := strings.TrimSpace(stderr.String())
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("%v: exit %v, want 1 (%s)", c.args, err, msg)
		}
		if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%v: stderr %q, want one line with %q", c.args, msg, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: %s was written", c.args, out)
			os.Remove(out)
		}
	}
	if os.Geteuid() != 0 {
		_, _, err := execute(t, "", "quantize", "-f", good, "-o", filepath.Join(ro, "x.gguf"), "--type", "F16")
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("read-only directory: %v", err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("left in the directory: %v", entries)
	}
	// --allow-requantize does it.
	if _, _, err := execute(t, "", "quantize", "-f", good, "-o", out, "--type", "Q4_K_M", "--allow-requantize"); err != nil {
		t.Error(err)
	}
}

// config's list of ISQ names (for Validate) and the loader's parser agree.
func TestISQNamesAgree(t *testing.T) {
	for _, name := range []string{"q4_0", "Q4_1", "q5_0", "q5_1", "q8_0", "q8_1", "q2k", "q3k", "q4k", "Q5K", "q6k", "q8k",
		"q4_k", "q5_k", "q6_k", "Q4_K", "2", "3", "4", "5", "6", "7", "8", "hqq4", "fp8", "afq4", "q4_k_m", "f16", ""} {
		_, err := loader.ParseISQ(name)
		if ok := config.ValidISQ(name); ok != (err == nil) {
			t.Errorf("%q: config accepts %v, loader error %v", name, ok, err)
		}
	}
}

// serve --isq and run --isq refuse an unknown type with one line.
func TestISQFlagErrors(t *testing.T) {
	dir := t.TempDir()
	path := writeRandomModel(t, model.RandomConfig{Arch: "llama", Layers: 1, Embd: 64, FF: 128, Heads: 2, Vocab: 300, Seed: 1, Type: kernels.F32}, filepath.Join(dir, "m.gguf"))
	_, _, err := execute(t, "", "run", "-f", path, "--isq", "q3k", "--prompt", "hi")
	if err == nil || err.Error() != `ISQ type "q3k" is not supported by this engine (choose one of q4_0, q4_1, q5_0, q5_1, q8_0, q4k, q5k, q6k)` {
		t.Errorf("run: %v", err)
	}
	for _, args := range [][]string{{"run", "--isq", "q4k", "--prompt", "hi"}, {"serve", "--isq", "q4k"}} {
		if _, _, err := execute(t, "", args...); err == nil || !strings.Contains(err.Error(), "the embedded demo model is not quantized") {
			t.Errorf("%v: %v", args, err)
		}
	}
	_, _, err = execute(t, "", "serve", "-f", path, "--isq", "q7")
	if err == nil || !strings.Contains(err.Error(), `invalid value "q7" for --isq`) {
		t.Errorf("serve: %v", err)
	}
	out, stderr, err := execute(t, "", "run", "-f", path, "--isq", "Q8_0", "--prompt", "hi", "-n", "4", "--temperature", "0")
	if err != nil || out == "" || !strings.Contains(stderr, "isq Q8_0: 9 tensors quantized (9 Q8_0), 0 kept") {
		t.Errorf("run --isq Q8_0: %v\nstdout %q\nstderr %s", err, out, stderr)
	}
}

// serve --isq quantizes the served model at load (the summary line on
// stderr) and serves it; from-config's in_situ_quant does the same for run.
func TestServeAndFromConfigISQ(t *testing.T) {
	dir := t.TempDir()
	path := writeRandomModel(t, model.RandomConfig{Arch: "llama", Layers: 1, Embd: 64, FF: 128, Heads: 2, Vocab: 300, Seed: 1, Type: kernels.F32}, filepath.Join(dir, "m.gguf"))
	port := freePort(t)
	s := startCommand(t, port, "serve", "--host", "127.0.0.1", "-p", strconv.Itoa(port), "--threads", "1", "text", "-f", path, "--isq", "q4_0")
	if code, body := s.post("/v1/completions", `{"prompt":"hi","max_tokens":2}`); code != 200 {
		t.Errorf("completions: %d %s", code, body)
	}
	out := s.stop(syscall.SIGINT)
	if !strings.Contains(out, "isq Q4_0: 9 tensors quantized (1 Q8_0, 8 Q4_0), 0 kept") {
		t.Errorf("no ISQ summary line:\n%s", out)
	}

	cfgPath := filepath.Join(dir, "run.toml")
	toml := "command = \"run\"\n[runtime]\nthreads = 1\n[[models]]\nmodel_id = \"" + path + "\"\n[models.quantization]\nin_situ_quant = \"Q6K\"\n"
	if err := os.WriteFile(cfgPath, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := execute(t, "hello\n/exit\n", "from-config", "-f", cfgPath)
	if err != nil || !strings.Contains(errOut, "isq Q6K: 9 tensors quantized (9 Q8_0), 0 kept") || strings.Contains(errOut, "warning") {
		t.Errorf("from-config run: %v\n%s", err, errOut)
	}
}
