package kernels

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// goid is the current goroutine's id, read from its stack header.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// forOnWorkers runs p.For(n, fn) with fn called only on chunks a worker
// took (the caller's own chunks sleep a little so that the workers get
// some), retrying until a worker ran one (for up to 20 s: a loaded machine
// may leave the workers unscheduled for a while); it returns what For
// panicked with.
func forOnWorkers(t *testing.T, p *Pool, n int, fn func(lo, hi int)) any {
	t.Helper()
	caller := goid()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		var ranOnWorker atomic.Bool // several workers may run chunks
		v := func() (v any) {
			defer func() { v = recover() }()
			p.For(n, func(lo, hi int) {
				if goid() == caller {
					time.Sleep(50 * time.Microsecond)
					return
				}
				ranOnWorker.Store(true)
				fn(lo, hi)
			})
			return nil
		}()
		if ranOnWorker.Load() {
			return v
		}
	}
	t.Fatal("no chunk ran on a worker")
	return nil
}

// A panic on a worker reaches For's caller as a *PanicError with the
// worker's stack, after the loop; the pool keeps working.
func TestPoolForCarriesWorkerPanic(t *testing.T) {
	p := NewPool(4)
	defer p.Close()
	v := forOnWorkers(t, p, 64, func(lo, hi int) { panic("boom") })
	pe, ok := v.(*PanicError)
	if !ok || pe.Value != "boom" || !bytes.Contains(pe.Stack, []byte("runCaught")) {
		t.Fatalf("For panicked with %#v, want a *PanicError carrying boom and the worker's stack", v)
	}
	// The caller's own panic is carried the same way.
	func() {
		defer func() {
			if pe, ok := recover().(*PanicError); !ok || pe.Value != "mine" {
				t.Errorf("caller's panic: %#v", pe)
			}
		}()
		p.For(64, func(lo, hi int) { panic("mine") })
	}()
	for range 10 {
		var sum atomic.Int64
		p.For(100, func(lo, hi int) { sum.Add(int64(hi - lo)) })
		if sum.Load() != 100 {
			t.Fatalf("after a panic: loop covered %d of 100", sum.Load())
		}
	}
}

// A worker reading a memory-mapped file that was truncated under it faults
// (SIGBUS); the worker turns the fault into a panic carried to For's
// caller, a runtime error with the faulting address, instead of a crash.
func TestPoolForCarriesMappedFileFault(t *testing.T) {
	if emulated() {
		t.Skip("MISTRALRS_EMULATED: user-mode emulation (qemu-user) does not deliver the SIGBUS of a truncated mapping as the kernel does (the read sees a nil-pointer fault); this test runs on real hardware")
	}
	const pages = 64
	page := os.Getpagesize()
	path := filepath.Join(t.TempDir(), "weights")
	if err := os.WriteFile(path, make([]byte, pages*page), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(fd.Fd()), 0, pages*page, unix.PROT_READ, unix.MAP_SHARED)
	fd.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))

	p := NewPool(4)
	defer p.Close()
	var sink byte
	v := forOnWorkers(t, p, pages, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			sink ^= m[i*page]
		}
	})
	_ = sink
	pe, ok := v.(*PanicError)
	var fault interface{ Addr() uintptr }
	if !ok || !errors.As(pe, &fault) {
		t.Fatalf("For panicked with %#v, want a *PanicError wrapping a fault", v)
	}
	if a := fault.Addr(); a < uintptr(unsafe.Pointer(&m[0])) || a >= uintptr(unsafe.Pointer(&m[0]))+uintptr(len(m)) {
		t.Errorf("fault address %#x outside the map", a)
	}
}
