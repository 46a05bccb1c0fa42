package server

import (
	"net/http"

	"mistralrs/internal/httpguard"
	"mistralrs/internal/observe"
	"mistralrs/internal/server/anthropic"
)

// jsonRoutes are the routes whose body is a JSON document: a request to one
// of them must say Content-Type: application/json (or a +json type), or it is
// answered 415 before the handler runs, as mistral.rs's Json extractor does.
// A missing Content-Type is refused too: text/plain, form bodies and bodies
// without a type are the ones a web page can POST cross-site without a CORS
// preflight, so this is what keeps other sites from running completions or
// unloading models through a visitor's browser.
var jsonRoutes = map[string]bool{
	"/v1/chat/completions":      true,
	"/v1/completions":           true,
	"/v1/responses":             true,
	"/v1/messages":              true,
	"/v1/messages/count_tokens": true,
	"/v1/embeddings":            true,
	"/v1/models/unload":         true,
	"/v1/models/reload":         true,
	"/v1/models/status":         true,
}

// guard builds the checks that run inside the observability layer (so their
// refusals are logged and counted) and before the body is read (so a refused
// body is never buffered): the Host header first (DNS rebinding; /health
// stays open to probes that reach the server by IP), then the API key (a
// client without the key learns nothing else), then the JSON content type.
// inner (the caller's own guard, if any) runs after them.
func (s *Server) guard(inner func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	needsKey := func(r *http.Request) bool {
		if observe.Route(r.Context()) == "/metrics" {
			return s.opts.APIKeyMetrics
		}
		return !observe.IsHousekeeping(r.Context())
	}
	needsJSON := func(r *http.Request) bool {
		return r.Method == http.MethodPost && jsonRoutes[observe.Route(r.Context())]
	}
	needsHost := func(r *http.Request) bool {
		return observe.Route(r.Context()) != "/health"
	}
	hosts := httpguard.Hosts(s.opts.AllowedHosts, needsHost, writeGuardError)
	auth := httpguard.APIKey(s.opts.APIKey, needsKey, writeGuardError)
	ctype := httpguard.RequireJSON(needsJSON, writeGuardError)
	return func(next http.Handler) http.Handler {
		if inner != nil {
			next = inner(next)
		}
		return hosts(auth(ctype(next)))
	}
}

// anthropicRoutes are the path patterns that answer in Anthropic's envelope.
var anthropicRoutes = []string{"/v1/messages", "/v1/messages/count_tokens"}

// addAnthropicErrorWriters makes the observability layer answer the errors
// it detects itself on the Anthropic routes (413, 405) in their envelope.
func addAnthropicErrorWriters(o *observe.Options) {
	ew := make(map[string]observe.ErrorWriter, len(o.ErrorWriters)+len(anthropicRoutes))
	for k, v := range o.ErrorWriters {
		ew[k] = v
	}
	for _, p := range anthropicRoutes {
		ew[p] = anthropic.WriteError
	}
	o.ErrorWriters = ew
}

// writeGuardError answers a refusal in the route's envelope: Anthropic's on
// the /v1/messages routes (401 is authentication_error there), OpenAI's
// elsewhere ({"error":{"type":"invalid_request_error","code":…}}).
func writeGuardError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	route := observe.Route(r.Context())
	for _, p := range anthropicRoutes {
		if p == route {
			anthropic.WriteError(w, r, status, msg)
			return
		}
	}
	if status == http.StatusUnauthorized {
		// As OpenAI answers a bad key; clients look for the header.
		w.Header().Set("WWW-Authenticate", `Bearer realm="mistralrs"`)
	}
	c := code
	observe.WriteError(w, r, status, observe.APIError{Message: msg, Code: &c})
}
