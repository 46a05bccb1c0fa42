package server

import (
	"io"
	"net/http"
	"strings"

	"mistralrs/internal/observe"
	"mistralrs/internal/server/gen"
)

// route is one registered route. The table is the only place routes are
// listed: the mux, the debug route lines and the OpenAPI test all read it.
type route struct {
	method  string
	pattern string // ServeMux pattern (the `path` metric label)
	handler http.Handler
}

// docPath is the route's path in OpenAPI terms: "/{$}" is "/", and a
// trailing "{name...}" wildcard is "{name}".
func (r route) docPath() string {
	p := strings.TrimSuffix(r.pattern, "{$}")
	return strings.ReplaceAll(p, "...}", "}")
}

func (s *Server) routeTable() []route {
	h := func(f http.HandlerFunc) http.Handler { return f }
	return []route{
		{"POST", "/v1/chat/completions", h(s.openai.Chat)},
		{"POST", "/v1/completions", h(s.openai.Completions)},
		{"POST", "/v1/responses", h(s.responses.Create)},
		{"GET", "/v1/responses/{response_id}", h(s.responses.Get)},
		{"DELETE", "/v1/responses/{response_id}", h(s.responses.Delete)},
		{"POST", "/v1/responses/{response_id}/cancel", h(s.responses.Cancel)},
		{"POST", "/v1/messages", h(s.anthropic.Messages)},
		{"POST", "/v1/messages/count_tokens", h(s.anthropic.CountTokens)},
		{"POST", "/v1/embeddings", h(s.openai.Embeddings)},
		{"GET", "/v1/models", h(s.handleListModels)},
		{"POST", "/v1/models/unload", h(s.handleUnload)},
		{"POST", "/v1/models/reload", h(s.handleReload)},
		{"POST", "/v1/models/status", h(s.handleModelStatus)},
		{"GET", "/health", h(handleHealth)},
		{"GET", "/{$}", h(handleHealth)},
		{"GET", "/metrics", s.obs.MetricsHandler()},
		{"GET", "/docs", h(handleDocs)},
		{"GET", "/docs/{file...}", h(handleDocsFile)},
		{"GET", "/api-doc/openapi.json", h(handleOpenAPI)},
	}
}

// handleHealth is GET /health and GET /: liveness only (no model check).
func handleHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "OK")
}

type modelJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Root    string `json:"root,omitempty"`
	Status  string `json:"status,omitempty"`
}

// handleListModels is GET /v1/models: the synthetic "default" entry first,
// then every model with its status, as mistral.rs lists them.
func (s *Server) handleListModels(w http.ResponseWriter, _ *http.Request) {
	data := []modelJSON{{ID: "default", Object: "model", Created: s.created, OwnedBy: "local", Root: "default"}}
	for _, e := range s.models.entries {
		data = append(data, modelJSON{ID: e.spec.ID, Object: "model", Created: s.created, OwnedBy: "local", Status: e.status()})
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
			_ = s.opts.PayloadLog.Error(err.Error())
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

