package observe

import (
	"fmt"
	"net/http"
	"strings"
)

// Unmatched is the route label of requests no pattern matched.
const Unmatched = "<unmatched>"

// Router is the layer that names the request's route: it asks mux which
// pattern the request matches and records the pattern's path as the route
// label (the `path` metric label; Unmatched when none matches, the path's
// label when only the method is wrong), and whether the request is
// housekeeping (from routes, the facts of mux's routes). Put it outermost:
// the layers below read the label. Register "GET /{$}" rather than "/" for
// the root, since "/" matches every path.
func Router(mux *http.ServeMux, routes []RouteFacts) func(http.Handler) http.Handler {
	return router(mux, mustRouteTable(routes))
}

func router(mux *http.ServeMux, t *routeTable) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec, w, r, own := enter(w, r)
			rec.Route = routeOf(mux, r, rec)
			rec.Housekeeping = t.isHousekeeping(r.Method, rec.Route, rec.Path)
			serveLayer(rec, own, next, w, r)
		})
	}
}

// routeOf returns the path label of r's route.
func routeOf(mux *http.ServeMux, r *http.Request, rec *Record) string {
	// CONNECT paths are not canonicalised and may redirect to a
	// client-chosen path: never a label.
	if r.Method == http.MethodConnect {
		rec.unrouted = true
		return Unmatched
	}
	h, pat := mux.Handler(r)
	rec.unrouted = pat == ""
	if !strings.Contains(pat, "{") && r.RequestURI != "*" {
		rec.handler, rec.pattern = h, pat
	}
	if pat == "" {
		// 405: the path exists under another method and keeps its label.
		r2 := *r
		for _, m := range probeMethods {
			if m == r.Method {
				continue
			}
			r2.Method = m
			if _, pat = mux.Handler(&r2); pat != "" {
				break
			}
		}
		if pat == "" {
			return Unmatched
		}
	}
	return patternPath(pat)
}

var probeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}

// patternPath strips the method and host of a ServeMux pattern.
func patternPath(pat string) string {
	if i := strings.IndexByte(pat, '/'); i >= 0 {
		return pat[i:]
	}
	return pat
}

// dispatch is the innermost handler: it calls the handler Router found,
// sparing a second route lookup, or lets the mux route when path values are
// needed. The mux's own 404 and 405 become JSON errors, in the route's
// envelope (RouteFacts.Errors) or OpenAI's.
type dispatch struct {
	mux    *http.ServeMux
	routes *routeTable
}

func (d *dispatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := RecordFrom(r.Context())
	if rec != nil && (rec.unrouted || !cleanPath(r.URL.Path)) {
		// The mux's own 404/405 (CONNECT included) and path-cleaning
		// redirects answer in plain text or HTML; clients of an
		// OpenAI-style API expect every error as JSON.
		w = &jsonFallback{ResponseWriter: w, r: r, write: d.routes.errorWriter(rec.Route)}
	}
	if rec != nil && rec.handler != nil {
		r.Pattern = rec.pattern
		rec.handler.ServeHTTP(w, r)
		return
	}
	d.mux.ServeHTTP(w, r)
}

// cleanPath reports whether the mux would take p as it is (no redirect to
// a cleaned path).
func cleanPath(p string) bool {
	return !strings.Contains(p, "//") && !strings.Contains(p, "/./") && !strings.Contains(p, "/../") &&
		!strings.HasSuffix(p, "/.") && !strings.HasSuffix(p, "/..")
}

// jsonFallback turns the ServeMux's plain-text 404 and 405 responses and
// its HTML redirects into JSON errors in the route's envelope (the Allow
// header of a 405 and the Location of a redirect are kept).
type jsonFallback struct {
	http.ResponseWriter
	r        *http.Request
	write    ErrorWriter // the route's envelope, nil for OpenAI's
	replaced bool
}

func (j *jsonFallback) WriteHeader(code int) {
	var msg string
	switch code {
	case http.StatusNotFound:
		msg = fmt.Sprintf("no route for %s %s", j.r.Method, j.r.URL.Path)
	case http.StatusMethodNotAllowed:
		msg = fmt.Sprintf("method %s is not allowed for %s (allowed: %s)", j.r.Method, j.r.URL.Path, j.Header().Get("Allow"))
		if j.r.Method == http.MethodConnect {
			msg = fmt.Sprintf("method CONNECT is not allowed for %s", j.r.URL.Path)
		}
	case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		// The Location header stays: clients that follow redirects do.
		msg = fmt.Sprintf("%s is not a clean path: use %s", j.r.URL.Path, j.Header().Get("Location"))
	default:
		j.ResponseWriter.WriteHeader(code)
		return
	}
	j.replaced = true
	j.Header().Del("X-Content-Type-Options")
	if j.write != nil {
		j.write(j.ResponseWriter, j.r, code, msg)
		return
	}
	WriteErrorMessage(j.ResponseWriter, j.r, code, msg)
}

func (j *jsonFallback) Write(b []byte) (int, error) {
	if j.replaced {
		return len(b), nil // the plain-text body, already replaced
	}
	return j.ResponseWriter.Write(b)
}

func (j *jsonFallback) Unwrap() http.ResponseWriter { return j.ResponseWriter }
