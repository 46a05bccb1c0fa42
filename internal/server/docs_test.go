package server

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPIDescribesEveryRoute keeps the document true: its operations
// are exactly the routes the mux serves (every optional one enabled), and every one of its paths
// reaches the route it describes.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	// With the LoRA mutation routes, which are served only when enabled.
	ts := startServer(t, func(o *Options) { o.LoRAAPI = &LoRAAPI{AllowUpdates: true} })
	resp, body := ts.get("/api-doc/openapi.json")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Info    struct{ Title, Version string }       `json:"info"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
		Comps   struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") || doc.Info.Title == "" || doc.Info.Version == "" {
		t.Errorf("header: %s %+v", doc.OpenAPI, doc.Info)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "post", "put", "delete", "patch", "head", "options":
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	var served []string
	for _, rt := range ts.srv.routes {
		served = append(served, rt.method+" "+rt.docPath())
	}
	sort.Strings(documented)
	sort.Strings(served)
	if strings.Join(documented, "\n") != strings.Join(served, "\n") {
		t.Errorf("document and routes differ:\ndocumented:\n  %s\nserved:\n  %s", strings.Join(documented, "\n  "), strings.Join(served, "\n  "))
	}

	// Each documented path, with its parameters filled in, is matched by the
	// mux to the pattern of the same route.
	param := regexp.MustCompile(`\{[^}]+\}`)
	for _, rt := range ts.srv.routes {
		url := param.ReplaceAllString(rt.docPath(), "x")
		req, _ := http.NewRequest(rt.method, url, nil)
		if _, pat := ts.srv.mux.Handler(req); pat != rt.method+" "+rt.pattern {
			t.Errorf("%s %s reaches %q, want %q", rt.method, url, pat, rt.method+" "+rt.pattern)
		}
	}

	// Every schema reference resolves.
	for _, m := range regexp.MustCompile(`"#/components/schemas/([^"]+)"`).FindAllStringSubmatch(string(body), -1) {
		if _, ok := doc.Comps.Schemas[m[1]]; !ok {
			t.Errorf("dangling reference to schema %s", m[1])
		}
	}
}

func TestDocsAndHousekeeping(t *testing.T) {
	ts := startServer(t)
	resp, body := ts.get("/docs")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), `src="/docs/swagger-ui-bundle.js"`) || !strings.Contains(string(body), `/api-doc/openapi.json`) {
		t.Errorf("/docs: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), "https://") {
		t.Errorf("/docs loads something from the network: %s", body)
	}
	for file, ct := range map[string]string{"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css", "LICENSE": "text/plain"} {
		resp, body := ts.get("/docs/" + file)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) || len(body) < 1000 {
			t.Errorf("/docs/%s: %d %s, %d bytes", file, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}
	if resp, _ := ts.get("/docs/"); resp.StatusCode != 200 {
		t.Errorf("/docs/: %d", resp.StatusCode)
	}
	if resp, _ := ts.get("/docs/secret.txt"); resp.StatusCode != 404 {
		t.Errorf("/docs/secret.txt: %d", resp.StatusCode)
	}
	for _, p := range []string{"/", "/health"} {
		resp, body := ts.get(p)
		if resp.StatusCode != 200 || string(body) != "OK" {
			t.Errorf("%s: %d %q", p, resp.StatusCode, body)
		}
	}
	// Housekeeping stays out of the HTTP metrics.
	fams := ts.metrics()
	for _, ls := range labelSets(fams, "http_requests_total") {
		t.Errorf("housekeeping counted: %v", ls)
	}
}
