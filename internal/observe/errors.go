package observe

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// DefaultBodyLimit is the request body cap: 50 MiB, as mistral.rs's
// DefaultBodyLimit (not configurable there either).
const DefaultBodyLimit = 50 << 20

// APIError is the OpenAI error object, sent as {"error": APIError}.
// Param and Code are JSON null when nil.
type APIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// Error implements error.
func (e *APIError) Error() string { return e.Message }

// ErrorType is the OpenAI error type for a status: invalid_request_error
// for 3xx (a path-cleaning redirect) and 4xx, server_error otherwise.
func ErrorType(status int) string {
	if status >= 300 && status < 500 {
		return "invalid_request_error"
	}
	return "server_error"
}

// WriteError sends e as an OpenAI-style error body with status and attaches
// the message to the request's access-log line. An empty Type is derived
// from the status.
func WriteError(w http.ResponseWriter, r *http.Request, status int, e APIError) {
	if e.Type == "" {
		e.Type = ErrorType(status)
	}
	if r != nil {
		SetError(r.Context(), e.Message)
	}
	body, err := json.Marshal(struct {
		Error APIError `json:"error"`
	}{e})
	if err != nil { // cannot happen for these field types
		body = []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":null}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteErrorMessage is WriteError with only a message (type from the status,
// param and code null).
func WriteErrorMessage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	WriteError(w, r, status, APIError{Message: msg})
}

// SetError attaches an error message to the request's access-log line, for
// error responses whose body the middleware should not have to parse. Call
// it from the handler's goroutine, before the handler returns.
func SetError(ctx context.Context, msg string) {
	if rec := RecordFrom(ctx); rec != nil {
		rec.errMsg = msg
	}
}

// IsBodyTooLarge reports whether err comes from reading past the body limit.
func IsBodyTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// bodyTooLargeMessage is the message of a 413.
const bodyTooLargeMessage = "request body too large"

// WriteBodyTooLarge answers 413 with an OpenAI-style error body.
func WriteBodyTooLarge(w http.ResponseWriter, r *http.Request) {
	code := "request_body_too_large"
	WriteError(w, r, http.StatusRequestEntityTooLarge, APIError{
		Message: bodyTooLargeMessage,
		Type:    "invalid_request_error",
		Code:    &code,
	})
}

// errorMessage finds the message of a buffered error body: JSON "message",
// then "error.message", else the trimmed text (invalid UTF-8 replaced).
func errorMessage(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	if raw, found, valid := scanTopLevel(body, "message"); valid {
		if m, ok := jsonString(raw); found && ok {
			return m
		}
		if e, found, _ := scanTopLevel(body, "error"); found {
			if raw, found, _ := scanTopLevel(e, "message"); found {
				if m, ok := jsonString(raw); ok {
					return m
				}
			}
		}
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))
}
