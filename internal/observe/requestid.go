package observe

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strings"

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

// cors answers every OPTIONS request itself as a preflight (200, empty body)
// and adds the CORS headers to every other response, as tower-http does.
type cors struct {
	next    http.Handler
	origins map[string]bool // nil: any origin ("*")
}

func (c *cors) allowOrigin(h http.Header, r *http.Request) {
	if c.origins == nil {
		h["Access-Control-Allow-Origin"] = anyOrigin
		return
	}
	if o := r.Header.Get("Origin"); o != "" && c.origins[o] {
		h.Set("Access-Control-Allow-Origin", o)
	}
}

var (
	anyOrigin     = []string{"*"}
	varyValue     = []string{corsVary}
	allowMethods  = []string{corsAllowMethods}
	allowHeaders  = []string{corsAllowHeaders}
	exposeHeaders = []string{corsExposeHeaders}
)

func (c *cors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	if r.Method == http.MethodOptions {
		h["Vary"] = varyValue
		h["Access-Control-Allow-Methods"] = allowMethods
		h["Access-Control-Allow-Headers"] = allowHeaders
		c.allowOrigin(h, r)
		h["Content-Length"] = zeroLength
		w.WriteHeader(http.StatusOK)
		return
	}
	// Set before the handler runs: Go sends headers at the first write, so
	// they cannot be added afterwards (tower-http adds them after). The
	// shared slices have len == cap, so a handler's Header().Add copies
	// instead of writing into them.
	h["Vary"] = varyValue
	h["Access-Control-Expose-Headers"] = exposeHeaders
	c.allowOrigin(h, r)
	c.next.ServeHTTP(w, r)
}

var zeroLength = []string{"0"}
