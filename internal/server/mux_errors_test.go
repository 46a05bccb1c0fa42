package server

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// rawRequest sends a request line as written (no client-side path
// cleaning, any method) and returns the response.
func rawRequest(t *testing.T, ts *testServer, method, path string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, method+" "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// The mux's own answers (no route, a method it has no route for, CONNECT,
// a redirect to the cleaned path) and a missing docs file are JSON errors
// in the route's envelope, never text/plain or HTML.
func TestMuxAnswersAreJSON(t *testing.T) {
	ts := startServer(t)
	for _, c := range []struct {
		method, path string
		status       int
		msg, header  string
	}{
		{"GET", "/docs/x", 404, `no file "x" under /docs`, ""},
		{"GET", "/nope", 404, "no route for GET /nope", ""},
		{"DELETE", "/v1/models", 405, "method DELETE is not allowed for /v1/models", "Allow"},
		{"CONNECT", "/v1/models", 405, "method CONNECT is not allowed for /v1/models", ""},
		{"GET", "/v1//models", 307, "/v1//models is not a clean path: use /v1/models", "Location"},
		{"GET", "/v1/../v1/models", 307, "is not a clean path: use /v1/models", "Location"},
		{"POST", "/v1//messages", 307, "is not a clean path: use /v1/messages", "Location"},
	} {
		resp, body := rawRequest(t, ts, c.method, c.path)
		if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: %d %s %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			continue
		}
		var env struct {
			Error struct{ Message, Type string } `json:"error"`
			Type  string                         `json:"type"`
		}
		if err := json.Unmarshal(body, &env); err != nil || !strings.Contains(env.Error.Message, c.msg) || env.Error.Type != "invalid_request_error" {
			t.Errorf("%s %s: body %s (%v)", c.method, c.path, body, err)
		}
		if strings.HasPrefix(c.path, "/v1//messages") && env.Type != "error" {
			t.Errorf("%s %s: not in Anthropic's envelope: %s", c.method, c.path, body)
		}
		if c.header != "" && resp.Header.Get(c.header) == "" {
			t.Errorf("%s %s: no %s header", c.method, c.path, c.header)
		}
	}
	// A route's own 404 keeps its message.
	if resp, body := ts.get("/v1/responses/resp_nothere"); resp.StatusCode != 404 || !strings.Contains(string(body), "resp_nothere") {
		t.Errorf("GET /v1/responses/resp_nothere: %d %s", resp.StatusCode, body)
	}
}
