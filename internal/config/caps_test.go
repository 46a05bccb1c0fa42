package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/smallfile"
	"mistralrs/internal/testutil"
)

// A config file over its cap, or one that never ends, is refused by name
// without being read whole.
func TestLoadTOMLCapped(t *testing.T) {
	dir := t.TempDir()
	big := testutil.SparseFile(t, filepath.Join(dir, "big.toml"), smallfile.Config+1)
	zero := testutil.ZeroLink(t, filepath.Join(dir, "zero.toml"))
	sub := filepath.Join(dir, "d.toml")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		big:  "config file " + big + ": larger than 1 MiB",
		zero: "config file " + zero + ": is a character device, not a regular file",
		sub:  "config file " + sub + ": is a directory, not a file",
	} {
		_, _, err := LoadTOML(path)
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v\nwant %s", filepath.Base(path), err, want)
		}
	}
	// At the cap it is read (and parsed: a comment padded to the cap).
	atCap := writeFile(t, dir, "cap.toml", minimalTOML+"#"+strings.Repeat("x", smallfile.Config-len(minimalTOML)-2)+"\n")
	if _, _, err := LoadTOML(atCap); err != nil {
		t.Errorf("a file of exactly the cap: %v", err)
	}
}

// A chat template the loader would refuse for its size or type is refused
// when the config is checked, before any model loads.
func TestTemplateCapChecked(t *testing.T) {
	dir := t.TempDir()
	bigJinja := testutil.SparseFile(t, filepath.Join(dir, "big.jinja"), smallfile.Template+1)
	bigJSON := testutil.SparseFile(t, filepath.Join(dir, "big.json"), smallfile.TokenizerConfig+1)
	// A tokenizer_config.json may be larger than a .jinja template.
	okJSON := testutil.SparseFile(t, filepath.Join(dir, "ok.json"), smallfile.Template+1)
	zero := testutil.ZeroLink(t, filepath.Join(dir, "zero.jinja"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-c", bigJinja}, fmt.Sprintf("invalid value %q for --chat-template: larger than 1 MiB", bigJinja)},
		{[]string{"-j", bigJinja}, fmt.Sprintf("invalid value %q for --jinja-explicit: larger than 1 MiB", bigJinja)},
		{[]string{"-c", bigJSON}, fmt.Sprintf("invalid value %q for --chat-template: larger than 16 MiB", bigJSON)},
		{[]string{"-c", zero}, fmt.Sprintf("invalid value %q for --chat-template: is a character device, not a regular file", zero)},
		{[]string{"-c", okJSON}, ""},
	} {
		_, err := parseFlags(t, tc.args...)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.args, err)
			}
			continue
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v\nwant %s", tc.args, err, tc.want)
		}
	}
	_, _, err := loadString(t, fmt.Sprintf("[[models]]\nmodel_id = \"m\"\nchat_template = %q\n", zero))
	if want := fmt.Sprintf("models[0].chat_template = %q: is a character device, not a regular file", zero); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("TOML: %v\nwant %s", err, want)
	}
}

// A ref of the Hugging Face cache holds one commit; one that never ends or
// is far too large is an error naming it, not a read without end.
func TestResolveHFRefCapped(t *testing.T) {
	home := t.TempDir()
	hub := filepath.Join(home, "hub")
	fakeHub(t, hub, "org/Z", strings.Repeat("a", 40), "z.gguf")
	refs := filepath.Join(hub, "models--org--Z", "refs")
	zero := testutil.ZeroLink(t, filepath.Join(refs, "main"))
	big := testutil.SparseFile(t, filepath.Join(refs, "v1"), smallfile.Ref+1)
	env := envOf(map[string]string{"HF_HOME": home})
	for rev, want := range map[string]string{
		"main": "the Hugging Face cache's ref " + zero + ": is a character device, not a regular file",
		"v1":   "the Hugging Face cache's ref " + big + ": larger than 4 KiB",
	} {
		m := model("org/Z", "z.gguf")
		m.HFRevision = rev
		_, err := resolve(t, m, env)
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v\nwant %s", rev, err, want)
		}
	}
}
