// Package ui serves the web chat at /ui: a single page (plain HTML, CSS and
// JavaScript embedded in the binary, no build step and nothing fetched from
// elsewhere) that talks to the server's own /v1/models,
// /v1/chat/completions and /metrics.
//
// Paths: /ui and /ui/ are the page; /ui/NAME is the embedded file NAME;
// any other path under /ui/ is the page again (so a reload of a deep link
// works). Nothing outside the embedded set is ever served and there are no
// directory listings. The page finds its assets and the API through a
// relative <base> the handler writes for the requested depth, so it works
// behind a proxy that mounts the server under a prefix.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the path the UI is served under.
const Prefix = "/ui"

//go:embed static
var static embed.FS

// baseTag is the placeholder in index.html that the handler replaces with
// the base matching the request's depth.
const baseTag = `<base href="./">`

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// contentTypes are the types of the embedded files, by extension; a file
// with another extension fails the package's init (see load).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// csp allows the page its own origin only: its scripts and styles (no
// inline code), fetches to the server, and no framing.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'self'; form-action 'none'; frame-ancestors 'none'; object-src 'none'"

var (
	assets               map[string]asset // by file name, index.html excluded
	indexHead, indexTail []byte           // index.html around baseTag
)

func init() {
	var err error
	assets, indexHead, indexTail, err = load(static)
	if err != nil {
		panic("ui: " + err.Error())
	}
}

// load reads the flat static directory of fsys.
func load(fsys fs.FS) (map[string]asset, []byte, []byte, error) {
	entries, err := fs.ReadDir(fsys, "static")
	if err != nil {
		return nil, nil, nil, err
	}
	out := map[string]asset{}
	var head, tail []byte
	for _, e := range entries {
		if e.IsDir() {
			return nil, nil, nil, fmt.Errorf("static/%s: subdirectories are not served", e.Name())
		}
		body, err := fs.ReadFile(fsys, "static/"+e.Name())
		if err != nil {
			return nil, nil, nil, err
		}
		ctype, ok := contentTypes[path.Ext(e.Name())]
		if !ok {
			return nil, nil, nil, fmt.Errorf("static/%s: no content type for its extension", e.Name())
		}
		if e.Name() == "index.html" {
			i := bytes.Index(body, []byte(baseTag))
			if i < 0 || bytes.Count(body, []byte(baseTag)) != 1 {
				return nil, nil, nil, fmt.Errorf("static/index.html must hold %s exactly once", baseTag)
			}
			head, tail = body[:i], body[i+len(baseTag):]
			continue
		}
		sum := sha256.Sum256(body)
		out[e.Name()] = asset{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	if head == nil {
		return nil, nil, nil, fmt.Errorf("static/index.html is missing")
	}
	return out, head, tail, nil
}

// Handler serves GET and HEAD requests for Prefix and every path under it;
// other paths are 404 and other methods 405.
func Handler() http.Handler { return http.HandlerFunc(serve) }

func serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// The decoded path, cleaned: "..", "%2e%2e" and "..%2f" segments are
	// resolved here, so a path that climbs out of Prefix is refused.
	clean := path.Clean("/" + r.URL.Path)
	if clean != Prefix && !strings.HasPrefix(clean, Prefix+"/") {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	if a, ok := assets[strings.TrimPrefix(clean, Prefix+"/")]; ok {
		h.Set("Content-Type", a.ctype)
		h.Set("ETag", a.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
		return
	}
	h.Set("Content-Type", contentTypes[".html"])
	h.Set("Content-Security-Policy", csp)
	page := make([]byte, 0, len(indexHead)+len(indexTail)+64)
	page = append(page, indexHead...)
	page = append(page, `<base href="`+baseHref(r)+`">`...)
	page = append(page, indexTail...)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(page))
}

// baseHref is the relative URL of the UI's directory (Prefix + "/") seen
// from the page the browser asked for, counted on the path as sent (still
// escaped, as the browser resolves it): "ui/" from /ui, "./" from /ui/ and
// /ui/x, "../" from /ui/x/y. It is made of "ui/", "./" and "../" only.
func baseHref(r *http.Request) string {
	raw := r.URL.EscapedPath()
	p := path.Clean("/" + raw)
	if p != Prefix && !strings.HasPrefix(p, Prefix+"/") {
		// Escapes in the prefix itself ("/%75i/"): count the decoded path.
		raw = r.URL.Path
		p = path.Clean("/" + raw)
	}
	if strings.HasSuffix(raw, "/") && p != "/" {
		p += "/"
	}
	if p == Prefix {
		return strings.TrimPrefix(Prefix, "/") + "/"
	}
	depth := strings.Count(strings.TrimPrefix(p, Prefix+"/"), "/")
	if depth == 0 {
		return "./"
	}
	return strings.Repeat("../", depth)
}
