package server

import (
	"net/http"
	"strings"
	"testing"

	"mistralrs/internal/observe"
)

// Under --no-ui nothing is served at /ui, yet its paths stay housekeeping,
// as the UI's rows (without handlers) say: no API key is asked (a JSON 404,
// not a 401) and nothing is counted.
func TestNoUIStaysHousekeeping(t *testing.T) {
	ts := startServer(t, withKey(false), func(o *Options) { o.NoUI = true })
	for _, p := range []string{"/ui", "/ui/", "/ui/app.js"} {
		if resp, body := ts.get(p); resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"no route for GET `+p+`"`) {
			t.Errorf("--no-ui, no key: GET %s: %d %s", p, resp.StatusCode, body)
		}
	}
	if resp, _ := ts.get("/v1/models", "Authorization", "Bearer "+testKey); resp.StatusCode != 200 {
		t.Fatalf("GET /v1/models: %d", resp.StatusCode)
	}
	for _, ls := range labelSets(ts.metrics(), "http_requests_total") {
		if ls["path"] != "/v1/models" {
			t.Errorf("counted: %v", ls)
		}
	}
}

// Rows that the guard or the layers could not tell apart are refused, and
// so is a route whose model is read from a body that need not be JSON.
func TestRouteIndexRefuses(t *testing.T) {
	h := http.NotFoundHandler()
	for name, rows := range map[string][]route{
		"model from a body that need not be JSON": {
			{method: "POST", pattern: "/v1/x", handler: h, model: observe.SourceBody},
		},
		"one path, two accesses": {
			{method: "GET", pattern: "/v1/x", handler: h},
			{method: "DELETE", pattern: "/v1/x", handler: h, access: housekeeping},
		},
		"one path, two envelopes": {
			{method: "GET", pattern: "/v1/x", handler: h},
			{method: "DELETE", pattern: "/v1/x", handler: h, errors: writeAnthropicError},
		},
	} {
		if _, err := newRouteIndex(rows); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	rows := append((&Server{}).routeTable(h), uiRoutes(false)...)
	if _, err := newRouteIndex(rows); err != nil {
		t.Errorf("the route table: %v", err)
	}
}
