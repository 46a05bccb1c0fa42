package engine_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
	"mistralrs/internal/lora"
	"mistralrs/internal/model"
	"mistralrs/internal/testutil"
)

// The LoRA fixture (../shared/testdata/lora): llama.cpp's greedy ids for
// the tiny reference llama under adapter A, A at 0.5, A+B, B, A at -1 and
// none. Every F32-base case runs at once in one engine, each request with
// its own adapters, and gives llama.cpp's 32 greedy ids.
func TestLoRAFixtureGreedy(t *testing.T) {
	dir := testutil.SharedFile(t, "testdata", "lora")
	base := testutil.SharedFile(t, "testdata", "reference", "tiny-f32.gguf")
	raw, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Prompt []int32 `json:"prompt_tokens"`
		Cases  map[string]struct {
			Model  string `json:"model"`
			Active []struct {
				File  string  `json:"file"`
				Scale float32 `json:"scale"`
			} `json:"active_adapters"`
			Greedy []int32 `json:"greedy_32_tokens"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	m, err := loader.Load(base, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	adapters := map[string]*lora.Adapter{}
	var names []string
	var reqs []*engine.Request
	for name, c := range ref.Cases {
		if c.Model != "tiny-f32.gguf" {
			continue
		}
		req := &engine.Request{Prompt: ref.Prompt, Sampling: greedy(), MaxTokens: len(c.Greedy), IgnoreEOS: true}
		if len(c.Active) > 0 {
			l := &engine.LoRA{Name: name}
			var key []string
			for _, a := range c.Active {
				ad, ok := adapters[a.File]
				if !ok {
					if ad, err = lora.Load(filepath.Join(dir, a.File), m.Net, lora.Limits{}); err != nil {
						t.Fatal(err)
					}
					adapters[a.File] = ad
				}
				l.Active = append(l.Active, model.Active{Adapter: ad.Net, Scale: a.Scale})
				key = append(key, fmt.Sprintf("%s@%g", a.File, a.Scale))
			}
			l.Key = strings.Join(key, "+")
			req.LoRA = l
		}
		names = append(names, name)
		reqs = append(reqs, req)
	}
	if len(reqs) < 10 {
		t.Fatalf("%d F32 cases in the fixture", len(reqs))
	}
	e, rec := newEngine(t, m, opts(nil))
	got := runTogether(t, e, rec, reqs)
	for i, name := range names {
		if want := ref.Cases[name].Greedy; !slices.Equal(got[i].Tokens, want) {
			t.Errorf("case %s: %v\nllama.cpp %v", name, got[i].Tokens, want)
		}
	}
}
