package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"mistralrs/internal/engine"
)

// engineStats sits between one engine and the shared engine metrics: it
// forwards every report and keeps what the periodic throughput line needs
// (mistral.rs's IntervalLogger, one per engine).
type engineStats struct {
	next engine.Observer

	tokens  atomic.Int64 // processed in the current interval
	lookups atomic.Int64 // cumulative
	hits    atomic.Int64 // cumulative
	running atomic.Int64
	waiting atomic.Int64
	// Speculative decoding in the current interval: sequences verified and
	// draft tokens proposed and accepted.
	specDrafts, specProposed, specAccepted atomic.Int64
}

func newEngineStats(next engine.Observer) *engineStats {
	if next == nil {
		next = engine.NopObserver{}
	}
	return &engineStats{next: next}
}

func (s *engineStats) TokensProcessed(n int) {
	s.tokens.Add(int64(n))
	s.next.TokensProcessed(n)
}

func (s *engineStats) PrefixCacheLookup() {
	s.lookups.Add(1)
	s.next.PrefixCacheLookup()
}

func (s *engineStats) PrefixCacheHit() {
	s.hits.Add(1)
	s.next.PrefixCacheHit()
}

func (s *engineStats) PrefixCacheEvictions(n int) { s.next.PrefixCacheEvictions(n) }

func (s *engineStats) SchedulerState(running, waiting int) {
	s.running.Store(int64(running))
	s.waiting.Store(int64(waiting))
	s.next.SchedulerState(running, waiting)
}

func (s *engineStats) SequenceCompleted(reason string) { s.next.SequenceCompleted(reason) }
func (s *engineStats) SequenceRejected(reason string)  { s.next.SequenceRejected(reason) }
func (s *engineStats) KVCacheBlocks(used, total int)   { s.next.KVCacheBlocks(used, total) }
func (s *engineStats) Preempted()                      { s.next.Preempted() }
func (s *engineStats) PendingAdmission(n int)          { s.next.PendingAdmission(n) }
func (s *engineStats) Capacity(n int)                  { s.next.Capacity(n) }

func (s *engineStats) SpeculativeStats(drafts, proposed, accepted int, perPos []int) {
	s.specDrafts.Add(int64(drafts))
	s.specProposed.Add(int64(proposed))
	s.specAccepted.Add(int64(accepted))
	s.next.SpeculativeStats(drafts, proposed, accepted, perPos)
}

func (s *engineStats) SpeculativeStagedDrops(n int) { s.next.SpeculativeStagedDrops(n) }

// intervalLine returns the throughput line for the interval just ended and
// starts the next one. Like mistral.rs it says nothing for an interval
// without processed tokens or before any sequence was looked up.
func (s *engineStats) intervalLine(elapsed time.Duration) (string, bool) {
	tokens := s.tokens.Swap(0)
	lookups := s.lookups.Load()
	if tokens == 0 || lookups == 0 || elapsed <= 0 {
		return "", false
	}
	hitrate := 100 * float64(s.hits.Load()) / float64(lookups)
	drafts, proposed, accepted := s.specDrafts.Swap(0), s.specProposed.Swap(0), s.specAccepted.Swap(0)
	mtp := ""
	if proposed > 0 && drafts > 0 {
		// mistral.rs's segment: the acceptance rate, and the mean tokens a
		// verified step yields (the accepted drafts plus the one the
		// verification produces).
		mtp = fmt.Sprintf(", MTP accept %.1f%% (len %.2f)", 100*float64(accepted)/float64(proposed), 1+float64(accepted)/float64(drafts))
	}
	return fmt.Sprintf("Throughput (T/s) %.2f, Prefix cache hitrate %.2f%%%s, %d running, %d waiting",
		float64(tokens)/elapsed.Seconds(), hitrate, mtp, s.running.Load(), s.waiting.Load()), true
}

// logThroughput prints each engine's throughput line every interval while
// there is work, until ctx ends.
func (s *Server) logThroughput(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			elapsed := now.Sub(last)
			last = now
			for _, e := range s.models.entries {
				e.mu.Lock()
				st := e.stats
				e.mu.Unlock()
				if st == nil {
					continue
				}
				if line, ok := st.intervalLine(elapsed); ok {
					s.engineLog.Info(line)
				}
			}
		}
	}
}
