package model_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
)

// TestRandomModelsUnchanged: the random models are byte for byte those of
// the builders that named every tensor themselves, before nn.WriteRandom
// derived them from the weights' tags (SHA-256 of the files they wrote),
// so that fixtures keep their weights.
func TestRandomModelsUnchanged(t *testing.T) {
	base := model.RandomConfig{Layers: 3, Embd: 256, FF: 512, Heads: 4, KVHeads: 2, Vocab: 300, Seed: 5}
	with := func(f func(c *model.RandomConfig)) model.RandomConfig {
		c := base
		f(&c)
		return c
	}
	cases := []struct {
		name string
		cfg  model.RandomConfig
		sum  string
	}{
		{"llama-ropefreqs", with(func(c *model.RandomConfig) {
			c.Arch, c.Type, c.RopeFreqs, c.RopeScale = "llama", kernels.Q8_0, true, 2
		}), "ed932798282b2c723130cb5520191d566c74dc28ab21ddd7c1e61a66801b1c27"},
		{"llama-q4_k_m-yarn", with(func(c *model.RandomConfig) {
			c.Arch, c.Type, c.Mix, c.Layers, c.RopeScale, c.RopeScaling = "llama", kernels.F16, "Q4_K_M", 10, 4, "yarn"
		}), "28f80f7cb85716210efb06654877e2e5b2948bcaf3f48a5ae15fd316043ae68a"},
		{"mixtral", with(func(c *model.RandomConfig) {
			c.Arch, c.Type, c.Experts, c.ExpertUsed = "llama", kernels.F32, 4, 2
		}), "238c779fdcd8d5dcae2be50a8f3b718e90cb45f4463397bf78a8452ecd2c175d"},
		{"qwen2", with(func(c *model.RandomConfig) { c.Arch, c.Type = "qwen2", kernels.F32 }),
			"b4d99b124380625d9c13034c5797c17eab2abddb4e5d9687d9e4e23850013c94"},
		{"qwen3-tied", with(func(c *model.RandomConfig) { c.Arch, c.Type, c.Tied = "qwen3", kernels.Q8_0, true }),
			"bf81e6f02c5aa20d36839a6c5429ed7a9e8ab7dfe91dc8cb07c5ec854485d162"},
		{"qwen2moe", with(func(c *model.RandomConfig) {
			c.Arch, c.Type, c.Experts, c.ExpertUsed, c.ExpertFF, c.RMSEps, c.RopeBase = "qwen2moe", kernels.Q8_0, 4, 3, 128, 1e-6, 1e6
		}), "d3491274698634e85aee924e414102fcb8ad67cd5d6d9bd3161fedcfbe6c376f"},
		{"qwen3moe", with(func(c *model.RandomConfig) { c.Arch, c.Type, c.Experts, c.ExpertUsed = "qwen3moe", kernels.Q8_0, 4, 2 }),
			"d458a5082f614cfa65f71e7a8d5f415a47f13f835aa29346fbd4e3a201aea3a3"},
		{"phi3-longrope", with(func(c *model.RandomConfig) {
			c.Arch, c.Type, c.RopeFreqs, c.RopeDim, c.OrigCtx, c.ContextLen = "phi3", kernels.Q8_0, true, 32, 512, 4096
			c.SlidingWindow, c.SlidingPattern, c.RopeBaseSWA = 16, 3, 5e4
		}), "826ea376e7c8b358c2fcb06680ae2eccda71a8a40d13c30f1855285858e3d5c5"},
		{"gemma3", with(func(c *model.RandomConfig) {
			c.Arch, c.Type, c.RopeFreqs, c.RopeDim, c.OrigCtx, c.ContextLen = "gemma3", kernels.F32, true, 32, 512, 4096
			c.SlidingWindow, c.SlidingPattern, c.RopeBaseSWA = 16, 3, 5e4
		}), "02d513c5ca1886a82fd69c1ec4921c2e147e81d55208b4be7ca76f616e63ce9c"},
		{"gemma3-q4_k_m-yarn", with(func(c *model.RandomConfig) {
			c.Arch, c.Type, c.Mix, c.Layers, c.RopeScale, c.RopeScaling = "gemma3", kernels.Q4_K, "Q4_K_M", 10, 4, "yarn"
		}), "f4094846b5f76e67eab99062cca42693b7c9ff5df4dfd050758b83165aa49292"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := gguf.NewWriter()
			if err := model.BuildRandom(c.cfg, w); err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			if _, err := w.WriteTo(h); err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != c.sum {
				t.Errorf("SHA-256 %s, want %s", got, c.sum)
			}
		})
	}
}

// TestRandomTiedQ4KM: with tied embeddings, Q4_K_M gives token_embd.weight
// the output's Q6_K, as llama.cpp's quantizer (and --isq) does.
func TestRandomTiedQ4KM(t *testing.T) {
	for _, arch := range []string{"llama", "phi3", "gemma3"} {
		w := gguf.NewWriter()
		cfg := model.RandomConfig{Arch: arch, Layers: 2, Embd: 256, FF: 256, Heads: 2, Vocab: 300, Mix: "Q4_K_M", Tied: true}
		if err := model.BuildRandom(cfg, w); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Parse(arch, buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.Tensor("output.weight"); ok {
			t.Errorf("%s: tied model has output.weight", arch)
		}
		if ti, ok := f.Tensor("token_embd.weight"); !ok || ti.Type != kernels.Q6_K {
			t.Errorf("%s: token_embd.weight %v, want Q6_K", arch, ti)
		}
	}
}
