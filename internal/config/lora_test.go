package config

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"mistralrs/internal/hub"
	"mistralrs/internal/hub/hubtest"
)

func TestParseLoRA(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want LoRAModule
		err  string
	}{
		{"code = org/code-lora", LoRAModule{Alias: "code", Source: "org/code-lora"}, ""},
		{"code=org/a=b", LoRAModule{Alias: "code", Source: "org/a=b"}, ""},
		{`{"name":"p","path":"org/adapter","revision":"abc","base_model_name":"org/base","is_3d_lora_weight":true}`,
			LoRAModule{Alias: "p", Source: "org/adapter", Revision: "abc", BaseModelName: "org/base"}, ""},
		{` {"name":"p","path":"/x/a.gguf"} `, LoRAModule{Alias: "p", Source: "/x/a.gguf"}, ""},
		{"code", LoRAModule{}, "expected ALIAS=SOURCE or a JSON object"},
		{`{"name":"p"}`, LoRAModule{}, `missing field "path"`},
		{`{"path":"p"}`, LoRAModule{}, `missing field "name"`},
		{`{"name":"p","path":"q","rank":8}`, LoRAModule{}, `unknown field "rank"`},
		{`{"name":"p","path":"q"} {}`, LoRAModule{}, "text after the object"},
		{`{"name":"p","path":"q","revision":""}`, LoRAModule{}, `"revision" must not be empty`},
		{`{"name":"p","path":"q","base_model_name":" "}`, LoRAModule{}, `"base_model_name" must not be empty`},
		{`{"name":"p",`, LoRAModule{}, "invalid LoRA module JSON"},
	} {
		got, err := ParseLoRA(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"8589934592": 8589934592, "8gib": 8 << 30, "8GiB": 8 << 30, "4GB": 4e9, "512 mb": 512e6,
		"3kb": 3000, "3KiB": 3072, "7b": 7, "2mib": 2 << 20, "0": 0,
	} {
		if got, err := ParseByteSize(in); err != nil || int64(got) != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "gb", "1tib", "-1", "1.5gb", "99999999999gib"} {
		if got, err := ParseByteSize(in); err == nil {
			t.Errorf("%q: %d, want an error", in, got)
		}
	}
}

func TestExpandFlagValues(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"serve --lora a=x b=y -m m", "serve --lora a=x --lora b=y -m m"},
		{`serve --lora-modules {"name":"a","path":"x"} b=y text -m m`, `serve --lora-modules {"name":"a","path":"x"} --lora-modules b=y text -m m`},
		{"serve --lora=a=x b=y", "serve --lora=a=x b=y"},
		{"serve --lora a=x -- b=y", "serve --lora a=x -- b=y"},
		{"serve -m m --lora", "serve -m m --lora"},
		{"serve --lora-max-rank 8 x=y", "serve --lora-max-rank 8 x=y"},
	} {
		if got := strings.Join(ExpandFlagValues(strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// TestAdapterFlags: every adapter flag, its aliases, its defaults, and the
// conflicts the spec states, each a one-line error naming the flag.
func TestAdapterFlags(t *testing.T) {
	c, err := parseFlags(t, "-m", "m.gguf", "--lora", "a=x.gguf", "--lora-modules", `{"name":"b","path":"org/b","revision":"v2"}`,
		"--max-lora-rank", "64", "--lora-max-bytes", "512mib", "--lora-max-adapters", "4")
	if err != nil {
		t.Fatal(err)
	}
	a := c.Models[0].Adapter
	want := LoRAList{{Alias: "a", Source: "x.gguf"}, {Alias: "b", Source: "org/b", Revision: "v2"}}
	if !reflect.DeepEqual(a.LoRA, want) || *a.MaxRank != 64 || *a.MaxBytes != 512<<20 || *a.MaxAdapters != 4 || !a.DynamicLoRA() {
		t.Errorf("%+v", a)
	}
	c, err = parseFlags(t, "-m", "m.gguf")
	if err != nil || c.Models[0].Adapter.DynamicLoRA() {
		t.Fatalf("%v %+v", err, c.Models[0].Adapter)
	}
	if n, r, b := c.Models[0].Adapter.limits(); n != 16 || r != 256 || b != 8589934592 {
		t.Errorf("defaults %d %d %d", n, r, b)
	}
	if _, err := parseFlags(t, "-m", "m.gguf", "--enable-lora", "--lora-max-rank", "256"); err != nil {
		t.Errorf("a default given explicitly: %v", err)
	}
	long := strings.Repeat("é", MaxLoRAAliasBytes/2) + "x"
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--lora-max-rank", "64"}, "--lora-max-rank: a LoRA runtime limit needs dynamic LoRA: --enable-lora or at least one --lora adapter"},
		{[]string{"--max-lora-rank", "64"}, "--lora-max-rank: a LoRA runtime limit needs dynamic LoRA"},
		{[]string{"--lora-max-bytes", "1gib"}, "--lora-max-bytes: a LoRA runtime limit needs dynamic LoRA"},
		{[]string{"--enable-lora", "--lora-max-adapters", "0"}, "invalid value 0 for --lora-max-adapters: must be greater than 0"},
		{[]string{"--enable-lora", "--lora-max-rank", "-1"}, "invalid value -1 for --lora-max-rank: must be greater than 0"},
		{[]string{"--enable-lora", "--lora-max-bytes", "0kb"}, "invalid value 0 for --lora-max-bytes: must be greater than 0"},
		{[]string{"--lora-max-bytes", "8tb"}, `invalid argument "8tb" for "--lora-max-bytes" flag: unknown suffix "tb"`},
		{[]string{"--lora", "a=x", "--lora", "a = y"}, `invalid value "a" for --lora: the adapter alias is given more than once`},
		{[]string{"--lora", "=x"}, `invalid value "=x" for --lora: the adapter alias must not be empty`},
		{[]string{"--lora", "a="}, `invalid value "a" for --lora: the adapter has no source`},
		{[]string{"--lora", long + "=x"}, "the adapter alias must not exceed 256 bytes"},
		{[]string{"--lora", "a\tb=x"}, "control characters"},
		{[]string{"--lora", "a=x", "--lora", "b=y", "--lora-max-adapters", "1"}, "--lora: 2 adapters to preload, more than --lora-max-adapters = 1"},
		{[]string{"--lora", "a"}, `invalid argument "a" for "--lora" flag: expected ALIAS=SOURCE`},
		{[]string{"--xlora", "org/x"}, `invalid value "org/x" for --xlora: X-LoRA is not supported by this server; dynamic LoRA is (--lora, --enable-lora)`},
		{[]string{"--legacy-lora", "a.ggml", "--legacy-lora-order", "o.json"}, `invalid value "a.ggml" for --legacy-lora: legacy LoRA is not supported by this server`},
		{[]string{"--tgt-non-granular-index", "2"}, "invalid value 2 for --tgt-non-granular-index: X-LoRA is not supported"},
	} {
		_, err := parseFlags(t, append([]string{"-m", "m.gguf"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v\nwant %q", tc.args, err, tc.err)
		}
	}
	// `serve embedding`: no adapter options.
	c, err = parseFlags(t, "-m", "m.gguf", "--lora", "a=x")
	if err != nil {
		t.Fatal(err)
	}
	c.Models[0].Kind = KindEmbedding
	if err := c.Validate(); err == nil || err.Error() != "--lora cannot be used with `serve embedding`: an embedding model takes no LoRA adapters" {
		t.Errorf("embedding: %v", err)
	}
	// multimodal: dynamic LoRA is fine.
	c.Models[0].Kind = KindMultimodal
	if err := c.Validate(); err != nil {
		t.Errorf("multimodal: %v", err)
	}
}

func TestAdapterTOML(t *testing.T) {
	c, warns, err := loadString(t, `
[[models]]
model_id = "base"
[models.adapter]
enable_lora = true
lora_max_rank = 32
lora_max_bytes = "2gib"
lora = [{alias = "a", source = "x.gguf"}, {alias = "b", source = "org/b", revision = "v1", base_model_name = "org/base", typo = 1}]
[[models]]
model_id = "other"
`)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Models[0].Adapter
	want := LoRAList{{Alias: "a", Source: "x.gguf"}, {Alias: "b", Source: "org/b", Revision: "v1", BaseModelName: "org/base"}}
	if !reflect.DeepEqual(a.LoRA, want) || *a.MaxRank != 32 || *a.MaxBytes != 2<<30 || *a.MaxAdapters != 16 || !a.EnableLoRA {
		t.Errorf("%+v", a)
	}
	if b := c.Models[1].Adapter; b.DynamicLoRA() || *b.MaxAdapters != 16 || *b.MaxBytes != 8<<30 {
		t.Errorf("second model %+v", b)
	}
	if len(warns) != 1 || warns[0].String() != "models.adapter.lora.typo: unknown key; ignored" {
		t.Errorf("warnings %v", warns)
	}
	for _, tc := range []struct{ body, err string }{
		{"[models.adapter]\nlora_max_rank = 8\n", "models[0].adapter.lora_max_rank: a LoRA runtime limit needs dynamic LoRA: enable_lora = true or at least one lora entry"},
		{"[models.adapter]\nenable_lora = true\nlora_max_adapters = 0\n", "models[0].adapter.lora_max_adapters = 0: must be greater than 0"},
		{"[models.adapter]\nenable_lora = true\nlora_max_bytes = \"1pb\"\n", `"1pb": unknown suffix "pb"`},
		{"[models.adapter]\nenable_lora = true\nlora_max_bytes = 1.5\n", "expected a byte count"},
		{"[models.adapter]\nlora = [{alias = \"a\", source = \"x\"}, {alias = \"a\", source = \"y\"}]\n", `models[0].adapter.lora = "a": the adapter alias is given more than once`},
		{"[models.adapter]\nlora = [{alias = \" \", source = \"x\"}]\n", "the adapter alias must not be empty"},
		{"[models.adapter]\nlora = [{alias = \"a\", source = \"x\", revision = \" \"}]\n", "revision must not be blank"},
		{"[models.adapter]\nxlora = \"org/x\"\nxlora_order = \"o.json\"\n", `models[0].adapter.xlora = "org/x": X-LoRA is not supported by this server; dynamic LoRA is (models.adapter.lora, models.adapter.enable_lora)`},
		{"[models.adapter]\nlegacy_lora = \"a\"\n", `models[0].adapter.legacy_lora = "a": legacy LoRA is not supported by this server`},
		{"kind = \"embedding\"\n[models.adapter]\nenable_lora = true\n", `models[0].kind = "embedding": adapter.enable_lora does not apply, an embedding model takes no LoRA adapters`},
		{"[models.adapter]\nlora = [{alias = \"a\", source = \"x\", base_model_name = \"other\"}]\n[[models]]\nmodel_id = \"other\"\n",
			`models[0].adapter.lora = "a": base_model_name "other" names another served model (models[1])`},
	} {
		_, _, err := loadString(t, "[[models]]\nmodel_id = \"m\"\n"+tc.body)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v\nwant %q", tc.body, err, tc.err)
		}
	}
	// base_model_name may name the model itself, or something not served.
	for _, b := range []string{"m", "org/base"} {
		if _, _, err := loadString(t, "[[models]]\nmodel_id = \"m\"\n[models.adapter]\nlora = [{alias = \"a\", source = \"x\", base_model_name = \""+b+"\"}]\n"); err != nil {
			t.Errorf("base_model_name %q: %v", b, err)
		}
	}
}

// peftDir writes a PEFT adapter folder.
func peftDir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	touch(t, dir, hub.PEFTConfig, hub.PEFTWeights)
	return dir
}

// TestLoRAForLocal resolves each kind of local source, and refuses what is
// none, with one error naming the adapter and its source.
func TestLoRAForLocal(t *testing.T) {
	dir := t.TempDir()
	touch(t, dir, "a.gguf", "notes.txt")
	peft := peftDir(t, filepath.Join(dir, "peft"))
	one := filepath.Join(dir, "one")
	touch(t, one, "lora-f16.gguf", "mmproj-f16.gguf", "README.md")
	both := peftDir(t, filepath.Join(dir, "both"))
	touch(t, both, "lora.gguf")
	two := filepath.Join(dir, "two")
	touch(t, two, "x.gguf", "y.gguf")
	empty := filepath.Join(dir, "empty")
	touch(t, empty, "README.md")

	c, err := parseFlags(t, ExpandFlagValues([]string{"-m", "m.gguf", "--lora", "a=" + filepath.Join(dir, "a.gguf"), "b=" + peft, "--lora", "c=" + one, "--lora-max-rank", "8"})...)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := c.LoRAFor(0, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := &LoRARuntime{MaxAdapters: 16, MaxRank: 8, MaxBytes: 8 << 30, Preload: []LoRAModule{
		{Alias: "a", Source: filepath.Join(dir, "a.gguf"), Path: filepath.Join(dir, "a.gguf")},
		{Alias: "b", Source: peft, Path: peft},
		{Alias: "c", Source: one, Path: filepath.Join(one, "lora-f16.gguf")},
	}}
	if !reflect.DeepEqual(rt, want) {
		t.Errorf("got  %+v\nwant %+v", rt, want)
	}
	if c, _ = parseFlags(t, "-m", "m.gguf"); mustLoRA(t, c) != nil {
		t.Error("a runtime without dynamic LoRA")
	}
	if c, _ = parseFlags(t, "-m", "m.gguf", "--enable-lora"); !reflect.DeepEqual(mustLoRA(t, c), &LoRARuntime{MaxAdapters: 16, MaxRank: 256, MaxBytes: 8 << 30}) {
		t.Error("--enable-lora alone")
	}

	for _, tc := range []struct{ source, err string }{
		{filepath.Join(dir, "notes.txt"), "is a file but not a .gguf adapter"},
		{both, "holds both a PEFT adapter and lora.gguf"},
		{two, "holds several GGUF files and no PEFT adapter"},
		{empty, "holds no LoRA adapter"},
		{filepath.Join(dir, "missing.gguf"), "no such file or folder"},
		{"./nowhere", "no such file or folder"},
		{"nowhere", `"nowhere" is neither a local .gguf file or folder nor a Hugging Face repository (ORG/NAME)`},
		{"org/uncached", "LoRA adapter org/uncached at revision main is not in the Hugging Face cache " + dir + "; it is downloaded at startup"},
	} {
		c, err := parseFlags(t, "-m", "m.gguf", "--hf-cache", dir, "--lora", "x="+tc.source)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.LoRAFor(0, noEnv)
		prefix := "--lora x=" + tc.source + ": "
		if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v\nwant %q…%q", tc.source, err, prefix, tc.err)
		}
	}
}

func mustLoRA(t *testing.T, c *Config) *LoRARuntime {
	t.Helper()
	rt, err := c.LoRAFor(0, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestFetchLoRA downloads adapters named ORG/NAME through the fake Hub,
// with a revision, then resolves them from the cache alone.
func TestFetchLoRA(t *testing.T) {
	h := hubtest.New(t)
	peft := h.Add("org/peft-lora", map[string][]byte{hub.PEFTConfig: []byte(`{"r":8}`), hub.PEFTWeights: []byte("st")})
	peft.Refs["v1"] = peft.Commit
	gg := h.Add("org/gguf-lora", map[string][]byte{"lora.gguf": []byte("GGUF"), "README.md": []byte("x")})
	h.Add("org/empty-lora", map[string][]byte{"README.md": []byte("x")})
	home := t.TempDir()
	env := map[string]string{"HF_HOME": home, "HF_ENDPOINT": h.URL}
	var progress strings.Builder
	o := FetchOptions{Getenv: envOf(env), Progress: &progress}
	local := filepath.Join(t.TempDir(), "a.gguf")
	touch(t, filepath.Dir(local), "a.gguf")

	c, _, err := loadString(t, `[[models]]
model_id = "`+filepath.Join(filepath.Dir(local), "a.gguf")+`"
[models.adapter]
lora = [{alias = "p", source = "org/peft-lora", revision = "v1"}, {alias = "g", source = "org/gguf-lora"}, {alias = "l", source = "`+local+`"}]
`)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Fetch(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	rt, err := c.LoRAFor(0, envOf(map[string]string{"HF_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	snaps := filepath.Join(home, "hub")
	want := []LoRAModule{
		{Alias: "p", Source: "org/peft-lora", Revision: "v1", Path: filepath.Join(snaps, "models--org--peft-lora", "snapshots", peft.Commit)},
		{Alias: "g", Source: "org/gguf-lora", Revision: "main", Path: filepath.Join(snaps, "models--org--gguf-lora", "snapshots", gg.Commit, "lora.gguf")},
		{Alias: "l", Source: local, Path: local},
	}
	if !reflect.DeepEqual(rt.Preload, want) {
		t.Errorf("got  %+v\nwant %+v", rt.Preload, want)
	}
	if !strings.Contains(progress.String(), "LoRA adapter p: org/peft-lora at "+peft.Commit+" (adapter_config.json + adapter_model.safetensors)") {
		t.Errorf("progress %q", progress.String())
	}

	// Without Fetch (a new Config), the cache alone resolves them: no request.
	h.Reset()
	c2, _, err := loadString(t, `[[models]]
model_id = "m"
[models.adapter]
lora = [{alias = "p", source = "org/peft-lora", revision = "v1"}, {alias = "g", source = "org/gguf-lora"}]
`)
	if err != nil {
		t.Fatal(err)
	}
	rt, err = c2.LoRAFor(0, envOf(map[string]string{"HF_HOME": home}))
	if err != nil || !reflect.DeepEqual(rt.Preload, want[:2]) {
		t.Errorf("from the cache: %+v %v", rt, err)
	}
	if n := h.Count(""); n != 0 {
		t.Errorf("%d requests", n)
	}

	// A repository with no adapter: one error naming the alias and the repository.
	c3, _, _ := loadString(t, "[[models]]\nmodel_id = \""+local+"\"\n[models.adapter]\nlora = [{alias = \"e\", source = \"org/empty-lora\"}]\n")
	err = c3.Fetch(context.Background(), o)
	if err == nil || err.Error() != `LoRA adapter "e": Hugging Face model org/empty-lora: the repository holds no LoRA adapter: neither a PEFT adapter (adapter_config.json + adapter_model.safetensors) nor a GGUF adapter file` {
		t.Errorf("empty repository: %v", err)
	}
}
