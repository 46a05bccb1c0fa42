package engine

// Stats is one report of what the engine did, as a plain value for its
// StatsSink to map onto metrics (as vLLM's scheduler hands SchedulerStats and
// IterationStats to its stat loggers). The engine goroutine makes one after
// each scheduling decision, after each step and when it goes idle, with
// everything that happened since its previous one; Submit and Embed make one
// for the sequences they count or refuse and for the requests they queue;
// SetStatsSink makes one with the engine's capacity and idle state.
//
// A new statistic is a field here, set where the engine learns it; the sink
// decides what to do with it. Counts follow the semantics of mistral.rs's
// engine metrics (its mistralrs_* Prometheus families): completion reasons
// are its stop-reason labels plus "error", counted once per sequence;
// prefix-cache lookups, hits and evictions are counted as its prefix cacher
// (contiguous caches) and its paged block pool count them.
type Stats struct {
	// Counts: what happened since the previous report of the same origin.

	// Tokens is what the steps computed: prompt chunks (paged: without the
	// cached prefix; contiguous caches: a prompt's cached prefix is counted
	// too, once) and one per decoding sequence.
	Tokens int
	// PrefixLookups counts new generating sequences (each choice of a
	// request), when their request arrives (also when prefix caching is
	// off, and before any rejection); embeddings are not counted.
	PrefixLookups int
	// PrefixHits counts sequences that started from cached KV, at most once
	// per sequence (a preempted sequence resuming from its own cached
	// blocks counts if it had not before).
	PrefixHits int
	// PrefixEvictions counts cache entries evicted: paged, cached blocks
	// reused for new data; contiguous, finished caches dropped past
	// --prefix-cache-n (or all of them after a forward error).
	PrefixEvictions int
	// Preemptions counts running sequences sent back to the waiting queue.
	Preemptions int
	// Speculative verification: SpecDrafts is the number of sequences
	// verified, SpecProposed and SpecAccepted their draft tokens (accepted
	// excludes the bonus token the verification itself produces, and drafts
	// cut off by a stop or the token limit), and SpecAcceptedPerPos[i] the
	// sequences that accepted at least i+1 drafts (acceptance is
	// prefix-wise).
	SpecDrafts, SpecProposed, SpecAccepted int
	SpecAcceptedPerPos                     []int
	// SpecStagedDrops counts sequences whose proposal was discarded without
	// verification: the step could not hold it (token budget or KV room),
	// the sequence was preempted, or the proposer failed.
	SpecStagedDrops int
	// EncoderHits and EncoderMisses count the encoder cache's lookups of
	// image embeddings (images.go). A sequence looks an image up when it is
	// admitted and still has the image's positions to compute (an image
	// inside its cached prefix needs no embeddings and is not looked up),
	// and again when it is admitted after a preemption (it let go of them):
	// a hit when the cache holds them or another sequence is encoding them,
	// a miss when an encoding starts.
	EncoderHits, EncoderMisses int
	// Finished lists the sequences that ended, once each, and those refused
	// before they ran.
	Finished []Finish

	// Levels: the state when the report was made. Measured says which of
	// them this report carries; the others are zero and mean nothing.
	Measured Levels
	// Running and Waiting are the queue lengths (LevelQueues).
	Running, Waiting int
	// KVBlocksUsed and KVBlocksTotal are the paged KV cache's blocks
	// (LevelKV, paged mode only); cached blocks that no sequence uses count
	// as free.
	KVBlocksUsed, KVBlocksTotal int
	// PendingAdmission is the number of requests received but not yet seen
	// by the scheduler (LevelPending).
	PendingAdmission int
	// Capacity is the maximum number of concurrently scheduled sequences,
	// --max-seqs (LevelCapacity).
	Capacity int
	// RunningLoRA and WaitingLoRA are the distinct adapter names
	// (Request.LoRA's Name) of the running and the waiting sequences,
	// sorted; empty when none uses an adapter (LevelLoRA, measured with
	// the queue lengths: vLLM's lora_requests_info labels).
	RunningLoRA, WaitingLoRA []string
}

// Levels says which levels of a Stats are measured.
type Levels uint8

// The levels a report can carry, each measured where the engine knows it:
// queues, their adapters and KV blocks by the scheduler, pending admissions
// by Submit and the scheduler taking the inbox (in that order, under the
// engine's lock), capacity once by SetStatsSink (with empty queues).
const (
	LevelQueues Levels = 1 << iota
	LevelKV
	LevelPending
	LevelCapacity
	LevelLoRA
)

// Finish is one sequence that ended or was refused.
type Finish struct {
	// Reason is a completion's finish reason (stop, length, canceled,
	// error, tool_calls; streamed or not), or a refusal's reason
	// (RejectOverCapacity, RejectCacheExhausted).
	Reason string
	// Rejected: the sequence was refused before it ran and did not
	// complete.
	Rejected bool
}

// StatsSink receives the engine's reports. The engine calls it from its
// scheduler goroutine and from Submit callers, sometimes under its lock:
// it must be safe for concurrent use, cheap (it runs on the hot path), and
// must not call the engine. The slices of a Stats are the engine's scratch,
// valid only during the call.
type StatsSink func(Stats)

// discardStats is the sink of an engine that has none.
func discardStats(Stats) {}

// refused is the report of a sequence that Submit or Embed refused.
func refused(reason string) Stats {
	return Stats{Finished: []Finish{{Reason: reason, Rejected: true}}}
}
