package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMultimodalFlagErrors: the multimodal flag group is refused where
// mistral.rs has none (`serve text`, `serve embedding`), a projector needs a
// model, and multimodal needs a projector. All fail before a model loads.
func TestMultimodalFlagErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "txt.gguf")
	writeModel(t, path, 4)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "text", "-f", path, "--max-edge", "512"}, "--max-edge cannot be used with `serve text`: a text model takes no images (use `serve multimodal` or `serve auto`)"},
		{[]string{"serve", "--max-num-images", "3", "embedding", "-f", path}, "--max-num-images cannot be used with `serve embedding`"},
		{[]string{"serve", "text", "-f", path, "--mmproj", "p.gguf"}, "--mmproj cannot be used with `serve text`"},
		{[]string{"serve", "--mmproj", "p.gguf"}, "--mmproj needs a model (-m or -f); the embedded demo model takes no images"},
		{[]string{"serve", "multimodal"}, "serve multimodal needs a model: -m MODEL_ID or -f FILE.gguf"},
		{[]string{"serve", "multimodal", "-f", path}, "a multimodal model needs a vision projector, and no *mmproj*.gguf file is beside " + path},
		{[]string{"serve", "-f", path, "--mmproj", "a.gguf;b.gguf"}, `invalid value "a.gguf;b.gguf" for --mmproj: names 2 projectors; this server loads one vision projector per model`},
		{[]string{"serve", "-m", dir, "--mmproj", "mmproj-x.gguf"}, "vision projector mmproj-x.gguf not found in " + dir + " (no *mmproj*.gguf file there)"},
		{[]string{"run", "--mmproj", "p.gguf", "--prompt", "x"}, "--mmproj needs a model (-f or -m); the embedded demo model takes no images"},
		{[]string{"run", "-f", path, "--mmproj", "a.gguf;b.gguf", "--prompt", "x"}, `invalid value "a.gguf;b.gguf" for --mmproj: names 2 projectors`},
		{[]string{"run", "-f", path, "--mmproj", "proj.bin", "--prompt", "x"}, `invalid value "proj.bin" for --mmproj: must be a .gguf file`},
	} {
		if _, _, err := execute(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\nerror %v\nwant  %q", c.args, err, c.want)
		}
	}
}
