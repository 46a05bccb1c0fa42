package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
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
			err: `model "org/absent" is not in the local Hugging Face cache (no ` + filepath.Join(hub, "models--org--absent") + `); this server downloads nothing. ` +
				"Download it first, e.g. `hf download org/absent --include '*Q8_0*.gguf'`, point HF_HOME, HF_HUB_CACHE or --hf-cache at the cache that holds it, or pass a local directory with -m"},
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
