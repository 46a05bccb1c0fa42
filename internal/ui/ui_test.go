package ui

import (
	"bufio"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

func get(t *testing.T, method, target string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, r)
	return w
}

func embedded(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(static, "static/"+name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// isIndex reports whether body is the page with the given base.
func isIndex(body, base string) bool {
	return strings.Contains(body, `<div id="transcript"`) && strings.Contains(body, `<base href="`+base+`">`)
}

func TestIndexAndBase(t *testing.T) {
	for _, c := range []struct{ path, base string }{
		{"/ui", "ui/"},
		{"/ui/", "./"},
		{"/ui/index.html", "./"},
		{"/ui/chat", "./"},
		{"/ui/chat/", "../"},
		{"/ui/chat/42", "../"},
		{"/ui/a/b/c/", "../../../"},
		{"/ui/a%2Fb", "./"}, // one segment for the browser
		{"/ui/missing.js", "./"},
		{"/ui/static/", "../"},
		{"/ui/static/app.js", "../"},
		{"/ui?x=1", "ui/"},
	} {
		w := get(t, "GET", c.path)
		body := w.Body.String()
		if w.Code != http.StatusOK || !isIndex(body, c.base) {
			t.Errorf("GET %s: %d, want 200 and the page with base %q; body starts %.200q", c.path, w.Code, c.base, body)
			continue
		}
		if ct := w.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", c.path, ct)
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", c.path, csp)
		}
		if strings.Count(body, "<base ") != 1 {
			t.Errorf("GET %s: %d base tags", c.path, strings.Count(body, "<base "))
		}
	}
}

func TestAssets(t *testing.T) {
	for name, ctype := range map[string]string{
		"app.js":     "text/javascript; charset=utf-8",
		"metrics.js": "text/javascript; charset=utf-8",
		"style.css":  "text/css; charset=utf-8",
		"icon.svg":   "image/svg+xml",
	} {
		w := get(t, "GET", "/ui/"+name)
		if w.Code != http.StatusOK || w.Body.String() != embedded(t, name) {
			t.Errorf("GET /ui/%s: %d, body differs from the embedded file: %v", name, w.Code, w.Body.String() != embedded(t, name))
			continue
		}
		if got := w.Header().Get("Content-Type"); got != ctype {
			t.Errorf("GET /ui/%s: Content-Type %q, want %q", name, got, ctype)
		}
		if w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET /ui/%s: no nosniff", name)
		}
		etag := w.Header().Get("ETag")
		if etag == "" {
			t.Errorf("GET /ui/%s: no ETag", name)
			continue
		}
		if w := get(t, "GET", "/ui/"+name, "If-None-Match", etag); w.Code != http.StatusNotModified {
			t.Errorf("GET /ui/%s with its ETag: %d, want 304", name, w.Code)
		}
		// A name the page links to relatively resolves the same below /ui/.
		if w := get(t, "GET", "/ui/x/../"+name); w.Body.String() != embedded(t, name) {
			t.Errorf("GET /ui/x/../%s is not the file", name)
		}
	}
}

func TestMethods(t *testing.T) {
	w := get(t, "HEAD", "/ui/")
	if w.Code != http.StatusOK || w.Body.Len() != 0 || w.Header().Get("Content-Length") == "" {
		t.Errorf("HEAD /ui/: %d, %d body bytes, Content-Length %q", w.Code, w.Body.Len(), w.Header().Get("Content-Length"))
	}
	w = get(t, "HEAD", "/ui/app.js")
	if w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Errorf("HEAD /ui/app.js: %d, %d body bytes", w.Code, w.Body.Len())
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		w := get(t, m, "/ui/")
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /ui/: %d, Allow %q", m, w.Code, w.Header().Get("Allow"))
		}
	}
}

// secrets are texts of files outside the embedded set: none may ever appear
// in an answer.
func secrets(t *testing.T) []string {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("ui.go")
	if err != nil {
		t.Fatal(err)
	}
	return []string{string(gomod[:40]), string(src[:60]), "root:x:0:0"}
}

var traversals = []string{
	"/ui/../go.mod",
	"/ui/../../go.mod",
	"/ui/%2e%2e/go.mod",
	"/ui/%2E%2E/%2e%2e/go.mod",
	"/ui/..%2fgo.mod",
	"/ui/..%2f..%2fgo.mod",
	"/ui/%2e%2e%2f%2e%2e%2fgo.mod",
	"/ui/..%5c..%5cgo.mod",
	"/ui/%252e%252e/go.mod",
	"/ui/./../internal/ui/ui.go",
	"/ui/static/../ui.go",
	"/ui/../internal/ui/ui.go",
	"/ui/..%2fui.go",
	"/ui/ui.go",
	"/ui/static/index.html/..%2f..%2fui.go",
	"/ui/../../../../../../etc/passwd",
	"/ui/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
	"/ui//etc/passwd",
	"/ui/.",
	"/ui/..",
}

func TestTraversalNeverServesOtherFiles(t *testing.T) {
	bad := secrets(t)
	for _, p := range traversals {
		w := get(t, "GET", p)
		body := w.Body.String()
		for _, s := range bad {
			if strings.Contains(body, s) {
				t.Errorf("GET %s served a file outside the embedded set (%q)", p, s)
			}
		}
		if w.Code != http.StatusNotFound && !(w.Code == http.StatusOK && strings.Contains(body, `<div id="transcript"`)) {
			t.Errorf("GET %s: %d, want 404 or the page; body %.200q", p, w.Code, body)
		}
	}
	// Paths that climb out of /ui are refused, not answered with the page.
	for _, p := range []string{"/ui/../go.mod", "/ui/%2e%2e/go.mod", "/ui/..%2fgo.mod", "/ui/..", "/other", "/", "/uix"} {
		if w := get(t, "GET", p); w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, w.Code)
		}
	}
}

// TestTraversalOverTheWire sends the paths as raw request lines (no client
// normalises them) to the handler mounted as the server mounts it.
func TestTraversalOverTheWire(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /ui", Handler())
	mux.Handle("GET /ui/", Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	bad := secrets(t)
	for _, p := range traversals {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(conn, "GET "+p+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		for _, s := range bad {
			if strings.Contains(string(body), s) {
				t.Errorf("GET %s over the wire served a file outside the embedded set", p)
			}
		}
		switch resp.StatusCode {
		case http.StatusOK:
			if !strings.Contains(string(body), `<div id="transcript"`) {
				t.Errorf("GET %s over the wire: 200 but not the page", p)
			}
		case http.StatusNotFound, http.StatusBadRequest, http.StatusMovedPermanently,
			http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			// The mux cleans paths with a redirect; the target is then 404.
		default:
			t.Errorf("GET %s over the wire: %d", p, resp.StatusCode)
		}
	}
}

func TestNoDirectoryListing(t *testing.T) {
	for _, p := range []string{"/ui/", "/ui/static", "/ui/static/", "/ui/./", "/ui/x/"} {
		body := get(t, "GET", p).Body.String()
		if !strings.Contains(body, `<div id="transcript"`) || strings.Contains(body, `<a href="app.js">`) {
			t.Errorf("GET %s: not the page (a listing?): %.200q", p, body)
		}
	}
}

func TestLoadRefusesBadTrees(t *testing.T) {
	page := &fstest.MapFile{Data: []byte("<html><head>" + baseTag + "</head></html>")}
	if _, _, _, err := load(fstest.MapFS{"static/index.html": page, "static/a.js": {Data: []byte("x")}}); err != nil {
		t.Fatalf("a good tree: %v", err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"no index":          {"static/a.js": {Data: []byte("x")}},
		"no base":           {"static/index.html": {Data: []byte("<html></html>")}},
		"two bases":         {"static/index.html": {Data: []byte(baseTag + baseTag)}},
		"subdirectory":      {"static/index.html": page, "static/sub/a.js": {Data: []byte("x")}},
		"unknown file type": {"static/index.html": page, "static/a.exe": {Data: []byte("x")}},
	} {
		if _, _, _, err := load(fsys); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestStaticFilesAreSafe guards the page's rules by reading its source: no
// way of inserting HTML (model output goes through textContent), nothing
// loaded from another origin, no absolute API paths (the page follows the
// server's base path), and only metric names the server exports.
func TestStaticFilesAreSafe(t *testing.T) {
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	htmlSinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|srcdoc|createContextualFragment`)
	remote := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/`)
	absolute := regexp.MustCompile(`['"]/(v1|metrics|ui)\b`)
	for _, e := range entries {
		src := embedded(t, e.Name())
		if m := htmlSinks.FindString(src); m != "" {
			t.Errorf("%s uses %s", e.Name(), m)
		}
		for _, m := range remote.FindAllString(src, -1) {
			if m != "http://www.w3.org/" { // the SVG namespace, not a fetch
				t.Errorf("%s refers to another origin: %s", e.Name(), m)
			}
		}
		if m := absolute.FindString(src); m != "" {
			t.Errorf("%s uses an absolute path %s", e.Name(), m)
		}
	}
	if !strings.Contains(embedded(t, "app.js"), ".textContent = m.content") {
		t.Error("app.js no longer sets message text with textContent")
	}

	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`mistralrs_[a-z_]+`).FindAllString(embedded(t, "metrics.js"), -1)
	if len(names) < 10 {
		t.Fatalf("metrics.js names %d metrics, want the panel's families", len(names))
	}
	for _, n := range names {
		if !strings.Contains(string(doc), n) {
			t.Errorf("metrics.js reads %s, which docs/observability.md does not list", n)
		}
	}
}
