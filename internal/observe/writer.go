package observe

import (
	"errors"
	"net/http"
)

// errorCaptureLimit bounds how much of an error response body is kept to
// find its message for the access log (mistral.rs buffers up to 4096 bytes).
const errorCaptureLimit = 4096

// ResponseWriter wraps an http.ResponseWriter, recording the status and the
// number of body bytes written. It keeps http.Flusher working for SSE and
// exposes Unwrap so http.ResponseController reaches the connection.
//
// Inside the observability middleware the wrapper also sets x-request-id on
// the header block, notices SSE responses and keeps the start of error
// bodies; used alone (NewResponseWriter) it only records.
type ResponseWriter struct {
	w           http.ResponseWriter
	status      int
	written     int64
	wroteHeader bool
	writeErr    error

	rec *Record // nil when used standalone

	errBody []byte // first bytes of a 4xx/5xx body
}

// NewResponseWriter wraps w. Status is 0 until a header is written.
func NewResponseWriter(w http.ResponseWriter) *ResponseWriter {
	return &ResponseWriter{w: w}
}

// Status reports the status code sent, or 0 when nothing was written yet.
func (rw *ResponseWriter) Status() int { return rw.status }

// Written reports the number of body bytes accepted by the underlying writer.
func (rw *ResponseWriter) Written() int64 { return rw.written }

// Err reports the first error returned by a Write or Flush to the client.
func (rw *ResponseWriter) Err() error { return rw.writeErr }

// Header returns the header map of the underlying writer.
func (rw *ResponseWriter) Header() http.Header { return rw.w.Header() }

// Unwrap lets http.ResponseController reach the underlying writer.
func (rw *ResponseWriter) Unwrap() http.ResponseWriter { return rw.w }

// WriteHeader records the status and sends the header block once;
// informational (1xx) headers pass through without being recorded.
func (rw *ResponseWriter) WriteHeader(code int) {
	if rw.wroteHeader {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		rw.w.WriteHeader(code)
		return
	}
	rw.wroteHeader = true
	rw.status = code
	if rw.rec != nil {
		rw.rec.headerWritten(rw, code)
	}
	rw.w.WriteHeader(code)
}

// Write sends body bytes, writing a 200 header first if none was written.
func (rw *ResponseWriter) Write(p []byte) (int, error) {
	if !rw.wroteHeader {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.status >= 400 && rw.rec != nil && len(rw.errBody) < errorCaptureLimit+1 {
		room := errorCaptureLimit + 1 - len(rw.errBody)
		rw.errBody = append(rw.errBody, p[:min(room, len(p))]...)
	}
	n, err := rw.w.Write(p)
	rw.written += int64(n)
	if err != nil && rw.writeErr == nil {
		rw.writeErr = err
	}
	return n, err
}

// Flush sends buffered data to the client (SSE frames).
func (rw *ResponseWriter) Flush() {
	_ = rw.FlushError()
}

// FlushError is Flush reporting failure; http.ResponseController prefers it.
func (rw *ResponseWriter) FlushError() error {
	if !rw.wroteHeader {
		rw.WriteHeader(http.StatusOK)
	}
	err := http.NewResponseController(rw.w).Flush()
	if err != nil && rw.writeErr == nil && !errors.Is(err, http.ErrNotSupported) {
		rw.writeErr = err
	}
	return err
}
