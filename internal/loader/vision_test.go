package loader_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/loader"
	"mistralrs/internal/testutil"
)

// A model loaded with its mmproj has the projector, as wide as the text
// model, and Close releases both.
func TestLoadWithProjector(t *testing.T) {
	text := testutil.SharedFile(t, "testdata/vision/text-f32.gguf")
	proj := testutil.SharedFile(t, "testdata/vision/mmproj-f32.gguf")
	m, err := loader.Load(text, loader.Options{MMProj: proj})
	if err != nil {
		t.Fatal(err)
	}
	if m.Vision == nil || m.Vision.Path() != proj || m.Vision.Type() != "gemma3" || m.Vision.Embd() != m.Net.Config.Embd {
		t.Fatalf("projector %+v", m.Vision)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	plain, err := loader.Load(text, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.Vision != nil {
		t.Error("a projector without Options.MMProj")
	}
}

// Each bad projector is one line naming it: missing, truncated, not a
// projector, and one of another model (naming both files).
func TestLoadProjectorErrors(t *testing.T) {
	text := testutil.SharedFile(t, "testdata/vision/text-f32.gguf")
	proj := testutil.SharedFile(t, "testdata/vision/mmproj-f32.gguf")
	dir := t.TempDir()
	data, err := os.ReadFile(proj)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "mmproj-cut.gguf")
	if err := os.WriteFile(cut, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	other := writeTiny(t, dir, "other.gguf", nil) // n_embd 32, not 192
	for _, tc := range []struct {
		model, proj string
		want        []string
	}{
		{text, filepath.Join(dir, "absent.gguf"), []string{"vision projector", filepath.Join(dir, "absent.gguf")}},
		{text, cut, []string{"vision projector", cut}},
		{text, other, []string{"vision projector " + other, `not "clip"`}},
		{other, proj, []string{"vision projector " + proj + " gives rows of width 192, but the text model " + other + " has n_embd 32"}},
	} {
		m, err := loader.Load(tc.model, loader.Options{MMProj: tc.proj})
		if err == nil {
			m.Close()
			t.Errorf("%s with %s: loaded", tc.model, tc.proj)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("not one line: %q", msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s with %s: %q lacks %q", tc.model, tc.proj, msg, w)
			}
		}
		if strings.Count(msg, tc.proj) != 1 {
			t.Errorf("%q names the projector %d times", msg, strings.Count(msg, tc.proj))
		}
	}
}
