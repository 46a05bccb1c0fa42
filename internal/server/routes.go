package server

import (
	"fmt"
	"net/http"
	"strings"

	"mistralrs/internal/observe"
	"mistralrs/internal/server/anthropic"
	"mistralrs/internal/server/gen"
	"mistralrs/internal/ui"
)

// route is one row of the route table and every fact about the route: the
// mux registers its handler; the guard (guard.go) reads its access, JSON
// body and error envelope; the observability layer its model source,
// housekeeping and envelope (observeFacts); the debug route lines and the
// OpenAPI test its method and pattern. Adding a route is adding a row.
type route struct {
	method  string       // "GET" also answers HEAD (ServeMux)
	pattern string       // ServeMux pattern without the method; its path is the `path` metric label
	handler http.Handler // nil: not served (the web UI under --no-ui), yet its other facts hold
	// model is where the request names its model, for the `model` label:
	// none (the zero value), the query, the body's "model" or "model_id".
	model observe.ModelSource
	// json: the body is a JSON document, refused with 415 unless its
	// Content-Type says JSON (and so, a simple request, it cannot come from
	// another site's page). A route whose model comes from the body has one.
	json bool
	// access is who may call the route and how its requests are observed;
	// the zero value is an API route.
	access access
	// errors writes the route's errors in its family's envelope (the guard's
	// refusals, the layers' 405s and 413s); nil: OpenAI's.
	errors observe.ErrorWriter
}

// access is who may call a route and how its requests are observed.
type access uint8

const (
	// apiRoute: needs the API key (when one is set) and an allowed Host;
	// counted in the HTTP metrics and in the access log.
	apiRoute access = iota
	// housekeeping: no API key; not in the HTTP metrics; an access line only
	// with --access-log-health (observe's Housekeeping).
	housekeeping
	// scrape is housekeeping that needs the API key with --api-key-metrics.
	scrape
	// probe is housekeeping open to any Host: probes reach the server by IP.
	probe
)

// docPath is the route's path in OpenAPI terms: "/{$}" is "/", and a
// trailing "{name...}" wildcard is "{name}".
func (r route) docPath() string {
	p := strings.TrimSuffix(r.pattern, "{$}")
	return strings.ReplaceAll(p, "...}", "}")
}

// routeTable is the API the server serves and documents (openapi.json);
// metrics answers GET /metrics.
func (s *Server) routeTable(metrics http.Handler) []route {
	h := func(f http.HandlerFunc) http.Handler { return f }
	const body, modelID = observe.SourceBody, observe.SourceModelID
	rows := []route{
		{method: "POST", pattern: "/v1/chat/completions", handler: h(s.openai.Chat), model: body, json: true},
		{method: "POST", pattern: "/v1/completions", handler: h(s.openai.Completions), model: body, json: true},
		{method: "POST", pattern: "/v1/responses", handler: h(s.responses.Create), model: body, json: true},
		{method: "GET", pattern: "/v1/responses/{response_id}", handler: h(s.responses.Get)},
		{method: "DELETE", pattern: "/v1/responses/{response_id}", handler: h(s.responses.Delete)},
		{method: "POST", pattern: "/v1/responses/{response_id}/cancel", handler: h(s.responses.Cancel)},
		{method: "POST", pattern: "/v1/messages", handler: h(s.anthropic.Messages), model: body, json: true, errors: anthropic.WriteError},
		{method: "POST", pattern: "/v1/messages/count_tokens", handler: h(s.anthropic.CountTokens), model: body, json: true, errors: anthropic.WriteError},
		{method: "POST", pattern: "/v1/embeddings", handler: h(s.openai.Embeddings), model: body, json: true},
		{method: "GET", pattern: "/v1/models", handler: h(s.handleListModels)},
		{method: "POST", pattern: "/v1/models/unload", handler: h(s.handleUnload), model: modelID, json: true},
		{method: "POST", pattern: "/v1/models/reload", handler: h(s.handleReload), model: modelID, json: true},
		{method: "POST", pattern: "/v1/models/status", handler: h(s.handleModelStatus), model: modelID, json: true},
		{method: "GET", pattern: "/health", handler: h(s.handleReady), access: probe},
		{method: "GET", pattern: "/{$}", handler: h(s.handleReady), access: housekeeping},
		{method: "GET", pattern: "/readyz", handler: h(s.handleReady), access: probe},
		{method: "GET", pattern: "/livez", handler: h(handleLive), access: probe},
		{method: "GET", pattern: "/metrics", handler: metrics, access: scrape},
		{method: "GET", pattern: "/docs", handler: h(handleDocs), access: housekeeping},
		{method: "GET", pattern: "/docs/{file...}", handler: h(handleDocsFile), access: housekeeping},
		{method: "GET", pattern: "/api-doc/openapi.json", handler: h(handleOpenAPI), access: housekeeping},
		{method: "GET", pattern: "/v1/lora_adapters", handler: h(s.lora.list), model: observe.SourceQuery, errors: loraLayerError},
	}
	if s.lora != nil && s.lora.allow {
		// Only with MISTRALRS_ALLOW_RUNTIME_LORA_UPDATING (else 404, as unknown paths).
		const trimmed = observe.SourceBodyTrimmed
		rows = append(rows,
			route{method: "POST", pattern: "/v1/load_lora_adapter", handler: h(s.lora.load), model: trimmed, json: true, errors: loraLayerError},
			route{method: "POST", pattern: "/v1/unload_lora_adapter", handler: h(s.lora.unload), model: trimmed, json: true, errors: loraLayerError})
	}
	return rows
}

// uiRoutes are the web UI's (package ui): housekeeping like /docs, but
// outside the route table and the OpenAPI document. With --no-ui they have
// no handler: nothing is served under /ui, and what is asked there is still
// housekeeping (the "/ui/" subtree's, observe.RouteFacts).
func uiRoutes(noUI bool) []route {
	var h http.Handler
	if !noUI {
		h = ui.Handler()
	}
	return []route{
		{method: "GET", pattern: ui.Prefix, handler: h, access: housekeeping},
		{method: "GET", pattern: ui.Prefix + "/", handler: h, access: housekeeping},
	}
}

// observeFacts are the facts of rows the observability layer needs.
func observeFacts(rows []route) []observe.RouteFacts {
	facts := make([]observe.RouteFacts, len(rows))
	for i, rt := range rows {
		facts[i] = observe.RouteFacts{
			Method:       rt.method,
			Pattern:      rt.pattern,
			Model:        rt.model,
			Housekeeping: rt.access != apiRoute,
			Errors:       rt.errors,
		}
	}
	return facts
}

// routeIndex finds a request's row from the route label observe gave it
// (the pattern's path; a 405 keeps the path that exists under another
// method), as the guard needs.
type routeIndex map[string][]*route

// newRouteIndex indexes rows by path. Rows of one path must agree on what
// is looked up by path alone (access, envelope), and a route whose model
// comes from the body must have a JSON one.
func newRouteIndex(rows []route) (routeIndex, error) {
	ix := make(routeIndex, len(rows))
	for i := range rows {
		rt := &rows[i]
		if rt.model.ReadsBody() && !rt.json {
			return nil, fmt.Errorf("route %s %s: its model is read from the body, which must then be JSON", rt.method, rt.pattern)
		}
		path := rt.pattern
		if others := ix[path]; len(others) > 0 && (others[0].access != rt.access || (others[0].errors == nil) != (rt.errors == nil)) {
			return nil, fmt.Errorf("routes %s %s and %s %s share a path but not their access or error envelope", others[0].method, path, rt.method, path)
		}
		ix[path] = append(ix[path], rt)
	}
	return ix, nil
}

// path returns a row of the request's route path, nil for none.
func (ix routeIndex) path(r *http.Request) *route {
	if rows := ix[observe.Route(r.Context())]; len(rows) > 0 {
		return rows[0]
	}
	return nil
}

// row returns the row the request's method and route path name, nil for none.
func (ix routeIndex) row(r *http.Request) *route {
	for _, rt := range ix[observe.Route(r.Context())] {
		if rt.method == r.Method {
			return rt
		}
	}
	return nil
}

type modelJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Root    string `json:"root,omitempty"`
	Status  string `json:"status,omitempty"`
	// A LoRA adapter card's: its base model and generation ("" while the
	// base is not loaded).
	Parent            string `json:"parent,omitempty"`
	AdapterGeneration string `json:"adapter_generation,omitempty"`
}

// handleListModels is GET /v1/models: the synthetic "default" entry first,
// then every model with its status, then every LoRA adapter card, as
// mistral.rs lists them.
func (s *Server) handleListModels(w http.ResponseWriter, _ *http.Request) {
	data := []modelJSON{{ID: "default", Object: "model", Created: s.created, OwnedBy: "local", Root: "default"}}
	for _, e := range s.models.entries {
		data = append(data, modelJSON{ID: e.spec.ID, Object: "model", Created: s.created, OwnedBy: "local", Status: e.status()})
	}
	for _, c := range s.models.cards() {
		m := modelJSON{ID: c.id, Object: "model", Created: s.created, OwnedBy: "local", Root: c.alias,
			Parent: c.entry.spec.ID, Status: c.entry.status()}
		if g := c.entry.adapters().current(c.alias); g != nil {
			m.AdapterGeneration = g.id
		}
		data = append(data, m)
	}
	gen.WriteJSON(w, http.StatusOK, struct {
		Object string      `json:"object"`
		Data   []modelJSON `json:"data"`
	}{"list", data})
}

type modelStatusJSON struct {
	ModelID string `json:"model_id"`
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
}

// modelManagement reads {"model_id": …} and answers 200 with the outcome in
// the body (mistral.rs answers these routes with 200 whatever happens);
// only an unreadable body is a 400.
func (s *Server) modelManagement(w http.ResponseWriter, r *http.Request, op func(*modelEntry) (string, error)) {
	body, ok := s.base.ReadBody(w, r, gen.OpenAI)
	if !ok {
		return
	}
	var req struct {
		ModelID *string `json:"model_id"`
	}
	if err := gen.DecodeJSON(body, &req); err != nil {
		s.base.WriteRequestError(w, r, gen.OpenAI, err)
		return
	}
	if req.ModelID == nil {
		s.base.WriteRequestError(w, r, gen.OpenAI, gen.BadRequest("model_id", "model_id is required"))
		return
	}
	out := modelStatusJSON{ModelID: *req.ModelID}
	if e, found := s.models.byID[*req.ModelID]; !found {
		out.Status = StatusNotFound
	} else {
		status, err := op(e)
		out.Status = status
		if err != nil {
			out.Status = StatusInternalError
			out.Error = err.Error()
			observe.SetError(r.Context(), err.Error())
			_ = s.opts.PayloadLog.ErrorCtx(r.Context(), err.Error())
		}
	}
	s.base.Respond(w, out)
}

func (s *Server) handleUnload(w http.ResponseWriter, r *http.Request) {
	s.modelManagement(w, r, func(e *modelEntry) (string, error) { return e.unload(), nil })
}

func (s *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	s.modelManagement(w, r, func(e *modelEntry) (string, error) { return e.load() })
}

func (s *Server) handleModelStatus(w http.ResponseWriter, r *http.Request) {
	s.modelManagement(w, r, func(e *modelEntry) (string, error) { return e.status(), nil })
}
