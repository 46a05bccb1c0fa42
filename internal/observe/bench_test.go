package observe

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// discardWriter is a minimal http.ResponseWriter, so the benchmark measures
// the middleware rather than httptest's recorder.
type discardWriter struct {
	h    http.Header
	code int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(code int)        { d.code = code }
func (d *discardWriter) Flush()                      {}

// resettableBody replays the same bytes on every iteration.
type resettableBody struct{ strings.Reader }

func (*resettableBody) Close() error { return nil }

func benchStack(b *testing.B, wrap bool, method, target, body string) {
	benchStackTraced(b, wrap, nil, method, target, body)
}

func benchStackTraced(b *testing.B, wrap bool, tp trace.TracerProvider, method, target, body string, hdr ...string) {
	th := NewTracingHandler(io.Discard, nil) // access lines formatted, then discarded
	opts := DefaultOptions()
	opts.Tracer = tp
	opts.Logger = slog.New(th)
	opts.Models = testModels
	o, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	trivial := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
	}
	mux.HandleFunc("GET /v1/models", trivial)
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		trivial(w, r)
	})
	var h http.Handler = mux
	if wrap {
		h = o.Handler(mux)
	}
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rb := &resettableBody{}
	if body != "" {
		req.Body = rb
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	for b.Loop() {
		if body != "" {
			rb.Reset(body)
		}
		clear(w.h)
		h.ServeHTTP(w, req)
	}
	reportCPU(b, c0)
}

// cpuTime is the process's user+system CPU time. On a shared, loaded
// machine wall-clock ns/op mostly measures waiting for a core; CPU time per
// operation (cpu-ns/op) is what the middleware costs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, c0 time.Duration) {
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
}

// The whole observability stack (request id, CORS, body limit, access log
// formatted in full, HTTP metrics) against the bare mux, on a trivial handler.
func BenchmarkStack(b *testing.B) {
	b.Run("GET_models/bare", func(b *testing.B) { benchStack(b, false, "GET", "/v1/models", "") })
	b.Run("GET_models/observed", func(b *testing.B) { benchStack(b, true, "GET", "/v1/models", "") })
	chat := `{"model":"llama-3.2-1b","messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":64}`
	b.Run("POST_chat/bare", func(b *testing.B) { benchStack(b, false, "POST", "/v1/chat/completions", chat) })
	b.Run("POST_chat/observed", func(b *testing.B) { benchStack(b, true, "POST", "/v1/chat/completions", chat) })
}

// The stack with tracing off (the layer is absent: the same as "observed"
// above) and on: the SDK's batch processor to an exporter that discards,
// every span sampled, with and without an incoming traceparent.
func BenchmarkStackTracing(b *testing.B) {
	chat := `{"model":"llama-3.2-1b","messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":64}`
	b.Run("off", func(b *testing.B) { benchStack(b, true, "POST", "/v1/chat/completions", chat) })
	on := func(b *testing.B, hdr ...string) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		benchStackTraced(b, true, tp, "POST", "/v1/chat/completions", chat, hdr...)
	}
	b.Run("on", func(b *testing.B) { on(b) })
	b.Run("on_traceparent", func(b *testing.B) { on(b, "traceparent", incoming) })
}

// Rendering /metrics with 10,000 series (plus the engine families):
// "http" is 2,500 label sets in each of the four HTTP families (the
// histograms make about 92,000 sample lines); "counters" is 10,000
// http_requests_total series.
func BenchmarkMetricsRender10k(b *testing.B) {
	for _, kind := range []string{"http", "counters"} {
		b.Run(kind, func(b *testing.B) {
			o, _ := New(Options{Metrics: true})
			hm := o.metrics.http
			if kind == "http" {
				for i := 0; i < 2500; i++ {
					s := hm.start("POST", "/v1/chat/completions", "model-"+strconv.Itoa(i))
					s.inflight.Inc()
					s.observeBodyBytes(float64(i))
					d := s.status(200).done()
					d.requests.Inc()
					d.duration.observe(0.1, "", "", time.Now())
				}
			} else {
				for i := 0; i < 10000; i++ {
					hm.requests.WithLabelValues("POST", "/v1/chat/completions", "model-"+strconv.Itoa(i), "200").Inc()
				}
			}
			h := o.MetricsHandler()
			req := httptest.NewRequest("GET", "/metrics", nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			b.ReportMetric(float64(rec.Body.Len()), "bytes/scrape")
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuTime()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
			reportCPU(b, c0)
		})
	}
}

// HTTP throughput over loopback on GET /v1/models: the bare mux against the
// full stack with everything on (access log formatted to a discarded
// writer, metrics, request ids), in one run. The ratio is reported.
func BenchmarkThroughputModels(b *testing.B) {
	run := func(b *testing.B, wrap bool) float64 {
		th := NewTracingHandler(io.Discard, nil)
		opts := DefaultOptions()
		opts.Logger = slog.New(th)
		o, _ := New(opts)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"default","object":"model"}]}`))
		})
		var h http.Handler = mux
		if wrap {
			h = o.Handler(mux)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		tr := &http.Transport{MaxIdleConnsPerHost: 64}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		url := srv.URL + "/v1/models"
		b.ReportAllocs()
		b.SetParallelism(4)
		start := time.Now()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := client.Get(url)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
		rps := float64(b.N) / time.Since(start).Seconds()
		b.ReportMetric(rps, "req/s")
		return rps
	}
	var bare, observed float64
	b.Run("bare", func(b *testing.B) { bare = run(b, false) })
	b.Run("observed", func(b *testing.B) { observed = run(b, true) })
	if bare > 0 {
		b.Logf("observed/bare throughput: %.1f%%", 100*observed/bare)
	}
}
