package gen

import (
	"errors"
	"net/http"
	"unicode/utf8"

	"mistralrs/internal/observe"
)

// Envelope writes a route's errors in its dialect's shape.
type Envelope struct {
	// Write sends err with status.
	Write func(w http.ResponseWriter, r *http.Request, status int, err *Error)
	// TooLarge answers a body over the limit (413).
	TooLarge func(w http.ResponseWriter, r *http.Request)
}

// OpenAI is the envelope of every route but Anthropic's:
// {"error":{"message","type","param","code"}}, code model_not_found on a
// 404.
var OpenAI = Envelope{
	Write: func(w http.ResponseWriter, r *http.Request, status int, err *Error) {
		e := observe.APIError{Message: err.Msg}
		if err.Param != "" {
			p := err.Param
			e.Param = &p
		}
		if c := err.Code; c != "" {
			e.Code = &c
		} else if status == http.StatusNotFound {
			c := "model_not_found"
			e.Code = &c
		}
		observe.WriteError(w, r, status, e)
	},
	TooLarge: observe.WriteBodyTooLarge,
}

// asError is err as a request error: a *Error keeps its status, anything
// else is a 500 with err's message.
func asError(err error) *Error {
	var re *Error
	if errors.As(err, &re) {
		return re
	}
	return &Error{Status: http.StatusInternalServerError, Msg: err.Error()}
}

// WriteError answers err in env and logs it in the payload log; a client
// that left already gets the 499 that the access log and metrics show.
func (b *Base) WriteError(w http.ResponseWriter, r *http.Request, env Envelope, err error) {
	if ClientGone(r) || err == ErrClientClosed {
		env.Write(w, r, StatusClientClosed, ErrClientClosed)
		return
	}
	b.WriteRequestError(w, r, env, err)
}

// WriteRequestError answers err in env and logs it in the payload log,
// whether or not the client is still there.
func (b *Base) WriteRequestError(w http.ResponseWriter, r *http.Request, env Envelope, err error) {
	re := asError(err)
	_ = b.PayloadLog.ErrorCtx(r.Context(), re.Msg)
	env.Write(w, r, re.Status, re)
}

// ReadBody reads the whole request body (the observability layer usually
// has it buffered already) and logs it; a body over the limit is answered
// with 413, one that is not UTF-8 with 400, in env.
func (b *Base) ReadBody(w http.ResponseWriter, r *http.Request, env Envelope) ([]byte, bool) {
	body, err := observe.ReadBody(r)
	if err != nil {
		if observe.IsBodyTooLarge(err) {
			env.TooLarge(w, r)
		} else {
			env.Write(w, r, http.StatusBadRequest, BadRequest("", "failed to read request body: %s", err.Error()))
		}
		return nil, false
	}
	_ = b.PayloadLog.RequestCtx(r.Context(), body)
	if !utf8.Valid(body) {
		// encoding/json would quietly turn the bad bytes into U+FFFD and the
		// model would answer a prompt the client never sent.
		b.WriteError(w, r, env, BadRequest("", "request body is not valid UTF-8"))
		return nil, false
	}
	return body, true
}
