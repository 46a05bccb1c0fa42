package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"mistralrs/internal/gguf"
)

// ModelSource is a model's GGUF files found on local disk. Nothing is ever
// downloaded: a Hugging Face id must already be in the local HF cache.
type ModelSource struct {
	ID       string   // what clients name the model: model_id as given, else the file name without ".gguf" and shard suffix
	Dir      string   // directory the files were looked up in (the snapshot directory for an HF id)
	Files    []string // the model's GGUF files, shards in order; Files[0] is the file to open
	HFRepo   string   // "org/name" when found in the Hugging Face cache
	Revision string   // the snapshot's commit when found in the Hugging Face cache
}

// ResolveModel finds the GGUF files of a model entry:
//   - model_id a local directory: the files named by quantized_file inside it,
//     else its one GGUF model (the shards of a split model count as one);
//   - model_id a local .gguf file: that file (and its sibling shards);
//   - no model_id: the quantized_file paths themselves;
//   - otherwise a Hugging Face id ("org/name") looked up in the local hub
//     cache (device.hf_cache, $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub),
//     at the snapshot refs/main points to.
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
		return &ModelSource{ID: gguf.ModelName(files[0]), Dir: filepath.Dir(files[0]), Files: files}, nil
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
		return &ModelSource{ID: id, Dir: dir, Files: files}, nil
	}
	if looksLikePath(id) {
		return nil, fmt.Errorf("model %q: no such file or directory", id)
	}
	if !hfIDPattern.MatchString(id) || strings.Contains(id, "..") || strings.Contains(id, "--") {
		return nil, fmt.Errorf("model %q is neither a local directory nor a Hugging Face id (org/name)", id)
	}
	hub := HFHubDir(m.Device.HFCache, getenv)
	snap, rev, err := hfSnapshot(hub, id)
	if err != nil {
		return nil, err
	}
	files, err := modelFiles(snap, names, true)
	if err != nil {
		return nil, fmt.Errorf("model %q (Hugging Face cache): %w", id, err)
	}
	return &ModelSource{ID: id, Dir: snap, Files: files, HFRepo: id, Revision: rev}, nil
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
	if d := getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub")
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".cache", "huggingface", "hub")
}

// hfSnapshot returns the snapshot directory of repo id in the hub cache.
func hfSnapshot(hub, id string) (dir, rev string, err error) {
	repo := filepath.Join(hub, "models--"+strings.ReplaceAll(id, "/", "--"))
	notCached := func(detail string) error {
		return fmt.Errorf("model %q is not in the local Hugging Face cache (%s); this server downloads nothing. "+
			"Download it first, e.g. `hf download %s --include '*Q8_0*.gguf'`, point HF_HOME, HF_HUB_CACHE or --hf-cache "+
			"at the cache that holds it, or pass a local directory with -m", id, detail, id)
	}
	if st, err := os.Stat(repo); err != nil || !st.IsDir() {
		return "", "", notCached("no " + repo)
	}
	if b, err := os.ReadFile(filepath.Join(repo, "refs", "main")); err == nil {
		rev = strings.TrimSpace(string(b))
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
