package observe

import (
	"net/http"
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
