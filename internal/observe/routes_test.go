package observe

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Housekeeping comes from the route facts alone: a housekeeping route's
// label, every OPTIONS request, and every path of a housekeeping subtree
// ("/ui/" and its root "/ui"), also where the mux serves nothing (the UI's
// rows without their handlers, as under --no-ui). A wildcard pattern and
// the root "/" are not subtrees.
func TestRouteFactsHousekeeping(t *testing.T) {
	type seen struct {
		route string
		hk    bool
	}
	check := func(patterns []string, routes []RouteFacts, cases map[[2]string]seen) {
		t.Helper()
		mux := http.NewServeMux()
		for _, p := range patterns {
			mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
		}
		var got seen
		h := Router(mux, routes)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = seen{Route(r.Context()), IsHousekeeping(r.Context())}
		}))
		for c, want := range cases {
			got = seen{}
			req := httptest.NewRequest(c[0], "/", nil)
			req.URL.Path = c[1]
			h.ServeHTTP(httptest.NewRecorder(), req)
			if got != want {
				t.Errorf("%s %s: %+v, want %+v", c[0], c[1], got, want)
			}
		}
	}
	check([]string{"GET /health", "GET /docs/{file...}", "GET /v1/models"}, []RouteFacts{
		{Method: "GET", Pattern: "/health", Housekeeping: true},
		{Method: "GET", Pattern: "/docs/{file...}", Housekeeping: true},
		{Method: "GET", Pattern: "/v1/models"},
		{Method: "GET", Pattern: "/ui", Housekeeping: true}, // the UI's rows, not on the mux
		{Method: "GET", Pattern: "/ui/", Housekeeping: true},
	}, map[[2]string]seen{
		{"GET", "/health"}:            {"/health", true},
		{"HEAD", "/health"}:           {"/health", true},
		{"POST", "/health"}:           {"/health", true}, // 405: the path's facts
		{"CONNECT", "/health"}:        {Unmatched, false},
		{"GET", "/docs/x.css"}:        {"/docs/{file...}", true},
		{"GET", "/docs/../v1/models"}: {"/v1/models", false}, // a wildcard is no subtree
		{"GET", "/v1/models"}:         {"/v1/models", false},
		{"OPTIONS", "/v1/models"}:     {"/v1/models", true},
		{"GET", "/ui"}:                {Unmatched, true}, // the subtree's root
		{"GET", "/ui/chat/1"}:         {Unmatched, true},
		{"CONNECT", "/ui/x"}:          {Unmatched, true},
		{"GET", "/ui/../v1/models"}:   {"/v1/models", true},
		{"GET", "/uix"}:               {Unmatched, false},
		{"GET", "/elsewhere"}:         {Unmatched, false},
	})
	// The root "/" is housekeeping as a label, not as a subtree.
	check([]string{"GET /", "GET /v1/models"}, []RouteFacts{
		{Method: "GET", Pattern: "/", Housekeeping: true},
		{Method: "GET", Pattern: "/v1/models"},
	}, map[[2]string]seen{
		{"GET", "/elsewhere"}:      {"/", true},
		{"GET", "/v1/models"}:      {"/v1/models", false},
		{"GET", "/x/../v1/models"}: {"/v1/models", false},
	})
}

// Routes of one path share their facts (the layers key them by path, and a
// 405 gets the path's): New refuses routes that disagree, the layers built
// alone panic as ServeMux.Handle does.
func TestRouteFactsConflict(t *testing.T) {
	send := func(http.ResponseWriter, *http.Request, int, string) {}
	for _, c := range []struct {
		name string
		b    RouteFacts
		ok   bool
	}{
		{"same facts", RouteFacts{Method: "DELETE", Pattern: "/v1/x/{id}"}, true},
		{"model", RouteFacts{Method: "DELETE", Pattern: "/v1/x/{id}", Model: SourceQuery}, false},
		{"housekeeping", RouteFacts{Method: "DELETE", Pattern: "/v1/x/{id}", Housekeeping: true}, false},
		{"envelope", RouteFacts{Method: "DELETE", Pattern: "/v1/x/{id}", Errors: send}, false},
	} {
		routes := []RouteFacts{{Method: "GET", Pattern: "/v1/x/{id}"}, c.b}
		_, err := New(Options{Routes: routes})
		if (err == nil) != c.ok {
			t.Errorf("%s: New: %v", c.name, err)
		}
		if err != nil && !strings.Contains(err.Error(), "GET /v1/x/{id} and DELETE /v1/x/{id}") {
			t.Errorf("%s: the error does not name the routes: %v", c.name, err)
		}
		func() {
			defer func() {
				if p := recover(); (p == nil) != c.ok {
					t.Errorf("%s: ModelLabels alone: panic %v", c.name, p)
				}
			}()
			ModelLabels(routes, nil)
		}()
	}
}
