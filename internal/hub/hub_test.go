package hub

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"mistralrs/internal/hub/hubtest"
)

const repoID = "org/Tiny-GGUF"

// newHub is a fake Hub with one public repository of two quantizations, a
// projector and a small (non-LFS) file.
func newHub(t *testing.T) (*hubtest.Hub, *hubtest.Repo) {
	t.Helper()
	h := hubtest.New(t)
	r := h.Add(repoID, map[string][]byte{
		"tiny-Q8_0.gguf":   hubtest.Model(t, 1),
		"tiny-Q4_K_M.gguf": hubtest.Model(t, 2),
		"mmproj-f16.gguf":  []byte("GGUF projector"),
		"README.md":        []byte("# tiny\n"),
	})
	return h, r
}

func client(h *hubtest.Hub, cache string) *Client {
	return &Client{Endpoint: h.URL, CacheDir: cache, RetryWait: time.Millisecond}
}

// checkCached checks the huggingface_hub layout for file and returns its content.
func checkCached(t *testing.T, cache, repo string, r *hubtest.Repo, file string) {
	t.Helper()
	repoDir := filepath.Join(cache, RepoFolder(repo))
	want := r.Files[file]
	sum := hubtest.Sha256(want)
	blob := filepath.Join(repoDir, "blobs", sum)
	got, err := os.ReadFile(blob)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("blob %s: %v (%d bytes, want %d)", blob, err, len(got), len(want))
	}
	pointer := filepath.Join(repoDir, "snapshots", r.Commit, filepath.FromSlash(file))
	target, err := os.Readlink(pointer)
	if err != nil {
		t.Fatalf("snapshot entry: %v", err)
	}
	if filepath.IsAbs(target) || filepath.Clean(filepath.Join(filepath.Dir(pointer), target)) != blob {
		t.Errorf("link %s -> %s, want a relative link to %s", pointer, target, blob)
	}
	if _, err := os.Stat(filepath.Join(cache, ".locks", RepoFolder(repo), sum+".lock")); err != nil {
		t.Errorf("no lock file: %v", err)
	}
	if _, err := os.Stat(blob + ".incomplete"); err == nil {
		t.Error(".incomplete left after a complete download")
	}
}

func TestFreshDownloadThenCacheOnly(t *testing.T) {
	h, r := newHub(t)
	cache := t.TempDir()
	var log bytes.Buffer
	c := client(h, cache)
	c.Progress = &log
	snap, err := c.Get(context.Background(), repoID, "", []string{"tiny-Q8_0.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Fetched || snap.Commit != r.Commit || !reflect.DeepEqual(snap.Files, []string{"tiny-Q8_0.gguf"}) {
		t.Errorf("snapshot %+v", snap)
	}
	checkCached(t, cache, repoID, r, "tiny-Q8_0.gguf")
	ref, err := os.ReadFile(filepath.Join(cache, RepoFolder(repoID), "refs", "main"))
	if err != nil || string(ref) != r.Commit {
		t.Errorf("refs/main = %q, %v", ref, err)
	}
	if !strings.Contains(log.String(), "org/Tiny-GGUF tiny-Q8_0.gguf: downloading") {
		t.Errorf("progress: %q", log.String())
	}

	// Again, with the Hub unreachable: the cache answers.
	h.Reset()
	off := &Client{Endpoint: "http://127.0.0.1:1", CacheDir: cache}
	snap2, err := off.Get(context.Background(), repoID, "main", []string{"tiny-Q8_0.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	if snap2.Fetched || snap2.Dir != snap.Dir {
		t.Errorf("second run %+v", snap2)
	}
	if n := h.Count(""); n != 0 {
		t.Errorf("%d requests on the second run", n)
	}
	// A small (non-LFS) file: verified against its git blob hash.
	if _, err := c.Get(context.Background(), repoID, "", []string{"README.md"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(snap.Dir, "README.md"))
	if err != nil || string(b) != "# tiny\n" {
		t.Errorf("README.md: %q %v", b, err)
	}
}

func TestResumeWithinOneRun(t *testing.T) {
	h, r := newHub(t)
	file := "tiny-Q8_0.gguf"
	size := len(r.Files[file])
	h.CutAfter[file] = []int{size / 2}
	cache := t.TempDir()
	if _, err := client(h, cache).Get(context.Background(), repoID, "", []string{file}); err != nil {
		t.Fatal(err)
	}
	checkCached(t, cache, repoID, r, file)
	if want := []string{"bytes=" + itoa(size/2) + "-"}; !reflect.DeepEqual(h.RangeHeaders(), want) {
		t.Errorf("ranges %q, want %q", h.RangeHeaders(), want)
	}
	if h.Sent() != int64(size) {
		t.Errorf("CDN sent %d bytes for a %d-byte file", h.Sent(), size)
	}
}

func TestStalledTransferResumed(t *testing.T) {
	h, r := newHub(t)
	file := "tiny-Q8_0.gguf"
	size := len(r.Files[file])
	h.StallAfter[file] = []int{size / 4}
	cache := t.TempDir()
	c := client(h, cache)
	c.StallTimeout = 200 * time.Millisecond
	if _, err := c.Get(context.Background(), repoID, "", []string{file}); err != nil {
		t.Fatal(err)
	}
	checkCached(t, cache, repoID, r, file)
	if want := []string{"bytes=" + itoa(size/4) + "-"}; !reflect.DeepEqual(h.RangeHeaders(), want) {
		t.Errorf("ranges %q, want %q", h.RangeHeaders(), want)
	}
}

func TestResumeAcrossRuns(t *testing.T) {
	h, r := newHub(t)
	file := "tiny-Q4_K_M.gguf"
	size := len(r.Files[file])
	h.CutAfter[file] = []int{size / 3}
	cache := t.TempDir()
	c := client(h, cache)
	c.Retries = -1 // give up at the first cut
	_, err := c.Get(context.Background(), repoID, "", []string{file})
	if err == nil || !strings.Contains(err.Error(), "Hugging Face model org/Tiny-GGUF, file tiny-Q4_K_M.gguf: download interrupted") {
		t.Fatalf("error %v", err)
	}
	checkNotUsable(t, cache, r, file)
	inc := filepath.Join(cache, RepoFolder(repoID), "blobs", hubtest.Sha256(r.Files[file])+".incomplete")
	if st, err := os.Stat(inc); err != nil || st.Size() != int64(size/3) {
		t.Fatalf("partial file: %v %v", st, err)
	}
	h.Reset()
	if _, err := client(h, cache).Get(context.Background(), repoID, "", []string{file}); err != nil {
		t.Fatal(err)
	}
	checkCached(t, cache, repoID, r, file)
	if want := []string{"bytes=" + itoa(size/3) + "-"}; !reflect.DeepEqual(h.RangeHeaders(), want) {
		t.Errorf("ranges %q, want %q", h.RangeHeaders(), want)
	}
	if h.Sent() != int64(size-size/3) {
		t.Errorf("resumed transfer sent %d bytes, want %d", h.Sent(), size-size/3)
	}
}

// checkNotUsable: no blob and no snapshot entry for file.
func checkNotUsable(t *testing.T, cache string, r *hubtest.Repo, file string) {
	t.Helper()
	repoDir := filepath.Join(cache, RepoFolder(repoID))
	if _, err := os.Lstat(filepath.Join(repoDir, "blobs", hubtest.Sha256(r.Files[file]))); err == nil {
		t.Error("a blob exists after a failed download")
	}
	if _, err := os.Lstat(filepath.Join(repoDir, "snapshots", r.Commit, file)); err == nil {
		t.Error("a snapshot entry exists after a failed download")
	}
}

func TestBadChecksumRefused(t *testing.T) {
	h, r := newHub(t)
	file := "tiny-Q8_0.gguf"
	h.Corrupt[file] = true
	cache := t.TempDir()
	_, err := client(h, cache).Get(context.Background(), repoID, "", []string{file})
	if err == nil || !strings.Contains(err.Error(), "file tiny-Q8_0.gguf: refused: checksum mismatch: the download's sha256 is") {
		t.Fatalf("error %v", err)
	}
	checkNotUsable(t, cache, r, file)
	if _, err := os.Stat(filepath.Join(cache, RepoFolder(repoID), "blobs", hubtest.Sha256(r.Files[file])+".incomplete")); err == nil {
		t.Error("the corrupt download was kept for resuming")
	}
	// Fixed on the Hub: the next run succeeds.
	h.Mu.Lock()
	h.Corrupt[file] = false
	h.Mu.Unlock()
	if _, err := client(h, cache).Get(context.Background(), repoID, "", []string{file}); err != nil {
		t.Fatal(err)
	}
	checkCached(t, cache, repoID, r, file)
}

func TestTokens(t *testing.T) {
	h, r := newHub(t)
	r.Token = "hf_good"
	file := "tiny-Q8_0.gguf"
	for _, tc := range []struct {
		token, want string
	}{
		{"", "Hugging Face model org/Tiny-GGUF: 401 Unauthorized: the repository does not exist, or it is private or gated and needs a token (set HF_TOKEN or --token-source)"},
		{"hf_revoked", "Hugging Face model org/Tiny-GGUF: 401 Unauthorized: the token from $HF_TOKEN was refused (invalid, expired or revoked?)"},
		{"hf_good", ""},
	} {
		cache := t.TempDir()
		c := client(h, cache)
		c.Token, c.TokenFrom = tc.token, "$HF_TOKEN"
		_, err := c.Get(context.Background(), repoID, "", []string{file})
		if tc.want == "" {
			if err != nil {
				t.Fatalf("token %q: %v", tc.token, err)
			}
			checkCached(t, cache, repoID, r, file) // and the CDN refuses requests that carry the token
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("token %q: error %v\nwant %q", tc.token, err, tc.want)
		}
		if strings.Contains(err.Error(), "hf_revoked") {
			t.Error("the error shows the token")
		}
		checkNotUsable(t, cache, r, file)
	}
}

func TestMissingRepoAndFile(t *testing.T) {
	h, _ := newHub(t)
	cache := t.TempDir()
	for _, tc := range []struct {
		repo, token string
		files       []string
		want        string
	}{
		{"org/absent", "hf_any", nil, "Hugging Face model org/absent: 404: the repository does not exist on " + h.URL},
		{"org/absent", "", nil, "Hugging Face model org/absent: 401 Unauthorized: the repository does not exist, or it is private"},
		{repoID, "", []string{"tiny-Q2_K.gguf"}, "Hugging Face model org/Tiny-GGUF, file tiny-Q2_K.gguf: not in the repository at revision main (GGUF files there: mmproj-f16.gguf, tiny-Q4_K_M.gguf, tiny-Q8_0.gguf)"},
		{repoID, "", []string{"../escape.gguf"}, "file ../escape.gguf: not a file name inside a repository"},
	} {
		c := client(h, cache)
		c.Token = tc.token
		_, err := c.Get(context.Background(), tc.repo, "", tc.files)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: error %v\nwant %q", tc.repo, tc.files, err, tc.want)
		}
	}
	_, err := client(h, cache).Get(context.Background(), repoID, "v9", nil)
	if err == nil || !strings.Contains(err.Error(), "org/Tiny-GGUF at revision v9: 404: revision v9 not found") {
		t.Errorf("revision: %v", err)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Errorf("the cache was written: %v", ents)
	}
}

func TestOffline(t *testing.T) {
	h, r := newHub(t)
	cache := t.TempDir()
	c := client(h, cache)
	c.Offline = true
	_, err := c.Get(context.Background(), repoID, "", []string{"tiny-Q8_0.gguf"})
	want := "Hugging Face model org/Tiny-GGUF, file tiny-Q8_0.gguf: not in the Hugging Face cache " + cache + ", and HF_HUB_OFFLINE is set"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v\nwant %q", err, want)
	}
	if _, err := c.Get(context.Background(), repoID, "", nil); err == nil || !strings.Contains(err.Error(), "no GGUF model of it is in the Hugging Face cache") {
		t.Fatalf("error %v", err)
	}
	if n := h.Count(""); n != 0 {
		t.Errorf("%d requests while offline", n)
	}
	if _, err := client(h, cache).Get(context.Background(), repoID, "", []string{"tiny-Q8_0.gguf"}); err != nil {
		t.Fatal(err)
	}
	h.Reset()
	snap, err := c.Get(context.Background(), repoID, "", nil) // the cached model is chosen
	if err != nil || !reflect.DeepEqual(snap.Files, []string{"tiny-Q8_0.gguf"}) || snap.Commit != r.Commit {
		t.Fatalf("offline with a cached copy: %+v %v", snap, err)
	}
	if n := h.Count(""); n != 0 {
		t.Errorf("%d requests while offline", n)
	}
}

func TestEnvironment(t *testing.T) {
	h, r := newHub(t)
	env := map[string]string{"HF_ENDPOINT": h.URL + "/", "HF_HUB_OFFLINE": "0"}
	ep, off := Environment(func(k string) string { return env[k] })
	if ep != h.URL || off {
		t.Fatalf("endpoint %q offline %v", ep, off)
	}
	cache := t.TempDir()
	c := &Client{Endpoint: ep, CacheDir: cache}
	if _, err := c.Get(context.Background(), repoID, "", []string{"tiny-Q8_0.gguf"}); err != nil {
		t.Fatal(err)
	}
	checkCached(t, cache, repoID, r, "tiny-Q8_0.gguf")
	if h.Count("GET /api/models/org/Tiny-GGUF/revision/main") != 1 {
		t.Errorf("%d model info requests", h.Count("GET /api/models/org/Tiny-GGUF/revision/main"))
	}
	for v, want := range map[string]bool{"1": true, "TRUE": true, "yes": true, "on": true, "0": false, "": false, "no": false} {
		if _, off := Environment(func(k string) string {
			if k == "HF_HUB_OFFLINE" {
				return v
			}
			return ""
		}); off != want {
			t.Errorf("HF_HUB_OFFLINE=%q: offline %v", v, off)
		}
	}
	if ep, _ := Environment(func(string) string { return "" }); ep != DefaultEndpoint {
		t.Errorf("default endpoint %q", ep)
	}
}

func TestSplitShardsAndRevisions(t *testing.T) {
	h := hubtest.New(t)
	files := hubtest.Shards(t, "big-Q8_0", 3, 5)
	files["other-F16.gguf"] = []byte("GGUF other")
	r := h.Add("org/Big-GGUF", files)
	r.Refs["v1"] = r.Commit
	cache := t.TempDir()
	want := []string{"big-Q8_0-00001-of-00003.gguf", "big-Q8_0-00002-of-00003.gguf", "big-Q8_0-00003-of-00003.gguf"}
	snap, err := client(h, cache).Get(context.Background(), "org/Big-GGUF", "v1", []string{"big-Q8_0-00002-of-00003.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap.Files, want) {
		t.Errorf("files %q", snap.Files)
	}
	for _, f := range want {
		if b, err := os.ReadFile(filepath.Join(snap.Dir, f)); err != nil || !bytes.Equal(b, files[f]) {
			t.Errorf("%s: %v", f, err)
		}
	}
	repoDir := filepath.Join(cache, RepoFolder("org/Big-GGUF"))
	if b, err := os.ReadFile(filepath.Join(repoDir, "refs", "v1")); err != nil || string(b) != r.Commit {
		t.Errorf("refs/v1 %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(repoDir, "refs", "main")); err == nil {
		t.Error("refs/main written for revision v1")
	}
	// Automatic choice takes the complete split set over the F16 file.
	snap, err = client(h, t.TempDir()).Get(context.Background(), "org/Big-GGUF", r.Commit, nil)
	if err != nil || !reflect.DeepEqual(snap.Files, want) {
		t.Errorf("auto choice %+v %v", snap, err)
	}
}

func TestConcurrentDownloadsShareOneTransfer(t *testing.T) {
	h, r := newHub(t)
	h.Delay = 200 * time.Millisecond
	cache := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = client(h, cache).Get(context.Background(), repoID, "", []string{"tiny-Q8_0.gguf"})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkCached(t, cache, repoID, r, "tiny-Q8_0.gguf")
	if n := h.Count("GET /cdn/"); n != 1 {
		t.Errorf("%d transfers of the blob, want 1 (the lock makes the others wait)", n)
	}
}

// failingWriter fails with err once more than n bytes were written.
type failingWriter struct {
	w   io.Writer
	n   int
	err error
}

func (f *failingWriter) Write(b []byte) (int, error) {
	if len(b) > f.n {
		k, _ := f.w.Write(b[:f.n])
		f.n = 0
		return k, f.err
	}
	f.n -= len(b)
	return f.w.Write(b)
}

func TestDiskFull(t *testing.T) {
	h, r := newHub(t)
	cache := t.TempDir()
	c := client(h, cache)
	c.wrapWriter = func(w io.Writer) io.Writer { return &failingWriter{w: w, n: 1000, err: syscall.ENOSPC} }
	_, err := c.Get(context.Background(), repoID, "", []string{"tiny-Q8_0.gguf"})
	if err == nil || !strings.Contains(err.Error(), "Hugging Face model org/Tiny-GGUF, file tiny-Q8_0.gguf: download failed") ||
		!strings.Contains(err.Error(), "no space left on device") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v", err)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Error("the error does not wrap ENOSPC")
	}
	checkNotUsable(t, cache, r, "tiny-Q8_0.gguf")
	if h.Count("GET /cdn/") != 1 {
		t.Error("a disk error was retried")
	}
}

func TestCacheNotWritable(t *testing.T) {
	h, _ := newHub(t)
	parent := t.TempDir()
	var cache, want string
	if os.Geteuid() == 0 { // root writes anywhere: a cache below a file
		f := filepath.Join(parent, "file")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		cache, want = filepath.Join(f, "hub"), "not a directory"
	} else {
		cache = filepath.Join(parent, "hub")
		if err := os.Mkdir(cache, 0o555); err != nil {
			t.Fatal(err)
		}
		want = "the Hugging Face cache " + cache + " is not writable"
	}
	_, err := client(h, cache).Get(context.Background(), repoID, "", []string{"tiny-Q8_0.gguf"})
	if err == nil || !strings.Contains(err.Error(), "Hugging Face model org/Tiny-GGUF, file tiny-Q8_0.gguf: locking the blob") ||
		!strings.Contains(err.Error(), want) {
		t.Fatalf("error %v\nwant %q", err, want)
	}
	// The explanation of a permission or read-only file system error (what
	// a non-root run of this test meets above).
	for _, e := range []error{syscall.EACCES, syscall.EROFS} {
		err := cacheErr("/c", &os.PathError{Op: "mkdir", Path: "/c/.locks", Err: e})
		if !strings.Contains(err.Error(), "the Hugging Face cache /c is not writable (mkdir /c/.locks: ") ||
			!strings.Contains(err.Error(), "point HF_HOME, HF_HUB_CACHE or --hf-cache at a writable directory") {
			t.Errorf("%v: %v", e, err)
		}
	}
}

func TestProgressLines(t *testing.T) {
	h, _ := newHub(t)
	var log bytes.Buffer
	c := client(h, t.TempDir())
	c.Progress, c.ProgressEvery = &log, time.Nanosecond
	h.Delay = 10 * time.Millisecond
	if _, err := c.Get(context.Background(), repoID, "", []string{"tiny-Q8_0.gguf"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("progress %q", log.String())
	}
	if !strings.HasPrefix(lines[0], "org/Tiny-GGUF tiny-Q8_0.gguf: downloading (") {
		t.Errorf("first line %q", lines[0])
	}
	mid := lines[len(lines)-2]
	if !strings.Contains(mid, " of ") || !strings.Contains(mid, "%)") || !strings.Contains(mid, "/s") {
		t.Errorf("progress line %q", mid)
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, " in ") {
		t.Errorf("last line %q", last)
	}
	// A terminal gets a bar.
	log.Reset()
	c = client(h, t.TempDir())
	c.Progress, c.Terminal = &log, true
	if _, err := c.Get(context.Background(), repoID, "", []string{"tiny-Q8_0.gguf"}); err != nil {
		t.Fatal(err)
	}
	if s := log.String(); !strings.Contains(s, "org/Tiny-GGUF tiny-Q8_0.gguf") || !strings.Contains(s, "100%") || !strings.Contains(s, "\r") {
		t.Errorf("bar %q", s)
	}
}

func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  []string
		err   string
	}{
		{[]string{"m-Q8_0.gguf", "m-Q4_K_M.gguf", "m-F16.gguf"}, []string{"m-Q4_K_M.gguf"}, ""},
		{[]string{"m-F16.gguf", "m.q8_0.gguf", "README.md"}, []string{"m.q8_0.gguf"}, ""},
		{[]string{"m-BF16.gguf", "m-F16.gguf"}, []string{"m-F16.gguf"}, ""},
		{[]string{"mmproj-Q4_K_M.gguf", "m-Q6_K.gguf"}, []string{"m-Q6_K.gguf"}, ""},
		{[]string{"m-Q4_0_4_4.gguf", "m-Q4_0.gguf"}, []string{"m-Q4_0.gguf"}, ""},
		{[]string{"b-Q4_K_M.gguf", "a-Q4_K_M.gguf"}, []string{"a-Q4_K_M.gguf"}, ""},
		{[]string{"Q4_K_M/m-00001-of-00002.gguf", "Q4_K_M/m-00002-of-00002.gguf", "m-Q8_0.gguf"},
			[]string{"Q4_K_M/m-00001-of-00002.gguf", "Q4_K_M/m-00002-of-00002.gguf"}, ""},
		{[]string{"m-Q4_K_M-00001-of-00002.gguf", "m-Q8_0.gguf"}, []string{"m-Q8_0.gguf"}, ""}, // incomplete set
		{[]string{"m-Q2_K.gguf", "m-IQ4_XS.gguf"}, nil, "none of its GGUF files has a quantization this server chooses by itself"},
		{[]string{"model.safetensors", "config.json"}, nil, "no .gguf file in the repository"},
	} {
		got, err := Choose(tc.names)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.names, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %q %v, want %q", tc.names, got, err, tc.want)
		}
	}
	h, r := newHub(t)
	snap, err := client(h, t.TempDir()).Get(context.Background(), repoID, "", nil)
	if err != nil || !reflect.DeepEqual(snap.Files, []string{"tiny-Q4_K_M.gguf"}) {
		t.Fatalf("auto choice %+v %v", snap, err)
	}
	if b, err := os.ReadFile(snap.Paths()[0]); err != nil || !bytes.Equal(b, r.Files["tiny-Q4_K_M.gguf"]) {
		t.Errorf("chosen file: %v", err)
	}
}

func TestTokenSources(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "tok")
	if err := os.WriteFile(tokFile, []byte("hf_file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("hf_login\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		src       string
		env       map[string]string
		tok, from string
		err       string
	}{
		{"", map[string]string{"HF_TOKEN": "hf_env", "HF_HOME": dir}, "hf_env", "$HF_TOKEN", ""},
		{"cache", map[string]string{"HF_HOME": dir}, "hf_login", filepath.Join(dir, "token"), ""},
		{"cache", map[string]string{"HF_HOME": t.TempDir()}, "", "", ""},
		{"cache", map[string]string{"HF_TOKEN_PATH": tokFile}, "hf_file", tokFile, ""},
		{"none", map[string]string{"HF_TOKEN": "hf_env"}, "", "", ""},
		{"literal:hf_lit", nil, "hf_lit", "--token-source literal:…", ""},
		{"env:MY_TOK", map[string]string{"MY_TOK": "hf_my"}, "hf_my", "$MY_TOK", ""},
		{"env:MY_TOK", nil, "", "", "token source env:MY_TOK: MY_TOK is not set"},
		{"path:" + tokFile, nil, "hf_file", tokFile, ""},
		{"path:/nonexistent/tok", nil, "", "", "token source path:/nonexistent/tok: open /nonexistent/tok"},
		{"secret:hf_x", nil, "", "", `unknown token source "secret:…"`},
		{"env:", nil, "", "", `"env:" names nothing after the colon`},
	} {
		tok, from, err := Token(tc.src, env(tc.env))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil || tok != tc.tok || from != tc.from {
			t.Errorf("%q: %q from %q, %v; want %q from %q", tc.src, tok, from, err, tc.tok, tc.from)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
