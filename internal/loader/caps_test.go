package loader_test

import (
	"path/filepath"
	"testing"

	"mistralrs/internal/loader"
	"mistralrs/internal/smallfile"
	"mistralrs/internal/testutil"
)

// A chat template file is read whole: one over its cap (a .jinja template or
// a tokenizer_config .json, each with its own), or one that never ends, is
// a load error naming it.
func TestChatTemplateCapped(t *testing.T) {
	dir := t.TempDir()
	path := writeTiny(t, dir, "m.gguf", nil)
	bigJinja := testutil.SparseFile(t, filepath.Join(dir, "big.jinja"), smallfile.Template+1)
	bigJSON := testutil.SparseFile(t, filepath.Join(dir, "big.json"), smallfile.TokenizerConfig+1)
	zero := testutil.ZeroLink(t, filepath.Join(dir, "zero.jinja"))
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
