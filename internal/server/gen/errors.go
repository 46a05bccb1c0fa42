// Package gen is the generation seam under the API dialects: a neutral
// request (Request: the model, the prompt or messages, template options,
// tools, grammar and sampling settings), the checks every dialect shares
// (Base.Prepare), and one Run that owns the rest of a request's life: the
// engine stream, keep-alives, held-back tool-call text, the endings (error,
// cancel, client gone, drain), the payload log and the stream latency. A
// dialect (internal/server/openai, responses, anthropic) decodes its wire
// format into a Request and implements a Sink that writes its wire types.
package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
)

// StatusClientClosed is the status logged for a request whose client left
// before the answer (nginx's 499); nobody receives it.
const StatusClientClosed = 499

// Error is a client mistake: 400 unless Status says otherwise. Param names
// the field at fault ("" for the whole request).
type Error struct {
	Status int
	Param  string
	Code   string // the error's code, where the dialect has one ("" : none)
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// BadRequest is a 400 naming param.
func BadRequest(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Status is the HTTP status of a request error (500 for other errors).
func Status(err error) int {
	var re *Error
	if errors.As(err, &re) {
		return re.Status
	}
	return http.StatusInternalServerError
}

// ClientGone reports whether the request's client has left.
func ClientGone(r *http.Request) bool { return r.Context().Err() != nil }

// GenerateError maps an engine error to the request error the client gets:
// a request the engine refuses is the client's (400), a closed engine means
// the model went away (503), anything else is a server error.
func GenerateError(err error) error {
	var re *Error
	if errors.As(err, &re) {
		return err
	}
	var ee *engine.RequestError
	if errors.As(err, &ee) {
		return &Error{Status: http.StatusBadRequest, Msg: ee.Msg}
	}
	if errors.Is(err, engine.ErrClosed) {
		return &Error{Status: http.StatusServiceUnavailable, Msg: "the model was unloaded while the request waited; retry"}
	}
	if changed, ok := loader.AsChanged(err); ok {
		// Not the client's fault and over once the model is loaded again,
		// which the next request does (the server retires the old one).
		return &Error{Status: http.StatusServiceUnavailable, Msg: changed + " (it is loaded again on the next request; retry)"}
	}
	return fmt.Errorf("generation failed: %w", err)
}

// DecodeJSON decodes a request body, turning syntax and type errors into
// 400s that name the offending field.
func DecodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return BadRequest("", "request body is empty; expected a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var re *Error
		if errors.As(err, &re) { // a field's own UnmarshalJSON said what is wrong
			return re
		}
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return BadRequest("", "invalid JSON in request body at byte %d: %v", se.Offset, se)
		case errors.As(err, &te):
			if te.Field != "" {
				field := topField(te.Field)
				return BadRequest(field, "invalid type for field %q: expected %s, got JSON %s", field, JSONType(te.Type.Kind()), te.Value)
			}
			return BadRequest("", "request body must be a JSON object, got JSON %s", te.Value)
		}
		return BadRequest("", "invalid request body: %s", JSONProblem(err))
	}
	return nil
}

// topField drops the embedded Sampling struct's name from a field path:
// its fields are top-level fields of the body.
func topField(f string) string { return strings.TrimPrefix(f, "Sampling.") }

// JSONProblem says what is wrong with a JSON value in the client's terms:
// encoding/json's own messages name Go types ("cannot unmarshal number
// into Go value of type []responses.inputItem").
func JSONProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q: expected %s, got JSON %s", topField(te.Field), JSONType(te.Type.Kind()), te.Value)
		}
		return fmt.Sprintf("expected %s, got JSON %s", JSONType(te.Type.Kind()), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON: %v", se)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// JSONType names a Go kind in JSON terms for error messages.
func JSONType(k reflect.Kind) string {
	switch k {
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return k.String()
}

// IsNull reports whether raw is absent or JSON null.
func IsNull(raw []byte) bool {
	b := bytes.TrimSpace(raw)
	return len(b) == 0 || string(b) == "null"
}

// IsJSON reports whether the JSON bytes b are lit (a comparison that never
// copies b, which may be a whole prompt).
func IsJSON(b []byte, lit string) bool { return string(b) == lit }

// BodyJSON is a json.RawMessage that keeps the decoder's bytes instead of
// copying them, for the fields that carry the prompt: the request body they
// point into is never changed after it is read, and a large prompt is then
// not copied once per level of nesting (json.Unmarshal hands UnmarshalJSON
// a part of its input).
type BodyJSON []byte

func (b *BodyJSON) UnmarshalJSON(data []byte) error {
	*b = data
	return nil
}

// MarshalJSON writes the JSON as it came, as json.RawMessage does.
func (b BodyJSON) MarshalJSON() ([]byte, error) {
	if b == nil {
		return []byte("null"), nil
	}
	return b, nil
}
