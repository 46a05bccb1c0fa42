// Package hubtest is a fake Hugging Face Hub for tests: an httptest server
// that answers model info, resolves files with the Hub's headers (a redirect
// to a "CDN" path for LFS files, X-Linked-Etag, X-Linked-Size,
// X-Repo-Commit), serves Range requests, checks bearer tokens, and can cut a
// transfer or corrupt a file. Nothing leaves the machine.
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"mistralrs/internal/demo"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
)

// Repo is one model repository of the fake Hub.
type Repo struct {
	Commit string            // 40 hex digits
	Files  map[string][]byte // repo-relative name → content
	Token  string            // required bearer token; "" for a public repo
	Refs   map[string]string // revision → commit (main is added)
}

// Hub is the fake Hub. Its fields may be changed between requests under Mu.
type Hub struct {
	*httptest.Server
	CDN   *httptest.Server // another host: LFS files redirect there
	Mu    sync.Mutex
	Repos map[string]*Repo

	// CutAfter cuts the next transfers of a file (by name) after this many
	// bytes, once per entry in the slice.
	CutAfter map[string][]int
	// StallAfter makes the next transfers of a file stop sending after this
	// many bytes without closing the connection (until the client gives up).
	StallAfter map[string][]int
	// Corrupt serves these files' bytes with one byte flipped.
	Corrupt map[string]bool
	// Delay sleeps before serving each CDN body (for concurrency tests).
	Delay time.Duration

	// Requests logs "METHOD path" of every request; Ranges the Range
	// headers received by the CDN; CDNBytes the bytes it sent.
	Requests []string
	Ranges   []string
	CDNBytes int64
}

// New starts a fake Hub, closed with the test.
func New(t testing.TB) *Hub {
	h := &Hub{Repos: map[string]*Repo{}, CutAfter: map[string][]int{}, StallAfter: map[string][]int{}, Corrupt: map[string]bool{}}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	h.CDN = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Mu.Lock()
		h.Requests = append(h.Requests, r.Method+" "+r.URL.Path)
		h.Mu.Unlock()
		if !strings.HasPrefix(r.URL.Path, "/cdn/") {
			http.NotFound(w, r)
			return
		}
		h.cdn(w, r, strings.TrimPrefix(r.URL.Path, "/cdn/"))
	}))
	t.Cleanup(h.Close)
	t.Cleanup(h.CDN.Close)
	return h
}

// Add adds a public repository with the files and returns it.
func (h *Hub) Add(repo string, files map[string][]byte) *Repo {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	sum := sha1.New()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		sum.Write([]byte(n))
		sum.Write(files[n])
	}
	sum.Write([]byte(repo))
	r := &Repo{Commit: hex.EncodeToString(sum.Sum(nil)), Files: files, Refs: map[string]string{}}
	r.Refs["main"] = r.Commit
	h.Repos[repo] = r
	return r
}

// Count is how many logged requests start with prefix ("GET /cdn/").
func (h *Hub) Count(prefix string) int {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	n := 0
	for _, r := range h.Requests {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

// Sent is the number of body bytes the CDN sent.
func (h *Hub) Sent() int64 {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	return h.CDNBytes
}

// RangeHeaders are the Range headers the CDN received.
func (h *Hub) RangeHeaders() []string {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	return append([]string(nil), h.Ranges...)
}

// Reset clears the request logs.
func (h *Hub) Reset() {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	h.Requests, h.Ranges, h.CDNBytes = nil, nil, 0
}

func isLFS(name string) bool { return strings.HasSuffix(strings.ToLower(name), ".gguf") }

// Sha256 is the hex sha256 of b (an LFS file's ETag).
func Sha256(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// GitSha1 is git's blob hash of b (a small file's ETag).
func GitSha1(b []byte) string {
	s := sha1.New()
	fmt.Fprintf(s, "blob %d\x00", len(b))
	s.Write(b)
	return hex.EncodeToString(s.Sum(nil))
}

func (h *Hub) serve(w http.ResponseWriter, r *http.Request) {
	h.Mu.Lock()
	h.Requests = append(h.Requests, r.Method+" "+r.URL.Path)
	h.Mu.Unlock()
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/api/models/"):
		h.info(w, r, strings.TrimPrefix(p, "/api/models/"))
	case strings.Contains(p, "/resolve/"):
		h.resolve(w, r, p)
	default:
		http.NotFound(w, r)
	}
}

// repoFor finds the repository and checks the token; it answers the error
// itself and returns nil then.
func (h *Hub) repoFor(w http.ResponseWriter, r *http.Request, name string) *Repo {
	h.Mu.Lock()
	repo := h.Repos[name]
	h.Mu.Unlock()
	auth := r.Header.Get("Authorization")
	if repo == nil {
		if auth == "" { // as the Hub: without a token, absent looks like private
			w.Header().Set("X-Error-Code", "RepoNotFound")
			w.Header().Set("X-Error-Message", "Repository not found")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return nil
		}
		w.Header().Set("X-Error-Code", "RepoNotFound")
		w.Header().Set("X-Error-Message", "Repository not found")
		http.Error(w, "not found", http.StatusNotFound)
		return nil
	}
	if repo.Token != "" && auth != "Bearer "+repo.Token {
		w.Header().Set("X-Error-Message", "Invalid credentials in Authorization header")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return nil
	}
	return repo
}

func (h *Hub) info(w http.ResponseWriter, r *http.Request, rest string) {
	i := strings.Index(rest, "/revision/")
	if i < 0 {
		http.NotFound(w, r)
		return
	}
	repo := h.repoFor(w, r, rest[:i])
	if repo == nil {
		return
	}
	commit, ok := repo.resolveRev(rest[i+len("/revision/"):])
	if !ok {
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		http.Error(w, "revision not found", http.StatusNotFound)
		return
	}
	type sib struct {
		RFilename string `json:"rfilename"`
	}
	out := struct {
		ID       string `json:"id"`
		Sha      string `json:"sha"`
		Siblings []sib  `json:"siblings"`
	}{ID: rest[:i], Sha: commit}
	names := make([]string, 0, len(repo.Files))
	for n := range repo.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out.Siblings = append(out.Siblings, sib{n})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (repo *Repo) resolveRev(rev string) (string, bool) {
	if rev == repo.Commit {
		return rev, true
	}
	c, ok := repo.Refs[rev]
	return c, ok
}

func (h *Hub) resolve(w http.ResponseWriter, r *http.Request, p string) {
	i := strings.Index(p, "/resolve/")
	repo := h.repoFor(w, r, strings.TrimPrefix(p[:i], "/"))
	if repo == nil {
		return
	}
	rest := p[i+len("/resolve/"):]
	j := strings.IndexByte(rest, '/')
	if j < 0 {
		http.NotFound(w, r)
		return
	}
	commit, ok := repo.resolveRev(rest[:j])
	if !ok {
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		http.Error(w, "revision not found", http.StatusNotFound)
		return
	}
	name := rest[j+1:]
	data, ok := repo.Files[name]
	if !ok {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "entry not found", http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", commit)
	if isLFS(name) {
		sum := Sha256(data)
		w.Header().Set("X-Linked-Etag", `"`+sum+`"`)
		w.Header().Set("ETag", `"`+GitSha1([]byte("pointer "+sum))+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(data)))
		w.Header().Set("Location", h.CDN.URL+"/cdn/"+sum+"?name="+url.QueryEscape(name))
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+GitSha1(data)+`"`)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// cdn serves an LFS blob by its sha256, with Range support.
func (h *Hub) cdn(w http.ResponseWriter, r *http.Request, sum string) {
	if r.Header.Get("Authorization") != "" {
		http.Error(w, "the CDN must not get the token", http.StatusBadRequest)
		return
	}
	name := r.URL.Query().Get("name")
	h.Mu.Lock()
	var data []byte
	for _, repo := range h.Repos {
		if d, ok := repo.Files[name]; ok && Sha256(d) == sum {
			data = d
		}
	}
	corrupt := h.Corrupt[name]
	cut := -1
	if c := h.CutAfter[name]; len(c) > 0 {
		cut, h.CutAfter[name] = c[0], c[1:]
	}
	stall := false
	if c := h.StallAfter[name]; len(c) > 0 && cut < 0 {
		cut, h.StallAfter[name], stall = c[0], c[1:], true
	}
	if rg := r.Header.Get("Range"); rg != "" {
		h.Ranges = append(h.Ranges, rg)
	}
	delay := h.Delay
	h.Mu.Unlock()
	if data == nil {
		http.NotFound(w, r)
		return
	}
	if corrupt {
		data = append([]byte(nil), data...)
		data[len(data)/2] ^= 0xff
	}
	time.Sleep(delay)
	cw := &countWriter{ResponseWriter: w, h: h, left: cut}
	http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(data))
	if cw.cut && stall {
		<-r.Context().Done() // silent until the client closes
		return
	}
	if cw.cut {
		panic(http.ErrAbortHandler) // drop the connection mid-body
	}
}

// countWriter counts the body bytes and stops after left bytes (-1: never).
type countWriter struct {
	http.ResponseWriter
	h    *Hub
	left int
	cut  bool
}

func (c *countWriter) Write(b []byte) (int, error) {
	if c.cut {
		return 0, fmt.Errorf("cut")
	}
	if c.left >= 0 && len(b) > c.left {
		b = b[:c.left]
		c.cut = true
	}
	n, err := c.ResponseWriter.Write(b)
	c.h.Mu.Lock()
	c.h.CDNBytes += int64(n)
	c.h.Mu.Unlock()
	if c.left >= 0 {
		c.left -= n
	}
	if c.cut {
		if f, ok := c.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		return n, fmt.Errorf("cut")
	}
	return n, err
}

// Model returns the bytes of a tiny random GGUF model (different seeds give
// different files).
func Model(t testing.TB, seed uint64) []byte {
	t.Helper()
	w, err := demo.RandomModel(model.RandomConfig{Arch: "llama", Layers: 2, Embd: 32, FF: 64, Heads: 2, Vocab: 300,
		ContextLen: 256, Type: kernels.F32, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Shards returns the files of a tiny random model split into n shards,
// named prefix-0000K-of-0000N.gguf.
func Shards(t testing.TB, prefix string, n int, seed uint64) map[string][]byte {
	t.Helper()
	w, err := demo.RandomModel(model.RandomConfig{Arch: "llama", Layers: 2, Embd: 32, FF: 64, Heads: 2, Vocab: 300,
		ContextLen: 256, Type: kernels.F32, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths, err := w.WriteShards(dir+"/"+prefix, n)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p[len(dir)+1:]] = b
	}
	return out
}
