package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoRAStartupErrors: each bad adapter setting stops serve and
// from-config before anything is served, with one line and exit code 1.
func TestLoRAStartupErrors(t *testing.T) {
	h, _, _ := fakeHub(t)
	h.Add("org/empty-lora", map[string][]byte{"README.md": []byte("x")})
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(model, []byte("GGUF"), 0o644); err != nil { // found, never loaded: every case fails before
		t.Fatal(err)
	}
	toml := filepath.Join(dir, "limits.toml")
	if err := os.WriteFile(toml, []byte("[[models]]\nmodel_id = \""+model+"\"\n[models.adapter]\nlora_max_rank = 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.gguf")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "-m", model, "--lora", "x=" + missing},
			"error: --lora x=" + missing + ": LoRA adapter " + missing + ": no such file or folder"},
		{[]string{"serve", "-m", model, "--lora", "a=x.gguf", "b=y.gguf", "--lora-max-adapters", "1"},
			"error: --lora: 2 adapters to preload, more than --lora-max-adapters = 1"},
		{[]string{"serve", "text", "-m", model, "--max-lora-rank", "8"},
			"error: --lora-max-rank: a LoRA runtime limit needs dynamic LoRA: --enable-lora or at least one --lora adapter"},
		{[]string{"serve", "--enable-lora"},
			"error: --enable-lora needs a model (-m or -f); the embedded demo model takes no LoRA adapters"},
		{[]string{"serve", "embedding", "-m", model, "--lora-modules", `{"name":"a","path":"x.gguf"}`},
			"error: --lora cannot be used with `serve embedding`: an embedding model takes no LoRA adapters"},
		{[]string{"serve", "-m", model, "--xlora", "org/x", "--xlora-order", "o.json"},
			`error: invalid value "org/x" for --xlora: X-LoRA is not supported by this server; dynamic LoRA is (--lora, --enable-lora)`},
		{[]string{"serve", "-m", model, "--lora", `{"name":"a","path":"x","rank":8}`},
			`unknown field "rank"`},
		{[]string{"serve", "-m", model, "--lora", "e=org/empty-lora"},
			`error: LoRA adapter "e": Hugging Face model org/empty-lora: the repository holds no LoRA adapter`},
		{[]string{"from-config", "-f", toml},
			"error: " + toml + ": models[0].adapter.lora_max_rank: a LoRA runtime limit needs dynamic LoRA: enable_lora = true or at least one lora entry"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tc.args...)
			cmd.Env = append(os.Environ(), "MISTRALRS_TEST_MAIN=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want code 1; stderr %q", err, stderr.String())
			}
			msg := strings.TrimSpace(stderr.String())
			if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, tc.want) || strings.Contains(msg, "panic") {
				t.Errorf("want one line with %q, got %q", tc.want, msg)
			}
		})
	}
}
