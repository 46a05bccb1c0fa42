package demo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// The demo model is the real stories260K, and its chat template turns a
// conversation into a story to continue.
func TestDemoModelIsStories260K(t *testing.T) {
	sum := sha256.Sum256(stories)
	if got := hex.EncodeToString(sum[:]); got != "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d" {
		t.Fatalf("embedded file sha256 %s", got)
	}
	m, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.ID != ID || m.Net.Config.Arch != "llama" || m.Net.Config.Layers != 5 || m.Net.Config.Vocab != 512 {
		t.Errorf("loaded %q %+v", m.ID, m.Net.Config)
	}
	if ids := m.Tok.Encode("Once upon a time", true, false); len(ids) != 5 || ids[0] != 1 || ids[1] != 403 {
		t.Errorf("tokens %v, want [1 403 407 261 378]", ids)
	}
	got, err := m.Template.Render(nil, true, nil)
	if err != nil || got != "" {
		t.Errorf("empty conversation: %q %v", got, err)
	}
	if !strings.Contains(Warning, "-f model.gguf") || !strings.Contains(Warning, "stories") {
		t.Errorf("warning does not say what the demo is and how to load a real model: %q", Warning)
	}
}

func TestRandomModelIsDeterministicAndLoads(t *testing.T) {
	a, err := BuildRandom()
	if err != nil {
		t.Fatal(err)
	}
	b, err := BuildRandom()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("the random model differs between builds")
	}
	m, err := LoadRandom()
	if err != nil {
		t.Fatal(err)
	}
	if m.Net.Config.Arch != "llama" || m.Net.Config.Layers != Config.Layers {
		t.Errorf("loaded %q %+v", m.ID, m.Net.Config)
	}
	// Byte-level vocabulary: any text is one token per byte and decodes back.
	for _, s := range []string{"hello, world", "héllo ✓", "\x00\x7f"} {
		ids := m.Tok.Encode(s, false, false)
		if len(ids) != len(s) {
			t.Errorf("%q: %d tokens, want one per byte (%d)", s, len(ids), len(s))
		}
		if got := m.Tok.Decode(ids); got != s {
			t.Errorf("%q decodes to %q", s, got)
		}
	}
	// ChatML specials are single tokens and <|im_end|> ends generation.
	ids := m.Tok.Encode("<|im_start|>user\nhi<|im_end|>", false, true)
	if ids[0] != 257 || ids[len(ids)-1] != 258 || !m.Tok.IsEOG(258) {
		t.Errorf("specials: %v", ids)
	}
}

func TestRandomModelRejectsSmallVocab(t *testing.T) {
	cfg := Config
	cfg.Vocab = 100
	if _, err := RandomModel(cfg); err == nil {
		t.Error("a vocabulary without room for the byte tokens was accepted")
	}
	cfg.Vocab = 300
	cfg.Arch = "gpt-j"
	if _, err := RandomModel(cfg); err == nil {
		t.Error("an unsupported architecture was accepted")
	}
}
