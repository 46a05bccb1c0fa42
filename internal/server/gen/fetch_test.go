package gen

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

// imageServer serves body at /img, redirects /to?u=URL, and blocks on
// /slow until the client gives up.
func imageServer(t *testing.T, addr string, body []byte) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/img", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) })
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		// Flushed in pieces: no Content-Length, the limit applies while reading.
		for i := 0; i < len(body); i += 100 {
			_, _ = w.Write(body[i:min(i+100, len(body))])
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("u"), http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/missing", http.NotFound)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	ts := httptest.NewUnstartedServer(mux)
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestFetchPrivate: a loopback host is fetched only when private hosts are
// allowed, whether named by address or by a name that resolves to it.
func TestFetchPrivate(t *testing.T) {
	body := []byte("\x89PNG fake image bytes")
	ts := imageServer(t, "127.0.0.1:0", body)
	_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	for _, u := range []string{ts.URL + "/img", "http://localhost:" + port + "/img"} {
		f := newFetcher(RemoteImages{Allow: true, AllowPrivate: true})
		got, err := f.fetch(context.Background(), mustURL(t, u))
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%s with private hosts allowed: %q, %v", u, got, err)
		}
		f = newFetcher(RemoteImages{Allow: true})
		if got, err := f.fetch(context.Background(), mustURL(t, u)); err == nil || !strings.Contains(err.Error(), "non-public address") {
			t.Fatalf("%s by default: %q, %v; want the private address refused", u, got, err)
		}
	}
}

// TestFetchRedirectToPrivate: the address of every hop is checked, so a
// public host that redirects into the private network is refused; and
// redirects are limited.
func TestFetchRedirectToPrivate(t *testing.T) {
	public := imageServer(t, "127.0.0.1:0", []byte("public"))
	private := imageServer(t, "127.0.0.2:0", []byte("secret"))
	onlyFirst := func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.1") }
	f := newFetcherCheck(RemoteImages{Allow: true}, onlyFirst)
	if got, err := f.fetch(context.Background(), mustURL(t, public.URL+"/img")); err != nil || string(got) != "public" {
		t.Fatalf("the host taken as public: %q, %v", got, err)
	}
	to := public.URL + "/to?u=" + url.QueryEscape(private.URL+"/img")
	if got, err := f.fetch(context.Background(), mustURL(t, to)); err == nil || !strings.Contains(err.Error(), "non-public address") {
		t.Fatalf("redirect to 127.0.0.2: %q, %v; want it refused", got, err)
	}
	loop := public.URL + "/img"
	for range remoteImageRedirects + 1 {
		loop = public.URL + "/to?u=" + url.QueryEscape(loop)
	}
	if got, err := f.fetch(context.Background(), mustURL(t, loop)); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("%d redirects: %q, %v; want them refused", remoteImageRedirects+1, got, err)
	}
	tooFar := public.URL + "/to?u=" + url.QueryEscape("file:///etc/passwd")
	if got, err := f.fetch(context.Background(), mustURL(t, tooFar)); err == nil || !strings.Contains(err.Error(), `"file"`) {
		t.Fatalf("redirect to file: %q, %v; want it refused", got, err)
	}
}

// TestFetchLimits: an image over the size limit (announced or not), a host
// that never answers, and an error status.
func TestFetchLimits(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 2000)
	ts := imageServer(t, "127.0.0.1:0", big)
	f := newFetcher(RemoteImages{Allow: true, AllowPrivate: true, MaxBytes: 1000, Timeout: 300 * time.Millisecond})
	for _, path := range []string{"/img", "/chunked"} {
		if got, err := f.fetch(context.Background(), mustURL(t, ts.URL+path)); err == nil || !strings.Contains(err.Error(), "larger than 1000 bytes") {
			t.Errorf("%s: %d bytes, %v; want the size refused", path, len(got), err)
		}
	}
	if _, err := f.fetch(context.Background(), mustURL(t, ts.URL+"/slow")); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("/slow: %v; want the timeout", err)
	}
	if _, err := f.fetch(context.Background(), mustURL(t, ts.URL+"/missing")); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("/missing: %v; want the status", err)
	}
	f = newFetcher(RemoteImages{Allow: true, AllowPrivate: true, MaxBytes: 2000})
	if got, err := f.fetch(context.Background(), mustURL(t, ts.URL+"/chunked")); err != nil || len(got) != 2000 {
		t.Errorf("exactly at the limit: %d bytes, %v", len(got), err)
	}
}

func TestPublicAddr(t *testing.T) {
	for _, c := range []struct {
		addr   string
		public bool
	}{
		{"8.8.8.8", true}, {"2a00:1450:4001::1", true}, {"151.101.1.69", true},
		{"127.0.0.1", false}, {"127.9.9.9", false}, {"::1", false}, {"10.1.2.3", false}, {"172.16.0.1", false},
		{"192.168.1.1", false}, {"169.254.169.254", false}, {"fe80::1", false}, {"fc00::1", false},
		{"0.0.0.0", false}, {"::", false}, {"100.64.0.1", false}, {"224.0.0.1", false}, {"255.255.255.255", false},
		{"::ffff:127.0.0.1", false}, {"::ffff:10.0.0.1", false}, {"64:ff9b::a00:1", false}, {"2002:a00:1::", false},
		{"198.18.0.1", false}, {"240.0.0.1", false},
	} {
		if got := publicAddr(netip.MustParseAddr(c.addr)); got != c.public {
			t.Errorf("publicAddr(%s) = %v, want %v", c.addr, got, c.public)
		}
	}
}

func TestDataURL(t *testing.T) {
	for _, c := range []struct {
		url, want, err string
	}{
		{url: "data:image/png;base64,aGVsbG8=", want: "hello"},
		{url: "data:image/png;base64,aGVsbG8", want: "hello"},
		{url: "DATA:image/jpeg;BASE64,aGVs\nbG8=", want: "hello"},
		{url: "data:;base64,aGVsbG8=", want: "hello"},
		{url: "data:image/png,hi%20there", want: "hi there"},
		{url: "data:text/plain;base64,aGVsbG8=", err: "not an image type"},
		{url: "data:image/png;base64", err: "no comma"},
		{url: "data:image/png;base64,a$b=", err: "invalid base64"},
	} {
		got, err := dataURL(c.url)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %q, %v; want an error with %q", c.url, got, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%q: %q, %v; want %q", c.url, got, err, c.want)
		}
	}
}

// TestImageBytesRefusals: URLs refused before any fetch.
func TestImageBytesRefusals(t *testing.T) {
	b := &Base{}
	for _, c := range []struct{ url, err string }{
		{"https://example.com/cat.png", "not allowed on this server"},
		{"ftp://example.com/cat.png", `scheme "ftp" is not supported`},
		{"file:///etc/passwd", `scheme "file" is not supported`},
		{"cat.png", "must be a data: URL"},
	} {
		if _, err := b.imageBytes(context.Background(), &ImagePart{URL: c.url}); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %v; want %q", c.url, err, c.err)
		}
	}
}
