package engine

// Observer receives what the engine does, for metrics. The engine calls it
// from its scheduler goroutine and from Submit callers; implementations
// must be safe for concurrent use and cheap (they run on the hot path).
// Counts follow the semantics of mistral.rs's engine metrics (its
// mistralrs_* Prometheus families): completion reasons are its stop-reason
// labels plus "error", counted once per sequence; prefix-cache lookups, hits
// and evictions are counted as its prefix cacher (contiguous caches) and its
// paged block pool count them.
type Observer interface {
	// TokensProcessed adds, once per engine step, the tokens that step
	// computed: prompt chunks (paged: without the cached prefix; contiguous
	// caches: a prompt's cached prefix is counted too, once) and one per
	// decoding sequence.
	TokensProcessed(n int)
	// PrefixCacheLookup counts one new generating sequence (each choice of
	// a request), when its request arrives (also when prefix caching is
	// off, and before any rejection); embeddings are not counted.
	PrefixCacheLookup()
	// PrefixCacheHit counts a sequence that started from cached KV, at most
	// once per sequence (a preempted sequence resuming from its own cached
	// blocks counts if it had not before).
	PrefixCacheHit()
	// PrefixCacheEvictions counts cache entries evicted: paged, cached
	// blocks reused for new data; contiguous, finished caches dropped past
	// --prefix-cache-n (or all of them after a forward error).
	PrefixCacheEvictions(n int)
	// SchedulerState reports the running and waiting queue lengths after
	// each scheduling decision and when the engine goes idle.
	SchedulerState(running, waiting int)
	// SequenceCompleted counts a finished sequence by reason: stop, length,
	// canceled, error, tool_calls (streamed or not). Once per sequence;
	// rejected sequences are not counted here.
	SequenceCompleted(reason string)
	// SequenceRejected counts a sequence refused before it ran:
	// over_total_capacity, cache_exhausted.
	SequenceRejected(reason string)
	// KVCacheBlocks reports the paged KV cache's used and total blocks with
	// every SchedulerState (paged mode only); cached blocks that no
	// sequence uses count as free.
	KVCacheBlocks(used, total int)
	// Preempted counts a running sequence sent back to the waiting queue.
	Preempted()
	// PendingAdmission reports requests received but not yet seen by the
	// scheduler.
	PendingAdmission(n int)
	// Capacity reports the maximum number of concurrently scheduled
	// sequences (--max-seqs), once, from SetObserver.
	Capacity(n int)
	// SpeculativeStats records one step's speculative verification (only
	// when drafts > 0): drafts is the number of sequences verified, proposed
	// and accepted their draft tokens (accepted excludes the bonus token the
	// verification itself produces, and drafts cut off by a stop or the
	// token limit), and acceptedPerPos[i] the sequences that accepted at
	// least i+1 drafts (acceptance is prefix-wise).
	SpeculativeStats(drafts, proposed, accepted int, acceptedPerPos []int)
	// SpeculativeStagedDrops counts sequences whose proposal was discarded
	// without verification: the step could not hold it (token budget or KV
	// room), the sequence was preempted, or the proposer failed.
	SpeculativeStagedDrops(n int)
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

func (NopObserver) SpeculativeStats(int, int, int, []int) {}
func (NopObserver) SpeculativeStagedDrops(int)            {}
