package observe

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

var genIDRe = regexp.MustCompile(`^req_[0-9a-f]{32}$`)

// Request ids: an incoming x-request-id of 1-128 characters from
// [A-Za-z0-9._:/@+=-] is honoured; anything else is replaced by a generated
// req_ + 32 hex id. Either way it is echoed and logged.
func TestRequestIDAcceptance(t *testing.T) {
	ok128 := strings.Repeat("a", 128)
	for _, c := range []struct {
		name, in string
		kept     bool
	}{
		{"simple", "abc", true},
		{"all allowed characters", "AZaz09._:/@+=-", true},
		{"uuid", "3f2a1c9e-7b1d-4c55-9a0e-2d4f6b8c1e00", true},
		{"one char", "x", true},
		{"128 chars", ok128, true},
		{"129 chars", ok128 + "a", false},
		{"space", "a b", false},
		{"quote", `a"b`, false},
		{"comma", "a,b", false},
		{"semicolon", "a;b", false},
		{"non-ASCII", "ümlaut", false},
		{"tab", "a\tb", false},
		{"empty", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "warn,mistralrs=info", nil)
			req := httptest.NewRequest("GET", "/v1/models", nil)
			req.Header["X-Request-Id"] = []string{c.in}
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			got := rec.Header().Get("X-Request-Id")
			if c.kept && got != c.in {
				t.Errorf("echoed %q, want %q", got, c.in)
			}
			if !c.kept && !genIDRe.MatchString(got) {
				t.Errorf("echoed %q, want a generated id", got)
			}
			lines := e.logs.Lines()
			if len(lines) != 2 {
				t.Fatalf("lines %q", lines)
			}
			for _, l := range lines {
				if !strings.Contains(l, "request_id="+got+" ") {
					t.Errorf("log line without request_id=%s: %s", got, l)
				}
			}
		})
	}
	if ValidRequestID("") || ValidRequestID(ok128+"a") || !ValidRequestID(ok128) {
		t.Error("ValidRequestID bounds")
	}
}

func TestGeneratedRequestIDs(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := NewRequestID()
		if !genIDRe.MatchString(id) || len(id) != 36 {
			t.Fatalf("bad id %q", id)
		}
		// UUID v4: version nibble 4, variant 10xx.
		if id[4+12] != '4' || !strings.ContainsRune("89ab", rune(id[4+16])) {
			t.Fatalf("not a v4 uuid: %s", id)
		}
		if seen[id] {
			t.Fatalf("duplicate %s", id)
		}
		seen[id] = true
	}
}

// The id is echoed on every response: normal, housekeeping, 404, 405, 413,
// preflight and SSE responses.
func TestRequestIDEchoEverywhere(t *testing.T) {
	e := newEnv(t, "off", func(o *Options) { o.BodyLimit = 64 })
	big := `{"model":"` + strings.Repeat("x", 100) + `"}`
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/v1/models", "", 200},
		{"GET", "/health", "", 200},
		{"GET", "/metrics", "", 200},
		{"GET", "/missing", "", 404},
		{"DELETE", "/v1/models", "", 405},
		{"POST", "/v1/chat/completions", big, 413},
		{"POST", "/v1/upload", big, 413},
		{"OPTIONS", "/v1/chat/completions", "", 200},
		{"POST", "/v1/chat/completions", `{"stream":true,"steps":1}`, 200},
		{"POST", "/v1/empty", "", 404},
	} {
		rec := e.do(c.method, c.path, c.body, "X-Request-Id", "echo-me")
		if rec.Code != c.status {
			t.Errorf("%s %s: status %d, want %d", c.method, c.path, rec.Code, c.status)
		}
		if got := rec.Header().Get("X-Request-Id"); got != "echo-me" {
			t.Errorf("%s %s (%d): x-request-id %q", c.method, c.path, rec.Code, got)
		}
	}
	// A handler's own x-request-id is overwritten, as mistral.rs sets (not appends) it.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /x", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "handler")
		if RequestID(r.Context()) != "echo-me" {
			t.Errorf("RequestID(ctx) = %q", RequestID(r.Context()))
		}
	})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/x", nil)
	req.Header.Set("X-Request-Id", "echo-me")
	e.o.Handler(mux).ServeHTTP(rec, req)
	if got := rec.Header().Values("X-Request-Id"); len(got) != 1 || got[0] != "echo-me" {
		t.Errorf("overwrite: %q", got)
	}
}

// --disable-request-id-header: no response header, but the id is still
// generated for the access log.
func TestRequestIDHeaderDisabled(t *testing.T) {
	e := newEnv(t, "warn,mistralrs=info", func(o *Options) { o.RequestIDHeader = false })
	rec := e.do("GET", "/v1/models", "")
	if v, ok := rec.Header()["X-Request-Id"]; ok {
		t.Errorf("header present: %q", v)
	}
	rec = e.do("GET", "/v1/models", "", "X-Request-Id", "client-id")
	if rec.Header().Get("X-Request-Id") != "" {
		t.Error("header echoed while disabled")
	}
	lines := maskAll(e.logs.Lines())
	if len(lines) != 4 || !strings.Contains(lines[0], "request_id=req_ID ") || !strings.Contains(lines[2], "request_id=client-id ") {
		t.Errorf("lines: %q", lines)
	}
}

// CORS: any origin; preflight answered with mistral.rs's allowed methods and
// headers (x-request-id among them); x-request-id exposed on other responses.
func TestCORS(t *testing.T) {
	e := newEnv(t, "off", nil)
	rec := e.do("OPTIONS", "/v1/chat/completions", "", "Origin", "https://app.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type,x-request-id")
	h := rec.Header()
	if rec.Code != 200 || rec.Body.Len() != 0 {
		t.Errorf("preflight: %d %q", rec.Code, rec.Body.String())
	}
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":  "*",
		"Access-Control-Allow-Methods": "GET,POST,PUT,DELETE",
		"Access-Control-Allow-Headers": "content-type,authorization,x-api-key,anthropic-version,anthropic-beta,x-request-id",
		"Vary":                         "origin,access-control-request-method,access-control-request-headers",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("preflight %s = %q, want %q", k, got, want)
		}
	}
	if h.Get("Access-Control-Expose-Headers") != "" {
		t.Error("preflight carries expose-headers")
	}
	for _, path := range []string{"/v1/models", "/missing"} {
		rec = e.do("GET", path, "", "Origin", "https://app.example")
		h = rec.Header()
		if h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Expose-Headers") != "x-request-id" {
			t.Errorf("%s: CORS headers %v", path, h)
		}
		if h.Get("Access-Control-Allow-Methods") != "" {
			t.Errorf("%s: allow-methods on a non-preflight response", path)
		}
	}
	if !contains(CORSAllowedHeaders, "x-request-id") || !contains(CORSExposedHeaders, "x-request-id") {
		t.Error("x-request-id not allowed and exposed")
	}

	// A restricted origin list echoes allowed origins only.
	e = newEnv(t, "off", func(o *Options) { o.AllowedOrigins = []string{"https://ok.example"} })
	if got := e.do("GET", "/v1/models", "", "Origin", "https://ok.example").Header().Get("Access-Control-Allow-Origin"); got != "https://ok.example" {
		t.Errorf("allowed origin: %q", got)
	}
	if got := e.do("GET", "/v1/models", "", "Origin", "https://evil.example").Header().Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("disallowed origin: %q", got)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
