package httpguard

import (
	"net/http"
	"strings"
)

// CORS as mistral.rs configures tower-http's CorsLayer: any origin (unless a
// list is given), methods GET, POST, PUT, DELETE, the headers clients of the
// OpenAI and Anthropic APIs send plus x-request-id, and x-request-id exposed.
const (
	corsAllowMethods  = "GET,POST,PUT,DELETE"
	corsAllowHeaders  = "content-type,authorization,x-api-key,anthropic-version,anthropic-beta,x-request-id"
	corsExposeHeaders = "x-request-id"
	corsVary          = "origin,access-control-request-method,access-control-request-headers"
)

// CORSAllowedHeaders and CORSExposedHeaders list the CORS header names.
var (
	CORSAllowedHeaders = strings.Split(corsAllowHeaders, ",")
	CORSExposedHeaders = []string{corsExposeHeaders}
)

var (
	anyOrigin     = []string{"*"}
	varyValue     = []string{corsVary}
	allowMethods  = []string{corsAllowMethods}
	allowHeaders  = []string{corsAllowHeaders}
	exposeHeaders = []string{corsExposeHeaders}
	zeroLength    = []string{"0"}
)

// CORS is the layer that answers every OPTIONS request itself as a preflight
// (200, empty body) and adds the CORS headers to every other response, as
// tower-http does. origins nil allows any origin ("*"); otherwise only an
// Origin header equal to one of them is echoed back. The headers are set
// before next runs (Go sends headers at the first write), so the refusals and
// errors of the layers below carry them too.
func CORS(origins []string) func(http.Handler) http.Handler {
	var allowed map[string]bool
	if origins != nil {
		allowed = make(map[string]bool, len(origins))
		for _, o := range origins {
			allowed[o] = true
		}
	}
	allowOrigin := func(h http.Header, r *http.Request) {
		if allowed == nil {
			h["Access-Control-Allow-Origin"] = anyOrigin
			return
		}
		if o := r.Header.Get("Origin"); o != "" && allowed[o] {
			h.Set("Access-Control-Allow-Origin", o)
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			if r.Method == http.MethodOptions {
				h["Vary"] = varyValue
				h["Access-Control-Allow-Methods"] = allowMethods
				h["Access-Control-Allow-Headers"] = allowHeaders
				allowOrigin(h, r)
				h["Content-Length"] = zeroLength
				w.WriteHeader(http.StatusOK)
				return
			}
			// The shared slices have len == cap, so a handler's
			// Header().Add copies instead of writing into them.
			h["Vary"] = varyValue
			h["Access-Control-Expose-Headers"] = exposeHeaders
			allowOrigin(h, r)
			next.ServeHTTP(w, r)
		})
	}
}
