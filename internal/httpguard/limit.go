package httpguard

import "net/http"

// CodeBodyTooLarge is passed to ErrorFunc for a body over the limit.
const CodeBodyTooLarge = "request_body_too_large"

// BodyLimit is the layer that caps request bodies at limit bytes: a request
// applies selects (nil: every request) whose declared Content-Length is over
// the limit is answered 413 before next runs, and every body is wrapped so
// that reading past the limit fails (http.MaxBytesError; net/http then
// closes the connection after the response).
func BodyLimit(limit int64, applies func(*http.Request) bool, fail ErrorFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit && (applies == nil || applies(r)) {
				fail(w, r, http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "request body too large")
				return
			}
			if r.Body != nil && r.Body != http.NoBody {
				// The server's own writer lets MaxBytesReader mark the
				// connection for closing; wrappers hide it.
				r.Body = http.MaxBytesReader(unwrap(w), r.Body, limit)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// unwrap returns the innermost writer of a chain of wrappers that have
// Unwrap (as http.ResponseController finds it).
func unwrap(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}
