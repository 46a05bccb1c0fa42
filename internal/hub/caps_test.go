package hub

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mistralrs/internal/smallfile"
	"mistralrs/internal/testutil"
)

// A token file holds one token: a larger file, or one that never ends, is
// refused by name (path:FILE) or is no token (the login's file).
func TestTokenFileCapped(t *testing.T) {
	dir := t.TempDir()
	big := testutil.SparseFile(t, filepath.Join(dir, "big"), smallfile.Token+1)
	zero := testutil.ZeroLink(t, filepath.Join(dir, "zero"))
	for src, want := range map[string]string{
		"path:" + big:  "token source path:" + big + ": larger than 64 KiB",
		"path:" + zero: "token source path:" + zero + ": is a character device, not a regular file",
	} {
		if _, _, err := Token(src, func(string) string { return "" }); err == nil || err.Error() != want {
			t.Errorf("%s: %v\nwant %s", src, err, want)
		}
	}
	tok, from, err := Token("cache", func(k string) string {
		if k == "HF_TOKEN_PATH" {
			return zero
		}
		return ""
	})
	if tok != "" || from != "" || err != nil {
		t.Errorf("cache with a token file that never ends: %q from %q, %v; want no token", tok, from, err)
	}
}

// A cached ref that never ends is no commit: the Hub is asked, and the ref
// is written again.
func TestCachedRefCapped(t *testing.T) {
	h, r := newHub(t)
	cache := t.TempDir()
	ref := testutil.ZeroLink(t, filepath.Join(cache, RepoFolder(repoID), "refs", "main"))
	snap, err := client(h, cache).Get(context.Background(), repoID, "", []string{"README.md"})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Commit != r.Commit {
		t.Errorf("commit %s, want %s", snap.Commit, r.Commit)
	}
	if b, err := os.ReadFile(ref); err != nil || string(b) != r.Commit {
		t.Errorf("refs/main = %q, %v; want the commit", b, err)
	}
}

// The model info is read whole: an answer that never ends stops at the cap
// with an error that says so.
func TestModelInfoCapped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat(" ", 1<<16))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c := &Client{Endpoint: srv.URL, CacheDir: t.TempDir(), RetryWait: time.Millisecond}
	_, err := c.Get(context.Background(), repoID, "", []string{"README.md"})
	want := "Hugging Face model " + repoID + ": the Hub's model info is larger than 64 MiB"
	if err == nil || err.Error() != want {
		t.Errorf("%v\nwant %s", err, want)
	}
}
