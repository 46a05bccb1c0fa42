package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/hub/hubtest"
)

// TestMultimodalSettings: [models.multimodal] and --max-* set the same
// bounds, unset values take the table's defaults, and bad values are
// errors naming the key or the flag.
func TestMultimodalSettings(t *testing.T) {
	c, warns, err := loadString(t, "[[models]]\nmodel_id = \"a\"\nkind = \"multimodal\"\n[models.format]\nmmproj = \"mmproj-f16.gguf\"\n"+
		"[models.multimodal]\nmax_edge = 512\nmax_num_images = 3\n[[models]]\nmodel_id = \"b\"\n")
	if err != nil || len(warns) > 0 {
		t.Fatalf("%v %v", err, warns)
	}
	if got, want := c.Models[0].ImageLimits(), (ImageLimits{MaxEdge: 512, MaxImages: 3, MaxPixels: 4096 * 4096}); got != want {
		t.Errorf("model a: %+v, want %+v", got, want)
	}
	if got, want := c.Models[1].ImageLimits(), (ImageLimits{MaxImages: 8, MaxPixels: 4096 * 4096}); got != want {
		t.Errorf("model b (defaults): %+v, want %+v", got, want)
	}
	if got := (&ModelConfig{}).ImageLimits(); got.MaxImages != 8 || got.MaxPixels != 4096*4096 {
		t.Errorf("a zero entry: %+v", got)
	}
	fc, err := parseFlags(t, "-m", "x", "--max-image-length", "1000", "--max-num-images", "2", "--max-edge", "64")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fc.Models[0].ImageLimits(), (ImageLimits{MaxEdge: 64, MaxImages: 2, MaxPixels: 1000 * 1000}); got != want {
		t.Errorf("flags: %+v, want %+v", got, want)
	}

	m := "[[models]]\nmodel_id = \"a\"\n"
	for _, tc := range []struct{ toml, want string }{
		{m + "[models.format]\nmmproj = \"a.gguf;b.gguf\"\n", `models[0].format.mmproj = "a.gguf;b.gguf": names 2 projectors; this server loads one vision projector per model`},
		{m + "[models.format]\nmmproj = [\"a.gguf\", \"b.gguf\"]\n", `names 2 projectors`},
		{m + "[models.format]\nmmproj = \"proj.bin\"\n", `models[0].format.mmproj = "proj.bin": must be a .gguf file (a llama.cpp mmproj projector)`},
		{m + "kind = \"text\"\n[models.format]\nmmproj = \"p.gguf\"\n", `models[0].format.mmproj = "p.gguf": a text model takes no images (kind = "text"); use kind = "multimodal" or "auto"`},
		{m + "kind = \"embedding\"\n[models.format]\nmmproj = \"p.gguf\"\n", `a embedding model takes no images`},
		{m + "[models.multimodal]\nmax_num_images = 0\n", "models[0].multimodal.max_num_images = 0: must be between 1 and 1024"},
		{m + "[models.multimodal]\nmax_image_length = 70000\n", "models[0].multimodal.max_image_length = 70000: must be between 1 and 65536"},
		{m + "[models.multimodal]\nmax_edge = -1\n", "models[0].multimodal.max_edge = -1: must be between 0 (the projector's own size) and 65536"},
		{"[runtime]\nencoder_cache_mb = -1\n" + m, "runtime.encoder_cache_mb = -1: must not be negative"},
		{"[server]\nremote_image_max_mb = 0\n" + m, "server.remote_image_max_mb = 0: must be between 1 and 1024"},
		{"[server]\nremote_image_timeout_secs = 0\n" + m, "server.remote_image_timeout_secs = 0: must be between 1 and 3600"},
	} {
		if _, _, err := loadString(t, tc.toml); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\nerror %v\nwant  %q", tc.toml, err, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-m", "x", "--mmproj", "a.gguf;b.gguf"}, `invalid value "a.gguf;b.gguf" for --mmproj: names 2 projectors`},
		{[]string{"-m", "x", "--mmproj", "a.gguf", "--mmproj", "b.gguf"}, `names 2 projectors`},
		{[]string{"-m", "x", "--max-num-images", "0"}, "invalid value 0 for --max-num-images: must be between 1 and 1024"},
		{[]string{"-m", "x", "--encoder-cache-mb", "-5"}, "invalid value -5 for --encoder-cache-mb: must not be negative"},
		{[]string{"-m", "x", "--remote-image-timeout-secs", "0"}, "invalid value 0 for --remote-image-timeout-secs"},
	} {
		if _, err := parseFlags(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}
	// `serve text` sets the kind before Validate: a projector is refused.
	c, _ = parseFlags(t, "-m", "x", "--mmproj", "p.gguf")
	c.Models[0].Kind = KindText
	want := "--mmproj cannot be used with `serve text`: a text model takes no images (use `serve multimodal` or `serve auto`)"
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("serve text --mmproj: %v", err)
	}
	if got := MultimodalFlags(); strings.Join(got, " ") != "mmproj max-edge max-num-images max-image-length" {
		t.Errorf("MultimodalFlags() = %q", got)
	}
}

func TestProjectorSearch(t *testing.T) {
	root := t.TempDir()
	one := filepath.Join(root, "one")
	touch(t, one, "m-Q8_0.gguf", "mmproj-m-f16.gguf", "README.md")
	none := filepath.Join(root, "none")
	touch(t, none, "m-Q8_0.gguf")
	two := filepath.Join(root, "two")
	touch(t, two, "m-Q8_0.gguf", "mmproj-a.gguf", "MMPROJ-b.gguf")
	abs := filepath.Join(root, "elsewhere", "proj.gguf")
	touch(t, filepath.Dir(abs), "proj.gguf")
	if err := os.Symlink(filepath.Join(root, "gone"), filepath.Join(none, "mmproj-dangling.gguf")); err != nil {
		t.Fatal(err)
	}
	withKind := func(m ModelConfig, kind string, proj ...string) ModelConfig {
		m.Kind, m.Format.MMProj = kind, proj
		return m
	}
	for _, tc := range []struct {
		name string
		m    ModelConfig
		want string
		err  string
	}{
		{name: "auto: the one beside", m: withKind(model(one), KindAuto), want: filepath.Join(one, "mmproj-m-f16.gguf")},
		{name: "multimodal: the one beside", m: withKind(model(filepath.Join(one, "m-Q8_0.gguf")), KindMultimodal), want: filepath.Join(one, "mmproj-m-f16.gguf")},
		{name: "-f alone: beside the file", m: withKind(model("", filepath.Join(one, "m-Q8_0.gguf")), KindAuto), want: filepath.Join(one, "mmproj-m-f16.gguf")},
		{name: "text: none", m: withKind(model(one), KindText)},
		{name: "embedding: none", m: withKind(model(one), KindEmbedding)},
		{name: "auto without one: text", m: withKind(model(filepath.Join(none, "m-Q8_0.gguf")), KindAuto)},
		{name: "multimodal without one", m: withKind(model(filepath.Join(root, "none")), KindMultimodal),
			err: "a multimodal model needs a vision projector, and no *mmproj*.gguf file is beside " + filepath.Join(none, "m-Q8_0.gguf") + "; name one with --mmproj (models.format.mmproj)"},
		{name: "several", m: withKind(model(two), KindAuto),
			err: "several vision projectors beside " + filepath.Join(two, "m-Q8_0.gguf") + ": MMPROJ-b.gguf, mmproj-a.gguf; name one with --mmproj (models.format.mmproj), or serve the model as text (`serve text`, kind = \"text\")"},
		{name: "several, one named", m: withKind(model(two), KindAuto, "mmproj-a.gguf"), want: filepath.Join(two, "mmproj-a.gguf")},
		{name: "named, absolute", m: withKind(model(none), KindMultimodal, abs), want: abs},
		{name: "-f alone, named as a path", m: withKind(model("", filepath.Join(none, "m-Q8_0.gguf")), KindAuto, abs), want: abs},
		{name: "named, missing", m: withKind(model(two), KindAuto, "mmproj-c.gguf"),
			err: "vision projector mmproj-c.gguf not found in " + two + " (mmproj files there: MMPROJ-b.gguf, mmproj-a.gguf)"},
		{name: "named, missing, none there", m: withKind(model(one), KindAuto, "sub/p.gguf"),
			err: "vision projector sub/p.gguf not found in " + one + " (mmproj files there: mmproj-m-f16.gguf)"},
		{name: "named, broken link", m: withKind(model(none), KindAuto, "mmproj-dangling.gguf"),
			err: "vision projector " + filepath.Join(none, "mmproj-dangling.gguf") + " is a broken link (an incomplete download?)"},
		{name: "-f alone, named path missing", m: withKind(model("", filepath.Join(one, "m-Q8_0.gguf")), KindAuto, filepath.Join(root, "no.gguf")),
			err: "vision projector " + filepath.Join(root, "no.gguf") + ": no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := resolve(t, tc.m, nil)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v\nwant  %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if src.MMProj != tc.want {
				t.Errorf("projector %q, want %q", src.MMProj, tc.want)
			}
		})
	}
	if _, err := Projector(withKind(model(one), KindAuto, "sub"), one, filepath.Join(one, "m-Q8_0.gguf")); err == nil {
		t.Error("a missing name accepted")
	}
	if err := os.Mkdir(filepath.Join(one, "dir-mmproj.gguf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Projector(withKind(model(one), KindAuto, "dir-mmproj.gguf"), one, ""); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("a directory as projector: %v", err)
	}
	// A directory named like a projector is no projector: the one file stays the choice.
	if src, err := resolve(t, withKind(model(one), KindAuto), nil); err != nil || src.MMProj != filepath.Join(one, "mmproj-m-f16.gguf") {
		t.Errorf("with a directory beside: %+v %v", src, err)
	}
}

// TestFetchProjector: a Hugging Face model served auto or multimodal
// brings its repository's projector (the model's type, else F16), pinned
// like the model's files; text does not; multimodal needs one.
func TestFetchProjector(t *testing.T) {
	h := hubtest.New(t)
	r := h.Add("org/Vision-GGUF", map[string][]byte{
		"v-Q4_K_M.gguf": hubtest.Model(t, 1), "mmproj-v-f32.gguf": []byte("f32"), "mmproj-v-f16.gguf": []byte("f16"),
	})
	h.Add("org/Text-GGUF", map[string][]byte{"t-Q8_0.gguf": hubtest.Model(t, 2)})
	home := t.TempDir()
	getenv := envOf(map[string]string{"HF_HOME": home, "HF_ENDPOINT": h.URL})
	var progress strings.Builder
	o := FetchOptions{Getenv: getenv, Progress: &progress}
	ctx := context.Background()
	snap := filepath.Join(home, "hub", "models--org--Vision-GGUF", "snapshots", r.Commit)

	textHome := t.TempDir()
	text := DefaultModel()
	text.ModelID, text.Kind = "org/Vision-GGUF", KindText
	if err := FetchModel(ctx, &text, "", FetchOptions{Getenv: envOf(map[string]string{"HF_HOME": textHome, "HF_ENDPOINT": h.URL})}); err != nil {
		t.Fatal(err)
	}
	if len(text.Format.MMProj) != 0 {
		t.Errorf("text model pinned to a projector %q", text.Format.MMProj)
	}
	if _, err := os.Stat(filepath.Join(textHome, "hub", "models--org--Vision-GGUF", "snapshots", r.Commit, "mmproj-v-f16.gguf")); err == nil {
		t.Error("a text model downloaded a projector")
	}

	auto := DefaultModel()
	auto.ModelID = "org/Vision-GGUF"
	if err := FetchModel(ctx, &auto, "", o); err != nil {
		t.Fatal(err)
	}
	if got := auto.Format.MMProj.String(); got != "mmproj-v-f16.gguf" {
		t.Errorf("pinned projector %q", got)
	}
	if !strings.Contains(progress.String(), "org/Vision-GGUF: vision projector mmproj-v-f16.gguf (the model's own type, else F16, else the first by name; name another with --mmproj)") {
		t.Errorf("progress %q", progress.String())
	}
	src, err := ResolveModel(auto, getenv)
	if err != nil || src.MMProj != filepath.Join(snap, "mmproj-v-f16.gguf") || src.Files[0] != filepath.Join(snap, "v-Q4_K_M.gguf") {
		t.Fatalf("resolved %+v %v", src, err)
	}
	if b, err := os.ReadFile(src.MMProj); err != nil || string(b) != "f16" {
		t.Errorf("projector %q %v", b, err)
	}

	named := DefaultModel()
	named.ModelID, named.Kind, named.Format.MMProj = "org/Vision-GGUF", KindMultimodal, FileList{"mmproj-v-f32.gguf"}
	if err := FetchModel(ctx, &named, "", o); err != nil {
		t.Fatal(err)
	}
	if src, err := ResolveModel(named, getenv); err != nil || src.MMProj != filepath.Join(snap, "mmproj-v-f32.gguf") {
		t.Errorf("named projector: %+v %v", src, err)
	}

	mm := DefaultModel()
	mm.ModelID, mm.Kind = "org/Text-GGUF", KindMultimodal
	if err := FetchModel(ctx, &mm, "", o); err == nil || !strings.Contains(err.Error(), "the repository has no vision projector") {
		t.Errorf("multimodal on a text repository: %v", err)
	}
	autoText := DefaultModel()
	autoText.ModelID = "org/Text-GGUF"
	if err := FetchModel(ctx, &autoText, "", o); err != nil || len(autoText.Format.MMProj) != 0 {
		t.Errorf("auto on a text repository: %q %v", autoText.Format.MMProj, err)
	}
	if src, err := ResolveModel(autoText, getenv); err != nil || src.MMProj != "" {
		t.Errorf("auto on a text repository resolves to %+v %v", src, err)
	}
}

// A draft model takes no images: no projector is looked for beside it
// (several would be an error for a served model) nor fetched with it.
func TestDraftHasNoProjector(t *testing.T) {
	dir := t.TempDir()
	touch(t, dir, "d-Q8_0.gguf", "mmproj-a.gguf", "mmproj-b.gguf")
	c := Default()
	c.Runtime.MTPModel = dir
	c.Models = []ModelConfig{DefaultModel()}
	c.Models[0].ModelID = "m"
	src, err := c.ResolveDraft(0)
	if err != nil || src.MMProj != "" || src.Files[0] != filepath.Join(dir, "d-Q8_0.gguf") {
		t.Fatalf("draft %+v %v", src, err)
	}

	h := hubtest.New(t)
	r := h.Add("org/Draft-GGUF", map[string][]byte{"d-Q8_0.gguf": hubtest.Model(t, 1), "mmproj-d-f16.gguf": []byte("p")})
	home := t.TempDir()
	c.Runtime.MTPModel = "org/Draft-GGUF"
	c.Models[0].ModelID = dir // local: nothing to fetch
	c.Models[0].Kind = KindText
	if err := c.Fetch(context.Background(), FetchOptions{Getenv: envOf(map[string]string{"HF_HOME": home, "HF_ENDPOINT": h.URL})}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, "hub", "models--org--Draft-GGUF", "snapshots", r.Commit, "mmproj-d-f16.gguf")); err == nil {
		t.Error("the draft's projector was downloaded")
	}
}
