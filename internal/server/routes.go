package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"mistralrs/internal/observe"
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
		{"POST", "/v1/chat/completions", h(s.handleChat)},
		{"POST", "/v1/completions", h(s.handleCompletions)},
		{"POST", "/v1/responses", h(s.handleCreateResponse)},
		{"GET", "/v1/responses/{response_id}", h(s.handleGetResponse)},
		{"DELETE", "/v1/responses/{response_id}", h(s.handleDeleteResponse)},
		{"POST", "/v1/responses/{response_id}/cancel", h(s.handleCancelResponse)},
		{"POST", "/v1/messages", h(s.handleAnthropicMessages)},
		{"POST", "/v1/messages/count_tokens", h(s.handleAnthropicCountTokens)},
		{"POST", "/v1/embeddings", h(s.handleEmbeddings)},
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

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
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
	writeJSON(w, http.StatusOK, struct {
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
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var req struct {
		ModelID *string `json:"model_id"`
	}
	if err := decodeJSON(body, &req); err != nil {
		s.writeRequestError(w, r, err)
		return
	}
	if req.ModelID == nil {
		s.writeRequestError(w, r, badRequest("model_id", "model_id is required"))
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
	_ = s.opts.PayloadLog.Response(out)
	writeJSON(w, http.StatusOK, out)
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

// readBody reads the whole request body (the observability layer usually
// has it buffered already); a body over the limit is answered with 413.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := observe.ReadBody(r)
	if err != nil {
		if observe.IsBodyTooLarge(err) {
			observe.WriteBodyTooLarge(w, r)
		} else {
			observe.WriteErrorMessage(w, r, http.StatusBadRequest, "failed to read request body: "+err.Error())
		}
		return nil, false
	}
	_ = s.opts.PayloadLog.Request(body)
	if !utf8.Valid(body) {
		// encoding/json would quietly turn the bad bytes into U+FFFD and the
		// model would answer a prompt the client never sent.
		s.writeRequestError(w, r, badRequest("", "request body is not valid UTF-8"))
		return nil, false
	}
	return body, true
}

// writeRequestError answers a request error in the OpenAI error shape.
func (s *Server) writeRequestError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	e := observe.APIError{Message: err.Error()}
	if re, ok := err.(*requestError); ok {
		status = re.status
		if re.param != "" {
			p := re.param
			e.Param = &p
		}
		if status == http.StatusNotFound {
			c := "model_not_found"
			e.Code = &c
		}
	}
	_ = s.opts.PayloadLog.Error(err.Error())
	observe.WriteError(w, r, status, e)
}
