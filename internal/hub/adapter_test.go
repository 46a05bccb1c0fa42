package hub

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"mistralrs/internal/hub/hubtest"
)

func TestChooseAdapter(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  []string
		err   string
	}{
		{[]string{"README.md", PEFTWeights, PEFTConfig, "lora-f16.gguf"}, []string{PEFTConfig, PEFTWeights}, ""},
		{[]string{"README.md", "lora-f16.gguf", "mmproj-f16.gguf"}, []string{"lora-f16.gguf"}, ""},
		{[]string{"sub/lora.gguf"}, []string{"sub/lora.gguf"}, ""},
		{[]string{"a.gguf", "b.gguf"}, nil, "several GGUF files and no PEFT adapter (adapter_config.json + adapter_model.safetensors), so the adapter is ambiguous: a.gguf, b.gguf"},
		{[]string{PEFTConfig}, nil, "only half of a PEFT adapter"},
		{[]string{"sub/" + PEFTConfig, "sub/" + PEFTWeights}, nil, "holds no LoRA adapter"},
		{[]string{"README.md"}, nil, "holds no LoRA adapter: neither a PEFT adapter"},
	} {
		got, err := ChooseAdapter(tc.names)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.names, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %q %v, want %q", tc.names, got, err, tc.want)
		}
	}
}

// TestGetAdapter fetches a PEFT adapter and a GGUF adapter from the fake
// Hub, with a revision, then again from the cache alone and offline.
func TestGetAdapter(t *testing.T) {
	h := hubtest.New(t)
	peft := h.Add("org/peft-lora", map[string][]byte{
		PEFTConfig:  []byte(`{"r": 8, "lora_alpha": 16}`),
		PEFTWeights: []byte("safetensors bytes"),
		"README.md": []byte("# lora\n"),
	})
	peft.Refs["v1"] = peft.Commit
	gg := h.Add("org/gguf-lora", map[string][]byte{"lora-f16.gguf": []byte("GGUF adapter"), "README.md": []byte("x")})
	h.Add("org/two-lora", map[string][]byte{"a.gguf": []byte("a"), "b.gguf": []byte("b")})
	cache := t.TempDir()
	c := client(h, cache)
	ctx := context.Background()

	snap, err := c.GetAdapter(ctx, "org/peft-lora", "v1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap.Files, []string{PEFTConfig, PEFTWeights}) || snap.Commit != peft.Commit || !snap.Fetched {
		t.Fatalf("PEFT adapter: %+v", snap)
	}
	for _, f := range snap.Files {
		if b, err := os.ReadFile(filepath.Join(snap.Dir, f)); err != nil || string(b) != string(peft.Files[f]) {
			t.Errorf("%s: %q %v", f, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(snap.Dir, "README.md")); err == nil {
		t.Error("README.md was downloaded with the adapter")
	}
	if b, _ := os.ReadFile(filepath.Join(cache, RepoFolder("org/peft-lora"), "refs", "v1")); string(b) != peft.Commit {
		t.Errorf("refs/v1 = %q", b)
	}

	snap, err = c.GetAdapter(ctx, "org/gguf-lora", "")
	if err != nil || !reflect.DeepEqual(snap.Paths(), []string{filepath.Join(cache, RepoFolder("org/gguf-lora"), "snapshots", gg.Commit, "lora-f16.gguf")}) {
		t.Fatalf("GGUF adapter: %+v %v", snap, err)
	}
	checkCached(t, cache, "org/gguf-lora", gg, "lora-f16.gguf")

	// Cached: no request, even offline.
	h.Reset()
	c.Offline = true
	for _, repo := range []string{"org/peft-lora", "org/gguf-lora"} {
		rev := "main"
		if repo == "org/peft-lora" {
			rev = "v1"
		}
		if _, err := c.GetAdapter(ctx, repo, rev); err != nil {
			t.Errorf("%s from the cache: %v", repo, err)
		}
	}
	if n := h.Count(""); n != 0 {
		t.Errorf("%d requests with the adapters cached", n)
	}
	if _, err := c.GetAdapter(ctx, "org/two-lora", ""); err == nil ||
		err.Error() != "Hugging Face model org/two-lora: no LoRA adapter of it is in the Hugging Face cache "+cache+", and HF_HUB_OFFLINE is set, so nothing is downloaded" {
		t.Errorf("offline, not cached: %v", err)
	}
	c.Offline = false

	for _, tc := range []struct{ repo, rev, err string }{
		{"org/two-lora", "", "Hugging Face model org/two-lora: the repository holds several GGUF files and no PEFT adapter"},
		{"org/peft-lora", "v2", "Hugging Face model org/peft-lora at revision v2: 404: revision v2 not found"},
		{"org/missing", "", "Hugging Face model org/missing: 401 Unauthorized"},
	} {
		if _, err := c.GetAdapter(ctx, tc.repo, tc.rev); err == nil || !strings.HasPrefix(err.Error(), tc.err) {
			t.Errorf("%s@%s: %v, want %q", tc.repo, tc.rev, err, tc.err)
		}
	}
}
