package observe

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"

	"github.com/google/uuid"
)

// HeaderRequestID is the request and response header carrying the request id.
const HeaderRequestID = "X-Request-Id"

// MaxRequestIDLen bounds an accepted incoming request id.
const MaxRequestIDLen = 128

// ValidRequestID reports whether an incoming x-request-id is honoured:
// 1-128 characters from [A-Za-z0-9._:/@+=-]. Deliberate difference: mistral.rs
// takes any visible ASCII of any length, which lets a client forge or break
// access-log lines (spaces, quotes) and bloat every log line.
func ValidRequestID(s string) bool {
	if len(s) == 0 || len(s) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !idChar[s[i]] {
			return false
		}
	}
	return true
}

var idChar = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "._:/@+=-" {
		t[c] = true
	}
	return t
}()

// NewRequestID returns `req_` followed by a random UUID v4 in simple form
// (32 lowercase hex digits), as mistral.rs generates them. The bits come
// from the runtime's ChaCha8 generator (securely seeded, per thread) rather
// than a getrandom call per request: ids must be unique, not secret.
func NewRequestID() string {
	var u uuid.UUID
	binary.LittleEndian.PutUint64(u[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(u[8:], rand.Uint64())
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	var b [36]byte
	copy(b[:], "req_")
	hex.Encode(b[4:], u[:])
	return string(b[:])
}

// requestIDFrom honours a valid incoming id, else generates one.
func requestIDFrom(h http.Header) string {
	if v := h[HeaderRequestID]; len(v) > 0 && ValidRequestID(v[0]) {
		return v[0]
	}
	return NewRequestID()
}

// RequestIDs is the layer that gives each request its id: a valid
// incoming x-request-id (see ValidRequestID), else a new one (NewRequestID).
// The id is on the request's Record (RequestID) for the access log and the
// exemplars; with echo it is also sent back as the x-request-id response
// header (replacing one the handler set, as mistral.rs does).
func RequestIDs(echo bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec, w, r, own := enter(w, r)
			rec.ID = requestIDFrom(r.Header)
			// Set when the status is decided, over any id the handler set.
			rec.echoID = echo
			serveLayer(rec, own, next, w, r)
		})
	}
}
