package httpguard

import (
	"net"
	"net/http"
	"strings"
)

// CodeInvalidHost is passed to ErrorFunc for a Host header not allowed.
const CodeInvalidHost = "invalid_host"

// LoopbackHosts are the host names a server bound to a loopback address
// answers when no list is configured.
var LoopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// Hosts is the layer that refuses, with 400, the requests applies selects
// (nil: every request) whose Host header names a host not in allowed: the
// defense against DNS rebinding, where a web page on an attacker's domain,
// resolved to the server's address, reaches it with its own host name. An
// entry matches the host name without its port, case-insensitively; an
// entry starting with a dot (".example.com") matches that domain and its
// subdomains; "*" matches any host. An empty list disables the layer.
func Hosts(allowed []string, applies func(*http.Request) bool, fail ErrorFunc) func(http.Handler) http.Handler {
	exact := map[string]bool{}
	var suffixes []string
	for _, h := range allowed {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "*":
			return func(next http.Handler) http.Handler { return next }
		case strings.HasPrefix(h, "."):
			suffixes = append(suffixes, h)
		case h != "":
			exact[strings.Trim(h, "[]")] = true
		}
	}
	if len(exact) == 0 && len(suffixes) == 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	ok := func(host string) bool {
		name := strings.ToLower(hostName(host))
		if exact[name] {
			return true
		}
		for _, s := range suffixes {
			if name == s[1:] || strings.HasSuffix(name, s) {
				return true
			}
		}
		return false
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if (applies == nil || applies(r)) && !ok(r.Host) {
				fail(w, r, http.StatusBadRequest, CodeInvalidHost, "invalid Host header: this server does not answer for "+quoteHost(r.Host))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// hostName strips the port and the brackets of an IPv6 literal.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.Trim(host, "[]")
}

// quoteHost shows a client-sent host safely in a message.
func quoteHost(h string) string {
	return `"` + strings.ToValidUTF8(clip(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' {
			return -1
		}
		return r
	}, h), 100), "\uFFFD") + `"`
}

// IsLoopback reports whether a listen address (a host name or IP, without a
// port) is a loopback one: localhost or an address in 127.0.0.0/8 or ::1.
func IsLoopback(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
