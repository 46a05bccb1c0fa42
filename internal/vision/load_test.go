package vision

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// rewrite copies the fixture mmproj src into a new file, kv and tensor
// changing the metadata and tensor names on the way (nil, "": dropped),
// then the keys of add added.
func rewrite(t *testing.T, src string, kv func(key string, v any) any, tensor func(ti *gguf.TensorInfo) string, add map[string]any) string {
	t.Helper()
	f, err := gguf.Open(fixture(t, src))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, e := range f.KV {
		if v := kv(e.Key, e.Value); v != nil {
			w.AddKV(e.Key, v)
		}
	}
	for k, v := range add {
		w.AddKV(k, v)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if name := tensor(ti); name != "" {
			if err := w.AddTensor(name, ti.Type, ti.Dims, ti.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "mmproj-edited.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func keepKV(_ string, v any) any            { return v }
func keepTensor(ti *gguf.TensorInfo) string { return ti.Name }

func TestLoadErrors(t *testing.T) {
	fixture(t, "mmproj-f32.gguf")
	set := func(key string, val any) func(string, any) any {
		return func(k string, v any) any {
			if k == key {
				return val
			}
			return v
		}
	}
	drop := func(name string) func(*gguf.TensorInfo) string {
		return func(ti *gguf.TensorInfo) string {
			if ti.Name == name {
				return ""
			}
			return ti.Name
		}
	}
	cases := []struct {
		name   string
		kv     func(string, any) any
		tensor func(*gguf.TensorInfo) string
		add    map[string]any
		want   string
	}{
		{"unknown type", set("clip.projector_type", "llava-next"), keepTensor, nil,
			`unknown projector type "llava-next" (supported: ` + strings.Join(Types(), ", ") + ")"},
		{"text model", set("general.architecture", "llama"), keepTensor, nil, `general.architecture is "llama", not "clip"`},
		{"not mmproj", set("general.type", "model"), keepTensor, nil, `general.type is "model", not "mmproj"`},
		{"no type", set("clip.projector_type", nil), keepTensor, nil, "missing clip.projector_type (supported: gemma3"},
		{"quick gelu", set("clip.use_gelu", false), keepTensor, nil, "clip.use_gelu is not true"},
		{"missing tensor", keepKV, drop("v.blk.1.attn_k.weight"), nil, "missing tensor v.blk.1.attn_k.weight"},
		{"bad pool", keepKV, keepTensor, map[string]any{"clip.vision.projector.scale_factor": uint32(3)}, "16 patches per side do not pool by 3"},
		{"bad size", set("clip.vision.image_size", uint32(220)), keepTensor, nil, "image size 220 is not a multiple of the patch size 14"},
		{"position rows", set("clip.vision.image_size", uint32(112)), keepTensor, nil, "tensor v.position_embd.weight has shape [128 256], expected [128 64]"},
	}
	for _, tc := range cases {
		path := rewrite(t, "mmproj-f32.gguf", tc.kv, tc.tensor, tc.add)
		p, err := Load(path)
		if err == nil {
			p.Close()
			t.Errorf("%s: loaded", tc.name)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q, want one line naming %s and saying %q", tc.name, msg, path, tc.want)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "absent.gguf")); err == nil || !strings.Contains(err.Error(), "absent.gguf") {
		t.Errorf("absent file: %v", err)
	}
}

func TestTypes(t *testing.T) {
	ts := Types()
	if !slices.IsSorted(ts) || !slices.Contains(ts, "gemma3") {
		t.Fatalf("Types() = %v", ts)
	}
}

// TestLegacyFFNNames: a file whose FFN matrices carry each other's names
// (as older conversions wrote them; llama.cpp swaps them back) encodes to
// the same bits.
func TestLegacyFFNNames(t *testing.T) {
	swapped := rewrite(t, "mmproj-f32.gguf", keepKV, func(ti *gguf.TensorInfo) string {
		if strings.Contains(ti.Name, ".ffn_up.") {
			return strings.Replace(ti.Name, ".ffn_up.", ".ffn_down.", 1)
		}
		return strings.Replace(ti.Name, ".ffn_down.", ".ffn_up.", 1)
	}, nil)
	legacy, err := Load(swapped)
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	p := loadFixture(t, "mmproj-f32.gguf")
	img := decodeFile(t, fixture(t, "img-tall-120x200.png"))
	if d := maxAbsDiff(t, encode(t, legacy, nil, img), encode(t, p, nil, img)); d != 0 {
		t.Fatalf("legacy names change the embeddings by %g", d)
	}
}

// TestScaleFactor: clip.vision.projector.scale_factor sets the pooling (2:
// 8×8 = 64 tokens of 2×2 patches).
func TestScaleFactor(t *testing.T) {
	path := rewrite(t, "mmproj-f32.gguf", keepKV, keepTensor, map[string]any{"clip.vision.projector.scale_factor": uint32(2)})
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pool := kernels.NewPool(2)
	defer pool.Close()
	out := encode(t, p, pool, decodeFile(t, fixture(t, "img-square-224.png")))
	if len(out) != 64*192 {
		t.Fatalf("%d values, want 64 tokens of 192", len(out))
	}
}
