package lora_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/lora"
)

// rewriteGGUF copies the adapter at src into a temporary file, through
// tensor (nil: as is) for each tensor and with the metadata edits kv (nil
// value: removed).
func rewriteGGUF(t *testing.T, src string, tensor func(*gguf.Writer, gguf.TensorInfo) error, kv map[string]any) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, e := range f.KV {
		if v, edited := kv[e.Key]; edited {
			if v != nil {
				w.AddKV(e.Key, v)
			}
			continue
		}
		w.AddKV(e.Key, e.Value)
	}
	for k, v := range kv {
		if _, had := f.Get(k); !had && v != nil {
			w.AddKV(k, v)
		}
	}
	for _, ti := range f.Tensors {
		if tensor == nil {
			err = w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data)
		} else {
			err = tensor(w, ti)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "adapter.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// renamed drops tensor from, and writes it under to ("" drops it).
func renamed(from, to string) func(*gguf.Writer, gguf.TensorInfo) error {
	return func(w *gguf.Writer, ti gguf.TensorInfo) error {
		if ti.Name != from {
			return w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data)
		}
		if to == "" {
			return nil
		}
		return w.AddTensor(to, ti.Type, ti.Dims, ti.Data)
	}
}

// Each bad adapter is refused with one line naming the file and, where
// there is one, the tensor.
func TestRefusals(t *testing.T) {
	fx := loadFixture(t)
	m := fx.base(t, "tiny-f32.gguf")
	A := filepath.Join(fx.dir, "lora-attn-r8.gguf")
	B := filepath.Join(fx.dir, "lora-ffn-r4.gguf")
	truncated := filepath.Join(t.TempDir(), "truncated.gguf")
	data, err := os.ReadFile(A)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(truncated, data[:len(data)-1000], 0o644); err != nil {
		t.Fatal(err)
	}
	swapped := func(w *gguf.Writer, ti gguf.TensorInfo) error { // attn_k's pair under attn_q's name and back
		name := ti.Name
		switch {
		case strings.HasPrefix(name, "blk.0.attn_q."):
			name = strings.Replace(name, "attn_q", "attn_k", 1)
		case strings.HasPrefix(name, "blk.0.attn_k."):
			name = strings.Replace(name, "attn_k", "attn_q", 1)
		}
		return w.AddTensor(name, ti.Type, ti.Dims, ti.Data)
	}
	withNorm := func(w *gguf.Writer, ti gguf.TensorInfo) error {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
			return err
		}
		if ti.Name == "blk.0.attn_q.weight.lora_a" {
			return w.AddTensorF32("blk.0.attn_norm.weight", 0, []uint64{64}, make([]float32, 64))
		}
		return nil
	}
	cases := []struct {
		name, path string
		lim        lora.Limits
		want       []string // in the message, besides the file
	}{
		{"other architecture", rewriteGGUF(t, A, nil, map[string]any{"general.architecture": "qwen2"}), lora.Limits{}, []string{`"qwen2"`, `"llama"`}},
		{"not an adapter", rewriteGGUF(t, A, nil, map[string]any{"general.type": "model"}), lora.Limits{}, []string{"general.type"}},
		{"not lora", rewriteGGUF(t, A, nil, map[string]any{"adapter.type": "control_vector"}), lora.Limits{}, []string{"adapter.type"}},
		{"missing base tensor", rewriteGGUF(t, A, func(w *gguf.Writer, ti gguf.TensorInfo) error {
			return w.AddTensor(strings.Replace(ti.Name, "blk.1.", "blk.7.", 1), ti.Type, ti.Dims, ti.Data)
		}, nil), lora.Limits{}, []string{"blk.7.", "no weight"}},
		{"embedding", rewriteGGUF(t, A, func(w *gguf.Writer, ti gguf.TensorInfo) error {
			return w.AddTensor(strings.Replace(ti.Name, "blk.0.attn_q.weight", "token_embd.weight", 1), ti.Type, ti.Dims, ti.Data)
		}, nil), lora.Limits{}, []string{"token_embd.weight.lora_a"}},
		{"shape mismatch", rewriteGGUF(t, A, swapped, nil), lora.Limits{}, []string{"blk.0.attn_", "shape", "not transposed"}},
		{"rank over limit", A, lora.Limits{MaxRank: 4}, []string{".lora_b", "rank 8", "limit of 4"}},
		{"bytes over limit", B, lora.Limits{MaxBytes: 10000}, []string{"limit of 10000 bytes"}},
		{"truncated", truncated, lora.Limits{}, nil},
		{"lora_a without lora_b", rewriteGGUF(t, A, renamed("blk.1.attn_v.weight.lora_b", ""), nil), lora.Limits{}, []string{"blk.1.attn_v.weight.lora_a", "no blk.1.attn_v.weight.lora_b"}},
		{"lora_b without lora_a", rewriteGGUF(t, A, renamed("blk.1.attn_v.weight.lora_a", ""), nil), lora.Limits{}, []string{"blk.1.attn_v.weight.lora_b"}},
		{"bad suffix", rewriteGGUF(t, A, renamed("blk.1.attn_v.weight.lora_a", "blk.1.attn_v.weight.lora_c"), nil), lora.Limits{}, []string{"blk.1.attn_v.weight.lora_c", "not a LoRA tensor"}},
		{"empty folder", t.TempDir(), lora.Limits{}, []string{"no LoRA adapter"}},
		{"missing", filepath.Join(t.TempDir(), "none.gguf"), lora.Limits{}, []string{"no such file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ad, err := lora.Load(c.path, m, c.lim)
			if err == nil {
				t.Fatalf("loaded: %+v", ad)
			}
			msg := err.Error()
			t.Log(msg)
			if strings.Contains(msg, "\n") {
				t.Errorf("the error has several lines: %q", msg)
			}
			for _, w := range append([]string{c.path}, c.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("the error %q does not say %q", msg, w)
				}
			}
		})
	}
	// Tensors ending in _norm.weight are ignored, as llama.cpp does.
	if _, err := lora.Load(rewriteGGUF(t, A, withNorm, nil), m, lora.Limits{}); err != nil {
		t.Errorf("an adapter with a norm tensor: %v", err)
	}
	// A folder holding one GGUF file is that adapter; with two, neither.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.gguf"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if ad, err := lora.Load(dir, m, lora.Limits{}); err != nil || ad.Format != "gguf" || ad.Rank != 8 || ad.Alpha != 16 || len(ad.Targets) != 8 {
		t.Errorf("a folder with one adapter file: %+v, %v", ad, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.gguf"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := lora.Load(dir, m, lora.Limits{}); err == nil || !strings.Contains(err.Error(), "2 .gguf files") {
		t.Errorf("a folder with two adapter files: %v", err)
	}
	// The limits at the adapter's own size pass; a byte less does not.
	ad, err := lora.Load(B, m, lora.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// A and B of 2 layers × (gate, up, down) in F32, and B's transposed copy.
	if want := int64(2 * 4 * (3*4*(64+256) + 4*(256+256+64))); ad.Bytes != want {
		t.Errorf("adapter B takes %d bytes, want %d", ad.Bytes, want)
	}
	if _, err := lora.Load(B, m, lora.Limits{MaxRank: 4, MaxBytes: ad.Bytes}); err != nil {
		t.Errorf("at the limits: %v", err)
	}
	if _, err := lora.Load(B, m, lora.Limits{MaxBytes: ad.Bytes - 1}); err == nil {
		t.Errorf("a byte under the adapter's size: loaded")
	}
}

// PEFT folders: truncated weights, a dtype or module the loader does not
// take, a lora_A without its lora_B, a bad config.
func TestPEFTRefusals(t *testing.T) {
	fx := loadFixture(t)
	m := fx.base(t, "tiny-f32.gguf")
	good := hfTensors(t, filepath.Join(fx.dir, "lora-attn-r8.gguf"), m.Config, "F32", same)
	cfg := peftConfig(8, 16, "q_proj", "k_proj", "v_proj", "o_proj")
	edit := func(f func(ts []stTensor) []stTensor) []stTensor {
		ts := make([]stTensor, len(good))
		copy(ts, good)
		return f(ts)
	}
	cases := []struct {
		name string
		cfg  map[string]any
		ts   []stTensor
		cut  int // bytes cut off the end of the safetensors file
		want []string
	}{
		{"truncated", cfg, good, 100, []string{"adapter_model.safetensors", "data_offsets"}},
		{"header cut", cfg, good, -1, []string{"adapter_model.safetensors", "header"}},
		{"dtype", cfg, edit(func(ts []stTensor) []stTensor { ts[0].dtype = "I32"; return ts }), 0, []string{good[0].name, "I32"}},
		{"embedding module", cfg, edit(func(ts []stTensor) []stTensor {
			ts[0].name = "base_model.model.model.embed_tokens.lora_embedding_A"
			return ts
		}), 0, []string{"embed_tokens"}},
		{"unknown module", cfg, edit(func(ts []stTensor) []stTensor {
			ts[0].name = strings.Replace(ts[0].name, "self_attn", "cross_attn", 1)
			return ts
		}), 0, []string{"cross_attn", "no GGUF weight"}},
		{"lora_A alone", cfg, edit(func(ts []stTensor) []stTensor {
			for i, x := range ts {
				if strings.HasSuffix(x.name, "layers.1.self_attn.v_proj.lora_B.weight") {
					return append(ts[:i], ts[i+1:]...)
				}
			}
			t.Fatal("no v_proj lora_B")
			return nil
		}), 0, []string{"layers.1.self_attn.v_proj.lora_A.weight", "no lora_B"}},
		{"DoRA", map[string]any{"r": 8, "lora_alpha": 16, "use_dora": true}, good, 0, []string{"adapter_config.json", "DoRA"}},
		{"zero rank", map[string]any{"r": 0, "lora_alpha": 16}, good, 0, []string{"adapter_config.json", "rank"}},
		{"bad pattern", map[string]any{"r": 8, "alpha_pattern": map[string]float64{"q_proj(": 1}}, good, 0, []string{"adapter_config.json", "alpha_pattern"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writePEFT(t, dir, c.cfg, c.ts)
			if c.cut != 0 {
				p := filepath.Join(dir, "adapter_model.safetensors")
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				n := len(b) - c.cut
				if c.cut < 0 {
					n = 20
				}
				if err := os.WriteFile(p, b[:n], 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ad, err := lora.Load(dir, m, lora.Limits{})
			if err == nil {
				t.Fatalf("loaded: %+v", ad)
			}
			msg := err.Error()
			t.Log(msg)
			if strings.Contains(msg, "\n") || !strings.Contains(msg, dir) {
				t.Errorf("the error %q is not one line naming the folder's file", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("the error %q does not say %q", msg, w)
				}
			}
		})
	}
}
