package gguf

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"mistralrs/internal/kernels"
)

func shardedWriter(t *testing.T, nTensors int) (*Writer, [][]byte) {
	r := rand.New(rand.NewPCG(5, 6))
	w := NewWriter()
	w.AddKV("general.architecture", "llama")
	w.AddKV("general.alignment", uint32(64))
	var datas [][]byte
	for i := range nTensors {
		data := randomBytes(r, 34*(i+1))
		if err := w.AddTensor(fmt.Sprintf("blk.%d.w", i), kernels.Q8_0, []uint64{32, uint64(i + 1)}, data); err != nil {
			t.Fatal(err)
		}
		datas = append(datas, data)
	}
	return w, datas
}

func TestShards(t *testing.T) {
	w, datas := shardedWriter(t, 5)
	prefix := filepath.Join(t.TempDir(), "model")
	paths, err := w.WriteShards(prefix, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 || paths[1] != prefix+"-00002-of-00003.gguf" {
		t.Fatalf("paths %v", paths)
	}
	for _, open := range []string{paths[0], paths[2]} { // any shard's name opens them all
		f, err := Open(open)
		if err != nil {
			t.Fatal(err)
		}
		if f.Path != paths[0] || len(f.Tensors) != 5 || len(f.maps) != 3 || f.Architecture() != "llama" {
			t.Fatalf("Path %s, %d tensors, %d maps, arch %q", f.Path, len(f.Tensors), len(f.maps), f.Architecture())
		}
		if n, _ := f.Uint("split.count"); n != 3 {
			t.Errorf("split.count %d", n)
		}
		for i, d := range datas {
			ti, ok := f.Tensor(fmt.Sprintf("blk.%d.w", i))
			if !ok || !bytes.Equal(ti.Data, d) {
				t.Errorf("tensor %d differs", i)
			}
		}
		// Each tensor's data lies in the map of the shard that holds it.
		for i, shard := range []int{0, 1, 1, 2, 2} {
			if !inside(f.maps[shard], f.Tensors[i].Data) {
				t.Errorf("tensor %d is not in the map of shard %d", i, shard)
			}
		}
		f.Close()
	}

	// A single shard opened under another name is refused.
	lone := filepath.Join(t.TempDir(), "lone.gguf")
	b, _ := os.ReadFile(paths[0])
	os.WriteFile(lone, b, 0o644)
	if _, err := Open(lone); err == nil || !strings.Contains(err.Error(), "3-way split") {
		t.Errorf("lone shard: %v", err)
	}

	os.Remove(paths[1])
	_, err = Open(paths[0])
	if err == nil || !strings.Contains(err.Error(), paths[1]+": shard 2 of 3 is missing") {
		t.Errorf("missing shard: %v", err)
	}
}

func TestShardErrors(t *testing.T) {
	w, _ := shardedWriter(t, 2)
	dir := t.TempDir()
	if _, err := w.WriteShards(filepath.Join(dir, "x"), 3); err == nil {
		t.Error("3 shards of 2 tensors accepted")
	}
	if _, err := Open(filepath.Join(dir, "m-00000-of-00002.gguf")); err == nil || !strings.Contains(err.Error(), "shard number 0") {
		t.Errorf("shard 0: %v", err)
	}
	// Shards from two different splits: the second file's split.no is wrong.
	a, _ := w.WriteShards(filepath.Join(dir, "a"), 2)
	if err := os.Rename(a[0], filepath.Join(dir, "b-00002-of-00002.gguf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(a[1], filepath.Join(dir, "b-00001-of-00002.gguf")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(dir, "b-00001-of-00002.gguf")); err == nil || !strings.Contains(err.Error(), "split.no is 1, expected 0") {
		t.Errorf("swapped shards: %v", err)
	}
	// A one-way split is an ordinary file.
	one, err := w.WriteShards(filepath.Join(dir, "one"), 1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(one[0])
	if err != nil || len(f.Tensors) != 2 {
		t.Fatalf("one shard: %v", err)
	}
	f.Close()
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	for path, want := range map[string]string{
		filepath.Join(dir, "none.gguf"): "no such file",
		dir:                             "is a directory",
		empty:                           "empty.gguf: file truncated reading magic",
	} {
		if _, err := Open(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s): %v, want %q", path, err, want)
		}
	}
}

// inside reports whether d lies within m's memory.
func inside(m, d []byte) bool {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(d)))
	return p >= lo && p+uintptr(len(d)) <= lo+uintptr(len(m))
}
