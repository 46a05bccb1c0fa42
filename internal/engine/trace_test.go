package engine_test

import (
	"slices"
	"testing"

	"mistralrs/internal/engine"
)

// traced is one request's events, as its Trace hook heard them (on the
// engine goroutine; read after the request is done).
type traced struct{ ev []engine.Event }

func (tr *traced) hook(ev engine.Event) { tr.ev = append(tr.ev, ev) }

// kinds are the kinds of choice index's events, in order.
func (tr *traced) kinds(index int) []engine.TraceKind {
	var k []engine.TraceKind
	for _, e := range tr.ev {
		if e.Index == index {
			k = append(k, e.Kind)
		}
	}
	return k
}

// Under a small KV pool with chunked prefill, each traced sequence reports
// its arrival, admission, prefill chunks covering its prompt, first token,
// preemptions each followed by a resumption, and its end with the decode
// steps it ran.
func TestTraceEventsPerSequence(t *testing.T) {
	m := tiny(t)
	reqs, pool := requests(16, 20, 200), 400
	if raceEnabled {
		// Shorter sequences under the race detector, in a pool small
		// enough that the running ones still outgrow it.
		reqs, pool = requests(16, 6, 60), 160
	}
	trs := make([]*traced, len(reqs))
	for i, r := range reqs {
		trs[i] = &traced{}
		r.Trace = trs[i].hook
	}
	e, rec := newEngine(t, m, opts(func(o *engine.Options) {
		o.ContextLen = pool
		o.MaxDecodeStepsBeforePrefill = 2
		o.MaxNumBatchedTokens = 40
	}))
	res := runTogether(t, e, rec, reqs)
	preempted := 0
	for i, tr := range trs {
		for idx := range max(reqs[i].N, 1) {
			k := tr.kinds(idx)
			if len(k) < 5 || k[0] != engine.TraceQueued || k[1] != engine.TraceAdmitted || k[len(k)-1] != engine.TraceFinished {
				t.Fatalf("request %d choice %d: events %v", i, idx, k)
			}
			if slices.Index(k, engine.TraceFirstToken) < 0 {
				t.Errorf("request %d choice %d: no first token in %v", i, idx, k)
			}
			p, r := countKind(k, engine.TracePreempted), countKind(k, engine.TraceResumed)
			if p != r {
				t.Errorf("request %d choice %d: %d preemptions, %d resumptions: %v", i, idx, p, r, k)
			}
			preempted += p
		}
		fin := tr.ev[len(tr.ev)-1]
		if fin.Reason != engine.FinishLength || fin.Proposed != 0 {
			t.Errorf("request %d: final event %+v", i, fin)
		}
		if reqs[i].N <= 1 {
			checkPrefill(t, i, tr, res[i])
		}
	}
	defer rec.lock()()
	if rec.preempted == 0 || preempted != rec.preempted {
		t.Errorf("%d preemptions traced, %d counted by the stats", preempted, rec.preempted)
	}
}

// checkPrefill checks a one-choice request's prefill chunks and decode
// steps against its result: before its first token the chunks cover the
// prompt less its reused prefix, and every token after the first took one
// decode step (recomputations after a preemption are prefill chunks).
func checkPrefill(t *testing.T, i int, tr *traced, res *engine.Result) {
	t.Helper()
	chunks, reused := 0, 0
	for _, ev := range tr.ev {
		switch ev.Kind {
		case engine.TraceAdmitted, engine.TraceResumed:
			reused = ev.Tokens // the prompt's last admission is the result's
		case engine.TracePrefill:
			chunks += ev.Tokens
		}
		if ev.Kind == engine.TraceFirstToken {
			break
		}
	}
	if reused != res.CachedTokens {
		t.Errorf("request %d: admitted with %d reused tokens, result says %d", i, reused, res.CachedTokens)
	}
	fin := tr.ev[len(tr.ev)-1]
	if fin.Steps > res.CompletionTokens-1 || fin.Steps == 0 {
		t.Errorf("request %d: %d decode steps for %d tokens", i, fin.Steps, res.CompletionTokens)
	}
	if chunks < res.PromptTokens-reused {
		t.Errorf("request %d: prefill chunks of %d tokens for a prompt of %d (%d reused)", i, chunks, res.PromptTokens, reused)
	}
}

func countKind(k []engine.TraceKind, want engine.TraceKind) int {
	n := 0
	for _, x := range k {
		if x == want {
			n++
		}
	}
	return n
}
