package gguf

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"mistralrs/internal/kernels"
)

// raw builds GGUF bytes by hand, for files the Writer refuses to make.
type raw []byte

func header(version uint32, nTensors, nKV uint64) raw {
	return raw("GGUF").u32(version).u64(nTensors).u64(nKV)
}
func (r raw) u32(v uint32) raw { return le.AppendUint32(r, v) }
func (r raw) u64(v uint64) raw { return le.AppendUint64(r, v) }
func (r raw) str(s string) raw { return append(r.u64(uint64(len(s))), s...) }
func (r raw) pad() raw         { return append(r, make([]byte, (32-len(r)%32)%32)...) }
func (r raw) zeros(n int) raw  { return append(r, make([]byte, n)...) }
func (r raw) tensorInfo(name string, typ uint32, off uint64, dims ...uint64) raw {
	r = r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r = r.u64(d)
	}
	return r.u32(typ).u64(off)
}

func TestVersions(t *testing.T) {
	b := encode(t, NewWriter())
	for _, c := range []struct {
		version uint32
		err     string
	}{
		{3, ""}, {2, ""}, {1, "unsupported version 1"}, {4, "unsupported version 4"},
		{0x03000000, "big-endian"},
	} {
		le.PutUint32(b[4:], c.version)
		f, err := parse("v.gguf", b)
		if c.err == "" {
			if err != nil || f.Version != c.version {
				t.Errorf("version %d: %v", c.version, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("version %d: error %v, want %q", c.version, err, c.err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	one := func(name string, typ uint32, off uint64, dataLen int, dims ...uint64) raw {
		return header(3, 1, 0).tensorInfo(name, typ, off, dims...).pad().zeros(dataLen)
	}
	cases := []struct {
		name string
		b    raw
		err  string
	}{
		{"empty", nil, "truncated reading magic"},
		{"magic", raw("GGML").u32(3).u64(0).u64(0), "not a GGUF file"},
		{"header", header(3, 0, 0)[:20], "truncated"},
		{"kv count", header(3, 0, math.MaxUint64), "metadata count"},
		{"kv count fits not", header(3, 0, 2).str("a").u32(typeUint8).zeros(1), "cannot fit"},
		{"tensor count", header(3, 1<<40, 0), "tensor count"},
		{"string length", header(3, 0, 1).u64(1 << 62).zeros(16), "past the end"},
		{"value string", header(3, 0, 1).str("k").u32(typeString).u64(99).zeros(10), "string value of key k"},
		{"value type", header(3, 0, 1).str("k").u32(13).zeros(8), "unknown value type 13"},
		{"array type", header(3, 0, 1).str("k").u32(typeArray).u32(99).u64(0), "unknown value type 99"},
		{"array length", header(3, 0, 1).str("k").u32(typeArray).u32(typeUint32).u64(1 << 61).zeros(64), "cannot fit"},
		{"string array length", header(3, 0, 1).str("k").u32(typeArray).u32(typeString).u64(5).zeros(32), "cannot fit"},
		{"array truncated", header(3, 0, 1).str("k").u32(typeArray).u32(typeUint16).u64(3).zeros(4), "cannot fit"},
		{"nesting", func() raw {
			r := header(3, 0, 1).str("deep").u32(typeArray)
			for range 20 {
				r = r.u32(typeArray).u64(1)
			}
			return r.u32(typeUint8).u64(0)
		}(), "nests arrays"},
		{"duplicate key", header(3, 0, 2).str("k").u32(typeUint8).zeros(1).str("k").u32(typeUint8).zeros(1), "duplicate metadata key k"},
		{"key with newline", header(3, 0, 2).str("a\nb").u32(typeBool).zeros(1).str("a\nb").u32(typeBool).zeros(1), `"a\nb"`},
		{"alignment type", header(3, 0, 1).str("general.alignment").u32(typeUint64).u64(32), "power of two"},
		{"alignment value", header(3, 0, 1).str("general.alignment").u32(typeUint32).u32(24), "power of two"},
		{"alignment zero", header(3, 0, 1).str("general.alignment").u32(typeUint32).u32(0), "power of two"},
		{"n_dims", header(3, 1, 0).str("t").u32(5).zeros(64), "5 dims"},
		{"tensor truncated", header(3, 1, 0).str("t").u32(2).u64(4).zeros(4), "truncated reading tensor t"},
		{"unknown type", one("blk.0.w", 77, 0, 64, 4), "tensor blk.0.w: unknown type 77"},
		{"overflow", one("t", 0, 0, 64, 1<<32, 1<<32, 1<<32), "2^40"},
		{"huge dim", one("t", 0, 0, 64, 0, 1<<62), "2^40"},
		{"too many elements", one("t", 0, 0, 64, 1<<20, 1<<21), "2^40"},
		{"block size", one("t", uint32(kernels.Q4_0), 0, 64, 16), "not a multiple of the Q4_0 block size 32"},
		{"scalar quantized", one("t", uint32(kernels.Q8_0), 0, 64), "block size"},
		{"past end", one("blk.0.attn_q.weight", 0, 0, 60, 16), "tensor blk.0.attn_q.weight data ends past end of file"},
		{"offset past end", one("t", 0, 1<<62, 64, 1), "past end of file"},
		{"offset unaligned", one("t", 0, 4, 64, 1), "offset 4 is not a multiple of the alignment 32"},
		{"no data section", header(3, 1, 0).tensorInfo("t", 0, 0, 0), "data section starts"},
		{"duplicate tensor", header(3, 2, 0).tensorInfo("t", 0, 0, 1).tensorInfo("t", 0, 32, 1).pad().zeros(64), "duplicate tensor name t"},
	}
	for _, c := range cases {
		_, err := parse("bad.gguf", c.b)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "bad.gguf: ") || strings.Contains(msg, "\n") || !strings.Contains(msg, c.err) {
			t.Errorf("%s: error %q, want one line naming the file and %q", c.name, msg, c.err)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	cases := []struct {
		name string
		b    raw
		n    int // tensors
	}{
		// Known types the kernels cannot compute with still load: the model loader decides.
		{"unsupported type", header(3, 1, 0).tensorInfo("t", uint32(kernels.Q2_K), 0, 256).pad().zeros(96), 1},
		{"scalar", header(3, 1, 0).tensorInfo("t", 0, 0).pad().zeros(4), 1},
		{"zero elements", header(3, 1, 0).tensorInfo("t", 0, 0, 0, 5).pad(), 1},
		{"overlapping", header(3, 2, 0).tensorInfo("a", 0, 0, 8).tensorInfo("b", 0, 0, 4).pad().zeros(32), 2},
		{"vocab only, no padding", header(3, 0, 1).str("k").u32(typeBool).zeros(1), 0},
	}
	for _, c := range cases {
		f, err := parse("ok.gguf", c.b)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		} else if len(f.Tensors) != c.n {
			t.Errorf("%s: %d tensors", c.name, len(f.Tensors))
		}
	}
}

// Every prefix of a file that cuts into its header or tensor data must fail
// cleanly.
func TestTruncated(t *testing.T) {
	w := NewWriter()
	for _, kv := range allValues {
		w.AddKV(kv.Key, kv.Value)
	}
	if err := w.AddTensor("a", kernels.Q8_0, []uint64{32, 2}, make([]byte, 68)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("b", kernels.F16, []uint64{3}, make([]byte, 6)); err != nil {
		t.Fatal(err)
	}
	b := encode(t, w)
	end := len(b) - 32 + 6 // b's data ends 26 bytes before the file does (padding)
	for n := 0; n < end; n++ {
		if _, err := parse("t.gguf", b[:n]); err == nil {
			t.Fatalf("prefix of %d bytes parsed", n)
		}
	}
	for n := end; n <= len(b); n++ {
		if _, err := parse("t.gguf", b[:n]); err != nil {
			t.Fatalf("prefix of %d bytes: %v", n, err)
		}
	}
	if !bytes.Equal(b[:4], []byte("GGUF")) {
		t.Fatal("no magic")
	}
}
