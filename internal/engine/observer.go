package engine

// Observer receives what the engine does, for metrics. The engine calls it
// from its own goroutines; implementations must be safe for concurrent use
// and cheap (they run on the hot path). Counts follow the semantics of
// mistral.rs's engine metrics (see docs/observability.md).
type Observer interface {
	// TokensProcessed adds prompt tokens computed in a prefill step and one
	// per sequence in a decode step.
	TokensProcessed(n int)
	// PrefixCacheLookup counts one new sequence looked up in the prefix cache
	// (also when prefix caching is off).
	PrefixCacheLookup()
	// PrefixCacheHit counts a sequence that reused cached KV (once per sequence).
	PrefixCacheHit()
	// PrefixCacheEvictions counts cache entries evicted.
	PrefixCacheEvictions(n int)
	// SchedulerState reports queue lengths after each scheduling decision.
	SchedulerState(running, waiting int)
	// SequenceCompleted counts a finished sequence by reason: stop, length,
	// canceled, tool_calls, error.
	SequenceCompleted(reason string)
	// SequenceRejected counts a sequence refused before it ran:
	// over_total_capacity, cache_exhausted.
	SequenceRejected(reason string)
	// KVCacheBlocks reports the paged KV cache's used and total blocks.
	KVCacheBlocks(used, total int)
	// Preempted counts a running sequence sent back to the waiting queue.
	Preempted()
	// PendingAdmission reports requests received but not yet scheduled.
	PendingAdmission(n int)
	// Capacity reports the maximum number of concurrently scheduled sequences.
	Capacity(n int)
}

// NopObserver ignores everything.
type NopObserver struct{}

func (NopObserver) TokensProcessed(int)      {}
func (NopObserver) PrefixCacheLookup()       {}
func (NopObserver) PrefixCacheHit()          {}
func (NopObserver) PrefixCacheEvictions(int) {}
func (NopObserver) SchedulerState(int, int)  {}
func (NopObserver) SequenceCompleted(string) {}
func (NopObserver) SequenceRejected(string)  {}
func (NopObserver) KVCacheBlocks(int, int)   {}
func (NopObserver) Preempted()               {}
func (NopObserver) PendingAdmission(int)     {}
func (NopObserver) Capacity(int)             {}
