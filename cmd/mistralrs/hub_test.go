package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"mistralrs/internal/hub/hubtest"
)

// fakeHub starts a fake Hugging Face Hub with org/Tiny-GGUF and points
// HF_ENDPOINT and an empty HF_HOME at it (child commands inherit both).
func fakeHub(t *testing.T) (*hubtest.Hub, *hubtest.Repo, string) {
	t.Helper()
	h := hubtest.New(t)
	r := h.Add("org/Tiny-GGUF", map[string][]byte{
		"tiny-Q4_K_M.gguf": hubtest.Model(t, 1),
		"tiny-Q8_0.gguf":   hubtest.Model(t, 2),
		"README.md":        []byte("tiny"),
	})
	home := t.TempDir()
	for k, v := range map[string]string{"HF_ENDPOINT": h.URL, "HF_HOME": home, "HF_TOKEN": "", "HF_HUB_CACHE": "",
		"HUGGINGFACE_HUB_CACHE": "", "HF_HUB_OFFLINE": "", "HF_TOKEN_PATH": filepath.Join(home, "no-token")} {
		t.Setenv(k, v)
	}
	return h, r, home
}

func TestRunAndBenchFromHub(t *testing.T) {
	h, r, home := fakeHub(t)
	local := filepath.Join(t.TempDir(), "local.gguf")
	if err := os.WriteFile(local, r.Files["tiny-Q4_K_M.gguf"], 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--raw", "--prompt", "abc", "--temperature", "0", "--max-tokens", "4", "-t", "1"}
	want, _, err := execute(t, "", append([]string{"run", "-f", local}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err := execute(t, "", append([]string{"run", "-m", "org/Tiny-GGUF"}, args...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if out != want {
		t.Errorf("run -m from the Hub: %q, the same file run locally: %q", out, want)
	}
	if !strings.Contains(errOut, "org/Tiny-GGUF: using tiny-Q4_K_M.gguf (chosen in the order Q4_K_M, Q8_0") ||
		!strings.Contains(errOut, "org/Tiny-GGUF tiny-Q4_K_M.gguf: downloading") {
		t.Errorf("stderr %q", errOut)
	}
	snap := filepath.Join(home, "hub", "models--org--Tiny-GGUF", "snapshots", r.Commit)
	if _, err := os.Stat(filepath.Join(snap, "tiny-Q4_K_M.gguf")); err != nil {
		t.Error(err)
	}
	// Again: from the cache, without a request.
	h.Reset()
	if again, _, err := execute(t, "", append([]string{"run", "-m", "org/Tiny-GGUF"}, args...)...); err != nil || again != want {
		t.Errorf("second run: %q %v", again, err)
	}
	if n := h.Count(""); n != 0 {
		t.Errorf("%d requests with the model cached", n)
	}
	// bench -m with -f naming a file inside the repository.
	if _, errOut, err := execute(t, "", "bench", "-m", "org/Tiny-GGUF", "-f", "tiny-Q8_0.gguf", "-p", "4", "-n", "0", "-r", "1", "-t", "1"); err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut)
	}
	if _, err := os.Stat(filepath.Join(snap, "tiny-Q8_0.gguf")); err != nil {
		t.Error(err)
	}
}

func TestServeFromHub(t *testing.T) {
	_, _, home := fakeHub(t)
	port := freePort(t)
	s := startCommand(t, port, "serve", "--host", "127.0.0.1", "-m", "org/Tiny-GGUF", "-f", "tiny-Q8_0.gguf", "-p", strconv.Itoa(port), "--threads", "1")
	if code, body := s.post("/v1/completions", `{"prompt":"hi","max_tokens":2}`); code != 200 || !strings.Contains(body, `"model":"org/Tiny-GGUF"`) {
		t.Errorf("completions: %d %s", code, body)
	}
	out := s.stop(syscall.SIGINT)
	if !strings.Contains(out, "org/Tiny-GGUF tiny-Q8_0.gguf: downloading") {
		t.Errorf("no download line:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(home, "hub", "models--org--Tiny-GGUF", "refs", "main")); err != nil {
		t.Error(err)
	}
}

// Bad input: one line naming the repository, the file and the cause, exit code 1.
func TestHubErrorsExitCode(t *testing.T) {
	h, _, _ := fakeHub(t)
	dir := t.TempDir()
	toml := filepath.Join(dir, "absent.toml")
	if err := os.WriteFile(toml, []byte("[[models]]\nmodel_id = \"org/absent\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"HF_TOKEN=hf_any"}, []string{"serve", "-m", "org/absent"},
			"Hugging Face model org/absent: 404: the repository does not exist on " + h.URL},
		{nil, []string{"serve", "-m", "org/absent"},
			"Hugging Face model org/absent: 401 Unauthorized: the repository does not exist, or it is private or gated and needs a token"},
		{nil, []string{"serve", "-m", "org/Tiny-GGUF", "-f", "tiny-Q2_K.gguf"},
			"Hugging Face model org/Tiny-GGUF, file tiny-Q2_K.gguf: not in the repository at revision main (GGUF files there: tiny-Q4_K_M.gguf, tiny-Q8_0.gguf)"},
		{nil, []string{"serve", "-m", "org/Tiny-GGUF", "--hf-revision", "v7"},
			"Hugging Face model org/Tiny-GGUF at revision v7: 404: revision v7 not found"},
		{[]string{"HF_HUB_OFFLINE=1"}, []string{"run", "-m", "org/Tiny-GGUF", "-f", "tiny-Q8_0.gguf", "--prompt", "x"},
			"Hugging Face model org/Tiny-GGUF, file tiny-Q8_0.gguf: not in the Hugging Face cache"},
		{nil, []string{"serve", "--token-source", "keyring", "-m", "org/Tiny-GGUF"},
			`unknown token source "keyring"`},
		{[]string{"HF_TOKEN=hf_any"}, []string{"from-config", "-f", toml},
			"Hugging Face model org/absent: 404: the repository does not exist"},
		{[]string{"HF_HOME=/proc/no-such-dir"}, []string{"bench", "-m", "org/Tiny-GGUF"},
			"Hugging Face model org/Tiny-GGUF, file tiny-Q4_K_M.gguf: locking the blob"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tc.args...)
			cmd.Env = append(append(os.Environ(), "MISTRALRS_TEST_MAIN=1"), tc.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want code 1; stderr %q", err, stderr.String())
			}
			msg := strings.TrimSpace(stderr.String())
			if i := strings.LastIndex(msg, "\nerror: "); i >= 0 { // progress lines may come first
				msg = msg[i+1:]
			}
			if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, tc.want) || strings.Contains(msg, "panic") {
				t.Errorf("want one line with %q, got %q", tc.want, msg)
			}
		})
	}
}
