package observe

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type chunkedReader struct{ r io.Reader }

func (c chunkedReader) Read(p []byte) (int, error) { return c.r.Read(p) }

// Body limit: 50 MiB; over it the request is answered 413 with an
// OpenAI-style JSON error, the model label is unknown, and the access log
// carries the message.
func TestBodyLimit(t *testing.T) {
	if DefaultOptions().BodyLimit != 52428800 || DefaultBodyLimit != 52428800 {
		t.Fatal("default body limit is not 50 MiB")
	}
	e := newEnv(t, "warn,mistralrs=info", nil)

	// Declared length over 50 MiB: refused before the body is read.
	req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader("{}"))
	req.ContentLength = DefaultBodyLimit + 1
	req.Header.Set("Content-Length", "52428801")
	req.Header.Set("X-Request-Id", "big")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	wantBody := `{"error":{"message":"request body too large","type":"invalid_request_error","param":null,"code":"request_body_too_large"}}`
	if rec.Code != 413 || rec.Body.String() != wantBody || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("413: %d %s %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
	if rec.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Error("413 without CORS headers")
	}

	// Exactly 50 MiB of valid JSON passes; one byte more (streamed, no
	// declared length) does not.
	if testing.Short() {
		t.Log("skipping the 50 MiB bodies in -short mode")
	} else {
		pad := strings.Repeat(" ", DefaultBodyLimit-len(`{"model":"llama-3.2-1b"}`))
		okBody := `{"model":"llama-3.2-1b"}` + pad
		req = httptest.NewRequest("POST", "/v1/chat/completions", chunkedReader{strings.NewReader(okBody)})
		req.ContentLength = -1
		req.Header.Del("Content-Length")
		rec = httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Errorf("50 MiB body: %d %s", rec.Code, rec.Body.String())
		}
		req = httptest.NewRequest("POST", "/v1/chat/completions", chunkedReader{strings.NewReader(okBody + " ")})
		req.ContentLength = -1
		req.Header.Del("Content-Length")
		req.Header.Set("X-Request-Id", "big2")
		rec = httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code != 413 || rec.Body.String() != wantBody {
			t.Errorf("50 MiB + 1 body: %d %s", rec.Code, rec.Body.String())
		}
	}
	var completed []string
	for _, l := range e.logs.Lines() {
		if strings.Contains(l, "request completed") && strings.Contains(l, "status=413") {
			completed = append(completed, mask(l))
		}
	}
	if len(completed) == 0 || completed[0] != `TS  INFO mistralrs_server_core::metrics: request completed: request_id=big method=POST route=/v1/chat/completions model=unknown status=413 duration_ms=D error="request body too large"` {
		t.Errorf("413 lines: %q", completed)
	}

	// Routes the layer does not buffer: the handler's read is capped.
	e = newEnv(t, "off", func(o *Options) { o.BodyLimit = 1000 })
	req = httptest.NewRequest("POST", "/v1/upload", chunkedReader{strings.NewReader(strings.Repeat("x", 1001))})
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != 413 || rec.Body.String() != wantBody {
		t.Errorf("handler read over limit: %d %s", rec.Code, rec.Body.String())
	}
	req = httptest.NewRequest("POST", "/v1/upload", chunkedReader{strings.NewReader(strings.Repeat("x", 1000))})
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Body.String() != "1000" {
		t.Errorf("handler read at limit: %d %s", rec.Code, rec.Body.String())
	}
	// An unmatched route with a huge declared length is still a 404.
	rec = e.do("POST", "/nowhere", strings.Repeat("x", 2000))
	if rec.Code != 404 {
		t.Errorf("unmatched over limit: %d", rec.Code)
	}
}

// The handler receives the buffered body unchanged.
func TestBufferedBodyReachesHandler(t *testing.T) {
	o, _ := New(withTestRoutes(DefaultOptions()))
	mux := http.NewServeMux()
	var got string
	var cl int64
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got, cl = string(b), r.ContentLength
	})
	body := `{"model":"x","messages":[{"role":"user","content":"hi \"there\""}]}`
	req := httptest.NewRequest("POST", "/v1/chat/completions", chunkedReader{strings.NewReader(body)})
	req.ContentLength = -1
	o.Handler(mux).ServeHTTP(httptest.NewRecorder(), req)
	if got != body || cl != int64(len(body)) {
		t.Errorf("handler saw %q (%d)", got, cl)
	}
}

// Every error body is the OpenAI error shape.
func TestWriteError(t *testing.T) {
	rec := httptest.NewRecorder()
	param, code := "temperature", "invalid_value"
	WriteError(rec, nil, 400, APIError{Message: "temperature must be in [0, 2]", Param: &param, Code: &code})
	var v struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 400 || rec.Header().Get("Content-Type") != "application/json" ||
		v.Error["message"] != "temperature must be in [0, 2]" || v.Error["type"] != "invalid_request_error" ||
		v.Error["param"] != "temperature" || v.Error["code"] != "invalid_value" {
		t.Errorf("%d %s", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	WriteErrorMessage(rec, nil, 500, "engine stopped")
	if rec.Body.String() != `{"error":{"message":"engine stopped","type":"server_error","param":null,"code":null}}` {
		t.Errorf("%s", rec.Body.String())
	}
	if ErrorType(404) != "invalid_request_error" || ErrorType(503) != "server_error" {
		t.Error("ErrorType")
	}
}

// The mux's own 404 and 405 answers come out as OpenAI-style JSON errors.
func TestUnmatchedRoutesAnswerJSON(t *testing.T) {
	o, err := New(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {})
	h := o.Handler(mux)
	for _, tc := range []struct {
		method, path string
		status       int
		msg, allow   string
	}{
		{"GET", "/nope", 404, "no route for GET /nope", ""},
		{"GET", "/v1/chat/completions", 405, "method GET is not allowed for /v1/chat/completions (allowed: POST)", "POST"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		var v struct {
			Error struct{ Message, Type string } `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Fatalf("%s %s: body %q is not JSON: %v", tc.method, tc.path, rec.Body.String(), err)
		}
		if rec.Code != tc.status || v.Error.Message != tc.msg || v.Error.Type != "invalid_request_error" ||
			rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d %v %q allow=%q", tc.method, tc.path, rec.Code, rec.Header(), rec.Body.String(), rec.Header().Get("Allow"))
		}
		if rec.Header().Get(HeaderRequestID) == "" {
			t.Errorf("%s %s: no request id header", tc.method, tc.path)
		}
	}
}
