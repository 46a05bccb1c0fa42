package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSharedDir(t *testing.T) {
	dir := SharedDir(t)
	if st, err := os.Stat(filepath.Join(dir, "testdata")); err != nil || !st.IsDir() {
		t.Fatalf("SharedDir returned %s without a testdata folder", dir)
	}
}

func TestSharedFileSkipsMissing(t *testing.T) {
	ran := false
	t.Run("missing", func(t *testing.T) {
		ran = true
		SharedFile(t, "testdata", "no-such-file")
		t.Fatal("SharedFile did not skip")
	})
	if !ran {
		t.Fatal("subtest did not run")
	}
}
