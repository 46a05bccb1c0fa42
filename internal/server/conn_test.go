package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"mistralrs/internal/config"
	"mistralrs/internal/observe"
)

// rawConn dials the test server over loopback.
func (ts *testServer) rawConn(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// healthOn sends GET /health on c and reads the answer.
func healthOn(t *testing.T, c net.Conn, br *bufio.Reader, wait time.Duration) (*http.Response, error) {
	t.Helper()
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		return nil, err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = c.SetReadDeadline(time.Time{})
	return resp, err
}

// waitClosed reads c until the server closes it (EOF or reset), failing
// after wait; it returns what was read.
func waitClosed(t *testing.T, c net.Conn, wait time.Duration) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	data, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v (read %q)", wait, data)
	}
	return data
}

// TestSlowBodyTimedOut: a client that sends its headers and then trickles
// the body slower than the body deadline is answered 400 and its
// connection closed, within the deadline (plus slack).
func TestSlowBodyTimedOut(t *testing.T) {
	const deadline = 80 * time.Millisecond
	ts := startServer(t, func(o *Options) { o.BodyTimeout = deadline })
	c := ts.rawConn(t)
	start := time.Now()
	_, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // one byte every 20 ms: 1000 bytes would take 20 s
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	data := waitClosed(t, c, 3*time.Second)
	took := time.Since(start)
	if took < deadline/2 || took > deadline+time.Second {
		t.Errorf("closed after %v, want about %v", took, deadline)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), nil)
	if err != nil {
		t.Fatalf("%v: %q", err, data)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !resp.Close || !strings.Contains(string(body), "request body not received within") {
		t.Errorf("status %d, close %v: %s", resp.StatusCode, resp.Close, body)
	}
}

// TestBodyInTimeKeepsConnection: a body sent at once is unaffected by the
// deadline, and the connection is kept for the next request past it.
func TestBodyInTimeKeepsConnection(t *testing.T) {
	const deadline = 50 * time.Millisecond
	ts := startServer(t, func(o *Options) { o.BodyTimeout = deadline })
	c := ts.rawConn(t)
	br := bufio.NewReader(c)
	body := `{"model":"tiny","prompt":"hi","max_tokens":2}`
	_, err := io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("status %d, close %v", resp.StatusCode, resp.Close)
	}
	time.Sleep(2 * deadline)
	if resp, err := healthOn(t, c, br, 2*time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("second request on the connection: %v", err)
	}
}

// TestIdleConnectionClosed: a keep-alive connection with no request for
// the idle timeout is closed by the server.
func TestIdleConnectionClosed(t *testing.T) {
	const idle = 60 * time.Millisecond
	ts := startServer(t, func(o *Options) { o.IdleTimeout = idle })
	c := ts.rawConn(t)
	br := bufio.NewReader(c)
	resp, err := healthOn(t, c, br, 2*time.Second)
	if err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("%v %v", resp, err)
	}
	start := time.Now()
	if data := waitClosed(t, c, 3*time.Second); len(data) != 0 {
		t.Errorf("read %q", data)
	}
	if took := time.Since(start); took < idle/2 || took > idle+time.Second {
		t.Errorf("closed after %v, want about %v", took, idle)
	}
}

// TestMaxConnections: with a cap of 2, a third connection gets no answer
// while two are held; it is served once one closes, a WARN line says the
// cap was reached, and normal service resumes.
func TestMaxConnections(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.MaxConnections = 2 })
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c := ts.rawConn(t)
		if resp, err := healthOn(t, c, bufio.NewReader(c), 2*time.Second); err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d: %v", i, err)
		}
		held = append(held, c)
	}
	third := ts.rawConn(t)
	br := bufio.NewReader(third)
	if _, err := healthOn(t, third, br, 150*time.Millisecond); err == nil {
		t.Fatal("third connection served while two are held")
	}
	held[0].Close()
	_ = third.SetReadDeadline(time.Now().Add(2 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("third connection after one closed: %v", err)
	}
	resp.Body.Close()
	if len(ts.log.lines("WARN", "Connection limit reached: 2 connections open")) == 0 {
		t.Errorf("no WARN line for the limit:\n%s", ts.log)
	}
	held[1].Close()
	third.Close()
	for i := 0; i < 5; i++ { // fresh connections each time
		req, _ := http.NewRequest("GET", ts.url+"/health", nil)
		req.Close = true
		if resp, _ := ts.do(req); resp.StatusCode != 200 {
			t.Fatalf("request %d after the held connections closed: %d", i, resp.StatusCode)
		}
	}
}

// TestStreamOutlivesBodyDeadline: a streamed answer lasting many times the
// body deadline completes with its final chunk and [DONE].
func TestStreamOutlivesBodyDeadline(t *testing.T) {
	const deadline = 10 * time.Millisecond
	ts := slowServer(t, func(o *Options) { o.BodyTimeout = deadline })
	start := time.Now()
	resp := ts.openStream(t, "long", map[string]any{"model": "slow", "prompt": "hello", "max_tokens": 400, "ignore_eos": true})
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	data, _ := sseEvents(t, body)
	if len(data) < 2 || data[len(data)-1] != "[DONE]" || !strings.Contains(data[len(data)-2], `"finish_reason":"length"`) {
		t.Fatalf("stream cut after %v: %d events, last %q", took, len(data), data[max(len(data)-1, 0):])
	}
	if took < 3*deadline {
		t.Logf("stream took only %v; the test wants it longer than the deadline", took)
	}
}

// fakeListener fails Accept with errs, then reports itself closed.
type fakeListener struct {
	mu   sync.Mutex
	errs []error
}

func (f *fakeListener) Accept() (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) == 0 {
		return nil, net.ErrClosed
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return nil, err
}
func (f *fakeListener) Close() error   { return nil }
func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

type tempErr struct{}

func (tempErr) Error() string   { return "accept4: too many open files" }
func (tempErr) Timeout() bool   { return false }
func (tempErr) Temporary() bool { return true }

// TestAcceptErrorsLoggedAtWarn: failed accepts are WARN lines with the
// error, at most one a second; a closed listener logs nothing.
func TestAcceptErrorsLoggedAtWarn(t *testing.T) {
	logs := &logBuf{}
	filter, err := observe.ParseFilter("info")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(observe.NewTracingHandler(logs, filter).ForTarget(observe.TargetServer))
	ln := newConnListener(&fakeListener{errs: []error{tempErr{}, tempErr{}, tempErr{}}}, 4, log)
	for i := 0; i < 4; i++ {
		if _, err := ln.Accept(); err == nil {
			t.Fatal("Accept succeeded")
		}
	}
	lines := logs.lines("WARN", "Accept error: accept4: too many open files")
	if len(lines) != 1 {
		t.Fatalf("want one WARN line, got:\n%s", logs)
	}
	if strings.Contains(logs.String(), "closed") {
		t.Errorf("closed listener logged:\n%s", logs)
	}
	if n := len(ln.sem); n != 0 {
		t.Errorf("%d slots still taken after failed accepts", n)
	}
}

// TestConnectionOptionsFromConfig: the connection settings reach the server
// options, a configuration's 0 (no limit) as a negative option, and the
// defaults as the server's defaults.
func TestConnectionOptionsFromConfig(t *testing.T) {
	cfg := config.Default()
	opts, _, err := OptionsFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if opts.MaxConnections != 1024 || opts.IdleTimeout != 120*time.Second || opts.BodyTimeout != 60*time.Second {
		t.Errorf("defaults: %d %v %v", opts.MaxConnections, opts.IdleTimeout, opts.BodyTimeout)
	}
	cfg.Server.MaxConnections, cfg.Server.IdleTimeoutSecs, cfg.Server.BodyTimeoutSecs = 0, 7, 0
	if opts, _, err = OptionsFromConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if opts.MaxConnections >= 0 || opts.IdleTimeout != 7*time.Second || opts.BodyTimeout >= 0 {
		t.Errorf("set: %d %v %v", opts.MaxConnections, opts.IdleTimeout, opts.BodyTimeout)
	}
}
