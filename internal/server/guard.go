package server

import (
	"net/http"

	"mistralrs/internal/httpguard"
	"mistralrs/internal/observe"
)

// guard builds the checks that run inside the observability layer (so their
// refusals are logged and counted) and before the body is read (so a refused
// body is never buffered): the Host header first (DNS rebinding; the probe
// route stays open to probes that reach the server by IP), then the API key
// (a client without the key learns nothing else), then the JSON content
// type. Each asks the request's row (s.index) what applies. inner (the
// caller's own guard, if any) runs after them.
//
// The JSON check is what mistral.rs's Json extractor does, and more: a
// missing Content-Type is refused too, since text/plain, form bodies and
// bodies without a type are the ones a web page can POST cross-site without
// a CORS preflight; so this is what keeps other sites from running
// completions or unloading models through a visitor's browser.
func (s *Server) guard(inner func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	needsKey := func(r *http.Request) bool {
		if rt := s.index.path(r); rt != nil && rt.access == scrape {
			return s.opts.APIKeyMetrics
		}
		// Housekeeping also covers what is asked under a housekeeping
		// subtree without a route (/ui with --no-ui) and preflights.
		return !observe.IsHousekeeping(r.Context())
	}
	needsJSON := func(r *http.Request) bool {
		rt := s.index.row(r)
		return rt != nil && rt.json
	}
	needsHost := func(r *http.Request) bool {
		rt := s.index.path(r)
		return rt == nil || rt.access != probe
	}
	hosts := httpguard.Hosts(s.opts.AllowedHosts, needsHost, s.writeGuardError)
	auth := httpguard.APIKey(s.opts.APIKey, needsKey, s.writeGuardError)
	ctype := httpguard.RequireJSON(needsJSON, s.writeGuardError)
	return func(next http.Handler) http.Handler {
		if inner != nil {
			next = inner(next)
		}
		return hosts(auth(ctype(next)))
	}
}

// writeGuardError answers a refusal in the route's envelope: its row's
// (Anthropic's on the /v1/messages routes, where 401 is
// authentication_error), else OpenAI's
// ({"error":{"type":"invalid_request_error","code":…}}).
func (s *Server) writeGuardError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	if rt := s.index.path(r); rt != nil && rt.errors != nil {
		rt.errors(w, r, status, msg)
		return
	}
	if status == http.StatusUnauthorized {
		// As OpenAI answers a bad key; clients look for the header.
		w.Header().Set("WWW-Authenticate", `Bearer realm="mistralrs"`)
	}
	c := code
	observe.WriteError(w, r, status, observe.APIError{Message: msg, Code: &c})
}
