package observe

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func bucketBounds(h *dto.Histogram) []float64 {
	var b []float64
	for _, bk := range h.Bucket {
		if !math.IsInf(bk.GetUpperBound(), 1) {
			b = append(b, bk.GetUpperBound())
		}
	}
	if n := len(h.Bucket); n == 0 || !math.IsInf(h.Bucket[n-1].GetUpperBound(), 1) {
		return nil // no +Inf bucket
	}
	return b
}

// HTTP metrics: names, labels (path = matched pattern or <unmatched>),
// buckets, and housekeeping excluded.
func TestHTTPMetrics(t *testing.T) {
	e := newEnv(t, "off", nil)
	e.do("POST", "/v1/chat/completions", `{"model":"llama-3.2-1b"}`)
	e.do("POST", "/v1/chat/completions", `{"model":"llama-3.2-1b"}`)
	e.do("GET", "/v1/models", "")
	e.do("GET", "/v1/files/abc", "")
	e.do("GET", "/v1/files/def", "")
	e.do("GET", "/not/a/route", "")
	e.do("GET", "/v1/chat/completions", "") // 405: the path keeps its label
	e.do("BREW", "/v1/models", "")          // a made-up method is not a label value
	for _, p := range []string{"/", "/health", "/metrics", "/docs/", "/api-doc/openapi.json", "/ui/", "/ui/api/list_models"} {
		e.do("GET", p, "")
	}
	e.do("OPTIONS", "/v1/chat/completions", "")
	fams := e.scrape(t)

	for _, c := range []struct {
		labels map[string]string
		count  float64
	}{
		{labels("method", "POST", "path", "/v1/chat/completions", "model", "llama-3.2-1b", "status", "200"), 2},
		{labels("method", "GET", "path", "/v1/models", "model", "none", "status", "200"), 1},
		{labels("method", "GET", "path", "/v1/files/{id}", "model", "none", "status", "404"), 2},
		{labels("method", "GET", "path", "<unmatched>", "model", "none", "status", "404"), 1},
		{labels("method", "GET", "path", "/v1/chat/completions", "model", "unknown", "status", "405"), 1},
		{labels("method", "OTHER", "path", "/v1/models", "model", "none", "status", "405"), 1},
	} {
		m := series(fams, "http_requests_total", c.labels)
		if m == nil || m.GetCounter().GetValue() != c.count {
			t.Errorf("http_requests_total%v = %v, want %v", c.labels, m, c.count)
		}
		d := series(fams, "http_request_duration_seconds", c.labels)
		if d == nil || float64(d.GetHistogram().GetSampleCount()) != c.count {
			t.Errorf("http_request_duration_seconds%v = %v", c.labels, d)
		}
	}
	if n := len(fams["http_requests_total"].Metric); n != 6 {
		t.Errorf("%d http_requests_total series (housekeeping leaked?)", n)
	}
	for _, f := range []string{"http_requests_total", "http_request_duration_seconds", "http_requests_in_flight", "http_request_body_bytes"} {
		for _, m := range fams[f].Metric {
			for _, lp := range m.Label {
				if lp.GetName() == "path" && (lp.GetValue() == "/health" || lp.GetValue() == "/metrics" || strings.HasPrefix(lp.GetValue(), "/ui") || strings.HasPrefix(lp.GetValue(), "/docs")) {
					t.Errorf("%s has housekeeping series %v", f, m.Label)
				}
				if lp.GetName() == "method" && lp.GetValue() == "OPTIONS" {
					t.Errorf("%s has an OPTIONS series", f)
				}
			}
		}
	}

	// Buckets and types.
	d := series(fams, "http_request_duration_seconds", labels("method", "GET", "path", "/v1/models", "model", "none", "status", "200"))
	if got := bucketBounds(d.GetHistogram()); !reflect.DeepEqual(got, DurationBuckets) || len(got) != 18 {
		t.Errorf("duration buckets %v", got)
	}
	b := series(fams, "http_request_body_bytes", labels("method", "POST", "path", "/v1/chat/completions", "model", "llama-3.2-1b"))
	if got := bucketBounds(b.GetHistogram()); !reflect.DeepEqual(got, BodyBytesBuckets) || len(got) != 12 {
		t.Errorf("body bucket bounds %v", got)
	}
	if b.GetHistogram().GetSampleCount() != 2 || b.GetHistogram().GetSampleSum() != 48 {
		t.Errorf("body bytes: count %d sum %v", b.GetHistogram().GetSampleCount(), b.GetHistogram().GetSampleSum())
	}
	// Body bytes only when the size is known: GET without Content-Length has none.
	if m := series(fams, "http_request_body_bytes", labels("method", "GET", "path", "/v1/models", "model", "none")); m != nil {
		t.Errorf("body bytes series for a request without a body size: %v", m)
	}
	for name, typ := range map[string]dto.MetricType{
		"http_requests_total":           dto.MetricType_COUNTER,
		"http_request_duration_seconds": dto.MetricType_HISTOGRAM,
		"http_requests_in_flight":       dto.MetricType_GAUGE,
		"http_request_body_bytes":       dto.MetricType_HISTOGRAM,
	} {
		if fams[name].GetType() != typ {
			t.Errorf("%s type %v", name, fams[name].GetType())
		}
	}
	if m := series(fams, "http_requests_in_flight", labels("method", "POST", "path", "/v1/chat/completions", "model", "llama-3.2-1b")); m == nil || m.GetGauge().GetValue() != 0 {
		t.Errorf("in flight after completion: %v", m)
	}
}

// Update moments: in-flight +1 while the handler runs, the request counted
// when it completes; for SSE, at the end of the stream.
func TestHTTPMetricsMoments(t *testing.T) {
	e := newEnv(t, "off", nil)
	release := make(chan struct{})
	entered := make(chan struct{})
	o := e.o
	mux := testMux(o)
	mux.HandleFunc("POST /v1/embeddings", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	})
	h := o.Handler(mux)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/embeddings", strings.NewReader(`{}`)))
	}()
	<-entered
	lbl3 := labels("method", "POST", "path", "/v1/embeddings", "model", "qwen3-0.6b")
	lbl4 := labels("method", "POST", "path", "/v1/embeddings", "model", "qwen3-0.6b", "status", "200")
	fams := e.scrape(t)
	if m := series(fams, "http_requests_in_flight", lbl3); m == nil || m.GetGauge().GetValue() != 1 {
		t.Errorf("in flight during the request: %v", m)
	}
	if m := series(fams, "http_request_body_bytes", lbl3); m == nil || m.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("body bytes at start: %v", m)
	}
	if m := series(fams, "http_requests_total", lbl4); m != nil {
		t.Errorf("counted before completion: %v", m)
	}
	close(release)
	wg.Wait()
	fams = e.scrape(t)
	if m := series(fams, "http_requests_in_flight", lbl3); m.GetGauge().GetValue() != 0 {
		t.Errorf("in flight after: %v", m)
	}
	if m := series(fams, "http_requests_total", lbl4); m == nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("total after: %v", m)
	}

	// SSE: recorded at stream end, with the whole stream's duration.
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true,"steps":4,"step_ms":40}`))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	_, _ = io.ReadFull(resp.Body, buf) // headers and the keep-alive frame arrived
	lblS := labels("method", "POST", "path", "/v1/chat/completions", "model", "qwen3-0.6b", "status", "200")
	fams = e.scrape(t)
	if m := series(fams, "http_requests_total", lblS); m != nil {
		t.Errorf("SSE counted before the stream ended: %v", m)
	}
	if m := series(fams, "http_requests_in_flight", labels("method", "POST", "path", "/v1/chat/completions", "model", "qwen3-0.6b")); m.GetGauge().GetValue() != 1 {
		t.Errorf("SSE in flight mid-stream: %v", m)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		fams = e.scrape(t)
		if m := series(fams, "http_requests_total", lblS); m != nil {
			d := series(fams, "http_request_duration_seconds", lblS)
			if d.GetHistogram().GetSampleSum() < 0.16 {
				t.Errorf("SSE duration %v does not cover the stream", d.GetHistogram().GetSampleSum())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("SSE request never counted")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// The model label, resolved per route as mistral.rs does: defaultable,
// explicit, unknown, none; an
// arbitrary client string never becomes a label value.
func TestModelLabel(t *testing.T) {
	for _, c := range []struct {
		name, method, target, body, want string
	}{
		{"omitted model: default model", "POST", "/v1/chat/completions", `{"messages":[]}`, "qwen3-0.6b"},
		{"\"default\"", "POST", "/v1/chat/completions", `{"model":"default"}`, "qwen3-0.6b"},
		{"empty", "POST", "/v1/chat/completions", `{"model":""}`, "qwen3-0.6b"},
		{"known", "POST", "/v1/chat/completions", `{"model":"llama-3.2-1b"}`, "llama-3.2-1b"},
		{"alias as supplied", "POST", "/v1/chat/completions", `{"model":"my-alias"}`, "my-alias"},
		{"not trimmed", "POST", "/v1/chat/completions", `{"model":" llama-3.2-1b"}`, "unknown"},
		{"unknown string", "POST", "/v1/chat/completions", `{"model":"gpt-4o"}`, "unknown"},
		{"non-string model", "POST", "/v1/chat/completions", `{"model":7}`, "qwen3-0.6b"},
		{"key case matters", "POST", "/v1/chat/completions", `{"Model":"llama-3.2-1b"}`, "qwen3-0.6b"},
		{"escaped key", "POST", "/v1/chat/completions", `{"mod\u0065l":"llama-3.2-1b"}`, "llama-3.2-1b"},
		{"nested model ignored", "POST", "/v1/chat/completions", `{"x":{"model":"llama-3.2-1b"}}`, "qwen3-0.6b"},
		{"last duplicate wins", "POST", "/v1/chat/completions", `{"model":"gpt","model":"llama-3.2-1b"}`, "llama-3.2-1b"},
		{"invalid JSON", "POST", "/v1/chat/completions", `{"model":"llama-3.2-1b"`, "unknown"},
		{"empty body", "POST", "/v1/chat/completions", ``, "unknown"},
		{"not an object", "POST", "/v1/chat/completions", `[1,2]`, "qwen3-0.6b"},
		{"completions", "POST", "/v1/completions", `{"model":"llama-3.2-1b","prompt":"x"}`, "llama-3.2-1b"},
		{"LoRA body trimmed", "POST", "/v1/load_lora_adapter", `{"model":"  llama-3.2-1b "}`, "llama-3.2-1b"},
		{"query", "GET", "/v1/lora_adapters?model=+llama-3.2-1b+", ``, "llama-3.2-1b"},
		{"query first non-empty", "GET", "/v1/lora_adapters?model=&model=my-alias&model=x", ``, "my-alias"},
		{"query missing", "GET", "/v1/lora_adapters", ``, "qwen3-0.6b"},
		{"query unknown", "GET", "/v1/lora_adapters?model=zzz", ``, "unknown"},
		{"explicit known", "POST", "/v1/models/status", `{"model_id":"llama-3.2-1b"}`, "llama-3.2-1b"},
		{"explicit missing", "POST", "/v1/models/status", `{}`, "unknown"},
		{"explicit default is not special", "POST", "/v1/models/status", `{"model_id":"default"}`, "unknown"},
		{"explicit unknown", "POST", "/v1/models/status", `{"model_id":"nope"}`, "unknown"},
		{"no model route", "GET", "/v1/models", ``, "none"},
		{"unmatched", "POST", "/v2/whatever", `{"model":"llama-3.2-1b"}`, "none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "off", nil)
			mux := testMux(e.o)
			for _, p := range []string{"POST /v1/load_lora_adapter", "POST /v1/completions"} {
				mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {})
			}
			e.h = e.o.Handler(mux)
			var req *http.Request
			if c.body == "" {
				req = httptest.NewRequest(c.method, c.target, nil)
			} else {
				req = httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
			}
			e.h.ServeHTTP(httptest.NewRecorder(), req)
			var got []string
			for _, m := range e.scrape(t)["http_requests_total"].GetMetric() {
				for _, lp := range m.Label {
					if lp.GetName() == "model" {
						got = append(got, lp.GetValue())
					}
				}
			}
			if len(got) != 1 || got[0] != c.want {
				t.Errorf("model label %q, want %q", got, c.want)
			}
		})
	}
	if mistralrsModelSources()["/v1/models/tune"] != SourceModelID || mistralrsModelSources()["/v1/responses"] != SourceBody {
		t.Error("route table")
	}
	// No resolver: "default" for the default model, every named model unknown.
	if defaultableModel(nil, "") != "default" || defaultableModel(nil, "x") != "unknown" || explicitModel(nil, "x") != "unknown" {
		t.Error("nil resolver")
	}
}

// Random client model names never reach the label set.
func TestModelLabelCardinality(t *testing.T) {
	e := newEnv(t, "off", nil)
	for i := 0; i < 200; i++ {
		e.do("POST", "/v1/chat/completions", fmt.Sprintf(`{"model":"attacker-%d"}`, i))
		e.do("POST", "/v1/models/status", fmt.Sprintf(`{"model_id":"attacker-%d"}`, i))
	}
	fams := e.scrape(t)
	for _, m := range fams["http_requests_total"].Metric {
		for _, lp := range m.Label {
			if lp.GetName() == "model" && lp.GetValue() != "unknown" {
				t.Errorf("model label %q", lp.GetValue())
			}
		}
	}
	if n := len(fams["http_requests_total"].Metric); n != 2 {
		t.Errorf("%d series", n)
	}
}
