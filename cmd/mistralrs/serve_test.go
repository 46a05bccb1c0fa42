package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"mistralrs/internal/demo"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
)

// syncBuf collects a child's output.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// childServer is the command running in a child process (this test binary).
type childServer struct {
	t    *testing.T
	cmd  *exec.Cmd
	out  *syncBuf
	url  string
	done chan error
}

// startCommand runs the command; `serve` gets --shutdown-delay-secs 0
// unless args set it, so that stopping it does not wait out the pre-stop
// delay (the drain tests set their own).
func startCommand(t *testing.T, port int, args ...string) *childServer {
	t.Helper()
	if len(args) > 0 && args[0] == "serve" && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--shutdown-delay-secs") }) {
		args = append([]string{"serve", "--shutdown-delay-secs", "0"}, args[1:]...)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MISTRALRS_TEST_MAIN=1", "RUST_LOG=")
	out := &syncBuf{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &childServer{t: t, cmd: cmd, out: out, url: "http://127.0.0.1:" + strconv.Itoa(port), done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-s.done
		}
	})
	want := "Server listening on http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), want) {
		select {
		case err := <-s.done:
			t.Fatalf("exited (%v) before listening:\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q:\n%s", want, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

func (s *childServer) post(path, body string) (int, string) {
	s.t.Helper()
	resp, err := http.Post(s.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func (s *childServer) get(path string) (int, string) {
	s.t.Helper()
	resp, err := http.Get(s.url + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// stop sends sig and expects a clean exit.
func (s *childServer) stop(sig syscall.Signal) string {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Fatalf("exit after %v: %v\n%s", sig, err, s.out.String())
		}
	case <-time.After(20 * time.Second):
		s.t.Fatalf("no exit after %v:\n%s", sig, s.out.String())
	}
	return s.out.String()
}

func TestServeDemoModel(t *testing.T) {
	port := freePort(t)
	s := startCommand(t, port, "serve", "--host", "127.0.0.1", "-p", strconv.Itoa(port), "--threads", "1", "--max-seqs", "4")
	code, body := s.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`)
	if code != 200 || !strings.Contains(body, `"model":"demo"`) {
		t.Errorf("chat: %d %s", code, body)
	}
	if code, body := s.get("/v1/models"); code != 200 || !strings.Contains(body, `"id":"demo"`) {
		t.Errorf("models: %d %s", code, body)
	}
	if code, body := s.get("/metrics"); code != 200 || !strings.Contains(body, "mistralrs_sequences_capacity 4") {
		t.Errorf("metrics: %d (capacity line missing)", code)
	}
	out := s.stop(syscall.SIGTERM)
	root := fmt.Sprintf("http://127.0.0.1:%d", port)
	for _, want := range []string{
		" WARN mistralrs_cli: no model given, using the embedded demo model",
		" INFO mistralrs_server_core: Server listening on " + root,
		" INFO mistralrs_server_core: OpenAI-compatible API: " + root + "/v1",
		" INFO mistralrs_server_core: Swagger UI docs: " + root + "/docs",
		" INFO mistralrs_server_core: Prometheus metrics: " + root + "/metrics",
		" INFO mistralrs_server_core: Access log: text format",
		" INFO mistralrs_server_core::metrics: request completed: request_id=req_",
		"route=/v1/chat/completions model=demo status=200 duration_ms=",
		"Server stopped",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// writeModel writes a tiny random GGUF model.
func writeModel(t *testing.T, path string, seed uint64) {
	t.Helper()
	w, err := demo.RandomModel(model.RandomConfig{Arch: "llama", Layers: 1, Embd: 32, FF: 64, Heads: 2, Vocab: 300,
		ContextLen: 256, Type: kernels.F32, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

func TestFromConfigServesEveryModel(t *testing.T) {
	dir := t.TempDir()
	alpha, beta := filepath.Join(dir, "alpha.gguf"), filepath.Join(dir, "beta.gguf")
	writeModel(t, alpha, 1)
	writeModel(t, beta, 2)
	port := freePort(t)
	conf := filepath.Join(dir, "models.toml")
	toml := fmt.Sprintf(`command = "serve"
default_model_id = %q

[server]
host = "127.0.0.1"
port = %d
shutdown_delay_secs = 0
access_log_format = "json"
prot = 1

[runtime]
threads = 1

[[models]]
model_id = %q

[[models]]
model_id = %q
`, beta, port, alpha, beta)
	if err := os.WriteFile(conf, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startCommand(t, port, "from-config", "-f", conf)
	code, body := s.get("/v1/models")
	var list struct {
		Data []struct{ ID, Status string } `json:"data"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Data) != 3 ||
		list.Data[1].ID != alpha || list.Data[2].ID != beta || list.Data[1].Status != "loaded" {
		t.Fatalf("models: %d %s", code, body)
	}
	code, body = s.post("/v1/completions", `{"prompt":"hi","max_tokens":2}`)
	if code != 200 || !strings.Contains(body, fmt.Sprintf(`"model":%q`, beta)) {
		t.Errorf("default model: %d %s", code, body)
	}
	code, body = s.post("/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"hi","max_tokens":2}`, alpha))
	if code != 200 || !strings.Contains(body, fmt.Sprintf(`"model":%q`, alpha)) {
		t.Errorf("alpha: %d %s", code, body)
	}
	out := s.stop(syscall.SIGINT)
	if !strings.Contains(out, "WARN") || !strings.Contains(out, "server.prot") {
		t.Errorf("no warning about the unknown key:\n%s", out)
	}
	if !strings.Contains(out, `{"time":`) || !strings.Contains(out, `"event":"request_completed"`) {
		t.Errorf("no JSON access lines:\n%s", out)
	}
}

func TestFromConfigErrors(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := execute(t, "", "from-config", "-f", filepath.Join(dir, "config.yaml")); err == nil || err.Error() != "mistralrs-cli config files must be .toml" {
		t.Errorf("non-TOML file: %v", err)
	}
	bad := filepath.Join(dir, "bad.toml")
	writeModel(t, filepath.Join(dir, "m.gguf"), 1)
	os.WriteFile(bad, []byte(fmt.Sprintf("command = \"serve\"\n[server]\nport = 0\n[[models]]\nmodel_id = %q\n", filepath.Join(dir, "m.gguf"))), 0o644)
	if _, _, err := execute(t, "", "from-config", "-f", bad); err == nil || !strings.Contains(err.Error(), "server.port") {
		t.Errorf("bad port: %v", err)
	}
	if _, _, err := execute(t, "", "serve", "--port", "70000"); err == nil || !strings.Contains(err.Error(), "--port") {
		t.Errorf("serve with a bad port: %v", err)
	}
	if _, _, err := execute(t, "", "serve", "-m", filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("serve with a missing model: %v", err)
	}
}

// bench --url drives a real server: every request completes, token counts add
// up and the latency percentiles are ordered.
func TestBenchLoadAgainstServer(t *testing.T) {
	port := freePort(t)
	s := startCommand(t, port, "serve", "--host", "127.0.0.1", "-p", strconv.Itoa(port), "--threads", "1")
	out, _, err := execute(t, "", "bench", "--url", s.url, "--concurrency", "3", "--num-requests", "5",
		"--max-tokens", "4", "--input-words", "8", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep loadReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Completed != 5 || rep.Failed != 0 || rep.TotalOutputTokens != 20 || rep.TotalInputTokens == 0 {
		t.Errorf("report: %+v", rep)
	}
	for _, p := range []map[string]float64{rep.TTFTMs, rep.ITLMs, rep.E2ELMs} {
		if p["median"] <= 0 || p["median"] > p["p99"] {
			t.Errorf("percentiles out of order: %v", p)
		}
	}
	if rep.E2ELMs["median"] < rep.TTFTMs["median"] {
		t.Errorf("end-to-end %v shorter than TTFT %v", rep.E2ELMs, rep.TTFTMs)
	}
	text, _, err := execute(t, "", "bench", "--url", s.url, "--num-requests", "1", "--max-tokens", "2")
	if err != nil || !strings.Contains(text, "Median TTFT (ms):") || !strings.Contains(text, "Successful requests:               1") {
		t.Errorf("text report (%v):\n%s", err, text)
	}
	// A server that is not there: requests fail, the report says so.
	bad, _, err := execute(t, "", "bench", "--url", "http://127.0.0.1:1", "--num-requests", "2", "--json")
	if err != nil || !strings.Contains(bad, `"failed": 2`) {
		t.Errorf("unreachable server (%v): %s", err, bad)
	}
}

// `serve embedding` serves a model for embeddings only: the server flags
// before the subcommand, the model flags after it, as in mistral.rs; chat
// is refused, embeddings answered. `serve text` is the bare form.
func TestServeEmbeddingSubcommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "emb.gguf")
	writeModel(t, path, 3)
	port := freePort(t)
	s := startCommand(t, port, "serve", "--host", "127.0.0.1", "-p", strconv.Itoa(port), "--threads", "1", "embedding", "-f", path)
	code, body := s.post("/v1/embeddings", `{"input":["a","b"]}`)
	var res struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Model string `json:"model"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || len(res.Data) != 2 || len(res.Data[0].Embedding) != 32 || res.Model != "emb" {
		t.Errorf("embeddings: %d %s", code, body)
	}
	code, body = s.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`)
	if code != 400 || !strings.Contains(body, "Model 'emb' is served for embeddings only (kind embedding)") {
		t.Errorf("chat: %d %s", code, body)
	}
	out := s.stop(syscall.SIGTERM)
	if !strings.Contains(out, "Model emb is served for embeddings only") {
		t.Errorf("no startup line:\n%s", out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "embedding"}, "serve embedding needs a model: -m MODEL_ID or -f FILE.gguf"},
		{[]string{"serve", "text", "--port", "0"}, "serve text needs a model"},
		{[]string{"serve", "embedding", "-f", path, "--spec-ngram"}, "--spec-ngram cannot be used with `serve embedding`"},
		{[]string{"serve", "speech", "-f", path}, `unknown command "speech" for "mistralrs serve"`},
	} {
		if _, _, err := execute(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}

	// command = "run" refuses an embedding default model.
	conf := filepath.Join(dir, "run.toml")
	os.WriteFile(conf, []byte(fmt.Sprintf("command = \"run\"\n[[models]]\nmodel_id = %q\nkind = \"embedding\"\n", path)), 0o644)
	if _, _, err := execute(t, "", "from-config", "-f", conf); err == nil || !strings.Contains(err.Error(), "is an embedding model") {
		t.Errorf("run with an embedding model: %v", err)
	}
}

// `serve text -m …` serves like the bare form.
func TestServeTextSubcommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "txt.gguf")
	writeModel(t, path, 4)
	port := freePort(t)
	s := startCommand(t, port, "serve", "--host", "127.0.0.1", "text", "-m", path, "-p", strconv.Itoa(port), "--threads", "1")
	if code, body := s.post("/v1/completions", `{"prompt":"hi","max_tokens":2}`); code != 200 || !strings.Contains(body, fmt.Sprintf(`"model":%q`, path)) {
		t.Errorf("completions: %d %s", code, body)
	}
	if code, body := s.post("/v1/embeddings", `{"input":"hi"}`); code != 200 {
		t.Errorf("embeddings from a text model: %d %s", code, body)
	}
	s.stop(syscall.SIGINT)
}

func TestServeSecondSignalExitsAtOnce(t *testing.T) {
	port := freePort(t)
	s := startCommand(t, port, "serve", "--host", "127.0.0.1", "-p", strconv.Itoa(port), "--threads", "1",
		"--shutdown-timeout-secs", "120")
	// A request whose body never finishes keeps the drain waiting.
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"prompt\":"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the handler is reading the body
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.out.String(), "again to exit at once") {
		if time.Now().After(deadline) {
			t.Fatalf("no shutdown line:\n%s", s.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-s.done:
		t.Fatalf("exited (%v) while a request was running:\n%s", err, s.out.String())
	case <-time.After(200 * time.Millisecond):
	}
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("exit %v, want status 130", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no exit after a second SIGINT:\n%s", s.out.String())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("second SIGINT took %v", d)
	}
	if out := s.out.String(); !strings.Contains(out, "Second interrupt: exiting without waiting for running requests") {
		t.Errorf("output lacks the exit line:\n%s", out)
	}
}

// SIGTERM through the real binary: readiness answers 503 at once while the
// server still answers requests for --shutdown-delay-secs, liveness stays
// 200, then the listener closes and the process exits 0 with the access
// line of the request served during the delay written.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	port := freePort(t)
	s := startCommand(t, port, "serve", "--host", "127.0.0.1", "-p", strconv.Itoa(port), "--threads", "1",
		"--shutdown-delay-secs", "2")
	if code, body := s.get("/health"); code != 200 || body != "OK" {
		t.Fatalf("readiness before the signal: %d %q", code, body)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := s.get("/readyz")
		if code == 503 && strings.HasPrefix(body, "draining") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readiness %d %q after SIGTERM", code, body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, body := s.get("/livez"); code != 200 || body != "OK" {
		t.Errorf("liveness while draining: %d %q", code, body)
	}
	code, body := s.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`)
	if code != 200 {
		t.Errorf("a request during the delay: %d %s", code, body)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, s.out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit:\n%s", s.out.String())
	}
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
		c.Close()
		t.Error("still accepting after exit")
	}
	out := s.out.String()
	draining := strings.Index(out, "Draining: readiness answers 503; still serving for 2s")
	served := strings.Index(out, "route=/v1/chat/completions model=demo status=200")
	closing := strings.Index(out, "Shutting down: no new connections")
	if draining < 0 || served < draining || closing < served || !strings.Contains(out, "Server stopped") {
		t.Errorf("lines out of order (draining %d, served %d, closing %d):\n%s", draining, served, closing, out)
	}
}
