package httpguard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type refusal struct {
	status int
	code   string
	msg    string
}

func recordFail(got *refusal) ErrorFunc {
	return func(w http.ResponseWriter, _ *http.Request, status int, code, msg string) {
		*got = refusal{status, code, msg}
		w.WriteHeader(status)
	}
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

func TestIsJSON(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "application/json; charset=utf-8": true, "APPLICATION/JSON": true,
		"application/problem+json": true, "application/vnd.api+json; charset=utf-8": true,
		"": false, "text/plain": false, "application/x-www-form-urlencoded": false,
		"multipart/form-data; boundary=x": false, "application/jsonp": false, "text/json+x": false,
		"application/json;;": false, "json": false,
	} {
		if got := IsJSON(ct); got != want {
			t.Errorf("IsJSON(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestRequireJSON(t *testing.T) {
	var got refusal
	h := RequireJSON(func(r *http.Request) bool { return r.URL.Path == "/json" }, recordFail(&got))(ok)
	for _, c := range []struct {
		path, ct string
		want     int
	}{
		{"/json", "application/json", 204},
		{"/json", "text/plain", 415},
		{"/json", "", 415},
		{"/other", "text/plain", 204},
	} {
		got = refusal{}
		req := httptest.NewRequest("POST", c.path, strings.NewReader("{}"))
		if c.ct != "" {
			req.Header.Set("Content-Type", c.ct)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s %q: %d, want %d", c.path, c.ct, rec.Code, c.want)
		}
		if c.want == 415 && got.code != CodeUnsupportedMediaType {
			t.Errorf("%s %q: code %q", c.path, c.ct, got.code)
		}
	}
}

func TestAPIKey(t *testing.T) {
	const key = "k-123456"
	var got refusal
	h := APIKey(key, func(r *http.Request) bool { return r.URL.Path != "/open" }, recordFail(&got))(ok)
	for _, c := range []struct {
		path string
		hdr  []string
		want int
	}{
		{"/api", []string{"Authorization", "Bearer " + key}, 204},
		{"/api", []string{"Authorization", "bearer  " + key + " "}, 204},
		{"/api", []string{"X-Api-Key", key}, 204},
		{"/api", nil, 401},
		{"/api", []string{"Authorization", key}, 401},
		{"/api", []string{"Authorization", "Basic " + key}, 401},
		{"/api", []string{"Authorization", "Bearer " + key[:4]}, 401},
		{"/api", []string{"X-Api-Key", key + "x"}, 401},
		{"/api", []string{"Authorization", "Bearer "}, 401},
		{"/open", nil, 204},
	} {
		got = refusal{}
		req := httptest.NewRequest("GET", c.path, nil)
		if c.hdr != nil {
			req.Header.Set(c.hdr[0], c.hdr[1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s %q: %d, want %d", c.path, c.hdr, rec.Code, c.want)
		}
		if c.want == 401 && (got.code != CodeInvalidAPIKey || strings.Contains(got.msg, key[:4])) {
			t.Errorf("%s %q: refusal %+v", c.path, c.hdr, got)
		}
	}
	// No key: the layer is the next handler itself.
	if h := APIKey("", func(*http.Request) bool { return true }, recordFail(&got))(ok); h == nil {
		t.Fatal("nil handler")
	} else {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/api", nil))
		if rec.Code != 204 {
			t.Errorf("no key configured: %d", rec.Code)
		}
	}
}
