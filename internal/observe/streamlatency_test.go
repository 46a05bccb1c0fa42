package observe

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Streaming latency: TTFT and ITL with vLLM's buckets, one TTFT sample per
// stream and one ITL sample per token step after the first; keep-alive
// comments and [DONE] frames never make a sample.
func TestStreamLatency(t *testing.T) {
	e := newEnv(t, "off", nil)
	e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":4,"step_ms":15}`)
	e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":1}`)
	fams := e.scrape(t)
	lbl := labels("method", "POST", "path", "/v1/chat/completions", "model", "qwen3-0.6b", "status", "200")
	ttft := series(fams, "mistralrs_time_to_first_token_seconds", lbl)
	itl := series(fams, "mistralrs_inter_token_latency_seconds", lbl)
	if ttft == nil || itl == nil {
		t.Fatalf("missing series: %v %v", ttft, itl)
	}
	if got := ttft.GetHistogram().GetSampleCount(); got != 2 {
		t.Errorf("TTFT samples %d, want 2 (one per stream)", got)
	}
	if got := itl.GetHistogram().GetSampleCount(); got != 3 {
		t.Errorf("ITL samples %d, want 3 (steps after the first)", got)
	}
	if s := itl.GetHistogram().GetSampleSum(); s < 0.045 || s > 5 {
		t.Errorf("ITL sum %v, want about 3 × 15 ms", s)
	}
	// The first stream waited 15 ms before its first step (queueing and
	// prefill are part of TTFT).
	if s := ttft.GetHistogram().GetSampleSum(); s < 0.015 {
		t.Errorf("TTFT sum %v", s)
	}
	if got := bucketBounds(ttft.GetHistogram()); !reflect.DeepEqual(got, TTFTBuckets) || len(got) != 22 {
		t.Errorf("TTFT buckets %v", got)
	}
	if got := bucketBounds(itl.GetHistogram()); !reflect.DeepEqual(got, ITLBuckets) || len(got) != 19 {
		t.Errorf("ITL buckets %v", got)
	}
	// Non-streamed responses, and streams without a token step, make no
	// streaming-latency series.
	e.do("POST", "/v1/chat/completions", `{"model":"llama-3.2-1b"}`)
	e.do("POST", "/v1/chat/completions", `{"model":"my-alias","stream":true,"steps":0}`)
	fams = e.scrape(t)
	if n := len(fams["mistralrs_time_to_first_token_seconds"].Metric); n != 1 {
		t.Errorf("%d TTFT series", n)
	}
}

// Token steps reported before the SSE header are kept and counted once the
// response turns out to be a stream; on other responses they are dropped,
// and steps after the handler returned are ignored.
func TestStreamStepsBeforeHeader(t *testing.T) {
	e := newEnv(t, "off", nil)
	var late *Stream
	mux := testMux(e.o)
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		s := StreamFromContext(r.Context())
		late = s
		t0 := time.Now()
		s.TokenStep(t0)
		s.TokenStep(t0.Add(30 * time.Millisecond))
		if strings.Contains(r.URL.RawQuery, "json") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{}"))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	})
	h := e.o.Handler(mux)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{}`)))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/completions?json", strings.NewReader(`{}`)))
	late.TokenStep(time.Now())
	late.SetUsage(Usage{PromptTokens: 1})
	late.Error("late")
	late.Done()
	var nilStream *Stream
	nilStream.TokenStep(time.Now()) // no middleware: a no-op
	if StreamFromContext(t.Context()) != nil {
		t.Error("stream outside the middleware")
	}
	fams := e.scrape(t)
	lbl := labels("method", "POST", "path", "/v1/completions", "model", "qwen3-0.6b", "status", "200")
	if m := series(fams, "mistralrs_time_to_first_token_seconds", lbl); m == nil || m.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("TTFT %v", m)
	}
	if m := series(fams, "mistralrs_inter_token_latency_seconds", lbl); m == nil || m.GetHistogram().GetSampleCount() != 1 || m.GetHistogram().GetSampleSum() < 0.029 {
		t.Errorf("ITL %v", m)
	}
}
