package engine

import (
	"time"

	"mistralrs/internal/kvcache"
)

// CheckKV verifies the paged pool's invariants; call it only while the
// engine is idle (every Stream done).
func (e *Engine) CheckKV() error {
	if p, ok := e.kv.(*kvcache.Paged); ok {
		return p.Pool().Check()
	}
	return nil
}

// KVBlocks returns the paged pool's blocks: all of them, those holding
// memory and those holding a cached prefix (0, 0, 0 when not paged).
func (e *Engine) KVBlocks() (total, resident, cached int) {
	if p, ok := e.kv.(*kvcache.Paged); ok {
		return p.Pool().Total(), p.Pool().Resident(), p.Pool().Cached()
	}
	return 0, 0, 0
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
