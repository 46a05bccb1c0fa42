package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"mistralrs/internal/engine"
	"mistralrs/internal/observe"
)

// sseWriter writes a server-sent event stream: unnamed `data:` events and
// `:` comment frames (keep-alives), each flushed at once.
type sseWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	last time.Time // last frame written
	err  error     // first write failure: the client is gone
	buf  []byte
	// ping is the keep-alive frame: nil for the `:` comment frame; the
	// Anthropic dialect sets its `event: ping`.
	ping []byte
}

// startSSE sends the stream's header block.
func startSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), last: time.Now()}
	sw.flush()
	return sw
}

func (s *sseWriter) frame(b []byte) error {
	if s.err != nil {
		return s.err
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	s.flush()
	s.last = time.Now()
	return s.err
}

func (s *sseWriter) flush() {
	if err := s.rc.Flush(); err != nil && s.err == nil {
		s.err = err
	}
}

// data sends v as one `data:` event.
func (s *sseWriter) data(v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.buf = append(s.buf[:0], "data: "...)
	s.buf = append(s.buf, body...)
	s.buf = append(s.buf, "\n\n"...)
	return s.frame(s.buf)
}

// done sends the closing `data: [DONE]` event.
func (s *sseWriter) done() error { return s.frame([]byte("data: [DONE]\n\n")) }

// keepAlive sends an empty comment frame, as axum's KeepAlive does, or the
// dialect's own ping.
func (s *sseWriter) keepAlive() error {
	if s.ping != nil {
		return s.frame(s.ping)
	}
	return s.frame([]byte(":\n\n"))
}

// streamError sends the OpenAI-style error event that ends a failed stream.
func (s *sseWriter) streamError(msg string) error {
	type apiErr struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	if err := s.data(struct {
		Error apiErr `json:"error"`
	}{apiErr{Message: msg, Type: "server_error"}}); err != nil {
		return err
	}
	return s.done()
}

// generateStreaming submits req and hands each output to onOut as it
// arrives, on the calling goroutine, which owns the writer; while no frame
// was written for keepAlive it sends comment frames. Each engine step that
// produced outputs is one token step for TTFT and ITL: the tokens of a
// verified speculative run share their step's time and count once. A failed write (the
// client went away), an error from onOut, the end of ctx or the end of the
// server's drain time (genContext) cancels the generation; the engine then finishes it with reason canceled. It returns
// when the engine is done with the sequence.
func generateStreaming(ctx context.Context, eng *engine.Engine, req *engine.Request, sw *sseWriter,
	keepAlive time.Duration, onOut func(engine.Output) error) (*engine.Result, error) {
	res, err := generateStreamingAll(ctx, eng, req, sw, keepAlive, onOut)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// generateStreamingAll is generateStreaming for a request of several
// choices (their outputs interleave, tagged by Output.Index); it returns
// every choice's result.
func generateStreamingAll(ctx context.Context, eng *engine.Engine, req *engine.Request, sw *sseWriter,
	keepAlive time.Duration, onOut func(engine.Output) error) ([]*engine.Result, error) {
	steps := observe.StreamFromContext(ctx)
	ctx, cancel := genContext(ctx)
	defer cancel()
	st, err := eng.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	var lastStep time.Time
	ka := time.NewTimer(keepAlive)
	defer ka.Stop()
	for !st.Done() {
		select {
		case <-st.Ready():
			for {
				o, ok := st.Next()
				if !ok {
					break
				}
				if !o.Time.Equal(lastStep) {
					steps.TokenStep(o.Time)
					lastStep = o.Time
				}
				if sw.err != nil || onOut(o) != nil {
					st.Cancel()
				}
			}
		case <-ka.C:
			if sw.err == nil {
				if idle := time.Since(sw.last); idle >= keepAlive {
					if err := sw.keepAlive(); err != nil {
						st.Cancel()
					}
				}
			}
			ka.Reset(max(keepAlive-time.Since(sw.last), time.Millisecond))
		}
	}
	return st.Results()
}
