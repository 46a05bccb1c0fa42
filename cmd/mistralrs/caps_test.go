package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mistralrs/internal/testutil"
)

// A config file that never ends (a link to /dev/zero) is refused at once:
// one line naming the file, exit code 1, instead of memory that grows until
// the process dies.
func TestFromConfigEndlessFile(t *testing.T) {
	conf := testutil.ZeroLink(t, filepath.Join(t.TempDir(), "zero.toml"))
	// The deadline only keeps a regression from reading until the machine runs
	// out of memory; the refusal takes no time.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "from-config", "-f", conf)
	cmd.Env = append(os.Environ(), "MISTRALRS_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, want code 1; stderr %q", err, stderr.String())
	}
	msg := strings.TrimSpace(stderr.String())
	want := "error: config file " + conf + ": is a character device, not a regular file"
	if msg != want {
		t.Errorf("stderr %q\nwant %q", msg, want)
	}
}
