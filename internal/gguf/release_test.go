package gguf

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// mappedRSS returns the resident kilobytes of the mapping at m
// (/proc/self/smaps: pages in the process's page tables, which mincore
// does not tell: it reports the page cache).
func mappedRSS(t *testing.T, m []byte) int {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	head := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&m[0])))
	// The mapping's header line, then its fields: the first Rss is its own.
	in := false
	for _, line := range strings.Split(string(smaps), "\n") {
		in = in || strings.HasPrefix(line, head)
		if in && strings.HasPrefix(line, "Rss:") {
			kb, err := strconv.Atoi(strings.Fields(line)[1])
			if err != nil {
				t.Fatal(line, err)
			}
			return kb
		}
	}
	t.Fatalf("mapping %s not in /proc/self/smaps", head)
	return 0
}

// TestRelease hands a tensor's pages back: they leave resident memory,
// the tensor reads the same bytes afterwards (from the file), and tensors
// outside any mapping are left alone.
func TestRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.gguf")
	writeWeights(t, path, 1.5)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ti, _ := f.Tensor("w")
	before := append([]byte(nil), ti.Data...) // touches every page
	if kb := mappedRSS(t, f.maps[0]); kb < 64 {
		t.Fatalf("before Release: %d KiB of the mapping resident, want the tensor's 64", kb)
	}
	f.Release("w")
	if !ti.Released {
		t.Error("Released not set")
	}
	if kb := mappedRSS(t, f.maps[0]); kb > 8 {
		t.Errorf("after Release: %d KiB of the mapping resident, want at most the two pages the tensor shares with the header", kb)
	}
	if string(ti.Data) != string(before) {
		t.Error("the tensor reads differently after Release")
	}
	f.Release("no such tensor") // nothing to do

	mem := &File{Tensors: []TensorInfo{{Name: "h", Data: make([]byte, 1<<16)}}}
	mem.Release("h")
	if mem.Tensors[0].Released {
		t.Error("a tensor outside any mapping was marked released")
	}
}
