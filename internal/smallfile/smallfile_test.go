package smallfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"mistralrs/internal/testutil"
)

func TestReadWithinCap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.toml")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int64{3, 4} {
		got, err := Read(p, limit)
		if err != nil || string(got) != "abc" {
			t.Errorf("limit %d: %q, %v", limit, got, err)
		}
	}
	if err := Check(p, 3); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// A sparse file one byte over the cap is refused from its size, unread.
func TestReadTooLarge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.toml")
	testutil.SparseFile(t, p, Config+1)
	_, err := Read(p, Config)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Path != p || err.Error() != p+": larger than 1 MiB" {
		t.Errorf("Read: %v", err)
	}
	if err := Check(p, Config); !errors.As(err, &tl) {
		t.Errorf("Check: %v", err)
	}
}

// /dev/zero never ends; through a link it is still a device, refused at once.
func TestReadDevZeroLink(t *testing.T) {
	p := testutil.ZeroLink(t, filepath.Join(t.TempDir(), "zero.toml"))
	for name, err := range map[string]error{"Read": second(Read(p, Config)), "Check": Check(p, Config)} {
		var nr *NotRegularError
		if !errors.As(err, &nr) || err.Error() != p+": is a character device, not a regular file" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A named pipe nobody writes to would block a plain open forever.
func TestReadNamedPipe(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo.jinja")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip("no named pipes here:", err)
	}
	_, err := Read(p, Template)
	if err == nil || err.Error() != p+": is a named pipe, not a regular file" {
		t.Errorf("Read: %v", err)
	}
}

func TestReadDirectory(t *testing.T) {
	d := t.TempDir()
	_, err := Read(d, Config)
	if err == nil || err.Error() != d+": is a directory, not a file" {
		t.Errorf("Read: %v", err)
	}
}

func TestReadMissing(t *testing.T) {
	_, err := Read(filepath.Join(t.TempDir(), "none"), Config)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read: %v, want os.ErrNotExist", err)
	}
}

// A stream that never ends stops one byte past the cap (a file that reports
// size 0 but holds more, as in /proc, goes through the same reader).
func TestReadAllStopsAtCap(t *testing.T) {
	got, err := ReadAll(strings.NewReader("abcd"), 4)
	if err != nil || string(got) != "abcd" {
		t.Errorf("at the cap: %q, %v", got, err)
	}
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Skip(err)
	}
	defer zero.Close()
	_, err = ReadAll(zero, 1<<10)
	if err == nil || err.Error() != "larger than 1 KiB" {
		t.Errorf("/dev/zero: %v", err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{1 << 20: "1 MiB", 16 << 20: "16 MiB", 4 << 10: "4 KiB", 1536: "1536 bytes", 100: "100 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

func second(_ []byte, err error) error { return err }
