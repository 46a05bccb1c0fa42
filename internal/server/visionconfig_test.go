package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mistralrs/internal/config"
)

// The image settings reach the server options: remote fetching and its
// limits, and each model's projector and bounds (a multimodal spec).
func TestImageOptionsFromConfig(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"m-Q8_0.gguf", "mmproj-m-f16.gguf"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("GGUF"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Default()
	cfg.Server.AllowRemoteImages, cfg.Server.AllowPrivateImageHosts = true, true
	cfg.Server.RemoteImageMaxMB, cfg.Server.RemoteImageTimeoutSecs = 3, 7
	auto, text := config.DefaultModel(), config.DefaultModel()
	auto.ModelID, text.ModelID, text.Kind = dir, dir+"/", config.KindText
	n := 2
	auto.Multimodal.MaxNumImages, auto.Multimodal.MaxEdge = &n, 640
	cfg.Models = []config.ModelConfig{auto, text}
	opts, _, err := OptionsFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !opts.AllowRemoteImages || !opts.AllowPrivateImageHosts || opts.RemoteImageMaxBytes != 3<<20 || opts.RemoteImageTimeout != 7*time.Second {
		t.Errorf("remote images: %v %v %d %v", opts.AllowRemoteImages, opts.AllowPrivateImageHosts, opts.RemoteImageMaxBytes, opts.RemoteImageTimeout)
	}
	m := opts.Models[0]
	want := config.ImageLimits{MaxEdge: 640, MaxImages: 2, MaxPixels: 4096 * 4096}
	if m.Kind != KindMultimodal || m.MMProj != filepath.Join(dir, "mmproj-m-f16.gguf") || m.Images != want {
		t.Errorf("auto with a projector beside: kind %q, projector %q, limits %+v", m.Kind, m.MMProj, m.Images)
	}
	if m := opts.Models[1]; m.Kind != KindText || m.MMProj != "" {
		t.Errorf("text: kind %q, projector %q", m.Kind, m.MMProj)
	}
	if d, _, _ := OptionsFromConfig(config.Default()); d.AllowRemoteImages || d.AllowPrivateImageHosts || d.RemoteImageMaxBytes != 20<<20 || d.RemoteImageTimeout != 10*time.Second {
		t.Errorf("defaults: %+v", d)
	}

	if err := os.Remove(filepath.Join(dir, "mmproj-m-f16.gguf")); err != nil {
		t.Fatal(err)
	}
	mm := config.DefaultModel()
	mm.ModelID, mm.Kind = dir, config.KindMultimodal
	cfg.Models = []config.ModelConfig{mm}
	if _, _, err := OptionsFromConfig(cfg); err == nil || !strings.Contains(err.Error(), "a multimodal model needs a vision projector") {
		t.Errorf("multimodal without a projector: %v", err)
	}
}
