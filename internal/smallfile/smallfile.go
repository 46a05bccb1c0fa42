// Package smallfile reads the files the program keeps whole in memory (a
// config, a chat template, a Hub ref or token) under a size cap, so that a
// file that never ends (a link to /dev/zero) or a huge one is an error naming
// the file instead of memory that grows until the process dies.
package smallfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The caps, one per kind of file; docs/configuration.md lists them. Each is
// far above what a real file of its kind holds.
const (
	// Config is a `from-config` TOML file (a few KiB in practice).
	Config = 1 << 20
	// Template is a .jinja chat template (the largest real ones are tens of KiB).
	Template = 1 << 20
	// TokenizerConfig is a Hugging Face tokenizer_config.json read for its
	// chat template: it also lists the added tokens, about 1 MiB for the
	// largest vocabularies.
	TokenizerConfig = 16 << 20
	// Ref is a Hugging Face cache ref (refs/main): one 40-digit commit.
	Ref = 4 << 10
	// Token is a Hugging Face token file: one token.
	Token = 64 << 10
	// HubJSON is a Hub API answer read whole (the model info, which lists
	// every file of the repository).
	HubJSON = 64 << 20
)

// TooLargeError is a file, or a stream, longer than its cap.
type TooLargeError struct {
	Path  string // empty for a stream
	Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Path == "" {
		return e.Problem()
	}
	return e.Path + ": " + e.Problem()
}

// Problem is the message without the path.
func (e *TooLargeError) Problem() string { return "larger than " + Size(e.Limit) }

// NotRegularError is a path that names something other than a regular file
// (after links): a directory, a named pipe, a device or a socket.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string { return e.Path + ": " + e.Problem() }

// Problem is the message without the path.
func (e *NotRegularError) Problem() string {
	if e.Mode.IsDir() {
		return "is a directory, not a file"
	}
	return "is " + kind(e.Mode) + ", not a regular file"
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}

// Read returns the contents of the regular file at path (links followed) when
// it holds at most limit bytes. Anything else is refused without reading it
// whole: a larger file (*TooLargeError), or a directory, named pipe, device
// or socket (*NotRegularError), which could block or never end. An error
// opening the file is os.Open's.
func Read(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a named pipe with no writer would otherwise wait
	// for one; on a regular file it changes nothing.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := check(path, st, limit); err != nil {
		return nil, err
	}
	// The file may grow after the Stat, and some (in /proc) report size 0:
	// the cap holds on what is read.
	data, err := ReadAll(f, limit)
	var tl *TooLargeError
	if errors.As(err, &tl) {
		tl.Path = path
	}
	return data, err
}

// Check reports, without reading the file, what Read would refuse for its
// type or size: for a check before any work starts.
func Check(path string, limit int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return check(path, st, limit)
}

func check(path string, st fs.FileInfo, limit int64) error {
	if !st.Mode().IsRegular() {
		return &NotRegularError{Path: path, Mode: st.Mode()}
	}
	if st.Size() > limit {
		return &TooLargeError{Path: path, Limit: limit}
	}
	return nil
}

// ReadAll reads r to its end when it holds at most limit bytes, and stops
// with a *TooLargeError (no Path) at the first byte past it.
func ReadAll(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	return data, nil
}

// Refused reports whether err is one of Read's or Check's refusals, whose
// message starts with the path, so that a caller can say what the file is
// for in front of it ("config file " + err).
func Refused(err error) bool { return Problem(err) != "" }

// Problem is what Read or Check refused a file for, without its path ("larger
// than 1 MiB"), for a caller that names the file itself; "" when err is no
// refusal.
func Problem(err error) string {
	var tl *TooLargeError
	if errors.As(err, &tl) {
		return tl.Problem()
	}
	var nr *NotRegularError
	if errors.As(err, &nr) {
		return nr.Problem()
	}
	return ""
}

// ChatTemplateLimit is the cap on a chat template file: a tokenizer_config
// .json by its extension, else a .jinja template.
func ChatTemplateLimit(path string) int64 {
	if strings.EqualFold(filepath.Ext(path), ".json") {
		return TokenizerConfig
	}
	return Template
}

// Size writes a cap as people read it: "1 MiB", "4 KiB", "100 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
