// Package testutil holds helpers shared by the tests of several packages.
package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// SharedDir returns the shared test-data directory: the first directory
// named "shared" that holds a "testdata" folder, found by walking up from the
// working directory (a test's working directory is its package directory, so
// this finds the checkout's sibling ../shared). The result holds
// testdata/vocab, testdata/reference and testdata/real. The test is skipped
// when no such directory exists, so that a bare checkout still passes.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Skipf("shared test data: %v", err)
	}
	for {
		cand := filepath.Join(dir, "shared")
		if st, err := os.Stat(filepath.Join(cand, "testdata")); err == nil && st.IsDir() {
			return cand
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("shared/testdata not found above the working directory")
		}
		dir = parent
	}
}

// SharedFile returns the path of a file under the shared directory, for
// example SharedFile(t, "testdata", "real", "stories260K.gguf"), and skips
// the test when the directory or the file is absent.
func SharedFile(t testing.TB, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{SharedDir(t)}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared test file missing: %v", err)
	}
	return p
}

// SparseFile makes path (and its folder) a file of size bytes that takes no
// room on disk, for tests of size caps; it returns path.
func SparseFile(t testing.TB, path string, size int64) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return path
}

// ZeroLink makes path (and its folder) a link to /dev/zero, a file that
// never ends; it returns path.
func ZeroLink(t testing.TB, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", path); err != nil {
		t.Fatal(err)
	}
	return path
}
