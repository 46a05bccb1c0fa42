package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/config"
	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/testutil"
)

// TestMain lets a test re-run this binary as the real command (exit codes).
func TestMain(m *testing.M) {
	if os.Getenv("MISTRALRS_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func execute(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(config.ExpandFlagValues(args)) // as main does
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestRunRawGreedyStories(t *testing.T) {
	path := testutil.SharedFile(t, "testdata/real/stories260K.gguf")
	out, errOut, err := execute(t, "", "run", "-f", path, "--raw", "--prompt", "Once upon a time",
		"--temperature", "0", "--max-tokens", "32", "-t", "2")
	if err != nil {
		t.Fatal(err)
	}
	// The greedy continuation of llama.cpp (../shared/testdata/real/README.md), alone on stdout.
	want := ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
	if out != want {
		t.Errorf("stdout = %q\nwant     %q", out, want)
	}
	if !strings.Contains(errOut, "decode: 32 tokens") {
		t.Errorf("stderr lacks the closing speed line: %q", errOut)
	}
}

func TestRunDemoModel(t *testing.T) {
	out, errOut, err := execute(t, "", "run", "--prompt", "hi", "--max-tokens", "5", "--seed", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "demo model") || !strings.Contains(errOut, "-f model.gguf") {
		t.Errorf("no demo warning on stderr: %q", errOut)
	}
	if strings.Contains(out, "demo model") {
		t.Errorf("the warning leaked to stdout: %q", out)
	}
	again, _, err := execute(t, "", "run", "--prompt", "hi", "--max-tokens", "5", "--seed", "1")
	if err != nil {
		t.Fatal(err)
	}
	if again != out {
		t.Errorf("same seed, different output: %q vs %q", out, again)
	}
}

// The demo model writes English: greedy from "Once upon a time" it tells
// of a little girl named Lily (as stories260K does under llama.cpp).
func TestRunDemoModelWritesEnglish(t *testing.T) {
	out, _, err := execute(t, "", "run", "--prompt", "Once upon a time", "--max-tokens", "12", "--temperature", "0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "there was a little girl named Lily") {
		t.Errorf("demo output %q", out)
	}
}

func TestRunInteractive(t *testing.T) {
	out, _, err := execute(t, "hello\n\nagain\n/exit\n", "run", "--max-tokens", "3", "--temperature", "0")
	if err != nil {
		t.Fatal(err)
	}
	if out == "" {
		t.Error("no answers on stdout")
	}
}

func TestTokenize(t *testing.T) {
	path := testutil.SharedFile(t, "testdata/vocab/ggml-vocab-llama-spm.gguf")
	out, _, err := execute(t, "Hello world", "tokenize", "-f", path)
	if err != nil {
		t.Fatal(err)
	}
	// From ggml-vocab-llama-spm.gguf.out: " Hello world" is 29871 15043 3186 there; without the
	// leading space llama.cpp gives 15043 3186 (the tokenizer adds the SentencePiece prefix).
	if got := strings.TrimSpace(out); got != "15043 3186" {
		t.Errorf("tokenize = %q, want 15043 3186", got)
	}
	out, _, err = execute(t, "Hello world", "tokenize", "-f", path, "--special")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out); got != "1 15043 3186" {
		t.Errorf("tokenize --special = %q, want 1 15043 3186 (BOS first)", got)
	}
}

func TestBenchJSON(t *testing.T) {
	out, _, err := execute(t, "", "bench", "-p", "8", "-n", "4", "-r", "2", "-t", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res []map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench --json is not a JSON array: %v\n%s", err, out)
	}
	if len(res) != 2 {
		t.Fatalf("want a pp and a tg test, got %d", len(res))
	}
	for _, key := range []string{"n_prompt", "n_gen", "n_threads", "avg_ts", "stddev_ts"} {
		if _, ok := res[0][key]; !ok {
			t.Errorf("missing llama-bench key %q", key)
		}
	}
	if res[0]["n_prompt"].(float64) != 8 || res[0]["n_gen"].(float64) != 0 {
		t.Errorf("pp test: %v", res[0])
	}
	if res[1]["n_prompt"].(float64) != 0 || res[1]["n_gen"].(float64) != 4 {
		t.Errorf("tg test: %v", res[1])
	}
	if res[0]["avg_ts"].(float64) <= 0 {
		t.Errorf("avg_ts not positive: %v", res[0])
	}
}

func TestBenchTable(t *testing.T) {
	out, _, err := execute(t, "", "bench", "-p", "4", "-n", "2", "-r", "1", "-t", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "| pp4") && !strings.Contains(out, "pp4 |") {
		t.Errorf("no pp4 row:\n%s", out)
	}
	if !strings.Contains(out, "tg2") || !strings.Contains(out, "±") {
		t.Errorf("no tg2 row with mean ± sd:\n%s", out)
	}
}

// bench -d runs every test at each depth, labelled as llama-bench does, with
// n_depth in the JSON; a depth past the context is refused up front.
func TestBenchDepth(t *testing.T) {
	out, _, err := execute(t, "", "bench", "-p", "4", "-n", "2", "-d", "0,16", "-r", "1", "-t", "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"pp4 |", "tg2 |", "pp4 @ d16 |", "tg2 @ d16 |"} {
		if !strings.Contains(out, label) {
			t.Errorf("no %q row:\n%s", label, out)
		}
	}
	out, _, err = execute(t, "", "bench", "-p", "4", "-n", "0", "-d", "16", "-r", "1", "-t", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res []map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 1 || res[0]["n_depth"] != float64(16) {
		t.Errorf("bench -d 16 --json: %v %s", err, out)
	}
	out, _, err = execute(t, "", "bench", "-p", "4", "-n", "2", "-r", "1", "-t", "1", "--cache-type", "f16", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 2 || res[0]["type_k"] != "f16" || res[1]["type_v"] != "f16" {
		t.Errorf("bench --cache-type f16 --json: %v %s", err, out)
	}
	out, _, err = execute(t, "", "bench", "-p", "4", "-n", "0", "-r", "1", "-t", "1", "--cache-type", "q4_0", "--cache-type-k", "q8_0", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 1 || res[0]["type_k"] != "q8_0" || res[0]["type_v"] != "q4_0" {
		t.Errorf("bench --cache-type q4_0 --cache-type-k q8_0 --json: %v %s", err, out)
	}
	if _, _, err := execute(t, "", "bench", "-p", "4", "-n", "0", "-r", "1", "--cache-type-v", "q5"); err == nil || !strings.Contains(err.Error(), "--cache-type-v") || !strings.Contains(err.Error(), "q4_0") {
		t.Errorf("bench --cache-type-v q5: %v, want an error naming the flag and the valid types", err)
	}
	if _, _, err := execute(t, "", "bench", "-p", "4", "-n", "0", "-d", "1000000", "-r", "1"); err == nil || !strings.Contains(err.Error(), "context") {
		t.Errorf("depth past the context: %v", err)
	}
}

// A broken model file: one line naming the file and the problem, exit code 1.
func TestBrokenModelExitCode(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "broken.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "run", "-f", bad, "--prompt", "x")
	cmd.Env = append(os.Environ(), "MISTRALRS_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, want code 1; stderr %q", err, stderr.String())
	}
	msg := strings.TrimSpace(stderr.String())
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, bad) || strings.Contains(msg, "panic") {
		t.Errorf("want one line naming %s, got %q", bad, msg)
	}
}

func TestGenModelThenRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	_, _, err := execute(t, "", "gen-model", "-o", path, "--type", "Q4_0", "--layers", "2", "--embd", "64",
		"--ff", "128", "--heads", "4", "--kv-heads", "2", "--vocab", "300")
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := execute(t, "", "run", "-f", path, "--raw", "--prompt", "abc", "--temperature", "0", "--max-tokens", "4")
	if err != nil {
		t.Fatal(err)
	}
	again, _, _ := execute(t, "", "run", "-f", path, "--raw", "--prompt", "abc", "--temperature", "0", "--max-tokens", "4")
	if out != again {
		t.Errorf("greedy output differs between runs: %q vs %q", out, again)
	}
	if _, _, err := execute(t, "", "gen-model", "-o", path, "--type", "Q2_K"); err == nil {
		t.Error("unsupported type accepted")
	}
}

// The reference F32 model's greedy text (llama.cpp, ../shared/testdata/reference) printed alone,
// its leading space included: --raw output continues the prompt.
func TestRunRawGreedyReference(t *testing.T) {
	dir := testutil.SharedFile(t, "testdata/reference/reference.json")
	data, err := os.ReadFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Prompt string `json:"prompt"`
		Models map[string]struct {
			File       string `json:"file"`
			GreedyText string `json:"greedy_32_text"`
		} `json:"models"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	m := ref.Models["tiny-f32"]
	out, _, err := execute(t, "", "run", "-f", filepath.Join(filepath.Dir(dir), m.File), "--raw", "--prompt", ref.Prompt,
		"--temperature", "0", "--max-tokens", "32")
	if err != nil {
		t.Fatal(err)
	}
	if out != m.GreedyText {
		t.Errorf("stdout = %q\nwant     %q", out, m.GreedyText)
	}
}

func TestRunRejectsInvalidUTF8(t *testing.T) {
	_, _, err := execute(t, "", "run", "--prompt", "ab\xffc")
	if err == nil || !strings.Contains(err.Error(), "--prompt is not valid UTF-8 (byte 0xff at offset 2)") {
		t.Errorf("err = %v", err)
	}
	// Interactive: the bad line is refused, the session goes on.
	out, errOut, err := execute(t, "\xfe\nhello\n", "run", "--max-tokens", "2", "--temperature", "0")
	if err != nil || !strings.Contains(errOut, "input is not valid UTF-8") || out == "" {
		t.Errorf("err %v, stderr %q, stdout %q", err, errOut, out)
	}
}

// command = "run" chats in the terminal with the file's default model.
func TestFromConfigRun(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	writeModel(t, model, 7)
	cfgPath := filepath.Join(dir, "run.toml")
	toml := "command = \"run\"\n[global]\nseed = 3\n[runtime]\nthreads = 1\n[[models]]\nmodel_id = \"" + model + "\"\n"
	if err := os.WriteFile(cfgPath, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := execute(t, "hello\n/exit\n", "from-config", "-f", cfgPath)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	again, _, err := execute(t, "hello\n/exit\n", "from-config", "-f", cfgPath)
	if err != nil || out == "" || out != again {
		t.Errorf("answers %q and %q (err %v): want the same non-empty answer for the same [global] seed", out, again, err)
	}
	if !strings.Contains(errOut, "decode:") {
		t.Errorf("no speed line on stderr: %q", errOut)
	}
}

// --type Q4_K_M writes the mixed layout of llama.cpp's Q4_K_M: Q6_K for the output matrix and
// for attn_v/ffn_down in the "more bits" layers, Q4_K elsewhere.
func TestGenModelQ4KM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q4km.gguf")
	if _, _, err := execute(t, "", "gen-model", "-o", path, "--type", "Q4_K_M", "--layers", "8", "--embd", "256",
		"--ff", "512", "--heads", "4", "--kv-heads", "2", "--vocab", "300"); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]kernels.Type{"output.weight": kernels.Q6_K, "blk.0.attn_v.weight": kernels.Q6_K,
		"blk.0.ffn_down.weight": kernels.Q6_K, "blk.1.attn_v.weight": kernels.Q4_K, "blk.3.ffn_down.weight": kernels.Q6_K,
		"blk.7.attn_v.weight": kernels.Q6_K, "blk.4.attn_q.weight": kernels.Q4_K, "blk.4.ffn_gate.weight": kernels.Q4_K}
	for name, typ := range want {
		ti, ok := f.Tensor(name)
		if !ok || ti.Type != typ {
			t.Errorf("%s: %v, want %s", name, ti, typ)
		}
	}
	if out, _, err := execute(t, "", "run", "-f", path, "--raw", "--prompt", "abc", "--temperature", "0", "--max-tokens", "3"); err != nil || out == "" {
		t.Errorf("run: %q %v", out, err)
	}
}
