package anthropic

import (
	"encoding/json"
	"net/http"

	"mistralrs/internal/observe"
	"mistralrs/internal/server/gen"
)

// Envelope writes errors in Anthropic's envelope
// {"type":"error","error":{"type":…,"message":…}}, which every error on
// these routes uses (the param of a request error is not part of it).
var Envelope = gen.Envelope{
	Write: func(w http.ResponseWriter, r *http.Request, status int, err *gen.Error) {
		WriteError(w, r, status, err.Msg)
	},
	TooLarge: func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, http.StatusRequestEntityTooLarge, "request body too large")
	},
}

// errorType is Anthropic's error type for a status.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

type errorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type errorJSON struct {
	Type  string    `json:"type"` // "error"
	Error errorBody `json:"error"`
}

// apiError is the envelope of an error with status; a stream's error
// event carries the same object.
func apiError(status int, msg string) errorJSON {
	return errorJSON{Type: "error", Error: errorBody{Type: errorType(status), Message: msg}}
}

// WriteError sends an error in Anthropic's envelope and attaches the
// message to the access-log line (an observe.ErrorWriter: the server's
// guards and the observability layer answer these routes with it).
func WriteError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if r != nil {
		observe.SetError(r.Context(), msg)
	}
	body, err := json.Marshal(apiError(status, msg))
	if err != nil { // cannot happen for these field types
		body = []byte(`{"type":"error","error":{"type":"api_error","message":"internal error"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
