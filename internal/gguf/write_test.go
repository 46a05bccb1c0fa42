package gguf

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"mistralrs/internal/kernels"
)

// allValues has one key per value type, arrays of each type and nested arrays.
var allValues = []KV{
	{"u8", uint8(200)}, {"i8", int8(-100)}, {"u16", uint16(60000)}, {"i16", int16(-30000)},
	{"u32", uint32(4000000000)}, {"i32", int32(-2000000000)}, {"f32", float32(1.5)},
	{"bool.t", true}, {"bool.f", false}, {"str", "héllo\x00world"}, {"empty", ""},
	{"u64", uint64(1) << 63}, {"i64", int64(-1) << 62}, {"f64", -2.25},
	{"a.u8", []uint8{0, 255}}, {"a.i8", []int8{-128, 127}}, {"a.u16", []uint16{1, 65535}},
	{"a.i16", []int16{-32768, 7}}, {"a.u32", []uint32{1, 2, 3}}, {"a.i32", []int32{-1, 0, 1}},
	{"a.f32", []float32{0.5, -3}}, {"a.bool", []bool{true, false, true}},
	{"a.str", []string{"a", "", "ccc"}}, {"a.u64", []uint64{1 << 40}}, {"a.i64", []int64{-5}},
	{"a.f64", []float64{1e300}}, {"a.empty", []int32{}},
	{"a.nested", []any{[]int32{1, 2}, []string{"x"}, []any{[]uint8{9}}, []any{}}},
}

func encode(t testing.TB, w *Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d bytes", n, buf.Len())
	}
	return buf.Bytes()
}

func mustParse(t testing.TB, b []byte) *File {
	t.Helper()
	f, err := parse("test.gguf", b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRoundTripValues(t *testing.T) {
	w := NewWriter()
	for _, kv := range allValues {
		w.AddKV(kv.Key, kv.Value)
	}
	w.AddKV("u8", uint8(201)) // replaces in place
	f := mustParse(t, encode(t, w))
	if f.Version != 3 || len(f.Tensors) != 0 {
		t.Fatalf("version %d, %d tensors", f.Version, len(f.Tensors))
	}
	want := append([]KV(nil), allValues...)
	want[0].Value = uint8(201)
	if !reflect.DeepEqual(f.KV, want) {
		t.Fatalf("metadata differs:\n got %#v\nwant %#v", f.KV, want)
	}
}

func TestAccessors(t *testing.T) {
	w := NewWriter()
	for _, kv := range allValues {
		w.AddKV(kv.Key, kv.Value)
	}
	w.AddKV("general.architecture", "llama")
	w.AddKV("a.u64big", []uint64{1 << 63})
	w.AddKV("a.i64big", []int64{1 << 40})
	f := mustParse(t, encode(t, w))

	if u, ok := f.Uint("u16"); !ok || u != 60000 {
		t.Errorf("Uint(u16) = %d, %v", u, ok)
	}
	if u, ok := f.Uint("u64"); !ok || u != 1<<63 {
		t.Errorf("Uint(u64) = %d, %v", u, ok)
	}
	if _, ok := f.Uint("i8"); ok {
		t.Error("Uint of a negative value succeeded")
	}
	if i, ok := f.Int("i32"); !ok || i != -2000000000 {
		t.Errorf("Int(i32) = %d, %v", i, ok)
	}
	if _, ok := f.Int("u64"); ok {
		t.Error("Int of 2^63 succeeded")
	}
	if _, ok := f.Int("f32"); ok {
		t.Error("Int of a float succeeded")
	}
	if x, ok := f.Float("f32"); !ok || x != 1.5 {
		t.Errorf("Float(f32) = %v, %v", x, ok)
	}
	if x, ok := f.Float("i16"); !ok || x != -30000 {
		t.Errorf("Float(i16) = %v, %v", x, ok)
	}
	if b, ok := f.Bool("bool.t"); !ok || !b {
		t.Errorf("Bool = %v, %v", b, ok)
	}
	if s, ok := f.String("str"); !ok || s != "héllo\x00world" {
		t.Errorf("String = %q, %v", s, ok)
	}
	if _, ok := f.String("u8"); ok {
		t.Error("String of a number succeeded")
	}
	if s, ok := f.Strings("a.str"); !ok || len(s) != 3 || s[2] != "ccc" {
		t.Errorf("Strings = %q, %v", s, ok)
	}
	if x, ok := f.Float32s("a.i16"); !ok || !reflect.DeepEqual(x, []float32{-32768, 7}) {
		t.Errorf("Float32s(a.i16) = %v, %v", x, ok)
	}
	if x, ok := f.Float32s("a.f64"); !ok || len(x) != 1 {
		t.Errorf("Float32s(a.f64) = %v, %v", x, ok)
	}
	if _, ok := f.Float32s("a.str"); ok {
		t.Error("Float32s of strings succeeded")
	}
	if x, ok := f.Int32s("a.u16"); !ok || !reflect.DeepEqual(x, []int32{1, 65535}) {
		t.Errorf("Int32s(a.u16) = %v, %v", x, ok)
	}
	if x, ok := f.Int32s("a.empty"); !ok || len(x) != 0 {
		t.Errorf("Int32s(a.empty) = %v, %v", x, ok)
	}
	for _, k := range []string{"a.u64big", "a.i64big", "a.f32", "missing"} {
		if _, ok := f.Int32s(k); ok {
			t.Errorf("Int32s(%s) succeeded", k)
		}
	}
	if f.Architecture() != "llama" {
		t.Errorf("Architecture = %q", f.Architecture())
	}
	if _, ok := f.Get("missing"); ok {
		t.Error("Get(missing) succeeded")
	}
}

// testTypes are all the tensor types the kernels package knows.
func testTypes() []kernels.Type {
	var ts []kernels.Type
	for i := range 64 {
		if t := kernels.Type(i); t.Known() {
			ts = append(ts, t)
		}
	}
	return ts
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestRoundTripTensors(t *testing.T) {
	for _, align := range []uint32{0, 64} {
		r := rand.New(rand.NewPCG(1, 2))
		w := NewWriter()
		if align != 0 {
			w.AddKV("general.alignment", align)
		}
		type want struct {
			typ  kernels.Type
			dims []uint64
			data []byte
		}
		var wants []want
		for _, typ := range testTypes() {
			bs := uint64(typ.BlockSize())
			for _, dims := range [][]uint64{{bs}, {bs * 2, 3}, {bs, 1, 2, 3}} {
				size, _ := tensorSize(typ, dims)
				data := randomBytes(r, int(size))
				name := typ.String() + "." + strings.Repeat("d", len(dims))
				if err := w.AddTensor(name, typ, dims, data); err != nil {
					t.Fatal(err)
				}
				wants = append(wants, want{typ, dims, data})
			}
		}
		f := mustParse(t, encode(t, w))
		if len(f.Tensors) != len(wants) {
			t.Fatalf("%d tensors, want %d", len(f.Tensors), len(wants))
		}
		a := uint64(max(align, 32))
		for i, ti := range f.Tensors {
			wt := wants[i]
			if ti.Type != wt.typ || !reflect.DeepEqual(ti.Dims, wt.dims) || !bytes.Equal(ti.Data, wt.data) {
				t.Errorf("tensor %s differs: %s %v", ti.Name, ti.Type, ti.Dims)
			}
			if ti.Offset%a != 0 {
				t.Errorf("tensor %s offset %d not aligned to %d", ti.Name, ti.Offset, a)
			}
			if got, _ := f.Tensor(ti.Name); got != &f.Tensors[i] {
				t.Errorf("Tensor(%s) did not find it", ti.Name)
			}
		}
	}
}

func TestWriterErrors(t *testing.T) {
	w := NewWriter()
	if err := w.AddTensor("a", kernels.F32, []uint64{2}, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		typ  kernels.Type
		dims []uint64
		n    int
		msg  string
	}{
		{"a", kernels.F32, []uint64{2}, 8, "duplicate"},
		{"b", kernels.F32, []uint64{2}, 7, "needs 8"},
		{"c", kernels.Q4_0, []uint64{16}, 9, "block size"},
		{"d", kernels.Type(99), []uint64{1}, 4, "unknown type 99"},
		{"e", kernels.F32, []uint64{1, 1, 1, 1, 1}, 4, "dims"},
		{"f", kernels.F32, []uint64{1 << 21, 1 << 21}, 0, "2^40"},
	}
	for _, c := range bad {
		err := w.AddTensor(c.name, c.typ, c.dims, make([]byte, c.n))
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("AddTensor(%s): %v, want %q", c.name, err, c.msg)
		}
	}
	for _, v := range []any{3, nil, []any{uint8(1)}, map[string]int{}, uint64(32)} {
		w := NewWriter()
		w.AddKV("general.alignment", v)
		if _, err := w.WriteTo(&bytes.Buffer{}); err == nil {
			t.Errorf("value %#v accepted", v)
		}
	}
	w = NewWriter()
	w.AddKV("general.alignment", uint32(48))
	if _, err := w.WriteTo(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "power of two") {
		t.Errorf("alignment 48: %v", err)
	}
}

func TestWriteFileOpen(t *testing.T) {
	w := NewWriter()
	w.AddKV("general.architecture", "llama")
	data := randomBytes(rand.New(rand.NewPCG(3, 4)), 4*6)
	if err := w.AddTensor("x", kernels.F32, []uint64{3, 2}, data); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	x, ok := f.Tensor("x")
	if !ok || !bytes.Equal(x.Data, data) || x.Elements() != 6 {
		t.Fatalf("tensor x: %v %v", ok, x)
	}
	// The data must be the mapping itself, not a copy on the heap.
	if !inside(f.maps[0], x.Data) {
		t.Error("tensor data is not inside the file's memory map")
	}
	if f.Path != path || f.Architecture() != "llama" {
		t.Errorf("Path %q, arch %q", f.Path, f.Architecture())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if x.Data != nil {
		t.Error("Data kept after Close")
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := w.WriteFile(filepath.Join(t.TempDir(), "no", "dir.gguf")); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

// failWriter accepts limit bytes, then fails.
type failWriter struct{ limit int }

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.limit {
		n := f.limit
		f.limit = 0
		return n, errors.New("disk full")
	}
	f.limit -= len(p)
	return len(p), nil
}

func TestWriteToFailure(t *testing.T) {
	w := NewWriter()
	w.AddKV("k", "v")
	if err := w.AddTensor("x", kernels.F32, []uint64{100}, make([]byte, 400)); err != nil {
		t.Fatal(err)
	}
	full := len(encode(t, w))
	for _, limit := range []int{0, 10, full - 500, full - 1} {
		n, err := w.WriteTo(&failWriter{limit})
		if err == nil || n != int64(limit) {
			t.Errorf("limit %d: wrote %d, %v", limit, n, err)
		}
	}
}

func TestHandBuiltFile(t *testing.T) {
	f := &File{
		KV:      []KV{{"general.architecture", "qwen2"}},
		Tensors: []TensorInfo{{Name: "a", Dims: []uint64{2, 3}}, {Name: "b"}},
	}
	if b, ok := f.Tensor("b"); !ok || b != &f.Tensors[1] || b.Elements() != 1 {
		t.Error("Tensor(b) on a hand-built File")
	}
	if _, ok := f.Tensor("c"); ok {
		t.Error("Tensor(c) found")
	}
	if f.Architecture() != "qwen2" || f.Close() != nil {
		t.Error("Architecture or Close")
	}
	p, err := Parse("mem.gguf", encode(t, NewWriter()))
	if err != nil || len(p.KV) != 0 {
		t.Fatalf("Parse: %v", err)
	}
	if _, ok := p.Tensor("a"); ok {
		t.Error("Tensor(a) found in an empty file")
	}
}

func TestModelName(t *testing.T) {
	for path, want := range map[string]string{
		"dir/Qwen3-0.6B-Q8_0.gguf":               "Qwen3-0.6B-Q8_0",
		"/m/llama-3-8b-00001-of-00003.gguf":      "llama-3-8b",
		"m/Big-Model-Q4_K_M-00002-OF-00004.GGUF": "Big-Model-Q4_K_M",
		"plain":                                  "plain",
		"a-of-b.gguf":                            "a-of-b",
	} {
		if got := ModelName(path); got != want {
			t.Errorf("ModelName(%q) = %q, want %q", path, got, want)
		}
	}
}
