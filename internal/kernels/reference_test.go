package kernels_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// The reference models in shared/testdata were written by llama.cpp's tools:
// the F32 file is the dequantized Q8_0 master, the F16 and Q4_0 files were
// converted from it. Comparing with them checks the block layouts and the
// conversions bit for bit against ggml itself.

func sharedTestdata(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "shared", "testdata")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("shared/testdata not found")
		}
		dir = parent
	}
}

func openReference(t *testing.T, name string) *gguf.File {
	path := filepath.Join(sharedTestdata(t), "reference", name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s not available", name)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func f32Values(t *testing.T, ti *gguf.TensorInfo) []float32 {
	if ti.Type != kernels.F32 {
		t.Fatalf("%s is %s, want F32", ti.Name, ti.Type)
	}
	v := make([]float32, ti.Elements())
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(ti.Data[4*i:]))
	}
	return v
}

func TestReferenceFiles(t *testing.T) {
	f32 := openReference(t, "tiny-f32.gguf")
	others := map[kernels.Type]*gguf.File{
		kernels.F16:  openReference(t, "tiny-f16.gguf"),
		kernels.Q8_0: openReference(t, "tiny-q8_0.gguf"),
		kernels.Q4_0: openReference(t, "tiny-q4_0.gguf"),
	}
	checked := 0
	for _, ref := range f32.Tensors {
		if len(ref.Dims) != 2 {
			continue // norms stay F32 in every file
		}
		want := f32Values(t, &ref)
		for ty, f := range others {
			ti, ok := f.Tensor(ref.Name)
			if !ok {
				t.Fatalf("%s: no tensor %s", ty, ref.Name)
			}
			if ti.Type != ty {
				t.Logf("%s: %s is stored as %s, skipped", ty, ref.Name, ti.Type)
				continue
			}
			// Our quantizer must produce llama.cpp's bytes.
			got := make([]byte, ty.RowSize(len(want)))
			kernels.Quantize(ty, want, got)
			if string(got) != string(ti.Data) {
				bad := 0
				bs := ty.TypeSize()
				for b := 0; b < len(got)/bs; b++ {
					if string(got[b*bs:(b+1)*bs]) != string(ti.Data[b*bs:(b+1)*bs]) {
						bad++
					}
				}
				t.Errorf("%s %s: Quantize differs from llama.cpp in %d of %d blocks", ty, ref.Name, bad, len(got)/bs)
			}
			// The Q8_0 master dequantizes to the F32 file exactly.
			if ty == kernels.Q8_0 {
				deq := make([]float32, len(want))
				kernels.Dequantize(ty, ti.Data, deq)
				for i := range deq {
					if math.Float32bits(deq[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: element %d dequantizes to %g, F32 file has %g", ref.Name, i, deq[i], want[i])
					}
				}
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no tensors compared")
	}
}
