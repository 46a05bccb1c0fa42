package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"mistralrs/internal/demo"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
)

// writeVocabModel writes a tiny random GGUF model with a vocabulary of vocab
// tokens.
func writeVocabModel(t *testing.T, path string, vocab int, seed uint64) {
	t.Helper()
	w, err := demo.RandomModel(model.RandomConfig{Arch: "llama", Layers: 1, Embd: 32, FF: 64, Heads: 2, Vocab: vocab,
		ContextLen: 256, Type: kernels.F32, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// runToExit runs the command in a child process and returns its exit code
// and stderr. A server that starts listening instead of exiting fails the
// test (and is killed).
func runToExit(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MISTRALRS_TEST_MAIN=1", "RUST_LOG=")
	stdout, stderr := &syncBuf{}, &syncBuf{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case err := <-done:
			if err == nil {
				return 0, stderr.String()
			}
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatalf("%q: %v", args, err)
			}
			return ee.ExitCode(), stderr.String()
		case <-deadline:
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("%q: still running after 60s:\n%s%s", args, stdout.String(), stderr.String())
		case <-time.After(20 * time.Millisecond):
			if strings.Contains(stdout.String(), "Server listening") {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				<-done
				t.Fatalf("%q: the server started; want exit code 1 with one line\n%s", args, stdout.String())
			}
		}
	}
}

// wantOneLine checks exit code 1 and a single "error: …" line on stderr
// holding every one of subs.
func wantOneLine(t *testing.T, args []string, subs ...string) {
	t.Helper()
	code, stderr := runToExit(t, args...)
	msg := strings.TrimRight(stderr, "\n")
	if code != 1 || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "error: ") || strings.Contains(msg, "panic") {
		t.Errorf("%q: exit code %d, stderr %q; want 1 and one error line", args, code, stderr)
		return
	}
	for _, s := range subs {
		if !strings.Contains(msg, s) {
			t.Errorf("%q: %q does not say %q", args, msg, s)
		}
	}
}

// Each bad speculative setting stops serve and from-config before serving:
// exit code 1 and one line naming the cause.
func TestSpeculativeBadInput(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.gguf")
	writeVocabModel(t, target, 300, 1)
	draft := filepath.Join(dir, "draft.gguf")
	writeVocabModel(t, draft, 300, 2)
	missing := filepath.Join(dir, "missing-draft.gguf")
	port := strconv.Itoa(freePort(t))
	serve := func(extra ...string) []string {
		return append([]string{"serve", "--host", "127.0.0.1", "-p", port, "--threads", "1", "-f", target}, extra...)
	}

	wantOneLine(t, serve("--mtp"), "--mtp: the built-in MTP head is not supported", "no supported architecture",
		"carries MTP layers", "--mtp-model", "--spec-ngram")
	wantOneLine(t, serve("--mtp", "--mtp-model", draft), "the argument '--mtp' cannot be used with '--mtp-model'")
	wantOneLine(t, serve("--mtp-n-predict", "0"), "invalid value 0 for --mtp-n-predict: must be between 1 and 16")
	wantOneLine(t, serve("--mtp-n-predict", "99"), "invalid value 99 for --mtp-n-predict: must be between 1 and 16")
	wantOneLine(t, serve("--mtp-model", missing), fmt.Sprintf("--mtp-model: draft model %q: no such file or directory", missing))
	wantOneLine(t, serve("--mtp-model", draft, "--spec-ngram"), "the argument '--mtp-model' cannot be used with '--spec-ngram' (choose one proposer)")
	wantOneLine(t, serve("--spec-ngram=9"), "invalid value 9 for --spec-ngram: must be between 0 (off) and 8")
	wantOneLine(t, serve("--spec-ngram", "5"), "--spec-ngram=5")

	conf := func(text string) string {
		p := filepath.Join(dir, fmt.Sprintf("c%d.toml", time.Now().UnixNano()))
		if err := os.WriteFile(p, []byte(fmt.Sprintf("[server]\nhost = \"127.0.0.1\"\nport = %s\n[runtime]\nthreads = 1\n", port)+text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := conf(fmt.Sprintf("mtp_n_predict = 99\n[[models]]\nmodel_id = %q\n", target))
	wantOneLine(t, []string{"from-config", "-f", c}, c+": runtime.mtp_n_predict = 99: must be between 1 and 16")
	c = conf(fmt.Sprintf("mtp = true\n[[models]]\nmodel_id = %q\n", target))
	wantOneLine(t, []string{"from-config", "-f", c}, "runtime.mtp: the built-in MTP head is not supported", "runtime.mtp_model")
	c = conf(fmt.Sprintf("mtp = true\nmtp_model = %q\n[[models]]\nmodel_id = %q\n", draft, target))
	wantOneLine(t, []string{"from-config", "-f", c}, "runtime.mtp and runtime.mtp_model are both set")
	c = conf(fmt.Sprintf("[[models]]\nmodel_id = %q\n[[models]]\nmodel_id = %q\nmtp_model = %q\n", target, draft, missing))
	wantOneLine(t, []string{"from-config", "-f", c}, fmt.Sprintf("models[1].mtp_model: draft model %q: no such file or directory", missing))
	c = conf(fmt.Sprintf("[[models]]\nmodel_id = %q\nmtp_n_predict = 0\n", target))
	wantOneLine(t, []string{"from-config", "-f", c}, "models[0].mtp_n_predict = 0: must be between 1 and 16")
}

// A draft model with another vocabulary: the engine refuses it, and serve
// exits 1 with one line naming both files.
func TestSpeculativeDraftVocabularyMismatch(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.gguf")
	writeVocabModel(t, target, 300, 1)
	other := filepath.Join(dir, "other-vocab.gguf")
	writeVocabModel(t, other, 320, 2)
	port := strconv.Itoa(freePort(t))
	code, stderr := runToExit(t, "serve", "--host", "127.0.0.1", "-p", port, "--threads", "1", "-f", target, "--mtp-model", other)
	msg := strings.TrimRight(stderr, "\n")
	if code != 1 || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "error: ") || !strings.Contains(msg, target) ||
		!strings.Contains(msg, other) || !strings.Contains(strings.ToLower(msg), "vocab") {
		t.Errorf("exit code %d, stderr %q; want 1 and one line naming both files and the vocabulary", code, stderr)
	}
}

// A draft with the model's vocabulary and prompt lookup: serve starts,
// says how each model decodes, and answers.
func TestServeSpeculative(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.gguf")
	writeVocabModel(t, target, 300, 1)
	draft := filepath.Join(dir, "draft.gguf")
	writeVocabModel(t, draft, 300, 2)
	for _, tc := range []struct {
		args []string
		line string
	}{
		{[]string{"--mtp-model", draft, "--mtp-n-predict", "3"}, "Speculative decoding for target: draft model " + draft + ", 3 draft tokens per step"},
		{[]string{"--spec-ngram"}, "Speculative decoding for target: prompt lookup (n-grams of up to 3 tokens), 4 draft tokens per step"},
	} {
		port := freePort(t)
		s := startCommand(t, port, append([]string{"serve", "--host", "127.0.0.1", "-p", strconv.Itoa(port), "--threads", "1", "-f", target}, tc.args...)...)
		code, body := s.post("/v1/completions", `{"prompt":"abc abc abc","max_tokens":6,"temperature":0}`)
		if code != 200 || !strings.Contains(body, `"model":"target"`) {
			t.Errorf("%q: %d %s", tc.args, code, body)
		}
		if out := s.stop(syscall.SIGTERM); !strings.Contains(out, tc.line) {
			t.Errorf("%q: output lacks %q:\n%s", tc.args, tc.line, out)
		}
	}
}
