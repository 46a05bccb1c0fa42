package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The speculative flags: --spec-ngram alone means 3, a size goes after "=";
// --mtp-model and --mtp-n-predict are plain flags.
func TestSpeculativeFlags(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		ngram, tok   int
		draft        string
		positionals  []string
		engineTokens int
	}{
		{nil, 0, 4, "", nil, 4},
		{[]string{"--spec-ngram"}, 3, 4, "", nil, 4},
		{[]string{"--spec-ngram=5"}, 5, 4, "", nil, 4},
		{[]string{"--spec-ngram=0"}, 0, 4, "", nil, 4},
		{[]string{"--spec-ngram", "--mtp-n-predict", "8"}, 3, 8, "", nil, 8},
		// pflag's optional values: a separate word is not the flag's value
		// (serve refuses the stray argument with a hint).
		{[]string{"--spec-ngram", "5"}, 3, 4, "", []string{"5"}, 4},
		{[]string{"--mtp-model", "d.gguf", "--mtp-n-predict=2"}, 0, 2, "d.gguf", nil, 2},
	} {
		c := Default()
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		BindServeFlags(fs, c)
		if err := fs.Parse(tc.args); err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		r := c.Runtime
		if r.SpecNgram != tc.ngram || r.MTPNPredict != tc.tok || r.MTPModel != tc.draft ||
			strings.Join(fs.Args(), " ") != strings.Join(tc.positionals, " ") {
			t.Errorf("%q: spec_ngram %d, mtp_n_predict %d, mtp_model %q, args %q", tc.args, r.SpecNgram, r.MTPNPredict, r.MTPModel, fs.Args())
		}
		// The engine options carry the [runtime] values; the one model of
		// serve gets them.
		if o := c.EngineOptions(); o.SpecNgram != tc.ngram || o.SpecTokens != tc.engineTokens {
			t.Errorf("%q: engine options SpecNgram %d, SpecTokens %d", tc.args, o.SpecNgram, o.SpecTokens)
		}
		if s := c.SpeculativeFor(0); s.DraftModel != tc.draft || s.Ngram != tc.ngram || s.Tokens != tc.tok {
			t.Errorf("%q: SpeculativeFor(0) = %+v", tc.args, s)
		}
	}
	if f := newServeFlags(t).Lookup("spec-ngram"); f == nil || f.NoOptDefVal != "3" || f.DefValue != "0" {
		t.Errorf("--spec-ngram: %+v", f)
	}
}

func newServeFlags(t *testing.T) *pflag.FlagSet {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	BindServeFlags(fs, Default())
	return fs
}

// Every bad speculative setting is one line naming the flag or the key.
func TestSpeculativeErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mtp"}, "--mtp: the built-in MTP head is not supported: no supported architecture (llama, mistral, qwen2, qwen3 GGUFs) carries MTP layers; use --mtp-model (a draft model) or --spec-ngram (prompt lookup)"},
		{[]string{"--mtp", "--mtp-model", "d.gguf"}, "the argument '--mtp' cannot be used with '--mtp-model'"},
		{[]string{"--mtp-model", "d.gguf", "--mtp"}, "the argument '--mtp' cannot be used with '--mtp-model'"},
		{[]string{"--mtp-n-predict", "0"}, "invalid value 0 for --mtp-n-predict: must be between 1 and 16"},
		{[]string{"--mtp-n-predict", "99"}, "invalid value 99 for --mtp-n-predict: must be between 1 and 16"},
		{[]string{"--mtp-n-predict", "-1"}, "invalid value -1 for --mtp-n-predict: must be between 1 and 16"},
		{[]string{"--spec-ngram=9"}, "invalid value 9 for --spec-ngram: must be between 0 (off) and 8"},
		{[]string{"--spec-ngram=-1"}, "invalid value -1 for --spec-ngram: must be between 0 (off) and 8"},
		{[]string{"--spec-ngram=x"}, `invalid argument "x" for "--spec-ngram" flag`},
		{[]string{"--mtp-model", "d.gguf", "--spec-ngram"}, "the argument '--mtp-model' cannot be used with '--spec-ngram' (choose one proposer)"},
	} {
		_, err := parseFlags(t, tc.args...)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v\nwant %q", tc.args, err, tc.want)
		}
	}

	m := modelsTOML
	for _, tc := range []struct {
		toml string
		want string
	}{
		{"[runtime]\nmtp = true\n" + m, "runtime.mtp: the built-in MTP head is not supported: no supported architecture (llama, mistral, qwen2, qwen3 GGUFs) carries MTP layers; use runtime.mtp_model (a draft model) or runtime.spec_ngram (prompt lookup)"},
		{"[runtime]\nmtp = true\nmtp_model = \"d.gguf\"\n" + m, "runtime.mtp and runtime.mtp_model are both set; remove runtime.mtp"},
		{"[runtime]\nmtp = \"yes\"\n" + m, `(last key "runtime.mtp"): incompatible types`},
		{"[runtime]\nmtp_n_predict = 0\n" + m, "runtime.mtp_n_predict = 0: must be between 1 and 16"},
		{"[runtime]\nmtp_n_predict = 99\n" + m, "runtime.mtp_n_predict = 99: must be between 1 and 16"},
		{"[runtime]\nspec_ngram = 9\n" + m, "runtime.spec_ngram = 9: must be between 0 (off) and 8"},
		{"[runtime]\nspec_ngram = 3\nmtp_model = \"d.gguf\"\n" + m, "runtime.mtp_model and runtime.spec_ngram are both set; choose one proposer"},
		{"[[models]]\nmodel_id = \"a\"\n[[models]]\nmodel_id = \"b\"\nmtp_n_predict = 17\n", "models[1].mtp_n_predict = 17: must be between 1 and 16"},
		{"[[models]]\nmodel_id = \"a\"\nmtp_n_predict = 0\n", "models[0].mtp_n_predict = 0: must be between 1 and 16"},
		{"[[models]]\nmodel_id = \"a\"\nspec_ngram = -2\n", "models[0].spec_ngram = -2: must be between 0 (off) and 8"},
		{"[[models]]\nmodel_id = \"a\"\nspec_ngram = \"3\"\n", `(last key "models.spec_ngram"): incompatible types`},
		{"[[models]]\nmodel_id = \"a\"\n[[models]]\nmodel_id = \"b\"\nmtp_model = \"d.gguf\"\nspec_ngram = 2\n", "models[1]: models[1].mtp_model and models[1].spec_ngram are both set; choose one proposer"},
		// The first model takes [runtime]'s proposer unless its entry overrides it.
		{"[runtime]\nspec_ngram = 3\n[[models]]\nmodel_id = \"a\"\nmtp_model = \"d.gguf\"\n", "models[0]: models[0].mtp_model and runtime.spec_ngram are both set; choose one proposer"},
		{"[runtime]\nmtp_model = \"d.gguf\"\n[[models]]\nmodel_id = \"a\"\nspec_ngram = 4\n", "models[0]: runtime.mtp_model and models[0].spec_ngram are both set; choose one proposer"},
	} {
		_, _, err := loadString(t, tc.toml)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q:\nerror %v\nwant  %q", tc.toml, err, tc.want)
		}
	}
	// Not conflicts: a later model's proposer is its own, and an entry's
	// spec_ngram = 0 turns [runtime]'s prompt lookup off for the first model.
	for _, ok := range []string{
		"[runtime]\nspec_ngram = 3\n[[models]]\nmodel_id = \"a\"\n[[models]]\nmodel_id = \"b\"\nmtp_model = \"d.gguf\"\n",
		"[runtime]\nspec_ngram = 3\n[[models]]\nmodel_id = \"a\"\nspec_ngram = 0\nmtp_model = \"d.gguf\"\n",
		"[runtime]\nmtp = false\nmtp_model = \"d.gguf\"\n" + m,
	} {
		if _, warns, err := loadString(t, ok); err != nil || len(warns) > 0 {
			t.Errorf("%q: %v %v", ok, err, warns)
		}
	}
}

// [runtime] is the first model's; each entry's own keys are its own; a later
// model without them gets the table's defaults.
func TestSpeculativeFor(t *testing.T) {
	c, warns, err := loadString(t, `
[runtime]
mtp_model = "draft.gguf"
mtp_n_predict = 6

[[models]]
model_id = "first"

[[models]]
model_id = "second"
spec_ngram = 2
mtp_n_predict = 9

[[models]]
model_id = "third"

[[models]]
model_id = "fourth"
mtp_model = "other-draft.gguf"
`)
	if err != nil || len(warns) > 0 {
		t.Fatal(err, warns)
	}
	want := []Speculative{
		{DraftModel: "draft.gguf", Tokens: 6},
		{Tokens: 9, Ngram: 2},
		{Tokens: 4},
		{DraftModel: "other-draft.gguf", Tokens: 4},
	}
	for i, w := range want {
		got := c.SpeculativeFor(i)
		got.draftKey, got.ngramKey = "", ""
		if got != w {
			t.Errorf("model %d: %+v, want %+v", i, got, w)
		}
	}
	if o := c.EngineOptions(); o.SpecTokens != 6 || o.SpecNgram != 0 || o.Draft != nil {
		t.Errorf("engine options: SpecTokens %d, SpecNgram %d, Draft %v", o.SpecTokens, o.SpecNgram, o.Draft)
	}

	// The first entry's own keys win over [runtime].
	c, _, err = loadString(t, "[runtime]\nspec_ngram = 3\nmtp_n_predict = 2\n[[models]]\nmodel_id = \"a\"\nspec_ngram = 0\nmtp_n_predict = 5\n")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.SpeculativeFor(0); s.Ngram != 0 || s.Tokens != 5 || s.DraftModel != "" {
		t.Errorf("first entry overriding [runtime]: %+v", s)
	}
	c, _, err = loadString(t, "[runtime]\nmtp_model = \"d.gguf\"\n[[models]]\nmodel_id = \"a\"\nmtp_model = \"e.gguf\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.SpeculativeFor(0); s.DraftModel != "e.gguf" || s.draftKey != "models[0].mtp_model" {
		t.Errorf("first entry's draft: %+v", s)
	}
}

// ResolveDraft finds a draft like a model_id, and names the setting and the
// draft when it cannot.
func TestResolveDraft(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "draft.gguf", "")
	sub := filepath.Join(dir, "sub")
	inDir := writeFile(t, sub, "small-q8_0.gguf", "")
	missing := filepath.Join(dir, "missing.gguf")

	c, err := parseFlags(t, "--mtp-model", file)
	if err != nil {
		t.Fatal(err)
	}
	if src, err := c.ResolveDraft(0); err != nil || len(src.Files) != 1 || src.Files[0] != file {
		t.Errorf("file: %+v %v", src, err)
	}
	if src, err := c.ResolveDraft(1); src != nil || err != nil {
		t.Errorf("a model without a draft: %+v %v", src, err)
	}
	c, _ = parseFlags(t, "--mtp-model", sub)
	if src, err := c.ResolveDraft(0); err != nil || len(src.Files) != 1 || src.Files[0] != inDir {
		t.Errorf("directory: %+v %v", src, err)
	}
	c, _ = parseFlags(t, "--mtp-model", missing)
	if _, err := c.ResolveDraft(0); err == nil || err.Error() != fmt.Sprintf("--mtp-model: draft model %q: no such file or directory", missing) {
		t.Errorf("missing file (flags): %v", err)
	}
	empty := t.TempDir()
	c, _ = parseFlags(t, "--mtp-model", empty)
	if _, err := c.ResolveDraft(0); err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("--mtp-model: draft model %q: no .gguf file in %s", empty, empty)) {
		t.Errorf("empty directory: %v", err)
	}
	c, _, err = loadString(t, fmt.Sprintf("[runtime]\nmtp_model = %q\n[[models]]\nmodel_id = \"a\"\n[[models]]\nmodel_id = \"b\"\nmtp_model = %q\n", missing, missing))
	if err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"runtime.mtp_model", "models[1].mtp_model"} {
		if _, err := c.ResolveDraft(i); err == nil || err.Error() != fmt.Sprintf("%s: draft model %q: no such file or directory", key, missing) {
			t.Errorf("missing file (TOML, model %d): %v", i, err)
		}
	}
}
