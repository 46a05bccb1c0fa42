// Package httpguard holds small HTTP layers that refuse requests before a
// handler sees them: RequireJSON answers a body that is not JSON with 415,
// APIKey answers a missing or wrong key with 401. Each is a
// func(http.Handler) http.Handler, usable alone; the caller decides which
// requests each applies to and writes the error in its own envelope.
package httpguard

import (
	"crypto/sha256"
	"crypto/subtle"
	"mime"
	"net/http"
	"strings"
)

// ErrorFunc answers a refused request with status, a machine-readable code
// ("unsupported_media_type", "invalid_api_key") and a message.
type ErrorFunc func(w http.ResponseWriter, r *http.Request, status int, code, msg string)

// Codes passed to ErrorFunc.
const (
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeInvalidAPIKey        = "invalid_api_key"
)

// IsJSON reports whether a Content-Type header names JSON:
// application/json or any application/*+json, with any parameters
// ("application/json; charset=utf-8"). An empty value is not JSON.
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// RequireJSON refuses, with 415, the requests applies selects whose
// Content-Type is not JSON (see IsJSON), a missing header included: as
// axum's Json extractor in mistral.rs does, and because text/plain, form
// bodies and bodies without a type are what a web page can send cross-site
// without a CORS preflight.
func RequireJSON(applies func(*http.Request) bool, fail ErrorFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if applies(r) {
				if ct := r.Header.Get("Content-Type"); !IsJSON(ct) {
					msg := "expected request with `Content-Type: application/json`"
					if ct != "" {
						msg += ", got " + strings.ToValidUTF8(clip(ct, 100), "\uFFFD")
					}
					fail(w, r, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, msg)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// APIKey refuses, with 401, the requests that need a key (needsKey) unless
// they carry key as "Authorization: Bearer <key>" or "x-api-key: <key>"
// (Anthropic's header). Keys are compared in constant time (as SHA-256
// digests, so the time does not depend on the key's length either). An
// empty key disables the layer. The key is never put in an error message.
func APIKey(key string, needsKey func(*http.Request) bool, fail ErrorFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if key == "" {
			return next
		}
		want := sha256.Sum256([]byte(key))
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if needsKey(r) && !hasKey(r, &want) {
				fail(w, r, http.StatusUnauthorized, CodeInvalidAPIKey, keyMessage(r))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// hasKey checks every key the request offers.
func hasKey(r *http.Request, want *[sha256.Size]byte) bool {
	ok := 0
	for _, v := range r.Header.Values("Authorization") {
		if tok, found := bearer(v); found {
			ok |= match(tok, want)
		}
	}
	for _, v := range r.Header.Values("X-Api-Key") {
		ok |= match(strings.TrimSpace(v), want)
	}
	return ok == 1
}

func match(got string, want *[sha256.Size]byte) int {
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], want[:])
}

// bearer returns the token of "Bearer <token>" (the scheme is case-insensitive).
func bearer(v string) (string, bool) {
	const scheme = "bearer "
	v = strings.TrimSpace(v)
	if len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return "", false
	}
	return strings.TrimSpace(v[len(scheme):]), true
}

// keyMessage says what was wrong without repeating what was sent.
func keyMessage(r *http.Request) string {
	if r.Header.Get("Authorization") == "" && r.Header.Get("X-Api-Key") == "" {
		return "missing API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`"
	}
	return "invalid API key"
}
