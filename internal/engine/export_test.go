package engine

import (
	"time"

	"mistralrs/internal/kvcache"
)

// CheckKV verifies the paged pool's invariants; call it only while the
// engine is idle (every Generate returned).
func (e *Engine) CheckKV() error {
	if e.kv == nil {
		return nil
	}
	return e.kv.Check()
}

// StepStats returns the scheduler's step counters: steps, time in steps,
// time inside Forward and time choosing batches.
func (e *Engine) StepStats() (steps int64, step, forward, sched time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.stats
	return s.steps, time.Duration(s.stepNanos), time.Duration(s.fwdNanos), time.Duration(s.schedNanos)
}

// ResetStepStats zeroes the step counters.
func (e *Engine) ResetStepStats() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stats.steps, e.stats.stepNanos, e.stats.fwdNanos, e.stats.schedNanos = 0, 0, 0, 0
}

// TestSched drives a scheduler of e's options directly, without the engine
// loop or the model: a step schedules a batch and pretends to compute it.
type TestSched struct {
	s    *scheduler
	seqs map[uint64]*seq
	next uint64
}

// TestScheduler returns a scheduler over a fresh pool of the given number
// of blocks (e must be paged).
func (e *Engine) TestScheduler(blocks int) *TestSched {
	s := newScheduler(e)
	cfg := e.Model.Net.Config
	s.kv = kvcache.NewPool(cfg.Layers, cfg.KDim(), cfg.VDim(), e.opts.BlockSize, blocks, e.f16KV)
	return &TestSched{s: s, seqs: map[uint64]*seq{}}
}

// Add queues a request and returns its id (ids grow with arrival).
func (t *TestSched) Add(prompt []int32, maxTokens int) uint64 {
	t.next++
	sq := newSeq(t.s.e, &Request{Prompt: prompt, MaxTokens: maxTokens}, maxTokens)
	sq.id = t.next
	t.seqs[sq.id] = sq
	t.s.waiting = append(t.s.waiting, sq)
	return sq.id
}

// Step schedules one batch and computes it: every sequence whose tokens
// are all computed gets token 1, and finishes (length) at its maximum. It
// returns the tokens each scheduled sequence got.
func (t *TestSched) Step() map[uint64]int {
	s := t.s
	s.schedule()
	got := map[uint64]int{}
	for _, sq := range s.batch {
		got[sq.id] = sq.n
		sq.computed += sq.n
		sq.n = 0
		if err := sq.cache().Extend(sq.computed); err != nil {
			panic(err)
		}
		s.commitBlocks(sq)
		if sq.computed == len(sq.tokens) {
			sq.tokens = append(sq.tokens, 1)
			if len(sq.tokens)-sq.promptLen == sq.maxTokens {
				s.finish(sq, FinishLength, nil)
			}
		}
	}
	s.deliver()
	return got
}

// Finish ends sequence id now.
func (t *TestSched) Finish(id uint64) {
	t.s.finish(t.seqs[id], FinishStop, nil)
	t.s.deliver()
}

// Running and Waiting list the queues' ids.
func (t *TestSched) Running() []uint64 { return ids(t.s.running) }
func (t *TestSched) Waiting() []uint64 { return ids(t.s.waiting) }

func ids(q []*seq) []uint64 {
	var out []uint64
	for _, sq := range q {
		out = append(out, sq.id)
	}
	return out
}

// Pool returns the scheduler's pool's used blocks and checks its invariants.
func (t *TestSched) Pool() (used int, err error) { return t.s.kv.Used(), t.s.kv.Check() }
