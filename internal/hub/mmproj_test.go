package hub

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"mistralrs/internal/hub/hubtest"
)

func TestChooseMMProj(t *testing.T) {
	for _, tc := range []struct {
		names, model []string
		want         string
	}{
		// The model's own type first, then F16, then the first by name.
		{[]string{"m-F16.gguf", "mmproj-m-f32.gguf", "mmproj-m-f16.gguf"}, []string{"m-F16.gguf"}, "mmproj-m-f16.gguf"},
		{[]string{"m-F32.gguf", "mmproj-m-f16.gguf", "mmproj-m-f32.gguf"}, []string{"m-F32.gguf"}, "mmproj-m-f32.gguf"},
		{[]string{"m-Q8_0.gguf", "mmproj-F16.gguf", "mmproj-Q8_0.gguf"}, []string{"m-Q8_0.gguf"}, "mmproj-Q8_0.gguf"},
		{[]string{"m-Q4_K_M.gguf", "mmproj-F32.gguf", "mmproj-F16.gguf", "mmproj-BF16.gguf"}, []string{"m-Q4_K_M.gguf"}, "mmproj-F16.gguf"},
		// BF16 is not F16 (the word must stand alone).
		{[]string{"m-Q4_K_M.gguf", "mmproj-F32.gguf", "mmproj-BF16.gguf"}, []string{"m-Q4_K_M.gguf"}, "mmproj-BF16.gguf"},
		{[]string{"m-Q4_K_M.gguf", "mmproj-b.gguf", "mmproj-a.gguf"}, []string{"m-Q4_K_M.gguf"}, "mmproj-a.gguf"},
		// A folder carries the type too; case does not matter.
		{[]string{"F16/MMPROJ-model.gguf", "Q8_0/mmproj-model.gguf", "m-Q8_0.gguf"}, []string{"m-Q8_0.gguf"}, "Q8_0/mmproj-model.gguf"},
		{[]string{"m-Q4_K_M.gguf", "README.md", "mmproj.json"}, []string{"m-Q4_K_M.gguf"}, ""},
		{[]string{"mmproj-f16.gguf"}, nil, "mmproj-f16.gguf"},
	} {
		if got := ChooseMMProj(tc.names, tc.model); got != tc.want {
			t.Errorf("%q with %q: %q, want %q", tc.names, tc.model, got, tc.want)
		}
	}
}

// newVisionHub is a fake Hub with a vision model (two quantizations, two
// projectors) and a text-only one.
func newVisionHub(t *testing.T) (*hubtest.Hub, *hubtest.Repo) {
	t.Helper()
	h := hubtest.New(t)
	r := h.Add("org/Vision-GGUF", map[string][]byte{
		"v-Q4_K_M.gguf":     hubtest.Model(t, 3),
		"v-F16.gguf":        hubtest.Model(t, 4),
		"mmproj-v-f16.gguf": []byte("GGUF f16 projector"),
		"mmproj-v-f32.gguf": []byte("GGUF f32 projector"),
	})
	h.Add("org/Text-GGUF", map[string][]byte{"t-Q8_0.gguf": hubtest.Model(t, 5)})
	return h, r
}

func TestGetModelFetchesProjector(t *testing.T) {
	h, r := newVisionHub(t)
	cache := t.TempDir()
	ctx := context.Background()
	snap, err := client(h, cache).GetModel(ctx, "org/Vision-GGUF", "", nil, Projector{Choose: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap.Files, []string{"v-Q4_K_M.gguf"}) || snap.MMProj != "mmproj-v-f16.gguf" {
		t.Fatalf("chose %q and %q", snap.Files, snap.MMProj)
	}
	checkCached(t, cache, "org/Vision-GGUF", r, "mmproj-v-f16.gguf")
	if _, err := os.Stat(filepath.Join(snap.Dir, "mmproj-v-f32.gguf")); err == nil {
		t.Error("the other projector was downloaded too")
	}

	// The cache answers, projector included, without the Hub.
	h.Reset()
	off := &Client{Endpoint: "http://127.0.0.1:1", CacheDir: cache}
	again, err := off.GetModel(ctx, "org/Vision-GGUF", "", nil, Projector{Choose: true, Required: true})
	if err != nil || again.MMProj != "mmproj-v-f16.gguf" || again.Fetched {
		t.Fatalf("from the cache: %+v %v", again, err)
	}

	// The F16 model gets the projector of its own type... which is F16
	// here too; a named one is fetched as named.
	named, err := client(h, cache).GetModel(ctx, "org/Vision-GGUF", "", []string{"v-F16.gguf"}, Projector{File: "mmproj-v-f32.gguf"})
	if err != nil || named.MMProj != "mmproj-v-f32.gguf" || !reflect.DeepEqual(named.Files, []string{"v-F16.gguf"}) {
		t.Fatalf("named projector: %+v %v", named, err)
	}
	b, err := os.ReadFile(filepath.Join(named.Dir, "mmproj-v-f32.gguf"))
	if err != nil || !bytes.Equal(b, r.Files["mmproj-v-f32.gguf"]) {
		t.Errorf("named projector's bytes: %v", err)
	}
	// Get alone never brings a projector.
	plain, err := client(h, t.TempDir()).Get(ctx, "org/Vision-GGUF", "", nil)
	if err != nil || plain.MMProj != "" {
		t.Errorf("Get: %+v %v", plain, err)
	}
}

func TestGetModelProjectorErrors(t *testing.T) {
	h, _ := newVisionHub(t)
	ctx := context.Background()
	_, err := client(h, t.TempDir()).GetModel(ctx, "org/Vision-GGUF", "", nil, Projector{File: "mmproj-x.gguf"})
	want := "Hugging Face model org/Vision-GGUF, file mmproj-x.gguf: not in the repository (mmproj files there: mmproj-v-f16.gguf, mmproj-v-f32.gguf)"
	if err == nil || err.Error() != want {
		t.Errorf("missing named projector: %v\nwant %s", err, want)
	}
	if _, err := client(h, t.TempDir()).GetModel(ctx, "org/Vision-GGUF", "", nil, Projector{File: "../x.gguf"}); err == nil ||
		!strings.Contains(err.Error(), "not a file name inside a repository") {
		t.Errorf("a projector outside the repository: %v", err)
	}

	// A text repository: auto serves the text model, multimodal is refused.
	snap, err := client(h, t.TempDir()).GetModel(ctx, "org/Text-GGUF", "", nil, Projector{Choose: true})
	if err != nil || snap.MMProj != "" || len(snap.Files) != 1 {
		t.Errorf("auto on a text repository: %+v %v", snap, err)
	}
	_, err = client(h, t.TempDir()).GetModel(ctx, "org/Text-GGUF", "", nil, Projector{Choose: true, Required: true})
	if err == nil || !strings.Contains(err.Error(), "Hugging Face model org/Text-GGUF: the repository has no vision projector (*mmproj*.gguf)") {
		t.Errorf("multimodal on a text repository: %v", err)
	}
}

// A model cached without its projector: auto stays offline (a text
// model), multimodal asks the Hub and fetches the projector; offline,
// multimodal is an error naming what is missing.
func TestGetModelProjectorCachedModel(t *testing.T) {
	h, _ := newVisionHub(t)
	cache := t.TempDir()
	ctx := context.Background()
	if _, err := client(h, cache).Get(ctx, "org/Vision-GGUF", "", nil); err != nil {
		t.Fatal(err)
	}
	h.Reset()
	snap, err := client(h, cache).GetModel(ctx, "org/Vision-GGUF", "", nil, Projector{Choose: true})
	if err != nil || snap.MMProj != "" || h.Count("") != 0 {
		t.Fatalf("auto with the model cached: %+v %v, %d requests", snap, err, h.Count(""))
	}
	off := client(h, cache)
	off.Offline = true
	_, err = off.GetModel(ctx, "org/Vision-GGUF", "", nil, Projector{Choose: true, Required: true})
	if err == nil || !strings.Contains(err.Error(), "Hugging Face model org/Vision-GGUF: no vision projector (*mmproj*.gguf) of it is in the Hugging Face cache") {
		t.Errorf("offline multimodal: %v", err)
	}
	snap, err = client(h, cache).GetModel(ctx, "org/Vision-GGUF", "", nil, Projector{Choose: true, Required: true})
	if err != nil || snap.MMProj != "mmproj-v-f16.gguf" || !snap.Fetched {
		t.Fatalf("multimodal with the model cached: %+v %v", snap, err)
	}
}
