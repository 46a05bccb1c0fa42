package engine

import "time"

// Tracing. A request whose Trace hook is set hears of its sequences'
// phases as plain values; the engine itself knows no tracing library (the
// server turns the events into spans). The hook runs on the engine's
// goroutine, between steps, so it must be cheap and never block (append to
// a buffer, no I/O); a nil hook costs one comparison per event site.

// TraceKind is the phase an Event reports.
type TraceKind uint8

const (
	// TraceQueued: the sequence reached the engine's waiting queue (Time
	// is its arrival, when Submit took it).
	TraceQueued TraceKind = iota
	// TraceAdmitted: the sequence got its first KV blocks; Tokens are the
	// prompt tokens whose KV the prefix cache (or, for a choice after the
	// first, the first choice's prompt) gave.
	TraceAdmitted
	// TracePrefill: one chunk of already known tokens (the prompt, or the
	// tokens recomputed after a preemption) was computed; Tokens is its size.
	TracePrefill
	// TraceFirstToken: the first token was sampled.
	TraceFirstToken
	// TracePreempted: the sequence went back to the waiting queue, its
	// blocks freed; it will recompute its tokens.
	TracePreempted
	// TraceResumed: a preempted sequence was admitted again; Tokens as for
	// TraceAdmitted.
	TraceResumed
	// TraceImage: an image of the prompt was looked up in the encoder
	// cache (Hit) before its rows were computed; Tokens is its positions.
	TraceImage
	// TraceFinished: the sequence ended with Reason (a finish or rejection
	// reason). Steps is the decode steps it ran after its first token
	// (each step one forward, whatever the speculative tokens it kept);
	// Proposed and Accepted its speculative guesses.
	TraceFinished
)

var traceKindNames = [...]string{"queued", "admitted", "prefill", "first_token", "preempted", "resumed", "image", "finished"}

func (k TraceKind) String() string {
	if int(k) < len(traceKindNames) {
		return traceKindNames[k]
	}
	return "unknown"
}

// Event is one phase of one sequence (Index: its choice).
type Event struct {
	Kind   TraceKind
	Index  int
	Time   time.Time
	Tokens int
	Hit    bool
	Reason string
	Steps  int
	// Speculative decoding: guesses verified and kept.
	Proposed, Accepted int
}

// seqTrace is what a traced sequence counts for its final event.
type seqTrace struct {
	steps, proposed, accepted int
	admitted, first           bool
}

// trace reports ev for sq when its request is traced.
func (sq *seq) trace(kind TraceKind, ev Event) {
	h := sq.req.Trace
	if h == nil {
		return
	}
	ev.Kind, ev.Index = kind, sq.index
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	h(ev)
}

// traceAdmit reports sq's (re)admission with the tokens it was given.
func (sq *seq) traceAdmit(reused int) {
	if sq.req.Trace == nil {
		return
	}
	kind := TraceAdmitted
	if sq.tr.admitted {
		kind = TraceResumed
	}
	sq.tr.admitted = true
	sq.trace(kind, Event{Tokens: reused})
}

// traceRun counts one computed run of sq (before its sampling): a chunk of
// known tokens is a prefill event, a step past the first token a decode
// step.
func (sq *seq) traceRun(pos, n int, verifying bool) {
	if sq.req.Trace == nil || sq.embed != nil {
		return
	}
	if !verifying && (pos+n < len(sq.tokens) || sq.firstTok.IsZero()) {
		sq.trace(TracePrefill, Event{Tokens: n})
		return
	}
	sq.tr.steps++
}

// traceFinish reports sq's end.
func (sq *seq) traceFinish(reason string) {
	if sq.req.Trace == nil {
		return
	}
	sq.trace(TraceFinished, Event{Reason: reason, Steps: sq.tr.steps, Proposed: sq.tr.proposed, Accepted: sq.tr.accepted})
}

// traceQueued reports the arrival of the sequences the engine took from
// its inbox (each request's first choice, holding the others).
func traceQueued(inbox []*seq) {
	for _, sq := range inbox {
		if sq.req.Trace == nil {
			continue
		}
		sq.trace(TraceQueued, Event{Time: sq.arrived})
		for _, c := range sq.children {
			c.trace(TraceQueued, Event{Time: c.arrived})
		}
	}
}

// traceFirstTokens reports the sampled sequences whose first token this
// step made.
func traceFirstTokens(sampled []*seq) {
	for _, sq := range sampled {
		if sq.req.Trace == nil || sq.tr.first || sq.firstTok.IsZero() {
			continue
		}
		sq.tr.first = true
		sq.trace(TraceFirstToken, Event{Time: sq.firstTok})
	}
}
