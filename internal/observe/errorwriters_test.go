package observe

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// A route with its own error envelope (RouteFacts.Errors) gets it for
// the errors the layer answers itself: a body over the limit, declared or
// read, and a wrong method; the access line still carries the message.
// Other routes keep OpenAI's shape.
func TestErrorWriters(t *testing.T) {
	envelope := func(w http.ResponseWriter, r *http.Request, status int, msg string) {
		SetError(r.Context(), msg)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"type":"error","status":` + strconv.Itoa(status) + `,"message":"` + msg + `"}`))
	}
	e := newEnv(t, "warn,mistralrs=info", func(o *Options) {
		o.BodyLimit = 100
		for i := range o.Routes {
			if o.Routes[i].Pattern == "/v1/chat/completions" {
				o.Routes[i].Errors = envelope
			}
		}
		o.Routes = append(o.Routes, RouteFacts{Method: "POST", Pattern: "/v1/upload", Errors: envelope})
	})
	big := strings.Repeat("x", 101)

	// Declared over the limit, and read over it without a declared length
	// (the layer buffers this route's body).
	req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(big))
	req.Header.Set("X-Request-Id", "declared")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	want := `{"type":"error","status":413,"message":"request body too large"}`
	if rec.Code != 413 || rec.Body.String() != want || rec.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("declared: %d %s %v", rec.Code, rec.Body.String(), rec.Header())
	}
	req = httptest.NewRequest("POST", "/v1/chat/completions", chunkedReader{strings.NewReader(big)})
	req.ContentLength = -1
	req.Header.Del("Content-Length")
	rec = httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != 413 || rec.Body.String() != want {
		t.Errorf("read: %d %s", rec.Code, rec.Body.String())
	}
	// A route the layer does not buffer: the body limit answers a declared
	// length over the limit.
	rec = e.do("POST", "/v1/upload", big)
	if rec.Code != 413 || rec.Body.String() != want {
		t.Errorf("unbuffered route: %d %s", rec.Code, rec.Body.String())
	}
	rec = e.do("GET", "/v1/chat/completions", "")
	if rec.Code != 405 || !strings.HasPrefix(rec.Body.String(), `{"type":"error","status":405,"message":"method GET is not allowed`) || rec.Header().Get("Allow") == "" {
		t.Errorf("405: %d %s %v", rec.Code, rec.Body.String(), rec.Header())
	}
	var line string
	for _, l := range e.logs.Lines() {
		if strings.Contains(l, "request completed: request_id=declared ") {
			line = l
		}
	}
	if !strings.Contains(line, `status=413`) || !strings.Contains(line, `error="request body too large"`) {
		t.Errorf("access line %q", line)
	}

	// Another route: OpenAI's shape.
	rec = e.do("GET", "/v1/models/status", "")
	if rec.Code != 405 || !strings.HasPrefix(rec.Body.String(), `{"error":{"message":"method GET`) {
		t.Errorf("other route 405: %d %s", rec.Code, rec.Body.String())
	}
}
