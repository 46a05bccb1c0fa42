package observe

import (
	"fmt"
	"net/http"
	"strings"
)

// RouteFacts are what the layers must know about one route of the mux. The
// server derives them from the rows of its route table, so that the layers
// keep no list of routes of their own.
//
// The layers key the facts by the route label, the pattern's path: a 405
// keeps the label of the path that exists under another method, and gets
// that path's facts. Routes that share a path must therefore give the same
// Model and Housekeeping, and all or none of them an Errors.
type RouteFacts struct {
	Method  string // as registered: "POST"; a "GET" route also answers HEAD
	Pattern string // the ServeMux pattern without its method: "/v1/files/{id}"
	// Model is where the route names its model, for the `model` label (and
	// whether BufferBody reads its body for it).
	Model ModelSource
	// Housekeeping: the route's requests get no HTTP metrics and, unless
	// AccessLogHealth, no access line (IsHousekeeping; the server also lets
	// them in without the API key). A housekeeping subtree pattern ("/ui/")
	// makes every path under it housekeeping, and its root without the
	// slash, whatever the mux does with the request (redirects, 404s when
	// the route is not registered, CONNECT): the whole prefix is its owner's.
	Housekeeping bool
	// Errors writes the errors the layers answer themselves on the route
	// (405, 413, an unreadable body) in its own envelope; nil: OpenAI's.
	Errors ErrorWriter
}

// routeTable is the facts of a mux's routes, keyed as the layers look them up.
type routeTable struct {
	byLabel  map[string]RouteFacts // the first route of each route label
	subtrees []string              // housekeeping path prefixes, "/ui/"
}

// newRouteTable indexes routes by label; it refuses routes of one path whose
// facts differ, which the layers could not tell apart.
func newRouteTable(routes []RouteFacts) (*routeTable, error) {
	t := &routeTable{byLabel: make(map[string]RouteFacts, len(routes))}
	for _, rf := range routes {
		label := patternPath(rf.Pattern)
		if f, seen := t.byLabel[label]; seen {
			if f.Model != rf.Model || f.Housekeeping != rf.Housekeeping || (f.Errors == nil) != (rf.Errors == nil) {
				return nil, fmt.Errorf("routes %s %s and %s %s share the route label %s but not their model source, housekeeping or error envelope",
					f.Method, f.Pattern, rf.Method, rf.Pattern, label)
			}
			continue
		}
		t.byLabel[label] = rf
		if rf.Housekeeping && isSubtree(label) {
			t.subtrees = append(t.subtrees, label)
		}
	}
	return t, nil
}

// mustRouteTable is newRouteTable for the layers built alone, which panic on
// conflicting routes as ServeMux.Handle does.
func mustRouteTable(routes []RouteFacts) *routeTable {
	t, err := newRouteTable(routes)
	if err != nil {
		panic("observe: " + err.Error())
	}
	return t
}

// isSubtree reports whether a pattern's path matches a whole subtree; the
// root "/" is left out, since it would make every path housekeeping.
func isSubtree(path string) bool {
	return len(path) > 1 && strings.HasSuffix(path, "/")
}

// isHousekeeping: every OPTIONS request, the housekeeping routes, and every
// path in a housekeeping subtree.
func (t *routeTable) isHousekeeping(method, route, path string) bool {
	if method == http.MethodOptions || t.byLabel[route].Housekeeping {
		return true
	}
	for _, sub := range t.subtrees {
		if path == sub[:len(sub)-1] || strings.HasPrefix(path, sub) {
			return true
		}
	}
	return false
}

// errorWriter returns the envelope of a route label, nil for OpenAI's.
func (t *routeTable) errorWriter(route string) ErrorWriter { return t.byLabel[route].Errors }
