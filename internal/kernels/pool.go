package kernels

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs data-parallel loops on a fixed set of worker goroutines. A loop
// costs one channel send per worker and one WaitGroup wait, no allocation:
// the model calls For about a hundred times per token.
//
// Loops come back to back while a model runs (tens of microseconds apart
// when decoding), and waking a parked goroutine takes about as long on a
// virtual machine: the workers measured a third of the caller's share of
// the chunks. So a worker polls for the next loop for spinWait before it
// parks, and For polls for the workers' completion before it waits.
//
// For may be called from several goroutines: one loop at a time uses the
// workers, a loop started while they are busy (including a nested For from
// inside fn) runs on its caller's goroutine alone rather than waiting.
type Pool struct {
	threads int
	mu      sync.Mutex // held by the loop that owns the workers
	wake    []chan struct{}
	wg      sync.WaitGroup
	closed  bool

	// The current loop, written under mu before the workers are woken.
	fn      func(lo, hi int)
	n       int
	chunk   int
	next    atomic.Int64
	pending atomic.Int32               // workers still in the loop
	failed  atomic.Pointer[PanicError] // the loop's first panic
}

// PanicError is a panic raised by a loop's fn, on a worker or on the
// goroutine calling For, carried to For's caller: For panics with it once
// every goroutine has left the loop, so that a panic in a worker never
// kills the process behind the caller's back. Unwrap gives the original
// value when it is an error (a memory fault is a runtime.Error with an
// Addr method: see gguf.Fault).
type PanicError struct {
	Value any
	Stack []byte // the stack of the goroutine that panicked
}

// Error includes the stack of the goroutine that panicked, which is what a
// crash prints: the caller's stack alone would not show where fn failed.
func (e *PanicError) Error() string {
	return fmt.Sprintf("panic in a parallel loop: %v\n\n%s", e.Value, e.Stack)
}

func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// spinWait is how long a worker polls for the next loop, and For for the
// workers to finish, before parking.
const spinWait = 200 * time.Microsecond

// NewPool starts a pool of threads goroutines counting the caller's (the
// goroutine calling For works too); threads <= 0 means runtime.NumCPU().
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads, wake: make([]chan struct{}, threads-1)}
	for i := range p.wake {
		ch := make(chan struct{}, 1)
		p.wake[i] = ch
		go p.worker(ch)
	}
	return p
}

// Threads returns the number of goroutines a loop runs on (1 for a nil pool).
func (p *Pool) Threads() int {
	if p == nil {
		return 1
	}
	return p.threads
}

func (p *Pool) worker(wake chan struct{}) {
	// Weights are read from memory-mapped model files: a file cut short
	// under the map faults (SIGBUS), which must become a panic that For's
	// caller can handle rather than a crash.
	debug.SetPanicOnFault(true)
	for {
		ok, got := true, false
		var t0 time.Time
		for i := 0; !got; i++ {
			select {
			case _, ok = <-wake:
				got = true
				continue
			default:
			}
			if i%64 == 63 {
				// Let other goroutines have the processor, and give up
				// after spinWait.
				runtime.Gosched()
				if i == 63 {
					t0 = time.Now()
				} else if time.Since(t0) > spinWait {
					break
				}
			}
		}
		if !got {
			_, ok = <-wake
		}
		if !ok {
			return
		}
		p.runCaught()
		p.wg.Done()
		p.pending.Add(-1)
	}
}

// runCaught is run, recording a panic of fn as the loop's failure (the first
// one wins) instead of letting it unwind the goroutine.
func (p *Pool) runCaught() {
	defer func() {
		if v := recover(); v != nil {
			p.failed.CompareAndSwap(nil, &PanicError{Value: v, Stack: debug.Stack()})
			// Stop handing out chunks: the loop has failed.
			p.next.Store(int64(p.n))
		}
	}()
	p.run()
}

// run takes chunks of the current loop until none is left. Chunks are
// handed out dynamically so that a goroutine that was descheduled does not
// hold up the loop.
func (p *Pool) run() {
	n, chunk, fn := p.n, p.chunk, p.fn
	for {
		lo := int(p.next.Add(int64(chunk))) - chunk
		if lo >= n {
			return
		}
		fn(lo, min(lo+chunk, n))
	}
}

// For calls fn on disjoint ranges [lo, hi) covering [0, n) in parallel and
// returns when all calls have returned. A nil pool runs fn(0, n) directly.
// When fn panics on a worker or on the caller's goroutine, For waits for
// the other goroutines to leave the loop and panics with a *PanicError.
func (p *Pool) For(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if p == nil || p.threads == 1 || n == 1 || !p.mu.TryLock() {
		fn(0, n)
		return
	}
	defer p.mu.Unlock()
	if p.closed {
		fn(0, n)
		return
	}
	// About four chunks per thread balance the load without much overhead.
	chunk := (n + 4*p.threads - 1) / (4 * p.threads)
	chunks := (n + chunk - 1) / chunk
	p.fn, p.n, p.chunk = fn, n, chunk
	p.next.Store(0)
	p.failed.Store(nil)
	workers := min(len(p.wake), chunks-1)
	p.wg.Add(workers)
	p.pending.Store(int32(workers))
	for i := 0; i < workers; i++ {
		p.wake[i] <- struct{}{}
	}
	p.runCaught()
	// The workers' last chunks are usually a few microseconds from done.
	if p.pending.Load() != 0 {
		t0 := time.Now()
		for i := 1; p.pending.Load() != 0; i++ {
			if i%64 == 0 && time.Since(t0) > spinWait {
				break
			}
		}
	}
	p.wg.Wait()
	p.fn = nil // do not keep the caller's closure alive
	if pe := p.failed.Swap(nil); pe != nil {
		panic(pe)
	}
}

// Close stops the workers; later loops run on the caller's goroutine.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, ch := range p.wake {
		close(ch)
	}
}
