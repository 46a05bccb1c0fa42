package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"mistralrs/internal/kernels"
	"mistralrs/internal/loader"
	mdl "mistralrs/internal/model"
	"mistralrs/internal/observe"
)

// slowConfig takes about 2 ms per decode step and 0.5 ms per prompt token on
// one core, so that streams last long enough to observe.
var slowConfig = mdl.RandomConfig{Arch: "llama", Layers: 2, Embd: 256, FF: 1024, Heads: 4, KVHeads: 2,
	Vocab: 300, ContextLen: 2048, Type: kernels.F32, Seed: 3}

// cutConfig is slowConfig eight times heavier (about 2 ms a decode step on
// an idle AVX-512 core), for the tests whose generation must outlast the
// drain time: with slowConfig 2000 tokens took only half a second there.
var cutConfig = mdl.RandomConfig{Arch: "llama", Layers: 4, Embd: 512, FF: 2048, Heads: 8, KVHeads: 4,
	Vocab: 300, ContextLen: 2048, Type: kernels.F32, Seed: 3}

// cutServer serves cutConfig as "slow" with a second of drain time: half
// of it is left to write the canceled answer (at 200 ms a loaded machine
// sometimes closed the connection first).
func cutServer(t *testing.T) *testServer {
	return startServer(t, func(o *Options) {
		o.Models = []ModelSpec{tinySpec(t, "slow", cutConfig, loader.Options{})}
		o.ShutdownTimeout = time.Second
	})
}

func slowServer(t *testing.T, opts ...testOpt) *testServer {
	return startServer(t, append([]testOpt{func(o *Options) {
		o.Models = []ModelSpec{tinySpec(t, "slow", slowConfig, loader.Options{})}
	}}, opts...)...)
}

// openStream starts a streamed completion and returns the response with
// its body unread.
func (ts *testServer) openStream(t *testing.T, id string, body map[string]any) *http.Response {
	t.Helper()
	body["stream"] = true
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", ts.url+"/v1/completions", bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return resp
}

// waitMetric polls /metrics until cond holds.
func (ts *testServer) waitMetric(t *testing.T, what string, cond func(map[string]*dto.MetricFamily) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams := ts.metrics()
		if cond(fams) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKeepAliveFrames(t *testing.T) {
	ts := slowServer(t, func(o *Options) { o.KeepAlive = 2 * time.Millisecond })
	// A long prompt: its prefill (tens of milliseconds even on a fast CPU)
	// leaves the stream idle long enough for several keep-alive comments
	// before the first token.
	resp := ts.openStream(t, "ka", map[string]any{"prompt": strings.Repeat("abcdefghij", 150), "max_tokens": 3, "ignore_eos": true})
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var frames []string
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			frames = append(frames, line)
		}
	}
	firstData := -1
	comments := 0
	for i, f := range frames {
		switch {
		case f == ":":
			comments++
		case strings.HasPrefix(f, "data: ") && firstData < 0:
			firstData = i
		}
	}
	if firstData < 2 || comments < 2 || frames[len(frames)-1] != "data: [DONE]" {
		t.Fatalf("frames: %q", frames)
	}
	// Keep-alives are not token steps: one TTFT sample, two ITL samples.
	labels := map[string]string{"path": "/v1/completions", "model": "slow", "status": "200"}
	fams := ts.metrics()
	if ttft, itl := value(fams, "mistralrs_time_to_first_token_seconds", labels), value(fams, "mistralrs_inter_token_latency_seconds", labels); ttft != 1 || itl != 2 {
		t.Errorf("TTFT samples %v, ITL samples %v", ttft, itl)
	}
}

func TestClientDisconnectCancelsSequence(t *testing.T) {
	ts := slowServer(t)
	resp := ts.openStream(t, "gone", map[string]any{"prompt": "abc", "max_tokens": 1500, "ignore_eos": true})
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}
	resp.Body.Close() // the client leaves after its first token
	left := time.Now()

	ts.waitMetric(t, "the canceled sequence", func(f map[string]*dto.MetricFamily) bool {
		return value(f, "mistralrs_sequences_completed_total", map[string]string{"reason": "canceled"}) == 1
	})
	if d := time.Since(left); d > 3*time.Second {
		t.Errorf("canceled %v after the client left", d)
	}
	fams := ts.metrics()
	// Far fewer than the 1500 requested tokens went through the model.
	if v := value(fams, "mistralrs_tokens_processed_total", nil); v <= 0 || v > 1000 {
		t.Errorf("tokens processed %v", v)
	}
	if v := value(fams, "mistralrs_sequences_running", nil); v != 0 {
		t.Errorf("still running: %v", v)
	}
	line := ts.log.waitLines(t, 1, "request completed: request_id=gone ")[0]
	if !strings.Contains(line, "status=200 outcome=client_disconnected") {
		t.Errorf("access line %q", line)
	}
	if v := value(fams, "http_requests_in_flight", map[string]string{"path": "/v1/completions"}); v != 0 {
		t.Errorf("in flight %v", v)
	}
}

func TestGracefulShutdownLetsStreamsFinish(t *testing.T) {
	ts := slowServer(t)
	resp := ts.openStream(t, "last", map[string]any{"prompt": "abc", "max_tokens": 60, "ignore_eos": true})
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	first, err := rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "data: ") {
		t.Fatalf("%q %v", first, err)
	}
	ts.cancel() // SIGINT/SIGTERM
	// No new connections once shutdown started.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(ts.url, "http://"), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The running stream still ends normally.
	rest, err := readAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := sseEvents(t, []byte(first+rest))
	if len(data) < 2 || data[len(data)-1] != "[DONE]" || !strings.Contains(data[len(data)-2], `"finish_reason":"length"`) {
		t.Fatalf("stream after shutdown began: %q", data)
	}
	ts.waitServed(t, 10*time.Second)
}

func TestShutdownTimeoutEndsStreams(t *testing.T) {
	ts := cutServer(t)
	resp := ts.openStream(t, "cut", map[string]any{"prompt": "abc", "max_tokens": 2000, "ignore_eos": true})
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	first, err := rd.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ts.cancel()
	ts.waitServed(t, 10*time.Second)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	// The stream still running at the end of the drain time ends with a
	// final chunk and [DONE].
	rest, err := readAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := sseEvents(t, []byte(first+rest))
	if len(data) < 2 || data[len(data)-1] != "[DONE]" || !strings.Contains(data[len(data)-2], `"finish_reason":"canceled"`) {
		t.Fatalf("stream cut by the drain deadline: %q", data[max(len(data)-2, 0):])
	}
	line := ts.log.waitLines(t, 1, "request completed: request_id=cut ")[0]
	if !strings.Contains(line, "outcome=completed") {
		t.Errorf("access line %q", line)
	}
	ts.log.waitLines(t, 1, "Drain time is over")
}

func TestShutdownTimeoutEndsAnthropicStream(t *testing.T) {
	ts := cutServer(t)
	data, _ := json.Marshal(map[string]any{"model": "slow", "max_tokens": 1800, "stream": true, "ignore_eos": true,
		"messages": []map[string]any{{"role": "user", "content": "abc"}}})
	req, _ := http.NewRequest("POST", ts.url+"/v1/messages", bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "cut-anthropic")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	first, err := rd.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	ts.cancel()
	rest, err := readAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	body := first + rest
	if !strings.Contains(body, "event: error") || !strings.Contains(body, "shutting down") || strings.Contains(body, "message_stop") {
		t.Fatalf("stream cut by the drain deadline ends %q", body[max(len(body)-300, 0):])
	}
	line := ts.log.waitLines(t, 1, "request completed: request_id=cut-anthropic ")[0]
	if !strings.Contains(line, "outcome=error") {
		t.Errorf("access line %q", line)
	}
}

func TestThroughputLineAndConcurrency(t *testing.T) {
	ts := slowServer(t, func(o *Options) { o.ThroughputInterval = 20 * time.Millisecond })
	var wg sync.WaitGroup
	errs := make(chan string, 3)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body := ts.post("/v1/completions", map[string]any{"prompt": "abc", "max_tokens": 40, "ignore_eos": true})
			if resp.StatusCode != 200 {
				errs <- string(body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	lines := ts.log.waitLines(t, 1, "Throughput (T/s)")
	re := regexp.MustCompile(`INFO mistralrs_core: Throughput \(T/s\) \d+\.\d{2}, Prefix cache hitrate \d+\.\d{2}%, \d+ running, \d+ waiting$`)
	for _, l := range lines {
		if !re.MatchString(l) {
			t.Errorf("throughput line %q", l)
		}
	}
	// Idle: no more lines.
	time.Sleep(50 * time.Millisecond)
	n := len(ts.log.lines("Throughput (T/s)"))
	time.Sleep(100 * time.Millisecond)
	if m := len(ts.log.lines("Throughput (T/s)")); m != n {
		t.Errorf("throughput lines while idle: %d then %d", n, m)
	}
}

func TestPayloadLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.log")
	pl, err := observe.OpenPayloadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	ts := startServer(t, func(o *Options) { o.PayloadLog = pl })
	ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"secret question"}],"max_tokens":2}`)
	ts.post("/v1/chat/completions", `{"model":"nope","messages":[]}`)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, want := range []string{"Request at ", "secret question", "Response at ", `"object":"chat.completion"`, "Error response at ", "Requested model 'nope'"} {
		if !strings.Contains(s, want) {
			t.Errorf("log lacks %q:\n%s", want, s)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
}

func readAll(rd *bufio.Reader) (string, error) {
	var b strings.Builder
	_, err := rd.WriteTo(&b)
	return b.String(), err
}

// An unload while a stream runs frees the model only when the stream ends;
// the stream finishes normally.
func TestUnloadDuringStream(t *testing.T) {
	ts := slowServer(t)
	resp := ts.openStream(t, "held", map[string]any{"prompt": "abc", "max_tokens": 40, "ignore_eos": true})
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	first, err := rd.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if s := manage(t, ts, "unload", "slow"); s.Status != StatusUnloaded {
		t.Fatalf("unload %+v", s)
	}
	rest, err := readAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := sseEvents(t, []byte(first+rest))
	if data[len(data)-1] != "[DONE]" || !strings.Contains(data[len(data)-2], `"finish_reason":"length"`) {
		t.Fatalf("stream: %q", data[len(data)-2:])
	}
	if s := manage(t, ts, "status", "slow"); s.Status != StatusUnloaded {
		t.Errorf("status %+v", s)
	}
	if r, b := ts.post("/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1}); r.StatusCode != 200 {
		t.Errorf("after unload: %d %s", r.StatusCode, b)
	}
}
