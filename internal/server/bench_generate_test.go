package server

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"mistralrs/internal/loader"
	"mistralrs/internal/observe"
)

// BenchmarkGenerate is the cost of one short generation request through
// the whole server (HTTP, observability, the dialect, the engine) on the
// tiny random model, per route and form: 4 tokens, greedy, so the
// dialect's and the seam's work is a visible part of it.
func BenchmarkGenerate(b *testing.B) {
	oo := observe.DefaultOptions()
	oo.Logger = slog.New(observe.NewTracingHandler(io.Discard, nil))
	o := Options{Models: []ModelSpec{tinySpec(b, "tiny", tinyConfig, loader.Options{})}, Observe: &oo,
		Logger: slog.New(slog.DiscardHandler), EngineLogger: slog.New(slog.DiscardHandler)}
	srv, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	msgs := `[{"role":"user","content":"abc"}]`
	for _, c := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"messages":` + msgs + `,"max_tokens":4,"temperature":0,"ignore_eos":true}`},
		{"chat-stream", "/v1/chat/completions", `{"messages":` + msgs + `,"max_tokens":4,"temperature":0,"ignore_eos":true,"stream":true}`},
		{"completions", "/v1/completions", `{"prompt":"abc","max_tokens":4,"temperature":0,"ignore_eos":true}`},
		{"responses-stream", "/v1/responses", `{"input":"abc","max_output_tokens":4,"temperature":0,"ignore_eos":true,"stream":true}`},
		{"messages-stream", "/v1/messages", `{"model":"tiny","messages":` + msgs + `,"max_tokens":4,"temperature":0,"ignore_eos":true,"stream":true}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := http.Post(hs.URL+c.path, "application/json", bytes.NewReader([]byte(c.body)))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("%s: %d", c.path, resp.StatusCode)
				}
			}
		})
	}
}
