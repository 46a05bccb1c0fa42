package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"mistralrs/internal/loader"
	"mistralrs/internal/observe"
)

// BenchmarkListModels is the HTTP throughput of GET /v1/models on the real
// server over loopback, with the whole observability stack on (access log
// formatted to a discarded writer, metrics, request-id header) and off, in
// one run; it logs the ratio.
func BenchmarkListModels(b *testing.B) {
	run := func(b *testing.B, on bool) float64 {
		oo := observe.DefaultOptions()
		oo.Logger = slog.New(observe.NewTracingHandler(io.Discard, nil))
		oo.AccessLog, oo.Metrics, oo.RequestIDHeader = on, on, on
		o := Options{Models: []ModelSpec{tinySpec(b, "tiny", tinyConfig, loader.Options{})}, Observe: &oo,
			Logger: slog.New(slog.DiscardHandler), EngineLogger: slog.New(slog.DiscardHandler)}
		srv, err := New(o)
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Close()
		hs := httptest.NewServer(srv.Handler())
		defer hs.Close()
		tr := &http.Transport{MaxIdleConnsPerHost: 64}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		url := hs.URL + "/v1/models"
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
	var off, on float64
	b.Run("off", func(b *testing.B) { off = run(b, false) })
	b.Run("on", func(b *testing.B) { on = run(b, true) })
	if off > 0 {
		b.Logf("everything on / everything off: %.1f%%", 100*on/off)
	}
}
