package gguf

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// A model file stays memory-mapped (MAP_SHARED, read-only) while it is
// served, and the kernels read the weights straight from the map. If the
// file is truncated or rewritten in place, a read past its new end raises
// SIGBUS, which would kill the process. So the package remembers every
// live mapping: what the file was when it was mapped (device, inode, size,
// modification time) and where the map lies in memory. Goroutines that read
// weights run with debug.SetPanicOnFault(true) (the engine's runner and the
// kernel workers), which turns the fault into a panic; Fault recognises a
// fault inside a mapped model file and names the file. CheckMapped notices
// a change before any read faults and logs it once.
//
// Replacing the file by rename (write a new file, rename it over the old
// path) is safe: the old inode stays mapped until the model is closed.

// mapping is one file mapped by Open.
type mapping struct {
	path       string
	start, end uintptr // the map's address range
	dev, ino   uint64
	size       int64
	mtime      time.Time

	logged int // what CheckMapped reported: 0 nothing, 1 replaced, 2 changed in place
}

var live struct {
	sync.Mutex
	maps    []*mapping
	checked time.Time // CheckMapped's last stat
}

// track records a new mapping of the file at path described by st.
func track(path string, st os.FileInfo, m []byte) *mapping {
	mp := &mapping{path: path, size: st.Size(), mtime: st.ModTime()}
	if len(m) > 0 {
		mp.start = uintptr(unsafe.Pointer(&m[0]))
		mp.end = mp.start + uintptr(len(m))
	}
	mp.dev, mp.ino = fileID(st)
	live.Lock()
	live.maps = append(live.maps, mp)
	live.Unlock()
	return mp
}

// untrack forgets mp (before its map is released).
func untrack(mp *mapping) {
	live.Lock()
	defer live.Unlock()
	for i, x := range live.maps {
		if x == mp {
			live.maps = append(live.maps[:i], live.maps[i+1:]...)
			return
		}
	}
}

func fileID(st os.FileInfo) (dev, ino uint64) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Dev), uint64(s.Ino)
	}
	return 0, 0
}

// ChangedError reports that a mapped model file was changed in place
// (truncated or rewritten) while the model was in use: its weights can no
// longer be read, and the model must be loaded again.
type ChangedError struct {
	Path   string
	Detail string // what changed, e.g. "size now 4096 bytes, was 1048576"
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("model file %s changed on disk while in use (%s); reload the model", e.Path, e.Detail)
}

// state compares the file now at mp.path with what was mapped. changed: the
// same file (inode) has another size or modification time, so the map no
// longer holds what was loaded; replaced: the path names another file now
// (or none), which leaves the mapped one intact.
func (mp *mapping) state() (changed, replaced bool, detail string) {
	st, err := os.Stat(mp.path)
	if err != nil {
		return false, true, "removed from its path"
	}
	if dev, ino := fileID(st); dev != mp.dev || ino != mp.ino {
		return false, true, "replaced by another file"
	}
	if st.Size() != mp.size {
		return true, false, fmt.Sprintf("size now %d bytes, was %d", st.Size(), mp.size)
	}
	if !st.ModTime().Equal(mp.mtime) {
		return true, false, fmt.Sprintf("modified at %s, after it was loaded", st.ModTime().UTC().Format(time.RFC3339))
	}
	return false, false, ""
}

// Check reports a *ChangedError when a file of f was changed in place since
// it was mapped. A file replaced by rename is not an error: the mapped copy
// stays readable. Files parsed from memory never change.
func (f *File) Check() error {
	for _, mp := range f.mapped {
		if changed, _, detail := mp.state(); changed {
			return &ChangedError{Path: mp.path, Detail: detail}
		}
	}
	return nil
}

// Fault returns a *ChangedError when v, a value recovered from a panic (or
// an error carrying one), is a memory fault at an address inside a mapped
// model file: the file was cut short or rewritten under the map. It returns
// nil for anything else, which the caller should panic with again.
func Fault(v any) error {
	err, ok := v.(error)
	if !ok {
		return nil
	}
	var fault interface{ Addr() uintptr }
	if !errors.As(err, &fault) {
		return nil
	}
	addr := fault.Addr()
	live.Lock()
	var hit *mapping
	for _, mp := range live.maps {
		if addr >= mp.start && addr < mp.end {
			hit = mp
			break
		}
	}
	live.Unlock()
	if hit == nil {
		return nil
	}
	changed, _, detail := hit.state()
	if !changed {
		detail = fmt.Sprintf("a read at offset %d of its map failed", addr-hit.start)
	}
	return &ChangedError{Path: hit.path, Detail: detail}
}

// checkEvery is how often CheckMapped looks at the files.
const checkEvery = time.Second

// CheckMapped looks at every mapped model file (at most once a second, so
// that callers may call it for every request) and logs, once per mapping,
// an ERROR for a file changed in place (requests on it will fail) and a
// WARN for a file replaced or removed (the loaded copy keeps serving until
// the model is reloaded).
func CheckMapped() {
	live.Lock()
	now := time.Now()
	if now.Sub(live.checked) < checkEvery {
		live.Unlock()
		return
	}
	live.checked = now
	maps := append([]*mapping(nil), live.maps...)
	live.Unlock()
	for _, mp := range maps {
		changed, replaced, detail := mp.state()
		live.Lock()
		report := (changed && mp.logged < 2) || (replaced && mp.logged < 1)
		if report {
			mp.logged = 1
			if changed {
				mp.logged = 2
			}
		}
		live.Unlock()
		switch {
		case report && changed:
			slog.Error("model file changed on disk while in use: reload the model (reads past its new end fail the requests, "+
				"and it now serves whatever bytes the file holds); deploy a new file by writing it beside the old one and renaming it over the path",
				"path", mp.path, "change", detail)
		case report && replaced:
			slog.Warn("model file replaced on disk: the loaded copy keeps serving until the model is reloaded",
				"path", mp.path, "change", detail)
		}
	}
}
