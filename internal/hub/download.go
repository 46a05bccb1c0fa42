package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// fileMeta is what the Hub's HEAD on a file's resolve URL says.
type fileMeta struct {
	etag     string // the blob's name: the sha256 of an LFS file, the git blob sha1 of a small one
	size     int64  // -1 when unknown
	location string // where the bytes are (the CDN for an LFS file)
}

// etagPattern is what a blob name may be: it becomes a file name.
var etagPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// fetchFile makes snapshots/<commit>/file a link to its verified blob,
// downloading the blob when the cache lacks it. It reports whether bytes
// were downloaded.
func (c *Client) fetchFile(ctx context.Context, repo, revision, commit, repoDir, file string) (bool, error) {
	fail := func(msg string, err error) error {
		return &Error{Repo: repo, Revision: revision, File: file, Msg: msg, Err: err}
	}
	pointer := filepath.Join(repoDir, "snapshots", commit, filepath.FromSlash(file))
	if st, err := os.Stat(pointer); err == nil && st.Mode().IsRegular() {
		return false, nil
	}
	meta, err := c.head(ctx, repo, revision, commit, file)
	if err != nil {
		return false, err
	}
	blob := filepath.Join(repoDir, "blobs", meta.etag)
	if blobComplete(blob, meta.size) {
		if err := link(blob, pointer); err != nil {
			return false, fail("linking it into the snapshot", cacheErr(c.CacheDir, err))
		}
		return false, nil
	}

	// One writer per blob, across processes: huggingface_hub's lock file,
	// so that a Python download of the same blob waits for us and we for it.
	lockPath := filepath.Join(c.CacheDir, ".locks", RepoFolder(repo), meta.etag+".lock")
	unlock, err := lockFile(ctx, lockPath, func() {
		c.printf("%s %s: waiting for another download of it (lock %s)\n", repo, file, lockPath)
	})
	if err != nil {
		return false, fail("locking the blob", cacheErr(c.CacheDir, err))
	}
	defer unlock()
	if blobComplete(blob, meta.size) { // written by whoever held the lock
		if err := link(blob, pointer); err != nil {
			return false, fail("linking it into the snapshot", cacheErr(c.CacheDir, err))
		}
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return false, fail("creating the blob directory", cacheErr(c.CacheDir, err))
	}
	incomplete := blob + ".incomplete"
	if err := c.download(ctx, repo, revision, file, meta, incomplete); err != nil {
		return false, err
	}
	if err := verify(incomplete, meta); err != nil {
		return false, fail("refused", err)
	}
	if err := os.Rename(incomplete, blob); err != nil {
		return false, fail("moving the verified download into blobs/", cacheErr(c.CacheDir, err))
	}
	if err := link(blob, pointer); err != nil {
		return false, fail("linking it into the snapshot", cacheErr(c.CacheDir, err))
	}
	return true, nil
}

// head asks the Hub for a file's metadata, following redirects within the
// Hub (a renamed repository) but not to another host (the CDN): the first
// answer of the Hub carries the headers that matter.
func (c *Client) head(ctx context.Context, repo, revision, commit, file string) (*fileMeta, error) {
	fail := func(msg string, err error) error {
		return &Error{Repo: repo, Revision: revision, File: file, Msg: msg, Err: err}
	}
	u := c.fileURL(repo, commit, file)
	hc := *c.client()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for hops := 0; ; hops++ {
		req, err := c.newRequest(ctx, http.MethodHead, u)
		if err != nil {
			return nil, fail("bad Hub address", err)
		}
		req.Header.Set("Accept-Encoding", "identity")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fail("cannot reach the Hub at "+c.endpoint(), err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			return nil, c.statusError(resp, repo, revision, file)
		}
		loc := resp.Header.Get("Location")
		isRedirect := resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != ""
		if isRedirect {
			next, err := req.URL.Parse(loc)
			if err != nil {
				return nil, fail("the Hub redirects to a bad address", err)
			}
			loc = next.String()
			if next.Host == req.URL.Host && resp.Header.Get("X-Linked-Etag") == "" && resp.Header.Get("ETag") == "" {
				if hops >= 5 {
					return nil, fail("too many redirects", nil)
				}
				u = loc
				continue
			}
		} else {
			loc = u
		}
		etag := normalizeETag(resp.Header.Get("X-Linked-Etag"))
		if etag == "" {
			etag = normalizeETag(resp.Header.Get("ETag"))
		}
		if !etagPattern.MatchString(etag) {
			return nil, fail(fmt.Sprintf("the Hub sent no usable ETag (%q); cannot name the blob", etag), nil)
		}
		if rc := resp.Header.Get("X-Repo-Commit"); rc != "" && rc != commit {
			return nil, fail(fmt.Sprintf("the Hub serves commit %s, not the %s asked for", rc, commit), nil)
		}
		size := int64(-1)
		for _, h := range []string{"X-Linked-Size", "Content-Length"} {
			if v := resp.Header.Get(h); v != "" {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
					size = n
					break
				}
			}
		}
		if isRedirect && resp.Header.Get("X-Linked-Size") == "" {
			size = -1 // Content-Length of a redirect is the redirect's body
		}
		return &fileMeta{etag: etag, size: size, location: loc}, nil
	}
}

// normalizeETag drops a weak marker and the quotes.
func normalizeETag(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "W/")
	return strings.Trim(s, `"`)
}

// blobComplete: a blob exists only once verified, so its presence (with the
// right size when known) means it is complete.
func blobComplete(blob string, size int64) bool {
	st, err := os.Stat(blob)
	return err == nil && st.Mode().IsRegular() && (size < 0 || st.Size() == size)
}

// link makes pointer a relative symbolic link to blob, as huggingface_hub
// does, replacing a stale link.
func link(blob, pointer string) error {
	if err := os.MkdirAll(filepath.Dir(pointer), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(pointer), blob)
	if err != nil {
		rel = blob
	}
	for try := 0; ; try++ {
		if st, err := os.Stat(pointer); err == nil && st.Mode().IsRegular() {
			return nil // already linked (a snapshot's files never change)
		}
		if _, err := os.Lstat(pointer); err == nil { // a broken link
			if err := os.Remove(pointer); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		err := os.Symlink(rel, pointer)
		if err == nil || !errors.Is(err, fs.ErrExist) {
			return err
		}
		// Another process linked it meanwhile: fine if it leads to the blob.
		if st, serr := os.Stat(pointer); serr == nil && st.Mode().IsRegular() {
			return nil
		}
		if try == 2 {
			return err
		}
	}
}

// lockFile takes an exclusive flock on path, polling so that ctx can end
// the wait; waiting is called once if another process holds it.
func lockFile(ctx context.Context, path string, waiting func()) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	fd, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	said := false
	for {
		err := unix.Flock(int(fd.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			fd.Close()
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		if !said && waiting != nil {
			waiting()
			said = true
		}
		select {
		case <-ctx.Done():
			fd.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return func() {
		_ = unix.Flock(int(fd.Fd()), unix.LOCK_UN)
		fd.Close()
	}, nil
}

// retryable marks a transfer error worth resuming (the network, not the disk).
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// download writes the blob's bytes to incomplete, resuming what is there
// and retrying an interrupted transfer.
func (c *Client) download(ctx context.Context, repo, revision, file string, meta *fileMeta, incomplete string) error {
	retries, wait := c.Retries, c.RetryWait
	if retries == 0 {
		retries = 5
	}
	if wait == 0 {
		wait = time.Second
	}
	var bar *progress
	for attempt := 0; ; attempt++ {
		err := c.transfer(ctx, meta, incomplete, &bar, repo+" "+file)
		if err == nil {
			bar.finish()
			return nil
		}
		bar.abort()
		var r retryable
		if !errors.As(err, &r) || attempt >= retries || ctx.Err() != nil {
			var he *Error
			if errors.As(err, &he) {
				he.Repo, he.Revision, he.File = repo, revision, file
				return he
			}
			msg := "download failed (the partial file " + incomplete + " is kept; the next start resumes it)"
			if errors.As(err, &r) {
				msg = fmt.Sprintf("download interrupted %d times (the partial file %s is kept; the next start resumes it)", attempt+1, incomplete)
			}
			return &Error{Repo: repo, Revision: revision, File: file, Msg: msg, Err: cacheErr(c.CacheDir, err)}
		}
		c.printf("%s %s: %v; resuming\n", repo, file, err)
		select {
		case <-ctx.Done():
			return &Error{Repo: repo, Revision: revision, File: file, Msg: "download canceled", Err: ctx.Err()}
		case <-time.After(wait << min(attempt, 5)):
		}
	}
}

// writeError is a failure to write the blob (a full disk): not retried.
type writeError struct{ err error }

func (w writeError) Error() string { return w.err.Error() }
func (w writeError) Unwrap() error { return w.err }

// transfer makes one request for the bytes incomplete lacks.
func (c *Client) transfer(ctx context.Context, meta *fileMeta, incomplete string, bar **progress, label string) error {
	fd, err := os.OpenFile(incomplete, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return err
	}
	off := st.Size()
	if meta.size >= 0 && off > meta.size {
		if err := fd.Truncate(0); err != nil {
			return err
		}
		off = 0
	}
	if meta.size >= 0 && off == meta.size && off > 0 {
		return nil // complete; verified next
	}
	stall := c.StallTimeout
	if stall <= 0 {
		stall = time.Minute
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchdog := time.AfterFunc(stall, cancel)
	defer watchdog.Stop()
	req, err := c.newRequest(tctx, http.MethodGet, meta.location)
	if err != nil {
		return err
	}
	req.Header.Set("Accept-Encoding", "identity")
	if off > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
	}
	resp, err := c.client().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		if tctx.Err() != nil {
			return retryable{fmt.Errorf("no answer for %v", stall)}
		}
		return retryable{err}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && off > 0:
		var start int64 = -1
		fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-", &start)
		if start != off {
			if err := fd.Truncate(0); err != nil {
				return err
			}
			return retryable{fmt.Errorf("the server resumed at byte %d, not %d; starting over", start, off)}
		}
	case resp.StatusCode == http.StatusOK:
		if off > 0 { // no Range support: from the start
			if err := fd.Truncate(0); err != nil {
				return err
			}
			off = 0
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		if err := fd.Truncate(0); err != nil {
			return err
		}
		return retryable{fmt.Errorf("the server refused to resume at byte %d; starting over", off)}
	case resp.StatusCode >= 500:
		return retryable{fmt.Errorf("the server answered %s", resp.Status)}
	default:
		u, _ := url.Parse(meta.location)
		host := ""
		if u != nil {
			host = u.Host
		}
		return &Error{Status: resp.StatusCode, Msg: fmt.Sprintf("the download from %s answered %s", host, resp.Status)}
	}
	if _, err := fd.Seek(off, io.SeekStart); err != nil {
		return err
	}
	if *bar == nil {
		*bar = c.newProgress(label, meta.size, off)
	}
	var w io.Writer = fd
	if c.wrapWriter != nil {
		w = c.wrapWriter(w)
	}
	body := &stallReader{r: resp.Body, reset: func() { watchdog.Reset(stall) }}
	n, err := copyBody(w, body, *bar)
	if err != nil {
		var we writeError
		if errors.As(err, &we) {
			return fmt.Errorf("writing %s: %w", incomplete, we.err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if tctx.Err() != nil {
			return retryable{fmt.Errorf("transfer stalled at byte %d: no data for %v", off+n, stall)}
		}
		return retryable{fmt.Errorf("transfer cut at byte %d: %w", off+n, err)}
	}
	if err := fd.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", incomplete, err)
	}
	if err := fd.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", incomplete, err)
	}
	if meta.size >= 0 && off+n != meta.size {
		return retryable{fmt.Errorf("transfer ended at byte %d of %d", off+n, meta.size)}
	}
	return nil
}

// stallReader restarts the stall watchdog on every read that brings bytes.
type stallReader struct {
	r     io.Reader
	reset func()
}

func (s *stallReader) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	if n > 0 {
		s.reset()
	}
	return n, err
}

// copyBody copies r to w, telling write errors from read errors.
func copyBody(w io.Writer, r io.Reader, bar *progress) (int64, error) {
	buf := make([]byte, 1<<20)
	var n int64
	for {
		k, rerr := r.Read(buf)
		if k > 0 {
			m, werr := w.Write(buf[:k])
			n += int64(m)
			bar.add(int64(m))
			if werr == nil && m < k {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return n, writeError{werr}
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

var (
	sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	sha1Pattern   = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// verify checks the downloaded bytes against the ETag: the sha256 of the
// content for an LFS file, the git blob sha1 for a small one. A file that
// does not match is removed: resuming it could never succeed.
func verify(p string, meta *fileMeta) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if meta.size >= 0 && st.Size() != meta.size {
		return fmt.Errorf("%d bytes downloaded, the Hub says %d", st.Size(), meta.size)
	}
	var h hash.Hash
	kind := ""
	switch {
	case sha256Pattern.MatchString(meta.etag):
		h, kind = sha256.New(), "sha256"
	case sha1Pattern.MatchString(meta.etag):
		h, kind = sha1.New(), "git blob sha1"
		fmt.Fprintf(h, "blob %d\x00", st.Size())
	default:
		return nil // an ETag that is no checksum: the size is all we can check
	}
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != meta.etag {
		f.Close()
		os.Remove(p)
		return fmt.Errorf("checksum mismatch: the download's %s is %s, the Hub's is %s; the corrupt download was removed", kind, got, meta.etag)
	}
	return nil
}
