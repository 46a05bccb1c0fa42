package gen

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"mistralrs/internal/observe"
)

// Events writes a server-sent event stream: `data:` events, named events
// and keep-alive frames, each flushed at once. The first failed write (the
// client is gone) is kept and returned by every later one.
type Events struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	last time.Time // last frame written
	err  error
	buf  []byte
	// ping is the keep-alive frame: nil for the `:` comment frame.
	ping []byte
	log  *observe.PayloadLog // every event's payload, as the -l log shows it
	ctx  context.Context     // the request's: its trace id goes with each payload
}

// startEvents sends the stream's header block.
func startEvents(w http.ResponseWriter) *Events {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	ev := &Events{w: w, rc: http.NewResponseController(w), last: time.Now()}
	ev.flush()
	return ev
}

// SetPing makes frame the keep-alive (Anthropic's `event: ping`) instead
// of the empty comment frame axum's KeepAlive sends.
func (e *Events) SetPing(frame []byte) { e.ping = frame }

// Err is the first write failure: non-nil once the client is gone.
func (e *Events) Err() error { return e.err }

func (e *Events) frame(b []byte) error {
	if e.err != nil {
		return e.err
	}
	if _, err := e.w.Write(b); err != nil {
		e.err = err
		return err
	}
	e.flush()
	e.last = time.Now()
	return e.err
}

func (e *Events) flush() {
	if err := e.rc.Flush(); err != nil && e.err == nil {
		e.err = err
	}
}

// Data sends v as one unnamed `data:` event.
func (e *Events) Data(v any) error { return e.Event("", v) }

// Event sends v as one event named name (`event: name`), or unnamed if
// name is "", and logs it as a response payload.
func (e *Events) Event(name string, v any) error {
	_ = e.log.ResponseCtx(e.ctx, v)
	return e.Unlogged(name, v)
}

// Unlogged is Event without the payload log: for the error events, whose
// message Run has logged already.
func (e *Events) Unlogged(name string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	e.buf = e.buf[:0]
	if name != "" {
		e.buf = append(append(append(e.buf, "event: "...), name...), '\n')
	}
	e.buf = append(e.buf, "data: "...)
	e.buf = append(e.buf, body...)
	e.buf = append(e.buf, "\n\n"...)
	return e.frame(e.buf)
}

// Done sends the closing `data: [DONE]` event.
func (e *Events) Done() error { return e.frame([]byte("data: [DONE]\n\n")) }

// keepAlive sends the keep-alive frame.
func (e *Events) keepAlive() error {
	if e.ping != nil {
		return e.frame(e.ping)
	}
	return e.frame([]byte(":\n\n"))
}
