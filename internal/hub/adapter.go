package hub

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// The two files of a Hugging Face PEFT LoRA adapter.
const (
	PEFTConfig  = "adapter_config.json"
	PEFTWeights = "adapter_model.safetensors"
)

// ChooseAdapter picks the files of a LoRA adapter among a repository's
// files (repo-relative names): the PEFT pair (adapter_config.json and
// adapter_model.safetensors) at the top of the repository, else the
// repository's one GGUF file (a llama.cpp adapter; vision projectors do not
// count). Several GGUF files and no PEFT pair is an error that lists them:
// an adapter repository holds one adapter, and which one to take is not
// ours to guess.
func ChooseAdapter(names []string) ([]string, error) {
	have := map[string]bool{}
	var gguf []string
	for _, n := range names {
		have[n] = true
		if isGGUF(n) && !isMMProj(n) {
			gguf = append(gguf, n)
		}
	}
	if have[PEFTConfig] && have[PEFTWeights] {
		return []string{PEFTConfig, PEFTWeights}, nil
	}
	sort.Strings(gguf)
	switch {
	case len(gguf) == 1:
		return gguf, nil
	case len(gguf) > 1:
		if len(gguf) > 12 {
			gguf = append(gguf[:12], "…")
		}
		return nil, fmt.Errorf("holds several GGUF files and no PEFT adapter (%s + %s), so the adapter is ambiguous: %s; download the one you want and give its path",
			PEFTConfig, PEFTWeights, strings.Join(gguf, ", "))
	case have[PEFTConfig] || have[PEFTWeights]:
		return nil, fmt.Errorf("holds only half of a PEFT adapter: a LoRA adapter needs both %s and %s", PEFTConfig, PEFTWeights)
	}
	return nil, fmt.Errorf("holds no LoRA adapter: neither a PEFT adapter (%s + %s) nor a GGUF adapter file", PEFTConfig, PEFTWeights)
}

// GetAdapter makes sure the LoRA adapter of repo at revision ("" means
// main) is in the cache, as ChooseAdapter picks its files, and returns
// where: Snapshot.Files are the PEFT pair (the adapter is the snapshot
// folder) or the one GGUF file. A snapshot of the revision that already
// holds an adapter is used without asking the network.
func (c *Client) GetAdapter(ctx context.Context, repo, revision string) (*Snapshot, error) {
	if revision == "" {
		revision = "main"
	}
	fail := func(file, msg string, err error) error {
		return &Error{Repo: repo, Revision: revision, File: file, Msg: msg, Err: err}
	}
	repoDir := filepath.Join(c.CacheDir, RepoFolder(repo))
	if commit := cachedCommit(repoDir, revision); commit != "" {
		snap := &Snapshot{Repo: repo, Revision: revision, Commit: commit, Dir: filepath.Join(repoDir, "snapshots", commit)}
		if files, err := ChooseAdapter(presentFiles(snap.Dir)); err == nil {
			snap.Files = files
			return snap, nil
		}
	}
	if c.Offline {
		return nil, fail("", "no LoRA adapter of it is in the Hugging Face cache "+c.CacheDir+", and HF_HUB_OFFLINE is set, so nothing is downloaded", nil)
	}
	inf, err := c.modelInfo(ctx, repo, revision)
	if err != nil {
		return nil, err
	}
	if !commitPattern.MatchString(inf.Sha) {
		return nil, fail("", fmt.Sprintf("the Hub's model info names no commit (sha %q)", inf.Sha), nil)
	}
	var siblings []string
	for _, s := range inf.Siblings {
		siblings = append(siblings, s.RFilename)
	}
	files, err := ChooseAdapter(siblings)
	if err != nil {
		return nil, fail("", "the repository "+err.Error(), nil)
	}
	snap := &Snapshot{Repo: repo, Revision: revision, Commit: inf.Sha, Dir: filepath.Join(repoDir, "snapshots", inf.Sha), Files: files}
	for _, f := range files {
		fetched, err := c.fetchFile(ctx, repo, revision, inf.Sha, repoDir, f)
		if err != nil {
			return nil, err
		}
		snap.Fetched = snap.Fetched || fetched
	}
	if revision != inf.Sha {
		if err := writeRef(repoDir, revision, inf.Sha); err != nil {
			return nil, fail("", "writing the cache's refs/"+revision, cacheErr(c.CacheDir, err))
		}
	}
	return snap, nil
}

// presentFiles lists the files that open in a snapshot, repo-relative
// ("/"-separated), without hidden folders.
func presentFiles(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if p != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			return nil // a link whose blob is gone
		}
		if rel, err := filepath.Rel(dir, p); err == nil {
			out = append(out, path.Clean(filepath.ToSlash(rel)))
		}
		return nil
	})
	sort.Strings(out)
	return out
}
