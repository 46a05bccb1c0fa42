package loader_test

import (
	"os"
	"path/filepath"
	"testing"

	"mistralrs/internal/loader"
	"mistralrs/internal/smallfile"
)

// A chat template file is read whole: one over its cap (a .jinja template or
// a tokenizer_config .json, each with its own), or one that never ends, is
// a load error naming it.
func TestChatTemplateCapped(t *testing.T) {
	dir := t.TempDir()
	path := writeTiny(t, dir, "m.gguf", nil)
	sparse := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bigJinja := sparse("big.jinja", smallfile.Template+1)
	bigJSON := sparse("big.json", smallfile.TokenizerConfig+1)
	zero := filepath.Join(dir, "zero.jinja")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for tmpl, want := range map[string]string{
		bigJinja: "chat template: " + bigJinja + ": larger than 1 MiB",
		bigJSON:  "chat template: " + bigJSON + ": larger than 16 MiB",
		zero:     "chat template: " + zero + ": is a character device, not a regular file",
	} {
		m, err := loader.Load(path, loader.Options{ChatTemplatePath: tmpl})
		if err == nil {
			m.Close()
		}
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v\nwant %s", filepath.Base(tmpl), err, want)
		}
	}
}
