package demo

import (
	"bytes"
	"strings"
	"testing"
)

func TestDemoModelIsDeterministicAndLoads(t *testing.T) {
	a, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("the demo model differs between builds")
	}
	m, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != ID || m.Net.Config.Arch != "llama" || m.Net.Config.Layers != Config.Layers {
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
	if !strings.Contains(Warning, "-f model.gguf") || !strings.Contains(Warning, "meaningless") {
		t.Errorf("warning does not say how to load a real model: %q", Warning)
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
