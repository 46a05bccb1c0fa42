package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/term"

	"mistralrs/internal/gguf"
	"mistralrs/internal/hub"
	"mistralrs/internal/smallfile"
)

// ModelSource is a model's GGUF files found on local disk. ResolveModel
// never reaches the network: a Hugging Face id must be in the local HF cache,
// where Fetch (run first by the commands, at startup) downloads it.
type ModelSource struct {
	ID       string   // what clients name the model: model_id as given, else the file name without ".gguf" and shard suffix
	Dir      string   // directory the files were looked up in (the snapshot directory for an HF id)
	Files    []string // the model's GGUF files, shards in order; Files[0] is the file to open
	HFRepo   string   // "org/name" when found in the Hugging Face cache
	Revision string   // the snapshot's commit when found in the Hugging Face cache
	MMProj   string   // the vision projector (Projector); "": a text model
}

// ResolveModel finds the GGUF files of a model entry:
//   - model_id a local directory: the files named by quantized_file inside it,
//     else its one GGUF model (the shards of a split model count as one);
//   - model_id a local .gguf file: that file (and its sibling shards);
//   - no model_id: the quantized_file paths themselves;
//   - otherwise a Hugging Face id ("org/name") looked up in the local hub
//     cache (device.hf_cache, $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub),
//     at the snapshot hf_revision's ref points to (refs/main by default), or
//     the snapshot of hf_revision when it is a commit;
//
// and its vision projector, as Projector finds it in the same directory.
//
// getenv nil means os.Getenv.
func ResolveModel(m ModelConfig, getenv func(string) string) (*ModelSource, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if _, err := m.format(); err != nil {
		return nil, err
	}
	names := []string(m.Format.QuantizedFile)
	id := m.ModelID
	if id == "" {
		if len(names) == 0 {
			return nil, errors.New("no model given: pass -m (a directory or a Hugging Face id) or -f (GGUF files)")
		}
		files, err := modelFiles("", names, false)
		if err != nil {
			return nil, err
		}
		return withProjector(m, "", &ModelSource{ID: gguf.ModelName(files[0]), Dir: filepath.Dir(files[0]), Files: files})
	}

	if st, err := os.Stat(id); err == nil {
		dir := id
		if !st.IsDir() {
			if len(names) > 0 {
				return nil, fmt.Errorf("model %q is a file; with -f (quantized_file), -m must be the directory that holds the files", id)
			}
			if !isGGUF(id) {
				return nil, fmt.Errorf("model %q is neither a directory nor a .gguf file", id)
			}
			dir, names = filepath.Dir(id), []string{filepath.Base(id)}
		}
		files, err := modelFiles(dir, names, false)
		if err != nil {
			return nil, err
		}
		return withProjector(m, dir, &ModelSource{ID: id, Dir: dir, Files: files})
	}
	if looksLikePath(id) {
		return nil, fmt.Errorf("model %q: no such file or directory", id)
	}
	if !validHFID(id) {
		return nil, fmt.Errorf("model %q is neither a local directory nor a Hugging Face id (org/name)", id)
	}
	hub := HFHubDir(m.Device.HFCache, getenv)
	snap, rev, err := hfSnapshot(hub, id, m.HFRevision)
	if err != nil {
		return nil, err
	}
	files, err := modelFiles(snap, names, true)
	if err != nil {
		return nil, fmt.Errorf("model %q (Hugging Face cache): %w", id, err)
	}
	return withProjector(m, snap, &ModelSource{ID: id, Dir: snap, Files: files, HFRepo: id, Revision: rev})
}

// withProjector sets src's vision projector, found as Projector says.
func withProjector(m ModelConfig, dir string, src *ModelSource) (*ModelSource, error) {
	p, err := Projector(m, dir, src.Files[0])
	if err != nil {
		return nil, err
	}
	src.MMProj = p
	return src, nil
}

// validHFID: the spelling of a Hugging Face repository id.
func validHFID(id string) bool {
	return hfIDPattern.MatchString(id) && !strings.Contains(id, "..") && !strings.Contains(id, "--")
}

var hfIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$`)

func looksLikePath(s string) bool {
	return strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "~") ||
		strings.Contains(s, `\`) || strings.Count(s, "/") > 1 || isGGUF(s)
}

func isGGUF(name string) bool { return strings.EqualFold(filepath.Ext(name), ".gguf") }

// HFHubDir returns the Hugging Face hub cache directory (the one holding
// models--org--name folders): override when given (or its hub/ subfolder when
// it is an HF_HOME-style folder), else $HF_HUB_CACHE, $HUGGINGFACE_HUB_CACHE,
// $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub.
func HFHubDir(override string, getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if override != "" {
		if st, err := os.Stat(filepath.Join(override, "hub")); err == nil && st.IsDir() {
			return filepath.Join(override, "hub")
		}
		return override
	}
	for _, v := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if d := getenv(v); d != "" {
			return d
		}
	}
	return filepath.Join(hub.Home(getenv), "hub")
}

// hfSnapshot returns the snapshot directory of repo id in the hub cache at
// revision ("" or "main": refs/main, else the newest snapshot; a branch or
// tag: its ref; a commit: its snapshot).
func hfSnapshot(hub, id, revision string) (dir, rev string, err error) {
	repo := filepath.Join(hub, "models--"+strings.ReplaceAll(id, "/", "--"))
	notCached := func(detail string) error {
		return fmt.Errorf("model %q is not in the local Hugging Face cache (%s). "+
			"Start without HF_HUB_OFFLINE to download it, or get it with `hf download %s --include '*Q4_K_M*.gguf'`; "+
			"or point HF_HOME, HF_HUB_CACHE or --hf-cache at the cache that holds it, or pass a local directory with -m", id, detail, id)
	}
	if st, err := os.Stat(repo); err != nil || !st.IsDir() {
		return "", "", notCached("no " + repo)
	}
	if revision != "" && revision != "main" {
		if commitPattern.MatchString(revision) {
			dir = filepath.Join(repo, "snapshots", revision)
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return "", "", notCached("no snapshot of commit " + revision)
			}
			return dir, revision, nil
		}
		rev, err = readRef(filepath.Join(repo, "refs", filepath.FromSlash(revision)))
		if smallfile.Refused(err) {
			return "", "", err
		}
		if err != nil {
			return "", "", notCached("no refs/" + revision)
		}
		dir = filepath.Join(repo, "snapshots", rev)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return "", "", notCached("refs/" + revision + " points to " + rev + " but " + dir + " is missing")
		}
		return dir, rev, nil
	}
	rev, err = readRef(filepath.Join(repo, "refs", "main"))
	if smallfile.Refused(err) {
		return "", "", err
	}
	if err == nil {
		dir = filepath.Join(repo, "snapshots", rev)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return "", "", notCached("refs/main points to " + rev + " but " + dir + " is missing")
		}
		return dir, rev, nil
	}
	// No refs/main (a download by revision): take the newest snapshot.
	ents, _ := os.ReadDir(filepath.Join(repo, "snapshots"))
	var bestT int64
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		t := info.ModTime().UnixNano()
		if rev == "" || t > bestT || (t == bestT && e.Name() > rev) {
			rev, bestT = e.Name(), t
		}
	}
	if rev == "" {
		return "", "", notCached("no snapshot in " + filepath.Join(repo, "snapshots"))
	}
	return filepath.Join(repo, "snapshots", rev), rev, nil
}

// shardPattern matches llama.cpp's split names: "name-00001-of-00003.gguf".
var shardPattern = regexp.MustCompile(`(?i)^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// ggufModel is one model among the files: a single file or a full shard set.
type ggufModel struct {
	label string   // for listings: "a.gguf" or "b-00001-of-00002.gguf (2 shards)"
	files []string // shards in order
}

// modelFiles returns the files of exactly one model. names empty: scan dir
// (recursively for an HF snapshot, whose repos often keep quantizations in
// subfolders). Names are relative to dir unless absolute.
func modelFiles(dir string, names []string, recursive bool) ([]string, error) {
	var paths []string
	if len(names) == 0 {
		found, err := scanGGUF(dir, recursive)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("no .gguf file in %s%s", dir, listing(dir))
		}
		paths = found
	} else {
		for _, n := range names {
			p := n
			if dir != "" && !filepath.IsAbs(n) {
				p = filepath.Join(dir, n)
			}
			if _, err := os.Stat(p); err != nil {
				if dir != "" {
					if _, lerr := os.Lstat(p); lerr == nil {
						return nil, fmt.Errorf("%s is a broken link (an incomplete download?)", p)
					}
					return nil, fmt.Errorf("%s not found in %s%s", n, dir, ggufListing(dir, recursive))
				}
				return nil, fmt.Errorf("model file %s: %v", n, unwrapPathError(err))
			}
			paths = append(paths, p)
		}
	}
	models, err := groupGGUF(paths)
	if err != nil {
		return nil, err
	}
	if len(models) > 1 {
		labels := make([]string, len(models))
		for i, m := range models {
			labels[i] = m.label
		}
		where := ""
		if dir != "" {
			where = " in " + dir
		}
		return nil, fmt.Errorf("several different models%s: %s; choose one with -f (models.format.quantized_file)",
			where, strings.Join(labels, ", "))
	}
	return models[0].files, nil
}

// scanGGUF lists the .gguf files under dir, without vision projectors
// (mmproj files), which are not language models.
func scanGGUF(dir string, recursive bool) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && (!recursive || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if isGGUF(d.Name()) && !strings.Contains(strings.ToLower(d.Name()), "mmproj") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading model directory: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// groupGGUF groups files into models: each shard brings its whole set, which
// must be complete on disk.
func groupGGUF(paths []string) ([]ggufModel, error) {
	var out []ggufModel
	seen := map[string]bool{}
	for _, p := range paths {
		base := filepath.Base(p)
		sm := shardPattern.FindStringSubmatch(base)
		if sm == nil {
			if !seen[p] {
				seen[p] = true
				out = append(out, ggufModel{label: base, files: []string{p}})
			}
			continue
		}
		n, _ := strconv.Atoi(sm[3])
		key := filepath.Join(filepath.Dir(p), strings.ToLower(sm[1])) + "\x00" + sm[3]
		if seen[key] {
			continue
		}
		seen[key] = true
		if n < 1 {
			return nil, fmt.Errorf("%s: a split model cannot have 0 shards", p)
		}
		m := ggufModel{label: fmt.Sprintf("%s (%d shards)", filepath.Base(shardName(p, sm, 1)), n)}
		var missing []string
		for i := 1; i <= n; i++ {
			sp := shardName(p, sm, i)
			if _, err := os.Stat(sp); err != nil {
				missing = append(missing, filepath.Base(sp))
			}
			m.files = append(m.files, sp)
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("%s is split into %d shards; missing: %s",
				filepath.Join(filepath.Dir(p), sm[1]), n, strings.Join(missing, ", "))
		}
		out = append(out, m)
	}
	return out, nil
}

// shardName is shard i of the set that p belongs to, keeping p's spelling.
func shardName(p string, sm []string, i int) string {
	ext := sm[0][len(sm[0])-len(".gguf"):]
	return filepath.Join(filepath.Dir(p), fmt.Sprintf("%s-%05d-of-%s%s", sm[1], i, sm[3], ext))
}

// ggufListing is a hint for a file not found: the GGUF files that are there.
func ggufListing(dir string, recursive bool) string {
	found, err := scanGGUF(dir, recursive)
	if err != nil || len(found) == 0 {
		return listing(dir)
	}
	rel := make([]string, len(found))
	for i, f := range found {
		r, err := filepath.Rel(dir, f)
		if err != nil {
			r = f
		}
		rel[i] = r
	}
	return " (GGUF files there: " + strings.Join(rel, ", ") + ")"
}

// listing is a hint naming up to 10 entries of dir.
func listing(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		return " (the directory is empty)"
	}
	var names []string
	for i, e := range ents {
		if i == 10 {
			names = append(names, "…")
			break
		}
		names = append(names, e.Name())
	}
	return " (it holds: " + strings.Join(names, ", ") + ")"
}

// commitPattern is a git commit id as the Hub writes it.
var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// FetchOptions says how Fetch reaches the Hugging Face Hub.
type FetchOptions struct {
	Getenv   func(string) string // nil: os.Getenv (HF_ENDPOINT, HF_HUB_OFFLINE, HF_TOKEN, HF_HOME, …)
	Progress io.Writer           // progress bars and notes (stderr); nil: silent
	HTTP     *http.Client        // nil: the default client
}

// Fetch makes sure every Hugging Face model of c is in the hub cache,
// downloading what is missing (unless HF_HUB_OFFLINE is set), and pins each
// entry to what it found: hf_revision becomes the commit and
// quantized_file the model's files, so that ResolveModel (which never
// reaches the network) opens exactly them. A draft model (mtp_model) given
// as a Hugging Face id becomes the path of its downloaded file, and so does a
// preloaded LoRA adapter given as one (LoRAModule.Path). Local models
// are left alone. Call it after Validate, before the models are resolved.
func (c *Config) Fetch(ctx context.Context, o FetchOptions) error {
	for i := range c.Models {
		if err := FetchModel(ctx, &c.Models[i], c.Global.TokenSource, o); err != nil {
			return err
		}
	}
	// Draft models: [runtime]'s (the first model's) and each entry's own.
	fetchDraft := func(id *string, cache string) error {
		if !isHFModelID(*id) {
			return nil
		}
		m := ModelConfig{Kind: KindText, ModelID: *id, Device: ModelDevice{HFCache: cache}} // a draft takes no images
		if err := FetchModel(ctx, &m, c.Global.TokenSource, o); err != nil {
			return err
		}
		src, err := ResolveModel(m, o.Getenv)
		if err != nil {
			return err
		}
		*id = src.Files[0]
		return nil
	}
	cache0 := ""
	if len(c.Models) > 0 {
		cache0 = c.Models[0].Device.HFCache
	}
	if err := fetchDraft(&c.Runtime.MTPModel, cache0); err != nil {
		return err
	}
	for i := range c.Models {
		if err := fetchDraft(&c.Models[i].MTPModel, c.Models[i].Device.HFCache); err != nil {
			return err
		}
		if err := c.fetchLoRA(ctx, i, o); err != nil {
			return err
		}
	}
	return nil
}

// isHFModelID reports whether a model_id names a Hugging Face repository
// rather than something on local disk (ResolveModel's order: a local path
// wins).
func isHFModelID(id string) bool {
	if id == "" || looksLikePath(id) || !validHFID(id) {
		return false
	}
	_, err := os.Stat(id)
	return err != nil
}

// FetchModel is Fetch for one model entry, with the token from tokenSource
// (--token-source / global.token_source; "" means cache).
func FetchModel(ctx context.Context, m *ModelConfig, tokenSource string, o FetchOptions) error {
	if !isHFModelID(m.ModelID) {
		return nil
	}
	names := []string(m.Format.QuantizedFile)
	for _, n := range names {
		if filepath.IsAbs(n) {
			return nil // files outside the repository: ResolveModel reads them as they are
		}
	}
	cl, err := newHubClient(m.Device.HFCache, tokenSource, o)
	if err != nil {
		return err
	}
	files := make([]string, len(names))
	for i, n := range names {
		files[i] = filepath.ToSlash(n)
	}
	snap, err := cl.GetModel(ctx, m.ModelID, m.HFRevision, files, hubProjector(m))
	if err != nil {
		return err
	}
	if len(names) == 0 && o.Progress != nil {
		fmt.Fprintf(o.Progress, "%s: using %s (chosen in the order %s; name another with -f)\n",
			m.ModelID, strings.Join(snap.Files, ";"), strings.Join(hub.Preference, ", "))
	}
	if len(m.Format.MMProj) == 0 && snap.MMProj != "" && o.Progress != nil {
		fmt.Fprintf(o.Progress, "%s: vision projector %s (the model's own type, else F16, else the first by name; name another with --mmproj)\n",
			m.ModelID, snap.MMProj)
	}
	m.HFRevision = snap.Commit
	m.Format.QuantizedFile = FileList(snap.Files)
	if snap.MMProj != "" {
		m.Format.MMProj = FileList{snap.MMProj}
	}
	return nil
}

// newHubClient is a Hub client for the hub cache hfCache (device.hf_cache;
// "": the environment's), with the token from tokenSource and the Hub and
// offline mode of the environment.
func newHubClient(hfCache, tokenSource string, o FetchOptions) (*hub.Client, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	token, from, err := hub.Token(tokenSource, getenv)
	if err != nil {
		return nil, fmt.Errorf("the token for the Hugging Face Hub: %w", err)
	}
	endpoint, offline := hub.Environment(getenv)
	cl := &hub.Client{
		Endpoint:  endpoint,
		Token:     token,
		TokenFrom: from,
		CacheDir:  HFHubDir(hfCache, getenv),
		Offline:   offline,
		HTTP:      o.HTTP,
		Progress:  o.Progress,
	}
	if f, ok := o.Progress.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		cl.Terminal = true
	}
	return cl, nil
}

// hubProjector is the vision projector a Hugging Face model entry fetches
// with its files: the one it names inside the repository; for auto one if
// the repository has one; for multimodal one it must have; none for a
// text or embedding model, or one given as an absolute path (a local file).
func hubProjector(m *ModelConfig) hub.Projector {
	switch {
	case m.Kind == KindText || m.Kind == KindEmbedding:
		return hub.Projector{}
	case len(m.Format.MMProj) > 0:
		if filepath.IsAbs(m.Format.MMProj[0]) {
			return hub.Projector{}
		}
		return hub.Projector{File: filepath.ToSlash(m.Format.MMProj[0])}
	}
	return hub.Projector{Choose: true, Required: m.Kind == KindMultimodal}
}

// checkTokenSource checks a token source's syntax; shown is the value as an
// error may print it (never a literal token).
func checkTokenSource(src string) (shown string, err error) {
	shown = src
	if i := strings.IndexByte(src, ':'); i >= 0 && (strings.HasPrefix(src, "literal:") || hub.CheckTokenSource(src) != nil) {
		shown = src[:i+1] + "…"
	}
	return shown, hub.CheckTokenSource(src)
}

// readRef reads a ref of the Hugging Face cache (refs/main): the commit a
// branch or tag points to; "" with the error when it cannot be read.
func readRef(path string) (string, error) {
	b, err := smallfile.Read(path, smallfile.Ref)
	if smallfile.Refused(err) {
		return "", fmt.Errorf("the Hugging Face cache's ref %w", err)
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
