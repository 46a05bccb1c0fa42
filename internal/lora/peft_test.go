package lora_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/lora"
	"mistralrs/internal/model"
	"mistralrs/internal/model/modeltest"
)

// stTensor is one tensor the tests write into a safetensors file.
type stTensor struct {
	name, dtype string
	shape       []int
	data        []byte
}

// writeSafetensors writes the safetensors format: an 8-byte little-endian
// header length, the JSON header, the tensors' bytes.
func writeSafetensors(t *testing.T, path string, ts []stTensor) {
	t.Helper()
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, x := range ts {
		hdr[x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int{len(data), len(data) + len(x.data)}}
		data = append(data, x.data...)
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	out = append(append(out, js...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

var hfNames = map[string]string{
	"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
	"ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}

// hfTensors turns a GGUF adapter's tensors into what PEFT saves for the
// same adapter of the Hugging Face model: HF module names, lora_A [r, in]
// and lora_B [out, r] (GGML's dims reversed, the same bytes), and lora_B of
// q and k with their rows in HF's order, before llama.cpp's converter
// interleaved each head's two halves for its rotary pairing. conv turns
// each tensor's bytes into the dtype wanted.
func hfTensors(t *testing.T, path string, cfg model.Config, dtype string, conv func(kernels.Type, []byte) []byte) []stTensor {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []stTensor
	for _, ti := range f.Tensors {
		var blk int
		var kind, half string
		if _, err := fmt.Sscanf(strings.NewReplacer(".", " ").Replace(ti.Name), "blk %d %s weight lora_%s", &blk, &kind, &half); err != nil {
			t.Fatalf("tensor %s: %v", ti.Name, err)
		}
		name := fmt.Sprintf("base_model.model.model.layers.%d.%s.lora_%s.weight", blk, hfNames[kind], strings.ToUpper(half))
		data := slices.Clone(ti.Data)
		rows, cols := int(ti.Dims[1]), int(ti.Dims[0])
		if half == "b" && (kind == "attn_q" || kind == "attn_k") {
			heads := cfg.Heads
			if kind == "attn_k" {
				heads = cfg.KVHeads
			}
			data = hfOrder(ti.Data, rows, heads)
		}
		out = append(out, stTensor{name: name, dtype: dtype, shape: []int{rows, cols}, data: conv(ti.Type, data)})
	}
	return out
}

// hfOrder undoes llama.cpp's q/k permutation: HF row h·hd + j·hd/2 + i is
// GGUF row h·hd + 2i + j.
func hfOrder(data []byte, rows, heads int) []byte {
	rb, hd := len(data)/rows, rows/heads
	out := make([]byte, len(data))
	for h := range heads {
		for i := range hd / 2 {
			for j := range 2 {
				hf, gg := h*hd+j*hd/2+i, h*hd+2*i+j
				copy(out[hf*rb:(hf+1)*rb], data[gg*rb:(gg+1)*rb])
			}
		}
	}
	return out
}

func same(_ kernels.Type, b []byte) []byte { return b }

// toBF16 keeps the upper half of each float32.
func toBF16(_ kernels.Type, b []byte) []byte {
	out := make([]byte, len(b)/2)
	for i := range len(b) / 4 {
		copy(out[2*i:], b[4*i+2:4*i+4])
	}
	return out
}

// truncBF16 is an F32 tensor's values cut to bfloat16, as F32 bytes.
func truncBF16(b []byte) []byte {
	out := slices.Clone(b)
	for i := 0; i < len(out); i += 4 {
		out[i], out[i+1] = 0, 0
	}
	return out
}

func writePEFT(t *testing.T, dir string, cfg map[string]any, ts []stTensor) {
	t.Helper()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	writeSafetensors(t, filepath.Join(dir, "adapter_model.safetensors"), ts)
}

func peftConfig(r int, alpha float64, modules ...string) map[string]any {
	return map[string]any{"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": r, "lora_alpha": alpha,
		"target_modules": modules, "fan_in_fan_out": false, "bias": "none", "base_model_name_or_path": "tiny"}
}

// firstLogits runs the prompt and three greedy steps with the adapter and
// returns every step's logits.
func firstLogits(t *testing.T, m *model.Model, prompt []int32, ad *lora.Adapter) [][]float32 {
	t.Helper()
	cache := modeltest.NewContiguous(m.Config, 16)
	toks := prompt
	var out [][]float32
	for range 4 {
		logits := make([]float32, m.Config.Vocab)
		in := &model.SeqInput{Tokens: toks, Pos: cache.Len(), Cache: cache, Logits: logits, LoRA: []model.Active{{Adapter: ad.Net, Scale: 1}}}
		if err := m.Forward(nil, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
			t.Fatal(err)
		}
		out = append(out, logits)
		toks = []int32{modeltest.Argmax(logits)}
	}
	return out
}

// Adapter A written as PEFT saves it (F32, F16; and BF16 against a GGUF
// of the same values) gives the GGUF form's logits exactly.
func TestPEFTMatchesGGUF(t *testing.T) {
	fx := loadFixture(t)
	m := fx.base(t, "tiny-f32.gguf")
	cases := []struct {
		name, gguf, dtype string
		conv              func(kernels.Type, []byte) []byte
		bf16              bool
	}{
		{"F32", "lora-attn-r8.gguf", "F32", same, false},
		{"F16", "lora-attn-r8-f16.gguf", "F16", same, false},
		{"BF16", "lora-attn-r8.gguf", "BF16", toBF16, true},
		{"ffn", "lora-ffn-r4.gguf", "F32", same, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := filepath.Join(fx.dir, c.gguf)
			if c.bf16 { // the GGUF form holds the bfloat16 values as F32
				src = rewriteGGUF(t, src, func(w *gguf.Writer, ti gguf.TensorInfo) error {
					return w.AddTensor(ti.Name, ti.Type, ti.Dims, truncBF16(ti.Data))
				}, nil)
			}
			want, err := lora.Load(src, m, lora.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			r, alpha := want.Rank, float64(want.Alpha)
			writePEFT(t, dir, peftConfig(r, alpha, "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
				hfTensors(t, filepath.Join(fx.dir, c.gguf), m.Config, c.dtype, c.conv))
			got, err := lora.Load(dir, m, lora.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Format != "peft" || got.Rank != want.Rank || got.Alpha != want.Alpha || !slices.Equal(got.Targets, want.Targets) || got.Path != dir {
				t.Fatalf("PEFT adapter %+v, GGUF %+v", got, want)
			}
			if byFile, err := lora.Load(filepath.Join(dir, "adapter_model.safetensors"), m, lora.Limits{}); err != nil || !slices.Equal(byFile.Targets, want.Targets) {
				t.Fatalf("the folder named by its safetensors file: %v", err)
			}
			g, w := firstLogits(t, m, fx.ref.Prompt, got), firstLogits(t, m, fx.ref.Prompt, want)
			for s := range w {
				if d := maxDiff(g[s], w[s]); d != 0 {
					t.Fatalf("step %d: PEFT and GGUF logits differ by %.3g", s, d)
				}
			}
		})
	}
}

// alpha_pattern and rank_pattern set a module's alpha and rank, use_rslora
// divides by sqrt(rank); a config rank the tensors do not have is refused.
func TestPEFTPatterns(t *testing.T) {
	fx := loadFixture(t)
	m := fx.base(t, "tiny-f32.gguf")
	ts := hfTensors(t, filepath.Join(fx.dir, "lora-attn-r8.gguf"), m.Config, "F32", same)
	scale := func(ad *lora.Adapter, name string) float32 {
		w, ok := m.Weight(name)
		if !ok {
			t.Fatalf("no weight %s", name)
		}
		return ad.Net.Deltas[w].Scale
	}
	dir := t.TempDir()
	cfg := peftConfig(8, 16, "q_proj", "k_proj", "v_proj", "o_proj")
	cfg["alpha_pattern"] = map[string]float64{"layers.1.self_attn.q_proj": 4}
	cfg["rank_pattern"] = map[string]int{"o_proj": 8}
	writePEFT(t, dir, cfg, ts)
	ad, err := lora.Load(dir, m, lora.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float32{"blk.1.attn_q.weight": 0.5, "blk.0.attn_q.weight": 2, "blk.1.attn_output.weight": 2} {
		if got := scale(ad, name); got != want {
			t.Errorf("%s: scale %v, want %v", name, got, want)
		}
	}
	cfg = peftConfig(8, 16, "q_proj")
	cfg["use_rslora"] = true
	writePEFT(t, dir, cfg, ts)
	if ad, err = lora.Load(dir, m, lora.Limits{}); err != nil {
		t.Fatal(err)
	} else if got := scale(ad, "blk.0.attn_v.weight"); got < 5.656 || got > 5.657 {
		t.Errorf("use_rslora: scale %v, want 16/sqrt(8)", got)
	}
	// Without r and lora_alpha, PEFT's defaults (8 and 8).
	writePEFT(t, dir, map[string]any{"peft_type": "LORA"}, ts)
	if ad, err = lora.Load(dir, m, lora.Limits{}); err != nil {
		t.Fatal(err)
	} else if got := scale(ad, "blk.0.attn_v.weight"); ad.Alpha != 8 || got != 1 {
		t.Errorf("PEFT's defaults: alpha %v, scale %v; want 8 and 1", ad.Alpha, got)
	}
	cfg = peftConfig(8, 16, "q_proj")
	cfg["rank_pattern"] = map[string]int{"v_proj": 4}
	writePEFT(t, dir, cfg, ts)
	if _, err := lora.Load(dir, m, lora.Limits{}); err == nil || !strings.Contains(err.Error(), "v_proj.lora_A.weight has rank 8") {
		t.Errorf("a rank_pattern the tensors contradict: %v", err)
	}
}
