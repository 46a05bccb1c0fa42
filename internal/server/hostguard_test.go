package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"mistralrs/internal/config"
)

// endlessBody is a request body that never ends; it counts the bytes read.
type endlessBody struct{ n atomic.Int64 }

func (b *endlessBody) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	b.n.Add(int64(len(p)))
	return len(p), nil
}

func (b *endlessBody) Close() error { return nil }

// The API key and the content type are checked before the body is read: an
// unauthenticated request, or one with a body that is not JSON, is refused
// without the server reading a byte of it (it used to buffer up to the
// 50 MiB limit first).
func TestRefusedBodiesAreNotRead(t *testing.T) {
	ts := startServer(t, withKey(false))
	for _, c := range []struct {
		name, ctype, key string
		status           int
	}{
		{"no key", "application/json", "", http.StatusUnauthorized},
		{"wrong key", "application/json", "Bearer nope", http.StatusUnauthorized},
		{"text/plain", "text/plain", "Bearer " + testKey, http.StatusUnsupportedMediaType},
	} {
		for _, path := range []string{"/v1/chat/completions", "/v1/messages", "/v1/models/unload"} {
			body := &endlessBody{}
			req := httptest.NewRequest("POST", path, nil)
			req.Body, req.ContentLength = body, -1
			req.Header.Set("Content-Type", c.ctype)
			if c.key != "" {
				req.Header.Set("Authorization", c.key)
			}
			rec := httptest.NewRecorder()
			ts.srv.Handler().ServeHTTP(rec, req)
			if rec.Code != c.status || body.n.Load() != 0 {
				t.Errorf("%s %s: %d after reading %d body bytes, want %d after none", c.name, path, rec.Code, body.n.Load(), c.status)
			}
		}
	}
	// With the key, the same endless body is read up to the limit: the
	// check above is what spares the reading.
	body := &endlessBody{}
	req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	req.Body, req.ContentLength = body, -1
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testKey)
	rec := httptest.NewRecorder()
	ts.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || body.n.Load() < 50<<20 {
		t.Errorf("with the key: %d after %d bytes", rec.Code, body.n.Load())
	}

	// Over a real connection: a client that declares a large body and sends
	// a few bytes of it gets its 401 at once, not after the body timeout.
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Content-Length: 40000000\r\n\r\n{\"model\":")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a slow unauthenticated body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("slow unauthenticated body: %d", resp.StatusCode)
	}
	fams := ts.metrics()
	if v := value(fams, "http_requests_total", map[string]string{"path": "/v1/chat/completions", "model": "unknown", "status": "401"}); v != 3 {
		t.Errorf("http_requests_total{chat,unknown,401} = %v, want 3", v)
	}
}

// --allowed-hosts: a request naming another host is a 400 in the route's
// envelope, counted and logged; the allowed names pass with any port, and
// /health is never checked.
func TestAllowedHosts(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.AllowedHosts = []string{"api.example", ".corp.example", "127.0.0.1"} })
	h := ts.srv.Handler()
	send := func(method, path, host, body string) *httptest.ResponseRecorder {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req := httptest.NewRequest(method, path, rd)
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, host := range []string{"evil.example", "evil.example:1234", "api.example.evil.example", "localhost", "corp.example.evil"} {
		rec := send("GET", "/v1/models", host, "")
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"code":"invalid_host"`) {
			t.Errorf("Host %q: %d %s", host, rec.Code, rec.Body.String())
		}
	}
	rec := send("POST", "/v1/messages", "evil.example", `{"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`)
	if rec.Code != http.StatusBadRequest || !strings.HasPrefix(rec.Body.String(), `{"type":"error"`) {
		t.Errorf("Anthropic route: %d %s", rec.Code, rec.Body.String())
	}
	for _, host := range []string{"api.example", "API.example:8443", "corp.example", "a.b.corp.example:1", "127.0.0.1:9"} {
		if rec := send("GET", "/v1/models", host, ""); rec.Code != http.StatusOK {
			t.Errorf("Host %q: %d %s", host, rec.Code, rec.Body.String())
		}
	}
	for _, p := range []string{"/health", "/readyz", "/livez"} {
		if rec := send("GET", p, "10.1.2.3:8080", ""); rec.Code != http.StatusOK {
			t.Errorf("%s by IP: %d", p, rec.Code)
		}
	}
	fams := ts.metrics()
	if v := value(fams, "http_requests_total", map[string]string{"path": "/v1/models", "status": "400"}); v != 5 {
		t.Errorf("http_requests_total{models,400} = %v, want 5", v)
	}
	if n := len(ts.log.lines("status=400", "invalid Host header")); n != 6 {
		t.Errorf("%d access lines of refused hosts, want 6:\n%s", n, ts.log.String())
	}
	if lines := strings.Join(ts.srv.StartupLines("127.0.0.1", 1, "text"), "\n"); !strings.Contains(lines, "Allowed hosts: api.example, .corp.example, 127.0.0.1") {
		t.Errorf("startup lines:\n%s", lines)
	}
}

// The configuration's host list: as given; unset, the loopback names on a
// loopback listen address and any host elsewhere.
func TestAllowedHostsFromConfig(t *testing.T) {
	for _, c := range []struct {
		listen string
		list   config.OriginList
		want   string
	}{
		{"0.0.0.0", nil, ""},
		{"192.168.1.5", nil, ""},
		{"::", nil, ""},
		{"127.0.0.1", nil, "localhost,127.0.0.1,::1"},
		{"localhost", nil, "localhost,127.0.0.1,::1"},
		{"::1", nil, "localhost,127.0.0.1,::1"},
		{"127.0.0.2", nil, "localhost,127.0.0.1,::1"},
		{"127.0.0.1", config.OriginList{"*"}, "*"},
		{"0.0.0.0", config.OriginList{"api.example"}, "api.example"},
	} {
		cfg := config.Default()
		cfg.Server.Host, cfg.Server.AllowedHosts = c.listen, c.list
		opts, _, err := OptionsFromConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(opts.AllowedHosts, ","); got != c.want {
			t.Errorf("host %s, list %q: allowed %q, want %q", c.listen, c.list, got, c.want)
		}
	}
}

// A server on a loopback address with the default configuration answers
// localhost names only: a DNS-rebinding page's host gets a 400.
func TestLoopbackDefaultRefusesOtherHosts(t *testing.T) {
	cfg := config.Default()
	cfg.Server.Host = "127.0.0.1"
	opts, _, err := OptionsFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(o *Options) { o.AllowedHosts = opts.AllowedHosts })
	for host, want := range map[string]int{"localhost:1234": 200, "127.0.0.1:80": 200, "[::1]:1234": 200, "[::1]": 200, "rebind.attacker.example:1234": 400} {
		req := httptest.NewRequest("GET", "/v1/models", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		ts.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %q: %d, want %d", host, rec.Code, want)
		}
	}
}
