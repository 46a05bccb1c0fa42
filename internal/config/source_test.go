package config

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"mistralrs/internal/hub/hubtest"
)

func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		writeFile(t, dir, n, "GGUF")
	}
}

func noEnv(string) string { return "" }

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func resolve(t *testing.T, m ModelConfig, getenv func(string) string) (*ModelSource, error) {
	t.Helper()
	if m.Kind == "" {
		m.Kind = "auto"
	}
	if getenv == nil {
		getenv = noEnv
	}
	return ResolveModel(m, getenv)
}

func model(id string, files ...string) ModelConfig {
	return ModelConfig{ModelID: id, Format: ModelFormat{QuantizedFile: files}}
}

func join(dir string, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(dir, n)
	}
	return out
}

func TestResolveLocalDirectory(t *testing.T) {
	root := t.TempDir()
	one := filepath.Join(root, "one")
	touch(t, one, "model-Q8_0.gguf", "mmproj-model-f16.gguf", "README.md")
	split := filepath.Join(root, "split")
	touch(t, split, "big-00002-of-00003.gguf", "big-00001-of-00003.gguf", "big-00003-of-00003.gguf")
	two := filepath.Join(root, "two")
	touch(t, two, "a.gguf", "b-00001-of-00002.gguf", "b-00002-of-00002.gguf", "sub/c.gguf")
	gap := filepath.Join(root, "gap")
	touch(t, gap, "x-00001-of-00003.gguf", "x-00003-of-00003.gguf")
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(root, "other")
	touch(t, other, "config.json")

	for _, tc := range []struct {
		name  string
		m     ModelConfig
		files []string
		id    string
		err   string
	}{
		{name: "one model, projector skipped", m: model(one), files: join(one, "model-Q8_0.gguf"), id: one},
		{name: "shards in order", m: model(split), files: join(split, "big-00001-of-00003.gguf", "big-00002-of-00003.gguf", "big-00003-of-00003.gguf"), id: split},
		{name: "several models", m: model(two),
			err: "several different models in " + two + ": a.gguf, b-00001-of-00002.gguf (2 shards); choose one with -f (models.format.quantized_file)"},
		{name: "pick with -f", m: model(two, "a.gguf"), files: join(two, "a.gguf"), id: two},
		{name: "-f in a subfolder", m: model(two, "sub/c.gguf"), files: join(two, "sub/c.gguf"), id: two},
		{name: "-f first shard brings the set", m: model(two, "b-00001-of-00002.gguf"), files: join(two, "b-00001-of-00002.gguf", "b-00002-of-00002.gguf"), id: two},
		{name: "-f all shards", m: model(two, "b-00002-of-00002.gguf", "b-00001-of-00002.gguf"), files: join(two, "b-00001-of-00002.gguf", "b-00002-of-00002.gguf"), id: two},
		{name: "-f absolute", m: model(two, filepath.Join(one, "model-Q8_0.gguf")), files: join(one, "model-Q8_0.gguf"), id: two},
		{name: "-f two models", m: model(two, "a.gguf", "sub/c.gguf"), err: "several different models in " + two + ": a.gguf, c.gguf; choose one"},
		{name: "-f missing", m: model(two, "zz.gguf"), err: "zz.gguf not found in " + two + " (GGUF files there: a.gguf, b-00001-of-00002.gguf, b-00002-of-00002.gguf)"},
		{name: "missing shard", m: model(gap), err: filepath.Join(gap, "x") + " is split into 3 shards; missing: x-00002-of-00003.gguf"},
		{name: "empty dir", m: model(empty), err: "no .gguf file in " + empty + " (the directory is empty)"},
		{name: "no gguf", m: model(other), err: "no .gguf file in " + other + " (it holds: config.json)"},
		{name: "-m a gguf file", m: model(filepath.Join(one, "model-Q8_0.gguf")), files: join(one, "model-Q8_0.gguf"), id: filepath.Join(one, "model-Q8_0.gguf")},
		{name: "-m a shard file", m: model(filepath.Join(split, "big-00001-of-00003.gguf")), files: join(split, "big-00001-of-00003.gguf", "big-00002-of-00003.gguf", "big-00003-of-00003.gguf"), id: filepath.Join(split, "big-00001-of-00003.gguf")},
		{name: "-m a file with -f", m: model(filepath.Join(one, "model-Q8_0.gguf"), "x.gguf"), err: "is a file; with -f (quantized_file), -m must be the directory that holds the files"},
		{name: "-m a non-gguf file", m: model(filepath.Join(one, "README.md")), err: "is neither a directory nor a .gguf file"},
		{name: "-f only", m: model("", filepath.Join(split, "big-00001-of-00003.gguf")), files: join(split, "big-00001-of-00003.gguf", "big-00002-of-00003.gguf", "big-00003-of-00003.gguf"), id: "big"},
		{name: "-f only, plain file", m: model("", filepath.Join(one, "model-Q8_0.gguf")), files: join(one, "model-Q8_0.gguf"), id: "model-Q8_0"},
		{name: "-f only, missing", m: model("", filepath.Join(root, "nope.gguf")), err: "model file " + filepath.Join(root, "nope.gguf") + ": no such file or directory"},
		{name: "nothing", m: model(""), err: "no model given: pass -m (a directory or a Hugging Face id) or -f (GGUF files)"},
		{name: "missing path", m: model(filepath.Join(root, "nope")), err: `model "` + filepath.Join(root, "nope") + `": no such file or directory`},
		{name: "relative missing path", m: model("./nope"), err: `model "./nope": no such file or directory`},
		{name: "bad id", m: model("a b"), err: `model "a b" is neither a local directory nor a Hugging Face id (org/name)`},
		{name: "ggml refused", m: ModelConfig{ModelID: one, Format: ModelFormat{Format: "ggml"}}, err: `format.format = "ggml": not supported by this engine (GGUF files only)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := resolve(t, tc.m, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(src.Files, tc.files) || src.ID != tc.id {
				t.Errorf("got id %q files %q, want %q %q", src.ID, src.Files, tc.id, tc.files)
			}
			if src.Dir != filepath.Dir(src.Files[0]) && src.Dir != tc.m.ModelID {
				t.Errorf("dir %q", src.Dir)
			}
		})
	}
}

// fakeHub builds hub/models--org--name with blobs, refs/main and snapshot
// links as huggingface_hub lays them out.
func fakeHub(t *testing.T, hub, id, rev string, files ...string) string {
	t.Helper()
	repo := filepath.Join(hub, "models--"+strings.ReplaceAll(id, "/", "--"))
	snap := filepath.Join(repo, "snapshots", rev)
	for _, f := range files {
		blob := filepath.Join(repo, "blobs", "sha-"+strings.ReplaceAll(f, "/", "_"))
		writeFile(t, filepath.Dir(blob), filepath.Base(blob), "GGUF")
		link := filepath.Join(snap, f)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(filepath.Dir(link), blob)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(rel, link); err != nil {
			t.Fatal(err)
		}
	}
	return snap
}

func setRef(t *testing.T, hub, id, rev string) {
	writeFile(t, filepath.Join(hub, "models--"+strings.ReplaceAll(id, "/", "--"), "refs"), "main", rev+"\n")
}

func TestResolveHFCache(t *testing.T) {
	home := t.TempDir()
	hub := filepath.Join(home, "hub")
	old := fakeHub(t, hub, "org/Model-GGUF", "1111", "model-Q4_K_M.gguf")
	cur := fakeHub(t, hub, "org/Model-GGUF", "2222", "model-Q8_0.gguf", "model-Q4_K_M.gguf", "BF16/model-BF16-00001-of-00002.gguf", "BF16/model-BF16-00002-of-00002.gguf")
	// refs/main wins even over a newer snapshot.
	past := time.Now().Add(-time.Hour)
	os.Chtimes(cur, past, past)
	setRef(t, hub, "org/Model-GGUF", "2222")
	single := fakeHub(t, hub, "solo/one", "aaaa", "one.gguf")
	setRef(t, hub, "solo/one", "aaaa")
	// No refs/main: the newest snapshot.
	fakeHub(t, hub, "norefs/x", "old", "x.gguf")
	newest := fakeHub(t, hub, "norefs/x", "new", "y.gguf")
	os.Chtimes(filepath.Join(filepath.Dir(newest), "old"), past, past)
	// refs/main pointing to a missing snapshot.
	fakeHub(t, hub, "dangling/ref", "aaaa", "a.gguf")
	setRef(t, hub, "dangling/ref", "bbbb")
	// A snapshot link whose blob is gone.
	broken := fakeHub(t, hub, "broken/link", "cccc", "b.gguf")
	setRef(t, hub, "broken/link", "cccc")
	os.RemoveAll(filepath.Join(filepath.Dir(filepath.Dir(broken)), "blobs"))
	// Legacy id without an organisation.
	gpt := fakeHub(t, hub, "gpt2", "dddd", "gpt2.gguf")
	setRef(t, hub, "gpt2", "dddd")
	_ = old

	env := envOf(map[string]string{"HF_HOME": home})
	for _, tc := range []struct {
		name  string
		m     ModelConfig
		env   func(string) string
		files []string
		rev   string
		err   string
	}{
		{name: "pick with -f", m: model("org/Model-GGUF", "model-Q8_0.gguf"), files: join(cur, "model-Q8_0.gguf"), rev: "2222"},
		{name: "subfolder shards", m: model("org/Model-GGUF", "BF16/model-BF16-00001-of-00002.gguf"),
			files: join(cur, "BF16/model-BF16-00001-of-00002.gguf", "BF16/model-BF16-00002-of-00002.gguf"), rev: "2222"},
		{name: "several without -f", m: model("org/Model-GGUF"),
			err: `model "org/Model-GGUF" (Hugging Face cache): several different models in ` + cur + ": model-BF16-00001-of-00002.gguf (2 shards), model-Q4_K_M.gguf, model-Q8_0.gguf; choose one with -f"},
		{name: "only one downloaded", m: model("solo/one"), files: join(single, "one.gguf"), rev: "aaaa"},
		{name: "no refs/main", m: model("norefs/x"), files: join(newest, "y.gguf"), rev: "new"},
		{name: "legacy id", m: model("gpt2"), files: join(gpt, "gpt2.gguf"), rev: "dddd"},
		{name: "HF_HUB_CACHE", m: model("solo/one"), env: envOf(map[string]string{"HF_HUB_CACHE": hub, "HF_HOME": "/nowhere"}), files: join(single, "one.gguf"), rev: "aaaa"},
		{name: "XDG_CACHE_HOME", m: model("solo/one"), env: envOf(map[string]string{"XDG_CACHE_HOME": filepath.Join(home, "xdg")}), err: "no " + filepath.Join(home, "xdg", "huggingface", "hub", "models--solo--one")},
		{name: "HOME", m: model("solo/one"), env: envOf(map[string]string{"HOME": home}), err: "no " + filepath.Join(home, ".cache", "huggingface", "hub", "models--solo--one")},
		{name: "--hf-cache hub dir", m: ModelConfig{ModelID: "solo/one", Device: ModelDevice{HFCache: hub}}, env: noEnv, files: join(single, "one.gguf"), rev: "aaaa"},
		{name: "--hf-cache HF_HOME-style dir", m: ModelConfig{ModelID: "solo/one", Device: ModelDevice{HFCache: home}}, env: noEnv, files: join(single, "one.gguf"), rev: "aaaa"},
		{name: "not cached", m: model("org/absent"),
			err: `model "org/absent" is not in the local Hugging Face cache (no ` + filepath.Join(hub, "models--org--absent") + `). ` +
				"Start without HF_HUB_OFFLINE to download it, or get it with `hf download org/absent --include '*Q4_K_M*.gguf'`; or point HF_HOME, HF_HUB_CACHE or --hf-cache at the cache that holds it, or pass a local directory with -m"},
		{name: "dangling ref", m: model("dangling/ref"), err: "refs/main points to bbbb but " + filepath.Join(hub, "models--dangling--ref", "snapshots", "bbbb") + " is missing"},
		{name: "broken link", m: model("broken/link", "b.gguf"), err: filepath.Join(broken, "b.gguf") + " is a broken link (an incomplete download?)"},
		{name: "file not in snapshot", m: model("org/Model-GGUF", "model-Q2_K.gguf"), err: "model-Q2_K.gguf not found in " + cur + " (GGUF files there: BF16/model-BF16-00001-of-00002.gguf, BF16/model-BF16-00002-of-00002.gguf, model-Q4_K_M.gguf, model-Q8_0.gguf)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := env
			if tc.env != nil {
				e = tc.env
			}
			src, err := resolve(t, tc.m, e)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v\nwant %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(src.Files, tc.files) || src.Revision != tc.rev || src.ID != tc.m.ModelID || src.HFRepo != tc.m.ModelID {
				t.Errorf("got %+v, want files %q rev %q", src, tc.files, tc.rev)
			}
			if _, err := os.Stat(src.Files[0]); err != nil {
				t.Errorf("resolved file does not open: %v", err)
			}
		})
	}
	// A local directory with the same name as an HF id wins.
	wd := t.TempDir()
	touch(t, filepath.Join(wd, "solo", "one"), "local.gguf")
	t.Chdir(wd)
	src, err := resolve(t, model("solo/one"), env)
	if err != nil || src.HFRepo != "" || filepath.Base(src.Files[0]) != "local.gguf" {
		t.Errorf("local dir over HF id: %+v %v", src, err)
	}
}

func TestHFHubDir(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HF_HUB_CACHE": "/a", "HUGGINGFACE_HUB_CACHE": "/b", "HF_HOME": "/c", "XDG_CACHE_HOME": "/d", "HOME": "/e"}, "/a"},
		{map[string]string{"HUGGINGFACE_HUB_CACHE": "/b", "HF_HOME": "/c", "XDG_CACHE_HOME": "/d", "HOME": "/e"}, "/b"},
		{map[string]string{"HF_HOME": "/c", "XDG_CACHE_HOME": "/d", "HOME": "/e"}, "/c/hub"},
		{map[string]string{"XDG_CACHE_HOME": "/d", "HOME": "/e"}, "/d/huggingface/hub"},
		{map[string]string{"HOME": "/e"}, "/e/.cache/huggingface/hub"},
	} {
		if got := HFHubDir("", envOf(tc.env)); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.env, got, tc.want)
		}
	}
	if got := HFHubDir("/override", envOf(map[string]string{"HF_HUB_CACHE": "/a"})); got != "/override" {
		t.Errorf("override: %q", got)
	}
}

// TestFetch downloads through a fake Hub (HF_ENDPOINT) into an HF_HOME
// cache, then resolves the pinned entry without the network.
func TestFetch(t *testing.T) {
	h := hubtest.New(t)
	q4, q8, draft := hubtest.Model(t, 1), hubtest.Model(t, 2), hubtest.Model(t, 3)
	r := h.Add("org/Tiny-GGUF", map[string][]byte{"tiny-Q8_0.gguf": q8, "tiny-Q4_K_M.gguf": q4, "README.md": []byte("hi")})
	r.Refs["v1"] = r.Commit
	h.Add("org/Draft-GGUF", map[string][]byte{"draft-Q8_0.gguf": draft})
	priv := h.Add("org/Private-GGUF", map[string][]byte{"p-Q8_0.gguf": q8})
	priv.Token = "hf_secret"
	home := t.TempDir()
	env := map[string]string{"HF_HOME": home, "HF_ENDPOINT": h.URL}
	getenv := envOf(env)
	var progress strings.Builder
	o := FetchOptions{Getenv: getenv, Progress: &progress}
	ctx := context.Background()

	c := Default()
	c.Runtime.MTPModel = "org/Draft-GGUF"
	c.Models = []ModelConfig{DefaultModel(), DefaultModel()}
	c.Models[0].ModelID = "org/Tiny-GGUF"
	c.Models[1].ModelID = "org/Tiny-GGUF"
	c.Models[1].HFRevision = "v1"
	c.Models[1].Format.QuantizedFile = FileList{"tiny-Q8_0.gguf"}
	if err := c.Fetch(ctx, o); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(home, "hub", "models--org--Tiny-GGUF", "snapshots", r.Commit)
	for i, want := range []string{"tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf"} {
		m := c.Models[i]
		if m.HFRevision != r.Commit || !reflect.DeepEqual([]string(m.Format.QuantizedFile), []string{want}) {
			t.Errorf("model %d pinned to %q %q", i, m.HFRevision, m.Format.QuantizedFile)
		}
		src, err := resolve(t, m, envOf(map[string]string{"HF_HOME": home}))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(src.Files, join(snap, want)) || src.ID != "org/Tiny-GGUF" || src.Revision != r.Commit {
			t.Errorf("model %d resolves to %+v", i, src)
		}
	}
	if !strings.Contains(progress.String(), "org/Tiny-GGUF: using tiny-Q4_K_M.gguf (chosen in the order Q4_K_M, Q8_0,") {
		t.Errorf("progress %q", progress.String())
	}
	if b, err := os.ReadFile(c.Runtime.MTPModel); err != nil || string(b) != string(draft) {
		t.Errorf("draft model at %q: %v", c.Runtime.MTPModel, err)
	}
	if src, err := c.ResolveDraft(0); err != nil || src.Files[0] != c.Runtime.MTPModel {
		t.Errorf("ResolveDraft: %+v %v", src, err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "hub", "models--org--Tiny-GGUF", "refs", "v1")); string(b) != r.Commit {
		t.Errorf("refs/v1 = %q", b)
	}

	// The same config again: no network at all.
	h.Reset()
	c2 := Default()
	c2.Models = []ModelConfig{DefaultModel()}
	c2.Models[0].ModelID = "org/Tiny-GGUF"
	if err := c2.Fetch(ctx, o); err != nil {
		t.Fatal(err)
	}
	if n := h.Count(""); n != 0 {
		t.Errorf("%d requests with everything cached", n)
	}

	// Offline: the cached copy, or a one-line error naming repo and file.
	env["HF_HUB_OFFLINE"] = "1"
	m := DefaultModel()
	m.ModelID = "org/Tiny-GGUF"
	if err := FetchModel(ctx, &m, "", o); err != nil || m.Format.QuantizedFile[0] != "tiny-Q4_K_M.gguf" {
		t.Errorf("offline, cached: %v %q", err, m.Format.QuantizedFile)
	}
	m = DefaultModel()
	m.ModelID = "org/Draft-GGUF"
	m.Format.QuantizedFile = FileList{"draft-Q4_0.gguf"}
	err := FetchModel(ctx, &m, "", o)
	if err == nil || !strings.Contains(err.Error(), "Hugging Face model org/Draft-GGUF, file draft-Q4_0.gguf: not in the Hugging Face cache "+filepath.Join(home, "hub")+", and HF_HUB_OFFLINE is set") {
		t.Errorf("offline, not cached: %v", err)
	}
	delete(env, "HF_HUB_OFFLINE")

	// Tokens: from --token-source, HF_TOKEN, or none.
	for _, tc := range []struct {
		src, hfToken, err string
	}{
		{"", "", "Hugging Face model org/Private-GGUF: 401 Unauthorized: the repository does not exist, or it is private or gated and needs a token"},
		{"literal:hf_old", "", "Hugging Face model org/Private-GGUF: 401 Unauthorized: the token from --token-source literal:… was refused"},
		{"", "hf_secret", ""},
		{"env:MY_TOKEN", "", "the token for the Hugging Face Hub: token source env:MY_TOKEN: MY_TOKEN is not set"},
		{"literal:hf_secret", "", ""},
	} {
		env["HF_TOKEN"] = tc.hfToken
		env["HF_HOME"] = t.TempDir()
		m := DefaultModel()
		m.ModelID = "org/Private-GGUF"
		err := FetchModel(ctx, &m, tc.src, o)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("token source %q, HF_TOKEN %q: %v, want %q", tc.src, tc.hfToken, err, tc.err)
		}
	}
	// Local models are left alone.
	m = model(t.TempDir())
	if err := FetchModel(ctx, &m, "", o); err != nil || m.HFRevision != "" || len(m.Format.QuantizedFile) != 0 {
		t.Errorf("local model: %+v %v", m, err)
	}
}

func TestTokenSourceValidation(t *testing.T) {
	for _, tc := range []struct{ src, err string }{
		{"cache", ""}, {"none", ""}, {"env:X", ""}, {"path:/x", ""}, {"literal:hf_x", ""},
		{"literal:", `global.token_source = "literal:…": "literal:" names nothing after the colon`},
		{"hf_abcdef", `global.token_source = "hf_abcdef": unknown token source "hf_abcdef"`},
		{"secret:hf_abcdef", `global.token_source = "secret:…": unknown token source "secret:…"`},
	} {
		c := Default()
		c.origin = originTOML
		c.Models = []ModelConfig{model("m")}
		c.Models[0].Kind = "auto"
		c.Global.TokenSource = tc.src
		err := c.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %v, want %q", tc.src, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), "abcdef") && strings.HasPrefix(tc.src, "secret:") {
			t.Errorf("%q: the error shows the value: %v", tc.src, err)
		}
	}
}

// TestResolveHFRevision: hf_revision picks the snapshot its ref (or, for a
// commit, its own snapshot) names.
func TestResolveHFRevision(t *testing.T) {
	home := t.TempDir()
	hub := filepath.Join(home, "hub")
	c1, c2 := strings.Repeat("a", 40), strings.Repeat("b", 40)
	s1 := fakeHub(t, hub, "org/R", c1, "r.gguf")
	s2 := fakeHub(t, hub, "org/R", c2, "r.gguf")
	setRef(t, hub, "org/R", c2)
	writeFile(t, filepath.Join(hub, "models--org--R", "refs"), "v1", c1)
	env := envOf(map[string]string{"HF_HOME": home})
	for _, tc := range []struct{ rev, dir, err string }{
		{"", s2, ""}, {"main", s2, ""}, {"v1", s1, ""}, {c1, s1, ""},
		{"v2", "", "no refs/v2"}, {strings.Repeat("c", 40), "", "no snapshot of commit " + strings.Repeat("c", 40)},
	} {
		m := model("org/R", "r.gguf")
		m.HFRevision = tc.rev
		src, err := resolve(t, m, env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want %q", tc.rev, err, tc.err)
			}
			continue
		}
		if err != nil || src.Dir != tc.dir {
			t.Errorf("%q: %+v %v, want %s", tc.rev, src, err, tc.dir)
		}
	}
}
