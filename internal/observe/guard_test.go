package observe

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Options.Guard runs inside CORS and the observability layer: it sees the
// matched route, its refusals carry the CORS headers, preflights never
// reach it, and the refusal is counted like any response.
func TestGuardOption(t *testing.T) {
	var routes []string
	env := newEnv(t, "warn", func(opts *Options) {
		opts.AllowedOrigins = []string{"https://ok.example"}
		opts.Guard = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				routes = append(routes, Route(r.Context()))
				if r.Header.Get("X-Let-In") == "" && !IsHousekeeping(r.Context()) {
					WriteErrorMessage(w, r, http.StatusUnauthorized, "no")
					return
				}
				next.ServeHTTP(w, r)
			})
		}
	})
	o := env.o

	rec := env.do("GET", "/v1/models", "", "Origin", "https://ok.example")
	if rec.Code != 401 || rec.Header().Get("Access-Control-Allow-Origin") != "https://ok.example" {
		t.Errorf("refused: %d, Access-Control-Allow-Origin %q", rec.Code, rec.Header().Get("Access-Control-Allow-Origin"))
	}
	if rec := env.do("GET", "/v1/models", "", "X-Let-In", "1"); rec.Code != 200 {
		t.Errorf("let in: %d", rec.Code)
	}
	if rec := env.do("OPTIONS", "/v1/models", "", "Origin", "https://ok.example"); rec.Code != 200 {
		t.Errorf("preflight: %d", rec.Code)
	}
	if len(routes) != 2 || routes[0] != "/v1/models" {
		t.Errorf("the guard saw routes %q, want two /v1/models", routes)
	}
	fams := env.scrape(t)
	if m := series(fams, "http_requests_total", map[string]string{"method": "GET", "path": "/v1/models", "model": "none", "status": "401"}); m.GetCounter().GetValue() != 1 {
		t.Errorf("http_requests_total{401} = %v, want 1", m.GetCounter().GetValue())
	}
	if got := o.AllowedOrigins(); len(got) != 1 || got[0] != "https://ok.example" {
		t.Errorf("AllowedOrigins() = %q", got)
	}
}

// countingBody never ends; it counts the bytes read from it.
type countingBody struct{ n int }

func (b *countingBody) Read(p []byte) (int, error) { b.n += len(p); return len(p), nil }
func (b *countingBody) Close() error               { return nil }

// The guard runs before the body of a body-labelled route is buffered: a
// refused request's body is never read, and it is labelled unknown.
func TestGuardBeforeBody(t *testing.T) {
	env := newEnv(t, "warn", func(opts *Options) {
		opts.Guard = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Let-In") == "" && !IsHousekeeping(r.Context()) {
					WriteErrorMessage(w, r, http.StatusUnauthorized, "no")
					return
				}
				next.ServeHTTP(w, r)
			})
		}
	})
	body := &countingBody{}
	req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	req.Body, req.ContentLength = body, -1
	rec := httptest.NewRecorder()
	env.h.ServeHTTP(rec, req)
	if rec.Code != 401 || body.n != 0 {
		t.Errorf("refused: %d after reading %d bytes", rec.Code, body.n)
	}
	if rec := env.do("POST", "/v1/chat/completions", `{"model":"llama-3.2-1b"}`, "X-Let-In", "1"); rec.Code != 200 {
		t.Errorf("let in: %d", rec.Code)
	}
	fams := env.scrape(t)
	if m := series(fams, "http_requests_total", labels("method", "POST", "path", "/v1/chat/completions", "model", "unknown", "status", "401")); m.GetCounter().GetValue() != 1 {
		t.Errorf("refusal not counted under model unknown")
	}
	if m := series(fams, "http_requests_total", labels("method", "POST", "path", "/v1/chat/completions", "model", "llama-3.2-1b", "status", "200")); m.GetCounter().GetValue() != 1 {
		t.Errorf("admitted request not counted under its model")
	}
}
