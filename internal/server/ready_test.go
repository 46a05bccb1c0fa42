package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"mistralrs/internal/loader"
)

// getProbe GETs path on a connection of its own and returns the status and
// body; err when the server refused the connection or cut it.
func getProbe(url, path string) (int, string, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := c.Get(url + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitProbe polls path until it answers status with a body holding sub,
// and returns the body.
func (ts *testServer) waitProbe(t *testing.T, path string, status int, sub string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, err := getProbe(ts.url, path)
		if err == nil && code == status && strings.Contains(body, sub) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %q (%v), want %d", path, code, body, err, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wantProbe checks that path answers status with a body holding sub.
func (ts *testServer) wantProbe(t *testing.T, path string, status int, sub string) {
	t.Helper()
	code, body, err := getProbe(ts.url, path)
	if err != nil || code != status || !strings.Contains(body, sub) {
		t.Errorf("%s: %d %q (%v), want %d with %q", path, code, body, err, status, sub)
	}
}

// streamOn opens a streamed completion on a keep-alive connection of its
// own (one the listener accepts now) and returns its response, the body
// unread.
func (ts *testServer) streamOn(t *testing.T, id string, maxTokens int) *http.Response {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"prompt": "abc", "max_tokens": maxTokens, "ignore_eos": true, "stream": true})
	req, _ := http.NewRequest("POST", ts.url+"/v1/completions", bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	c := &http.Client{Transport: &http.Transport{}} // keep-alive, on a new connection
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("stream %s: %v", id, err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("stream %s: status %d", id, resp.StatusCode)
	}
	return resp
}

// wantCompleteStream reads a stream to its end: its last chunk must end
// with finish_reason length, then [DONE].
func wantCompleteStream(t *testing.T, id string, resp *http.Response) {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("stream %s cut: %v", id, err)
	}
	data, _ := sseEvents(t, body)
	if len(data) < 2 || data[len(data)-1] != "[DONE]" || !strings.Contains(data[len(data)-2], `"finish_reason":"length"`) {
		t.Errorf("stream %s did not complete: %q", id, data[max(len(data)-2, 0):])
	}
}

// The drain: on the signal readiness answers 503 at once while the server
// still takes new connections and requests for the pre-stop delay; a
// stream started before and one started during the delay both complete;
// after the delay the listener is closed; liveness answers 200 for as long
// as the server answers at all; every access line is written.
func TestReadinessDrain(t *testing.T) {
	ts := slowServer(t, func(o *Options) { o.ShutdownDelay = 2 * time.Second })
	for _, p := range []string{"/health", "/", "/readyz", "/livez", "/health?model=slow", "/readyz?model=default"} {
		ts.wantProbe(t, p, 200, "OK")
	}
	before := ts.streamOn(t, "before", 400)
	ts.waitMetric(t, "the first stream", func(f map[string]*dto.MetricFamily) bool {
		return value(f, "mistralrs_sequences_running", nil) == 1
	})

	ts.cancel() // SIGINT/SIGTERM
	body := ts.waitProbe(t, "/health", 503, "")
	if body != probeDraining {
		t.Errorf("readiness body %q", body)
	}
	for _, p := range []string{"/", "/readyz", "/health?model=slow"} {
		ts.wantProbe(t, p, 503, "draining")
	}
	ts.wantProbe(t, "/livez", 200, "OK")
	// Still serving: a new connection and a new stream are taken, told to
	// close their connection after the response.
	during := ts.streamOn(t, "during", 200)
	if before.Close || !during.Close {
		t.Errorf("Connection: close before the signal %v, during the drain %v", before.Close, during.Close)
	}
	ts.log.waitLines(t, 1, "Draining: readiness answers 503")

	// Liveness answers 200 until the listener closes (a probe caught in the
	// closing may be reset instead of refused), which refuses new
	// connections.
	for {
		code, _, err := getProbe(ts.url, "/livez")
		if err != nil {
			break
		}
		if code != 200 {
			t.Fatalf("liveness %d while draining", code)
		}
		time.Sleep(5 * time.Millisecond)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(ts.url, "http://"), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections after the delay")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(ts.log.lines("Shutting down: no new connections")) != 1 {
		t.Errorf("the listener closed without its line:\n%s", ts.log.String())
	}

	var wg sync.WaitGroup
	for id, resp := range map[string]*http.Response{"before": before, "during": during} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wantCompleteStream(t, id, resp)
		}()
	}
	wg.Wait()
	for _, id := range []string{"before", "during"} {
		line := ts.log.waitLines(t, 1, "request completed: request_id="+id+" ")[0]
		if !strings.Contains(line, "status=200 outcome=completed") {
			t.Errorf("access line %q", line)
		}
	}
	ts.waitServed(t, 20*time.Second)
}

// Readiness about one model (?model=ID) follows the model: 503 while it is
// unloaded and while it loads again, 200 once it is loaded; readiness
// without a model stays 200 throughout (it is about the process).
func TestReadinessOfAModel(t *testing.T) {
	gate := make(chan struct{})
	var loads sync.Mutex
	n := 0
	ts := startServer(t, func(o *Options) {
		spec := tinySpec(t, "tiny", tinyConfig, loader.Options{})
		load := spec.Load
		spec.Load = func() (*loader.Model, error) {
			loads.Lock()
			n++
			first := n == 1
			loads.Unlock()
			if !first {
				<-gate // a reload waits for the test
			}
			return load()
		}
		o.Models = []ModelSpec{spec}
	})
	ts.wantProbe(t, "/health?model=tiny", 200, "OK")
	ts.wantProbe(t, "/health?model=%20default%20", 200, "OK")
	ts.wantProbe(t, "/readyz?model=", 200, "OK")
	ts.wantProbe(t, "/health?model=nope", 404, "Requested model 'nope' is not available")

	if r, b := ts.post("/v1/models/unload", map[string]any{"model_id": "tiny"}); r.StatusCode != 200 || !strings.Contains(string(b), StatusUnloaded) {
		t.Fatalf("unload: %d %s", r.StatusCode, b)
	}
	ts.wantProbe(t, "/health?model=tiny", 503, "model tiny is unloaded")
	ts.wantProbe(t, "/health", 200, "OK")

	reloaded := make(chan string, 1)
	go func() {
		_, b := ts.post("/v1/models/reload", map[string]any{"model_id": "tiny"})
		reloaded <- string(b)
	}()
	// Unloaded until the reload starts, then loading.
	if body := ts.waitProbe(t, "/readyz?model=tiny", 503, "is loading"); body != "model tiny is loading" {
		t.Errorf("while loading: %q", body)
	}
	ts.wantProbe(t, "/health", 200, "OK")
	ts.wantProbe(t, "/livez", 200, "OK")
	close(gate)
	if b := <-reloaded; !strings.Contains(b, StatusLoaded) {
		t.Fatalf("reload: %s", b)
	}
	ts.wantProbe(t, "/health?model=tiny", 200, "OK")
}

// mistralrs_kv_cache_usage_ratio is the paged pool's used blocks over its
// blocks, as the two block gauges show them: above 0 while streams hold
// blocks, 0 once they end.
func TestKVCacheUsageRatio(t *testing.T) {
	ts := slowServer(t)
	ratio := func(f map[string]*dto.MetricFamily) (r, used, total float64) {
		return value(f, "mistralrs_kv_cache_usage_ratio", nil), value(f, "mistralrs_kv_cache_blocks_used", nil),
			value(f, "mistralrs_kv_cache_blocks_total", nil)
	}
	if r, used, total := ratio(ts.metrics()); r != 0 || used != 0 || total <= 0 {
		t.Fatalf("idle: ratio %v, %v of %v blocks", r, used, total)
	}
	var streams []*http.Response
	for _, id := range []string{"kv-a", "kv-b"} {
		streams = append(streams, ts.streamOn(t, id, 300))
	}
	// The three gauges are set one after the other from each report, so a
	// scrape may fall between them: wait for one that agrees.
	var seen float64
	ts.waitMetric(t, "blocks in use by both streams, the ratio agreeing", func(f map[string]*dto.MetricFamily) bool {
		r, used, total := ratio(f)
		seen = r
		return value(f, "mistralrs_sequences_running", nil) == 2 && used > 0 && total > 0 && r == used/total
	})
	if !(seen > 0 && seen < 1) {
		t.Errorf("ratio %v while two streams run", seen)
	}
	for i, resp := range streams {
		wantCompleteStream(t, []string{"kv-a", "kv-b"}[i], resp)
	}
	ts.waitMetric(t, "the blocks freed", func(f map[string]*dto.MetricFamily) bool {
		r, used, _ := ratio(f)
		return used == 0 && r == 0
	})
}
