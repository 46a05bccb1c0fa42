package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestUIServed: the web UI answers under /ui (the page, its files, the
// page again for unknown paths) for GET and HEAD only, and serves nothing
// outside its embedded files.
func TestUIServed(t *testing.T) {
	ts := startServer(t)
	for _, p := range []string{"/ui", "/ui/", "/ui/index.html", "/ui/chat/1"} {
		resp, body := ts.get(p)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(string(body), `id="transcript"`) {
			t.Errorf("GET %s: %d %q, not the page", p, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if resp, body := ts.get("/ui/app.js"); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") || len(body) == 0 {
		t.Errorf("GET /ui/app.js: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	req, _ := http.NewRequest("HEAD", ts.url+"/ui/", nil)
	if resp, body := ts.do(req); resp.StatusCode != 200 || len(body) != 0 {
		t.Errorf("HEAD /ui/: %d, %d bytes", resp.StatusCode, len(body))
	}
	req, _ = http.NewRequest("POST", ts.url+"/ui/", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	if resp, _ := ts.do(req); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d, want 405", resp.StatusCode)
	}
	// Raw request lines: nothing normalises the paths on the way.
	for _, p := range []string{"/ui/../go.mod", "/ui/%2e%2e/go.mod", "/ui/..%2fgo.mod", "/ui/%2e%2e%2f%2e%2e%2fgo.mod", "/ui/../../../etc/passwd"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(conn, "GET "+p+" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		if strings.Contains(string(body), "module mistralrs") || strings.Contains(string(body), "root:") {
			t.Errorf("GET %s served a file outside the UI", p)
		}
		if resp.StatusCode == 200 && !strings.Contains(string(body), `id="transcript"`) {
			t.Errorf("GET %s: 200 but not the page", p)
		}
	}
}

// TestUIIsHousekeeping: requests under /ui are never in the HTTP metrics,
// and reach the access log only with --access-log-health.
func TestUIIsHousekeeping(t *testing.T) {
	for _, logHealth := range []bool{false, true} {
		ts := startServer(t, func(o *Options) { o.Observe.AccessLogHealth = logHealth })
		for _, p := range []string{"/ui", "/ui/", "/ui/app.js", "/ui/deep/link", "/ui/../ui/"} {
			if resp, _ := ts.get(p, "X-Request-Id", "ui-probe"); resp.StatusCode != 200 {
				t.Fatalf("GET %s: %d", p, resp.StatusCode)
			}
		}
		// A request that is counted, to show the scrape has the families.
		ts.get("/v1/models")
		fams := ts.metrics()
		seen := false
		for _, f := range []string{"http_requests_total", "http_request_duration_seconds", "http_requests_in_flight", "http_request_body_bytes"} {
			for _, ls := range labelSets(fams, f) {
				if strings.HasPrefix(ls["path"], "/ui") {
					t.Errorf("access-log-health %v: %s has series %v", logHealth, f, ls)
				}
				if ls["path"] == "/v1/models" {
					seen = true
				}
			}
		}
		if !seen {
			t.Errorf("access-log-health %v: /v1/models not counted, so the check above shows nothing", logHealth)
		}
		info := ts.log.lines("INFO", "request_id=ui-probe")
		if logHealth {
			ts.log.waitLines(t, 5, "INFO", "request completed:", "request_id=ui-probe")
			if l := ts.log.lines("INFO", "request completed:", "request_id=ui-probe", "route=/ui/ "); len(l) < 3 {
				t.Errorf("with --access-log-health, /ui/ requests are not logged: %q", l)
			}
		} else if len(info) != 0 {
			t.Errorf("/ui requests in the access log: %q", info)
		}
	}
}

// TestNoUI: --no-ui removes every /ui route.
func TestNoUI(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.NoUI = true })
	for _, p := range []string{"/ui", "/ui/", "/ui/app.js", "/ui/index.html", "/ui/chat/1"} {
		if resp, body := ts.get(p); resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), `id="transcript"`) {
			t.Errorf("--no-ui: GET %s: %d", p, resp.StatusCode)
		}
	}
	if resp, _ := ts.get("/health"); resp.StatusCode != 200 {
		t.Errorf("--no-ui: /health %d", resp.StatusCode)
	}
}

// TestUIStartupLine: the startup lines say where the UI is, or that it is off.
func TestUIStartupLine(t *testing.T) {
	for _, noUI := range []bool{false, true} {
		ts := startServer(t, func(o *Options) { o.NoUI = noUI })
		want := "Web UI: http://127.0.0.1:1234/ui/"
		if noUI {
			want = "Web UI: disabled (--no-ui)"
		}
		lines := ts.srv.StartupLines("127.0.0.1", 1234, "text format")
		if !strings.Contains(strings.Join(lines, "\n"), want) {
			t.Errorf("no-ui %v: startup lines lack %q:\n%s", noUI, want, strings.Join(lines, "\n"))
		}
	}
}
