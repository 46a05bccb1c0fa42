// Package hub downloads model files from the Hugging Face Hub into the
// standard Hugging Face cache, the layout huggingface_hub writes and reads:
//
//	<hub cache>/models--ORG--NAME/blobs/<etag>           the file's bytes, named by the hub's ETag
//	                              snapshots/<commit>/FILE a relative link to ../../blobs/<etag>
//	                              refs/<revision>         the commit the revision pointed to
//	<hub cache>/.locks/models--ORG--NAME/<etag>.lock     held (flock) while a blob is written
//
// so that a model fetched here is found by huggingface-cli, transformers and
// llama.cpp, and the other way round. A blob is written as
// blobs/<etag>.incomplete, resumed with an HTTP Range request after an
// interruption, checked against the hub's checksum (the sha256 of an LFS
// file, the git blob hash of a small one) and only then renamed into blobs/
// and linked into the snapshot: a partial or corrupt file is never used.
//
// Only the server's startup (internal/config, cmd/mistralrs) uses this
// package; the engine and the HTTP server never reach the network.
package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"mistralrs/internal/smallfile"
)

// DefaultEndpoint is the Hub; HF_ENDPOINT replaces it (a mirror).
const DefaultEndpoint = "https://huggingface.co"

// Client fetches files of model repositories into one hub cache.
type Client struct {
	Endpoint  string // the Hub's base URL, without a trailing slash
	Token     string // bearer token; "" for none
	TokenFrom string // where Token came from, for messages ("HF_TOKEN", "--token-source path:…"); never the token
	CacheDir  string // the hub cache: the directory holding models--ORG--NAME folders
	Offline   bool   // HF_HUB_OFFLINE: use the cache only
	HTTP      *http.Client

	// Progress receives one progress bar per downloaded file (a terminal) or
	// a plain line every ProgressEvery (anything else); nil: silent.
	Progress      io.Writer
	Terminal      bool
	ProgressEvery time.Duration // default 5 s

	// Retries is how many times an interrupted transfer is resumed within
	// one call (default 5); RetryWait the pause before the first retry
	// (default 1 s, doubling).
	Retries   int
	RetryWait time.Duration
	// StallTimeout ends a transfer that receives no byte for this long
	// (default 60 s); it is then resumed like an interrupted one.
	StallTimeout time.Duration

	// wrapWriter, when set, wraps the writer of each blob (tests inject
	// write errors such as a full disk through it).
	wrapWriter func(io.Writer) io.Writer
}

// Environment reads the settings huggingface_hub reads: HF_ENDPOINT and
// HF_HUB_OFFLINE (1, true, yes or on, in any case). getenv nil means
// os.Getenv.
func Environment(getenv func(string) string) (endpoint string, offline bool) {
	if getenv == nil {
		getenv = os.Getenv
	}
	endpoint = strings.TrimRight(strings.TrimSpace(getenv("HF_ENDPOINT")), "/")
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	return endpoint, IsTrue(getenv("HF_HUB_OFFLINE"))
}

// IsTrue is huggingface_hub's reading of a boolean environment variable.
func IsTrue(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

// Error is a failed fetch: one line naming the repository, the file (when
// one is concerned) and the cause.
type Error struct {
	Repo     string
	Revision string
	File     string
	Status   int // HTTP status when the Hub answered with an error, else 0
	Msg      string
	Err      error // the underlying error, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("Hugging Face model " + e.Repo)
	if e.Revision != "" && e.Revision != "main" {
		b.WriteString(" at revision " + e.Revision)
	}
	if e.File != "" {
		b.WriteString(", file " + e.File)
	}
	b.WriteString(": " + e.Msg)
	if e.Err != nil {
		b.WriteString(": " + oneLine(e.Err.Error()))
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Snapshot is the result of Get: the files, present in the cache.
type Snapshot struct {
	Repo     string
	Revision string
	Commit   string
	Dir      string   // snapshots/<commit>
	Files    []string // repo-relative names ("/"-separated), shards in order
	MMProj   string   // the vision projector fetched with the model (GetModel), repo-relative; "": none
	Fetched  bool     // something was downloaded
}

// Paths returns the local paths of the files.
func (s *Snapshot) Paths() []string {
	out := make([]string, len(s.Files))
	for i, f := range s.Files {
		out[i] = filepath.Join(s.Dir, filepath.FromSlash(f))
	}
	return out
}

// RepoFolder is the cache folder name of a model repository: models--ORG--NAME.
func RepoFolder(repo string) string { return "models--" + strings.ReplaceAll(repo, "/", "--") }

var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Get makes sure the files of repo at revision ("" means main) are in the
// cache and returns where. files are repo-relative; a shard of a split GGUF
// brings its whole set. With no files, a GGUF model is chosen (Choose).
//
// When the cache already holds the revision's snapshot with the files (or,
// without files, a GGUF model Choose accepts), nothing is asked of the
// network. Otherwise, unless Offline, the Hub's model info gives the commit
// and the file list, and the missing files are downloaded.
func (c *Client) Get(ctx context.Context, repo, revision string, files []string) (*Snapshot, error) {
	return c.GetModel(ctx, repo, revision, files, Projector{})
}

// Projector says which vision projector (mmproj file) GetModel brings
// with the model.
type Projector struct {
	File     string // a repo-relative name; "" for none, or to choose one
	Choose   bool   // without File: choose one (ChooseMMProj), if the repository has one
	Required bool   // with Choose: a repository without one is an error (a multimodal model)
}

// GetModel is Get with the model's vision projector, named in
// Snapshot.MMProj. A projector to choose is chosen among those in the
// cached snapshot when it has one, so that a model cached with its
// projector starts offline; when the snapshot has none, the Hub is asked
// only if one is Required (an optional one is looked for when the model
// itself is downloaded).
func (c *Client) GetModel(ctx context.Context, repo, revision string, files []string, proj Projector) (*Snapshot, error) {
	if revision == "" {
		revision = "main"
	}
	fail := func(file, msg string, err error) error {
		return &Error{Repo: repo, Revision: revision, File: file, Msg: msg, Err: err}
	}
	named := files
	if proj.File != "" {
		named = append(append([]string(nil), files...), proj.File)
	}
	for _, f := range named {
		if !safeRepoPath(f) {
			return nil, fail(f, "not a file name inside a repository", nil)
		}
	}
	wanted := expandShards(files)
	repoDir := filepath.Join(c.CacheDir, RepoFolder(repo))

	// The cache first: no network when it has what is asked.
	modelCached := false
	if commit := cachedCommit(repoDir, revision); commit != "" {
		snap := &Snapshot{Repo: repo, Revision: revision, Commit: commit, Dir: filepath.Join(repoDir, "snapshots", commit)}
		modelCached = cachedModel(snap, wanted)
		if modelCached && cachedProjector(snap, proj) {
			return snap, nil
		}
	}
	if c.Offline {
		return nil, c.offlineError(fail, wanted, proj, modelCached)
	}
	return c.fromHub(ctx, repo, revision, wanted, proj, fail)
}

// fromHub is GetModel's network part: the Hub's file list at revision,
// the model's files (chosen when wanted is empty) and its projector,
// downloaded where missing, and the ref.
func (c *Client) fromHub(ctx context.Context, repo, revision string, wanted []string, proj Projector, fail func(file, msg string, err error) error) (*Snapshot, error) {
	repoDir := filepath.Join(c.CacheDir, RepoFolder(repo))
	inf, err := c.modelInfo(ctx, repo, revision)
	if err != nil {
		return nil, err
	}
	commit := inf.Sha
	if !commitPattern.MatchString(commit) {
		return nil, fail("", fmt.Sprintf("the Hub's model info names no commit (sha %q)", commit), nil)
	}
	var siblings []string
	have := map[string]bool{}
	for _, s := range inf.Siblings {
		siblings = append(siblings, s.RFilename)
		have[s.RFilename] = true
	}
	sort.Strings(siblings)
	if len(wanted) == 0 {
		wanted, err = Choose(siblings)
		if err != nil {
			return nil, fail("", err.Error(), nil)
		}
	} else {
		for _, f := range wanted {
			if !have[f] {
				return nil, fail(f, "not in the repository at revision "+revision+ggufHint(siblings), nil)
			}
		}
	}
	snap := &Snapshot{Repo: repo, Revision: revision, Commit: commit, Dir: filepath.Join(repoDir, "snapshots", commit), Files: wanted}
	if snap.MMProj, err = projectorOf(siblings, have, wanted, proj); err != nil {
		return nil, fail(proj.File, err.Error(), nil)
	}
	fetch := wanted
	if snap.MMProj != "" {
		fetch = append(append([]string(nil), wanted...), snap.MMProj)
	}
	for _, f := range fetch {
		fetched, err := c.fetchFile(ctx, repo, revision, commit, repoDir, f)
		if err != nil {
			return nil, err
		}
		snap.Fetched = snap.Fetched || fetched
	}
	if revision != commit {
		if err := writeRef(repoDir, revision, commit); err != nil {
			return nil, fail("", "writing the cache's refs/"+revision, cacheErr(c.CacheDir, err))
		}
	}
	return snap, nil
}

// offlineError says what the cache lacks when nothing may be downloaded:
// the model (its files, or any model Choose accepts), else its projector.
func (c *Client) offlineError(fail func(file, msg string, err error) error, wanted []string, proj Projector, modelCached bool) error {
	const why = ", and HF_HUB_OFFLINE is set, so nothing is downloaded"
	switch {
	case !modelCached && len(wanted) == 0:
		return fail("", "no GGUF model of it is in the Hugging Face cache "+c.CacheDir+why, nil)
	case !modelCached:
		return fail(strings.Join(wanted, ", "), "not in the Hugging Face cache "+c.CacheDir+why, nil)
	case proj.File != "":
		return fail(proj.File, "not in the Hugging Face cache "+c.CacheDir+why, nil)
	}
	return fail("", "no vision projector (*mmproj*.gguf) of it is in the Hugging Face cache "+c.CacheDir+why, nil)
}

// cachedModel sets snap.Files to the wanted files when the snapshot holds
// them all, or without wanted files to a GGUF model Choose accepts among
// those it holds; false when it cannot.
func cachedModel(snap *Snapshot, wanted []string) bool {
	if len(wanted) > 0 {
		if missing := missingFiles(snap.Dir, wanted); len(missing) > 0 {
			return false
		}
		snap.Files = wanted
		return true
	}
	chosen, err := Choose(presentGGUF(snap.Dir))
	if err != nil {
		return false
	}
	snap.Files = chosen
	return true
}

// cachedProjector sets snap.MMProj to the projector proj asks for, from
// the snapshot's files; false when the snapshot lacks one it must have.
func cachedProjector(snap *Snapshot, proj Projector) bool {
	switch {
	case proj.File != "":
		if len(missingFiles(snap.Dir, []string{proj.File})) > 0 {
			return false
		}
		snap.MMProj = proj.File
	case proj.Choose:
		snap.MMProj = ChooseMMProj(presentGGUF(snap.Dir), snap.Files)
		return snap.MMProj != "" || !proj.Required
	}
	return true
}

// projectorOf is the projector proj asks for among a repository's files
// (siblings, sorted; have holds them), fetched with the model files.
func projectorOf(siblings []string, have map[string]bool, model []string, proj Projector) (string, error) {
	switch {
	case proj.File != "":
		if !have[proj.File] {
			return "", fmt.Errorf("not in the repository%s", mmprojHint(siblings))
		}
		return proj.File, nil
	case proj.Choose:
		p := ChooseMMProj(siblings, model)
		if p == "" && proj.Required {
			return "", fmt.Errorf("the repository has no vision projector (*mmproj*.gguf), which a multimodal model needs: give a local one with an absolute --mmproj path, or serve the model as text")
		}
		return p, nil
	}
	return "", nil
}

// mmprojHint lists a repository's projector files for an error message.
func mmprojHint(siblings []string) string {
	var g []string
	for _, s := range siblings {
		if isMMProj(s) {
			g = append(g, s)
		}
	}
	if len(g) == 0 {
		return " (it has no *mmproj*.gguf file)"
	}
	return " (mmproj files there: " + strings.Join(g, ", ") + ")"
}

// cachedCommit is the commit the cache knows for revision: refs/<revision>,
// or revision itself when it is a commit with a snapshot; "" when unknown.
func cachedCommit(repoDir, revision string) string {
	if commitPattern.MatchString(revision) {
		if st, err := os.Stat(filepath.Join(repoDir, "snapshots", revision)); err == nil && st.IsDir() {
			return revision
		}
		return ""
	}
	// A ref that cannot be read (or is no small file) is no commit: the Hub
	// is asked, and writeRef replaces it.
	b, err := smallfile.Read(filepath.Join(repoDir, "refs", filepath.FromSlash(revision)), smallfile.Ref)
	if err != nil {
		return ""
	}
	commit := strings.TrimSpace(string(b))
	if !commitPattern.MatchString(commit) {
		return ""
	}
	if st, err := os.Stat(filepath.Join(repoDir, "snapshots", commit)); err != nil || !st.IsDir() {
		return ""
	}
	return commit
}

// missingFiles are the files that do not open in the snapshot (absent, or a
// link whose blob is gone).
func missingFiles(dir string, files []string) []string {
	var out []string
	for _, f := range files {
		if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f))); err != nil || !st.Mode().IsRegular() {
			out = append(out, f)
		}
	}
	return out
}

// presentGGUF lists the GGUF files that open in a snapshot, repo-relative.
func presentGGUF(dir string) []string {
	var out []string
	for _, f := range presentFiles(dir) {
		if isGGUF(path.Base(f)) {
			out = append(out, f)
		}
	}
	return out
}

// safeRepoPath accepts a relative "/"-separated path without ".." or empty
// parts: it must stay inside the snapshot directory.
func safeRepoPath(f string) bool {
	if f == "" || strings.HasPrefix(f, "/") || strings.Contains(f, `\`) || strings.ContainsRune(f, 0) {
		return false
	}
	for _, part := range strings.Split(f, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// ggufHint lists a repository's GGUF files for an error message.
func ggufHint(siblings []string) string {
	var g []string
	for _, s := range siblings {
		if isGGUF(s) {
			g = append(g, s)
		}
	}
	if len(g) == 0 {
		return " (it has no .gguf file)"
	}
	if len(g) > 12 {
		g = append(g[:12], "…")
	}
	return " (GGUF files there: " + strings.Join(g, ", ") + ")"
}

// writeRef records that revision points to commit, atomically.
func writeRef(repoDir, revision, commit string) error {
	p := filepath.Join(repoDir, "refs", filepath.FromSlash(revision))
	if b, err := smallfile.Read(p, smallfile.Ref); err == nil && strings.TrimSpace(string(b)) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".ref-*")
	if err != nil {
		return err
	}
	_, werr := tmp.WriteString(commit)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// cacheErr explains an error writing to the cache.
func cacheErr(cache string, err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("the Hugging Face cache %s is not writable (%v); point HF_HOME, HF_HUB_CACHE or --hf-cache at a writable directory", cache, err)
	}
	return err
}

// modelInfo is GET {endpoint}/api/models/{repo}/revision/{revision}.
type modelInfo struct {
	Sha      string `json:"sha"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
	} `json:"siblings"`
}

func (c *Client) modelInfo(ctx context.Context, repo, revision string) (*modelInfo, error) {
	u := c.endpoint() + "/api/models/" + repo + "/revision/" + url.PathEscape(revision)
	req, err := c.newRequest(ctx, http.MethodGet, u)
	if err != nil {
		return nil, &Error{Repo: repo, Revision: revision, Msg: "bad Hub address", Err: err}
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return nil, &Error{Repo: repo, Revision: revision, Msg: "cannot reach the Hub at " + c.endpoint(), Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, c.statusError(resp, repo, revision, "")
	}
	body, err := smallfile.ReadAll(resp.Body, smallfile.HubJSON)
	if smallfile.Refused(err) {
		return nil, &Error{Repo: repo, Revision: revision, Msg: "the Hub's model info is " + err.Error()}
	}
	if err != nil {
		return nil, &Error{Repo: repo, Revision: revision, Msg: "cannot read the Hub's model info", Err: err}
	}
	var inf modelInfo
	if err := json.Unmarshal(body, &inf); err != nil {
		return nil, &Error{Repo: repo, Revision: revision, Msg: "the Hub's model info does not parse", Err: err}
	}
	return &inf, nil
}

// statusError turns a Hub error answer into an Error that says what to do.
func (c *Client) statusError(resp *http.Response, repo, revision, file string) error {
	code := resp.Header.Get("X-Error-Code")
	e := &Error{Repo: repo, Revision: revision, File: file, Status: resp.StatusCode}
	from := c.TokenFrom
	if from == "" {
		from = "the token source"
	}
	switch {
	case code == "GatedRepo":
		e.Msg = fmt.Sprintf("%d %s: a gated repository; accept its conditions on %s/%s", resp.StatusCode, http.StatusText(resp.StatusCode), c.endpoint(), repo)
		if c.Token == "" {
			e.Msg += " and give a token (HF_TOKEN or --token-source)"
		} else {
			e.Msg += " with the account of the token from " + from
		}
	case resp.StatusCode == http.StatusUnauthorized && c.Token == "":
		e.Msg = "401 Unauthorized: the repository does not exist, or it is private or gated and needs a token (set HF_TOKEN or --token-source)"
	case resp.StatusCode == http.StatusUnauthorized:
		e.Msg = "401 Unauthorized: the token from " + from + " was refused (invalid, expired or revoked?), or the repository does not exist"
	case resp.StatusCode == http.StatusForbidden:
		e.Msg = "403 Forbidden: no access to the repository"
		if c.Token != "" {
			e.Msg += " with the token from " + from + " (revoked, or without read access?)"
		} else {
			e.Msg += " without a token (set HF_TOKEN or --token-source)"
		}
	case resp.StatusCode == http.StatusNotFound && code == "RevisionNotFound":
		e.Msg = "404: revision " + revision + " not found"
	case resp.StatusCode == http.StatusNotFound && (code == "EntryNotFound" || file != ""):
		e.Msg = "404: the file is not in the repository at revision " + revision
	case resp.StatusCode == http.StatusNotFound:
		e.Msg = "404: the repository does not exist on " + c.endpoint()
	default:
		e.Msg = "the Hub answered " + resp.Status
	}
	if m := resp.Header.Get("X-Error-Message"); m != "" && e.Msg != "" && !strings.Contains(e.Msg, m) {
		e.Msg += " (the Hub says: " + oneLine(m) + ")"
	}
	return e
}

func (c *Client) endpoint() string {
	if c.Endpoint == "" {
		return DefaultEndpoint
	}
	return strings.TrimRight(c.Endpoint, "/")
}

func (c *Client) client() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

var defaultHTTP = &http.Client{Transport: func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = time.Minute
	return t
}()}

// newRequest makes a request with the token, sent only to the Hub's own
// host (never to the CDN it redirects to).
func (c *Client) newRequest(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "mistralrs-go (hf_hub compatible)")
	if c.Token != "" {
		if eu, err := url.Parse(c.endpoint()); err == nil && eu.Host == req.URL.Host {
			req.Header.Set("Authorization", "Bearer "+c.Token)
		}
	}
	return req, nil
}

// fileURL is {endpoint}/{repo}/resolve/{commit}/{file}, each part escaped.
func (c *Client) fileURL(repo, commit, file string) string {
	parts := strings.Split(file, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return c.endpoint() + "/" + repo + "/resolve/" + url.PathEscape(commit) + "/" + path.Join(parts...)
}

func isGGUF(name string) bool { return strings.EqualFold(path.Ext(name), ".gguf") }
