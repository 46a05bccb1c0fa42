package observe

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The wrapper records status and bytes, keeps http.Flusher working and lets
// http.ResponseController reach the connection (deadlines, hijacking).
func TestResponseWriterWrapper(t *testing.T) {
	rec := httptest.NewRecorder()
	rw := NewResponseWriter(rec)
	var _ http.Flusher = rw
	rw.Header().Set("Content-Type", "text/event-stream")
	_, _ = rw.Write([]byte("data: 1\n\n"))
	rw.Flush()
	rw.WriteHeader(500) // ignored: the header is out
	if rw.Status() != 200 || rw.Written() != 9 || !rec.Flushed || rec.Code != 200 || rw.Err() != nil {
		t.Errorf("status %d written %d flushed %v", rw.Status(), rw.Written(), rec.Flushed)
	}

	// Through the whole stack on a real connection: SetWriteDeadline and
	// Hijack reach the net/http writer.
	o, _ := New(Options{Metrics: true, RequestIDHeader: true})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /deadline", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
			t.Errorf("SetWriteDeadline: %v", err)
		}
		if err := rc.Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /hijack", func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		_ = buf.Flush()
	})
	srv := httptest.NewServer(o.Handler(mux))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/deadline")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("deadline: %d", resp.StatusCode)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("GET /hijack HTTP/1.1\r\nHost: x\r\n\r\n"))
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("hijack: %d", resp.StatusCode)
	}
}

// A panicking handler is still accounted for (500, in-flight released),
// and the panic reaches net/http.
func TestPanicAccounting(t *testing.T) {
	e := newEnv(t, "info", nil)
	mux := testMux(e.o)
	mux.HandleFunc("GET /v1/boom", func(w http.ResponseWriter, r *http.Request) { panic(errors.New("boom")) })
	h := e.o.Handler(mux)
	func() {
		defer func() {
			if p := recover(); p == nil {
				t.Error("panic swallowed")
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/boom", nil))
	}()
	e.h = h
	fams := e.scrape(t)
	if m := series(fams, "http_requests_total", labels("method", "GET", "path", "/v1/boom", "model", "none", "status", "500")); m == nil {
		t.Error("panicking request not counted")
	}
	if m := series(fams, "http_requests_in_flight", labels("method", "GET", "path", "/v1/boom", "model", "none")); m.GetGauge().GetValue() != 0 {
		t.Error("in-flight not released")
	}
	if l := e.logs.Lines(); len(l) < 2 || !strings.Contains(l[1], "status=500") {
		t.Errorf("%q", l)
	}
}
