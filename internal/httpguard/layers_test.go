package httpguard

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// CORS alone: preflights are answered without reaching the handler, other
// responses carry the headers; with a list, only a listed origin is echoed.
func TestCORS(t *testing.T) {
	reached := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached++; w.WriteHeader(http.StatusNoContent) })

	h := CORS(nil)(next)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("OPTIONS", "/v1/chat/completions", nil)
	req.Header.Set("Origin", "https://any.example")
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || reached != 0 || rec.Header().Get("Access-Control-Allow-Origin") != "*" ||
		rec.Header().Get("Access-Control-Allow-Methods") != "GET,POST,PUT,DELETE" ||
		!strings.Contains(rec.Header().Get("Access-Control-Allow-Headers"), "x-api-key") || rec.Header().Get("Content-Length") != "0" {
		t.Errorf("preflight: %d reached=%d %v", rec.Code, reached, rec.Header())
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/models", nil))
	if rec.Code != 204 || reached != 1 || rec.Header().Get("Access-Control-Allow-Origin") != "*" ||
		rec.Header().Get("Access-Control-Expose-Headers") != "x-request-id" || rec.Header().Get("Vary") == "" {
		t.Errorf("request: %d %v", rec.Code, rec.Header())
	}

	h = CORS([]string{"https://app.example"})(next)
	for origin, want := range map[string]string{"https://app.example": "https://app.example", "https://evil.example": "", "": ""} {
		for _, m := range []string{"OPTIONS", "POST"} {
			req := httptest.NewRequest(m, "/v1/chat/completions", nil)
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if got := rec.Header().Get("Access-Control-Allow-Origin"); got != want {
				t.Errorf("%s from %q: Access-Control-Allow-Origin %q, want %q", m, origin, got, want)
			}
		}
	}
}

// BodyLimit alone: a declared length over the limit is refused before the
// handler runs (for the requests it applies to); an undeclared one fails
// when read past the limit.
func TestBodyLimit(t *testing.T) {
	var got refusal
	var readErr error
	var n int64
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, readErr = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	h := BodyLimit(10, func(r *http.Request) bool { return r.URL.Path != "/free" }, recordFail(&got))(next)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/x", strings.NewReader(strings.Repeat("a", 11))))
	if rec.Code != 413 || got.code != CodeBodyTooLarge || n != 0 {
		t.Errorf("declared over: %d %+v, handler read %d", rec.Code, got, n)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/x", strings.NewReader(strings.Repeat("a", 10))))
	if rec.Code != 204 || n != 10 || readErr != nil {
		t.Errorf("at the limit: %d read %d %v", rec.Code, n, readErr)
	}
	req := httptest.NewRequest("POST", "/x", io.NopCloser(strings.NewReader(strings.Repeat("a", 100))))
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var mbe *http.MaxBytesError
	if !errors.As(readErr, &mbe) || n != 10 {
		t.Errorf("undeclared over: read %d, %v", n, readErr)
	}
	// Not applied: no 413 for the declared length, but reading is still capped.
	got = refusal{}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/free", strings.NewReader(strings.Repeat("a", 11))))
	if rec.Code != 204 || got.status != 0 || !errors.As(readErr, &mbe) {
		t.Errorf("not applied: %d %+v %v", rec.Code, got, readErr)
	}
}

// Hosts alone: names without the port, case-insensitive, domain suffixes,
// "*" and the empty list (both: any host).
func TestHosts(t *testing.T) {
	var got refusal
	h := Hosts([]string{"api.example", ".corp.example", "::1", "LocalHost"}, func(r *http.Request) bool { return r.URL.Path != "/health" }, recordFail(&got))(ok)
	for host, want := range map[string]int{
		"api.example": 204, "API.EXAMPLE:8080": 204, "corp.example": 204, "x.y.corp.example:1": 204,
		"[::1]:1234": 204, "[::1]": 204, "localhost:3000": 204,
		"evil.example": 400, "api.example.evil": 400, "xcorp.example": 400, "127.0.0.1": 400, "": 400,
	} {
		got = refusal{}
		req := httptest.NewRequest("GET", "/v1/models", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %q: %d, want %d", host, rec.Code, want)
		}
		if want == 400 && (got.code != CodeInvalidHost || !strings.Contains(got.msg, "invalid Host header")) {
			t.Errorf("Host %q: refusal %+v", host, got)
		}
	}
	req := httptest.NewRequest("GET", "/health", nil)
	req.Host = "10.0.0.1:8080"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 204 {
		t.Errorf("/health not applied: %d", rec.Code)
	}
	// A hostile Host is not echoed raw.
	req = httptest.NewRequest("GET", "/v1/models", nil)
	req.Host = "evil\"\x01" + strings.Repeat("x", 300)
	h.ServeHTTP(httptest.NewRecorder(), req)
	if strings.ContainsAny(got.msg[len("invalid Host header: this server does not answer for ")+1:len(got.msg)-1], "\"\x01") || len(got.msg) > 200 {
		t.Errorf("message %q", got.msg)
	}
	for _, list := range [][]string{nil, {}, {"*"}, {"a.example", "*"}} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Host = "anything.example"
		rec := httptest.NewRecorder()
		Hosts(list, nil, recordFail(&got))(ok).ServeHTTP(rec, req)
		if rec.Code != 204 {
			t.Errorf("list %q: %d", list, rec.Code)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "localhost": true, "LOCALHOST": true, "::1": true, "[::1]": true,
		"0.0.0.0": false, "::": false, "": false, "192.168.0.1": false, "example.com": false,
	} {
		if got := IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v", host, got)
		}
	}
}
