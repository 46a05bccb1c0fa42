package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"mistralrs/internal/config"
	"mistralrs/internal/demo"
	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/loader"
	mdl "mistralrs/internal/model"
	"mistralrs/internal/observe"
)

// logBuf collects log lines; safe for concurrent writers.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines returns the lines containing every one of subs.
func (l *logBuf) lines(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// waitLines waits until n lines contain every one of subs.
func (l *logBuf) waitLines(t *testing.T, n int, subs ...string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := l.lines(subs...)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d log lines with %q, got %d:\n%s", n, subs, len(got), l.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tinyConfig is a model small enough that tests generate hundreds of
// tokens in milliseconds.
var tinyConfig = mdl.RandomConfig{Arch: "llama", Layers: 1, Embd: 32, FF: 64, Heads: 2, KVHeads: 1,
	Vocab: 300, ContextLen: 512, Type: kernels.F32, Seed: 7}

var (
	ggufMu    sync.Mutex
	ggufCache = map[mdl.RandomConfig][]byte{}
)

// modelBytes builds (once) the GGUF bytes of a random model with a byte vocabulary.
func modelBytes(t testing.TB, cfg mdl.RandomConfig) []byte {
	ggufMu.Lock()
	defer ggufMu.Unlock()
	if b, ok := ggufCache[cfg]; ok {
		return b
	}
	w, err := demo.RandomModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	ggufCache[cfg] = buf.Bytes()
	return buf.Bytes()
}

// tinySpec serves a random model under id; every load parses it anew, as
// a reload from disk would. opts may set a chat template file.
func tinySpec(t testing.TB, id string, cfg mdl.RandomConfig, opts loader.Options) ModelSpec {
	data := modelBytes(t, cfg)
	opts.ID = id
	return ModelSpec{ID: id, Load: func() (*loader.Model, error) {
		f, err := gguf.Parse(id, data)
		if err != nil {
			return nil, err
		}
		return loader.FromFile(f, opts)
	}}
}

// testServer is a real server on 127.0.0.1 with captured logs.
type testServer struct {
	t      testing.TB
	srv    *Server
	url    string
	log    *logBuf
	client openai.Client
	cancel context.CancelFunc
	served chan error
}

type testOpt func(*Options)

// startServer starts the server with one tiny model "tiny" unless opts set models.
func startServer(t testing.TB, opts ...testOpt) *testServer {
	t.Helper()
	logs := &logBuf{}
	filter, err := observe.ParseFilter("warn,mistralrs=debug")
	if err != nil {
		t.Fatal(err)
	}
	h := observe.NewTracingHandler(logs, filter)
	oo := observe.DefaultOptions()
	oo.Logger = slog.New(h)
	eo := config.DefaultEngineOptions()
	eo.Threads = 1
	o := Options{
		Models:       []ModelSpec{tinySpec(t, "tiny", tinyConfig, loader.Options{})},
		Observe:      &oo,
		Engine:       eo,
		Logger:       slog.New(h.ForTarget(observe.TargetServer)),
		EngineLogger: slog.New(h.ForTarget(observe.TargetEngine)),
	}
	for _, f := range opts {
		f(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{t: t, srv: srv, url: "http://" + ln.Addr().String(), log: logs, cancel: cancel, served: make(chan error, 1)}
	go func() { ts.served <- srv.Serve(ctx, ln) }()
	ts.client = openai.NewClient(option.WithBaseURL(ts.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	t.Cleanup(func() {
		cancel()
		if err := <-ts.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		srv.Close()
	})
	return ts
}

// waitServed waits up to limit for Serve to return after a shutdown and
// checks that it returned nil; the result is put back for the cleanup.
func (ts *testServer) waitServed(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case err := <-ts.served:
		ts.served <- err
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(limit):
		t.Fatal("Serve did not return")
	}
}

// post sends a JSON body and returns the response and its body.
func (ts *testServer) post(path string, body any, hdr ...string) (*http.Response, []byte) {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			ts.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest("POST", ts.url+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return ts.do(req)
}

func (ts *testServer) get(path string, hdr ...string) (*http.Response, []byte) {
	ts.t.Helper()
	req, err := http.NewRequest("GET", ts.url+path, nil)
	if err != nil {
		ts.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return ts.do(req)
}

func (ts *testServer) do(req *http.Request) (*http.Response, []byte) {
	ts.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return resp, data
}

// sseEvents splits an SSE body into its frames: "data: …" payloads and ":" comments.
func sseEvents(t *testing.T, body []byte) (data []string, comments int) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case line == ":" || strings.HasPrefix(line, ": "):
			comments++
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return data, comments
}

// metrics scrapes /metrics and parses it.
func (ts *testServer) metrics() map[string]*dto.MetricFamily {
	ts.t.Helper()
	resp, body := ts.get("/metrics")
	if resp.StatusCode != 200 {
		ts.t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		ts.t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

// series finds the metric of fam whose labels include want (nil if none).
func series(fams map[string]*dto.MetricFamily, fam string, want map[string]string) *dto.Metric {
	f := fams[fam]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

// value is a counter's or gauge's value, or a histogram's sample count
// (-1 when the series does not exist).
func value(fams map[string]*dto.MetricFamily, fam string, labels map[string]string) float64 {
	m := series(fams, fam, labels)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}

// labelSets lists the label sets of a family.
func labelSets(fams map[string]*dto.MetricFamily, fam string) []map[string]string {
	var out []map[string]string
	if f := fams[fam]; f != nil {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out = append(out, l)
		}
	}
	return out
}

// writeTemplate writes a chat template file.
func writeTemplate(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "template.jinja")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

func newRequest(method, url string) (*http.Request, error) { return http.NewRequest(method, url, nil) }
