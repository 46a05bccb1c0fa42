package engine

import (
	"fmt"
	"slices"

	"mistralrs/internal/kvcache"
)

// Schedule is what one scheduling decision chose: the engine step runs it.
// Its slices are the scheduler's scratch, valid until the next decision.
type Schedule struct {
	// Runs are the sequences this step computes: decodes first (oldest
	// first), then prompt chunks, then newly admitted sequences.
	Runs []Run
	// Preempted sequences went back to the waiting queue: their blocks were
	// needed, and they will recompute their tokens (from cached blocks
	// where these survive).
	Preempted []uint64
	// Rejected sequences were ended by this decision because the KV cache
	// cannot hold them: reason RejectCacheExhausted for a prompt that does
	// not fit even an empty pool (the request fails), FinishLength for a
	// sequence that outgrew the pool while generating.
	Rejected []Rejection
	// Tokens is what the step processes, as reported in Stats.Tokens.
	Tokens int
	// StagedDrops counts sequences whose staged guesses this decision
	// discarded: no room for them in the token budget or the KV cache, or
	// the sequence was preempted or not scheduled.
	StagedDrops int
}

// Run is one sequence in a step: it computes tokens [Pos, Pos+N) and, when
// Sample, the logits of its last token, from which the next is sampled. A
// decode that verifies guesses has them in Draft: it computes its last
// token and the guesses (N = 1 + len(Draft)), and all their logits.
type Run struct {
	ID     uint64
	Pos, N int
	Sample bool
	Draft  []int32

	seq *seq
}

// Rejection is a sequence ended by the scheduler, and why.
type Rejection struct {
	ID     uint64
	Reason string
}

// scheduler owns the waiting queue and the running set: it chooses every
// step's batch within the options' limits and the KV cache's room. It runs
// on the engine's goroutine and knows nothing of the model; tests drive it
// on data (sched_test.go).
type scheduler struct {
	opts Options
	kv   kvcache.Manager
	sink StatsSink
	enc  *encoderCache
	// recompute: the cache keeps nothing once a token's logits are out
	// (--no-kv-cache), so a sequence holds its images until it ends.
	recompute bool
	left      int // the token budget the last decision left (for encoding)

	waiting []*seq // oldest first
	running []*seq // in admission order

	sch       Schedule
	batch     []*seq // this step's sequences, as chosen
	order     []*seq // scratch
	finished  []*seq // results to deliver after the step is reported
	evictions int64  // prefix-cache evictions reported so far
	stats     Stats  // the counts of the next report

	runningLoRA, waitingLoRA []string // scratch of the reports' adapter names
}

func newScheduler(o Options, kv kvcache.Manager) *scheduler {
	_, recompute := kv.(*kvcache.Recompute)
	return &scheduler{opts: o, kv: kv, sink: discardStats, enc: newEncoderCache(o.EncoderCacheBytes), recompute: recompute}
}

// schedule picks this step's batch: generation first (one decode token for
// every running sequence, then the prompt chunks of sequences being
// prefilled, then new sequences from the waiting queue), then embeddings
// (their chunks, then new ones) in what the budget has left, up to
// EmbeddingStepTokens, within max-num-batched-tokens and max-seqs. When the paged pool runs out, the
// youngest running sequence goes back to the waiting queue to be
// recomputed later.
func (s *scheduler) schedule() Schedule {
	o := &s.opts
	budget := o.MaxNumBatchedTokens
	s.batch = s.batch[:0]
	sch := &s.sch
	clear(sch.Runs)
	sch.Runs, sch.Preempted, sch.Rejected, sch.Tokens, sch.StagedDrops = sch.Runs[:0], sch.Preempted[:0], sch.Rejected[:0], 0, 0

	s.order = append(s.order[:0], s.running...)
	s.runRunning(passDecode, &budget)
	s.runRunning(passPrompt, &budget)
	if !s.admitWaiting(false, &budget) {
		s.scheduleEmbeddings(&budget)
	}
	clear(s.order) // keep no finished sequence alive through the scratch
	s.left = max(budget, 0)

	for _, sq := range s.running {
		if len(sq.draft) > 0 && sq.n != 1+len(sq.draft) {
			s.dropDraft(sq) // not scheduled with them
		}
	}
	for _, sq := range s.batch {
		r := Run{ID: sq.id, Pos: sq.computed, N: sq.n, Sample: sq.computed+sq.n >= len(sq.tokens), seq: sq}
		if sq.computed+sq.n > len(sq.tokens) {
			r.Draft = sq.draft
		}
		sch.Runs = append(sch.Runs, r)
	}
	s.stats.SpecStagedDrops += sch.StagedDrops
	return *sch
}

// The passes over the running sequences, in the order they get budget.
const (
	passDecode = iota // generation with one token to compute
	passPrompt        // generation prefilling its prompt
	passEmbed         // embeddings
)

// runRunning schedules the running sequences of one pass, oldest first.
// (A sequence is admitted only with budget left after every running one
// got a token, so decodes never outnumber the budget.)
func (s *scheduler) runRunning(pass int, budget *int) {
	for _, sq := range s.order {
		need := len(sq.tokens) - sq.computed
		if !sq.running || sq.n > 0 || runPass(sq, need) != pass {
			continue
		}
		n := min(need, *budget)
		if n <= 0 {
			break
		}
		if k := len(sq.draft); k > 0 {
			// Staged guesses ride along when the step has room for
			// them; nobody is preempted for a guess.
			if 1+k <= *budget && s.kv.Reserve(sq.kv, sq.computed+1+k) {
				s.add(sq, 1+k, budget)
				continue
			}
			s.dropDraft(sq)
		}
		if n = s.imageChunk(sq, n); n == 0 {
			continue // waiting for an image's embeddings
		}
		if !s.reserve(sq, sq.computed+n, budget) {
			continue
		}
		s.add(sq, n, budget)
	}
}

// imageChunk is the number of tokens sq computes in this step, out of n
// from sq.computed on: it stops before an image whose embeddings are not
// ready, and never splits a non-causal image (whose positions see the
// whole image, so the image is computed in one step): a chunk that would
// end inside one ends before the image instead, or, when the image starts
// the chunk (or the chunk starts inside it, after a prefix-cache hit),
// runs to the image's end, past the token budget if need be.
func (s *scheduler) imageChunk(sq *seq, n int) int {
	pos := sq.computed
	for i := range sq.imgs {
		im := &sq.imgs[i]
		if im.End() <= pos {
			continue
		}
		if im.Pos >= pos+n {
			break
		}
		if !im.ready() {
			return max(im.Pos-pos, 0)
		}
		if !im.NonCausal || im.End() <= pos+n {
			continue
		}
		if im.Pos > pos {
			return im.Pos - pos
		}
		return im.End() - pos
	}
	return n
}

// acquireImages holds the embeddings of the images sq still has to
// compute, counting the lookups (Stats.EncoderHits, EncoderMisses). It
// fails when an encoding cannot start.
func (s *scheduler) acquireImages(sq *seq) error {
	for i := range sq.imgs {
		im := &sq.imgs[i]
		if im.ent != nil || im.End() <= sq.computed {
			continue
		}
		ent, hit, err := s.enc.acquire(&im.Image)
		if err != nil {
			return fmt.Errorf("image %d: %v", i, err)
		}
		im.ent = ent
		sq.trace(TraceImage, Event{Hit: hit, Tokens: im.Len})
		if hit {
			s.stats.EncoderHits++
		} else {
			s.stats.EncoderMisses++
		}
	}
	return nil
}

// releaseComputed lets go of the images sq has computed (a cache that
// recomputes them keeps them until the end).
func (s *scheduler) releaseComputed(sq *seq) {
	if s.recompute {
		return
	}
	for i := range sq.imgs {
		if im := &sq.imgs[i]; im.ent != nil && im.End() <= sq.computed {
			s.enc.release(im.ent)
			im.ent = nil
		}
	}
}

// releaseImages lets go of all of sq's images (preempted or ended): an
// encoding no other sequence holds is dropped.
func (s *scheduler) releaseImages(sq *seq) {
	for i := range sq.imgs {
		if im := &sq.imgs[i]; im.ent != nil {
			s.enc.release(im.ent)
			im.ent = nil
		}
	}
}

func runPass(sq *seq, need int) int {
	switch {
	case sq.embed != nil:
		return passEmbed
	case need == 1:
		return passDecode
	}
	return passPrompt
}

// scheduleEmbeddings gives embeddings what generation left of the budget,
// at most EmbeddingStepTokens of it: an embeddings request of many long
// inputs then slows each generation step by a bounded amount instead of
// holding it back until every input is computed, and a request that
// arrives waits for at most that much embedding work in the step under
// way. (On a CPU a step of a few dozen tokens already computes them about
// as fast per token as a full budget would.)
func (s *scheduler) scheduleEmbeddings(budget *int) {
	share := min(*budget, s.opts.EmbeddingStepTokens)
	left := share
	s.runRunning(passEmbed, &left)
	s.admitWaiting(true, &left)
	*budget -= share - left
}

// admitWaiting starts waiting sequences of one kind (embeddings or
// generation) in arrival order, unless making room just cost a preemption.
// It reports whether it stopped at a starved sequence, which nobody may
// pass.
func (s *scheduler) admitWaiting(embed bool, budget *int) (blocked bool) {
	o := &s.opts
	for i := 0; len(s.sch.Preempted) == 0 && i < len(s.waiting) && len(s.running) < o.MaxSeqs && *budget > 0; {
		sq := s.waiting[i]
		if (sq.embed != nil) != embed {
			i++
			continue
		}
		if s.admit(sq, budget) {
			continue // admit removed it from the waiting queue
		}
		if len(s.running) == 0 {
			// Nothing to wait for: the cache is all free and still too small.
			s.exhausted(sq)
			continue
		}
		sq.starved++
		if sq.starved <= o.MaxDecodeStepsBeforePrefill {
			i++ // let a smaller prompt behind it use the blocks
			continue
		}
		// Starved: nobody passes it any more, and if preempting the running
		// sequences that yield to it frees enough blocks, they go back to
		// the queue, youngest first.
		if s.freeable(sq) >= s.kv.Need(sq.kv, sq.tokens, *budget) {
			for !s.admit(sq, budget) {
				v := s.victim(sq, true)
				if v == nil {
					break
				}
				s.preempt(v, budget)
			}
		}
		if sq.running {
			continue
		}
		return true
	}
	return false
}

// dropDraft discards sq's staged guesses (a staged drop).
func (s *scheduler) dropDraft(sq *seq) {
	sq.draft, sq.draftQ = sq.draft[:0], sq.draftQ[:0]
	s.sch.StagedDrops++
}

// reserve makes room in the cache for sq to hold n positions, preempting
// the running sequences that yield to it (victim) as needed. It reports
// false when sq itself had to go.
func (s *scheduler) reserve(sq *seq, n int, budget *int) bool {
	for !s.kv.Reserve(sq.kv, n) {
		v := s.victim(sq, false)
		if v == sq && len(s.running) == 1 && sq.embed == nil {
			// Alone and still out of blocks: it has outgrown the pool.
			s.reject(sq, FinishLength)
			s.finish(sq, FinishLength, nil)
			return false
		}
		s.preempt(v, budget)
		if v == sq {
			return false
		}
	}
	return true
}

// yields reports whether running sequence v may be preempted to make room
// for sq: an embedding yields to any generation, and to an older
// embedding; a generation only to an older generation (and, when sq is
// running itself, younger means any, sq included: !waiting).
func yields(v, sq *seq, waiting bool) bool {
	switch {
	case v.embed != nil && sq.embed == nil:
		return true
	case v.embed == nil && sq.embed != nil:
		return false
	}
	return !waiting || v.id > sq.id
}

// victim is the running sequence to preempt for sq: embeddings before
// generation, then the youngest. A waiting sq is never its own victim; a
// running one may be.
func (s *scheduler) victim(sq *seq, waiting bool) *seq {
	var y *seq
	for _, v := range s.running {
		if !yields(v, sq, waiting) {
			continue
		}
		if y == nil || preemptsBefore(v, y) {
			y = v
		}
	}
	return y
}

// preemptsBefore reports whether a is preempted before b: an embedding
// before a generation, else the younger.
func preemptsBefore(a, b *seq) bool {
	if ae, be := a.embed != nil, b.embed != nil; ae != be {
		return ae
	}
	return a.id > b.id
}

// freeable is the number of blocks free once the running sequences that
// yield to the waiting sq are preempted (blocks they share with others
// stay in use).
func (s *scheduler) freeable(sq *seq) int {
	n := s.kv.Usage().BlocksFree
	for _, v := range s.running {
		if yields(v, sq, true) {
			n += s.kv.Reclaimable(v.kv)
		}
	}
	return n
}

// admit starts sq if the cache has room for its first chunk (after any
// cached prefix), taking it out of the waiting queue.
func (s *scheduler) admit(sq *seq, budget *int) bool {
	adm, ok := s.kv.Admit(sq.kv, sq.tokens, *budget)
	if !ok {
		return false
	}
	s.sch.Tokens += adm.Counted
	if adm.Cached > 0 && !sq.hit {
		sq.hit = true
		s.stats.PrefixHits++
	}
	if len(sq.tokens) == sq.promptLen {
		sq.cached = adm.Cached
	}
	sq.computed = adm.Cached
	sq.starved = 0
	sq.running = true
	sq.traceAdmit(adm.Cached)
	s.waiting = slices.DeleteFunc(s.waiting, func(w *seq) bool { return w == sq })
	s.running = append(s.running, sq)
	if err := s.acquireImages(sq); err != nil {
		s.finish(sq, FinishError, err)
		return true
	}
	first := min(len(sq.tokens)-adm.Cached, *budget) // what Admit made room for
	n := s.imageChunk(sq, first)
	if n > first && !s.kv.Reserve(sq.kv, sq.computed+n) {
		n = 0 // the image runs in a later step, as a prompt chunk
	}
	if n > 0 {
		s.add(sq, n, budget)
	}
	return true
}

func (s *scheduler) add(sq *seq, n int, budget *int) {
	sq.n = n
	*budget -= n
	s.sch.Tokens += n
	s.batch = append(s.batch, sq)
}

// preempt sends a running sequence back to the waiting queue, in arrival
// order, freeing its blocks; it will recompute its tokens (its full blocks
// stay in the prefix cache while the pool can keep them).
func (s *scheduler) preempt(sq *seq, budget *int) {
	s.unschedule(sq, budget)
	if len(sq.draft) > 0 {
		s.dropDraft(sq)
	}
	s.running = slices.DeleteFunc(s.running, func(r *seq) bool { return r == sq })
	sq.running = false
	s.kv.Release(sq.kv, sq.tokens, false)
	s.releaseImages(sq)
	sq.computed = 0
	s.enqueue(sq)
	s.sch.Preempted = append(s.sch.Preempted, sq.id)
	s.stats.Preemptions++
	sq.trace(TracePreempted, Event{})
}

// enqueue puts sq in the waiting queue by age.
func (s *scheduler) enqueue(sq *seq) {
	i, _ := slices.BinarySearchFunc(s.waiting, sq.id, func(w *seq, id uint64) int { return cmpID(w.id, id) })
	s.waiting = slices.Insert(s.waiting, i, sq)
}

func cmpID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// unschedule takes sq out of this step's batch, giving back its tokens.
func (s *scheduler) unschedule(sq *seq, budget *int) {
	if sq.n == 0 {
		return
	}
	*budget += sq.n
	s.sch.Tokens -= sq.n
	sq.n = 0
	s.batch = slices.DeleteFunc(s.batch, func(b *seq) bool { return b == sq })
}

// exhausted handles a waiting sequence the empty cache cannot hold: a
// prompt is rejected (cache_exhausted); a preempted sequence that has
// outgrown the pool ends with reason length.
func (s *scheduler) exhausted(sq *seq) {
	if len(sq.tokens) > sq.promptLen {
		s.reject(sq, FinishLength)
		s.finish(sq, FinishLength, nil)
		return
	}
	s.reject(sq, RejectCacheExhausted)
	s.stats.Finished = append(s.stats.Finished, Finish{Reason: RejectCacheExhausted, Rejected: true})
	s.drop(sq, false)
	err := &RequestError{Reason: RejectCacheExhausted, Msg: "prompt does not fit the KV cache even with no other sequence running"}
	for _, c := range sq.children {
		c.traceFinish(RejectCacheExhausted)
		s.queueFinal(c, &final{err: err})
	}
	sq.children = nil
	sq.traceFinish(RejectCacheExhausted)
	s.queueFinal(sq, &final{err: err})
}

func (s *scheduler) reject(sq *seq, reason string) {
	s.sch.Rejected = append(s.sch.Rejected, Rejection{ID: sq.id, Reason: reason})
}

// reap finishes the sequences whose Stream was canceled.
func (s *scheduler) reap() {
	s.order = s.order[:0]
	for _, q := range [2][]*seq{s.running, s.waiting} {
		for _, sq := range q {
			if sq.cancel.Load() {
				s.order = append(s.order, sq)
			}
		}
	}
	for _, sq := range s.order {
		s.finish(sq, FinishCanceled, nil)
	}
}

// closeAll ends every sequence: the engine is closing.
func (s *scheduler) closeAll() {
	for _, sq := range slices.Concat(s.running, s.waiting) {
		s.finish(sq, FinishCanceled, ErrClosed)
	}
}

// drop removes sq from the queues and gives back its cache; finished lets
// a contiguous cache enter the prefix store.
func (s *scheduler) drop(sq *seq, finished bool) {
	budget := 0
	s.unschedule(sq, &budget)
	s.running = slices.DeleteFunc(s.running, func(r *seq) bool { return r == sq })
	s.waiting = slices.DeleteFunc(s.waiting, func(w *seq) bool { return w == sq })
	sq.running = false
	s.kv.Release(sq.kv, sq.tokens, finished)
	s.releaseImages(sq)
	sq.logits, sq.allLogits = nil, nil
	sq.draft, sq.draftQ, sq.ds = nil, nil, nil // the speculative state goes with it
}

// finish ends sq with reason (err: the generation failed, or the engine
// closed) and queues its result for delivery after the step's state is
// reported.
func (s *scheduler) finish(sq *seq, reason string, err error) {
	// Choices still waiting for this one's prompt end with it.
	children := sq.children
	sq.children = nil
	for _, c := range children {
		s.finish(c, reason, err)
	}
	s.drop(sq, err == nil)
	reason = finalReason(sq, reason, err)
	s.stats.Finished = append(s.stats.Finished, Finish{Reason: reason})
	sq.reason = reason
	sq.traceFinish(reason)
	if err != nil {
		s.queueFinal(sq, &final{err: err})
		return
	}
	s.queueFinal(sq, &final{res: result(sq, reason)})
}

func (s *scheduler) queueFinal(sq *seq, f *final) {
	f.index = sq.index
	sq.final = f
	s.finished = append(s.finished, sq)
}

// report publishes what happened since the last report, the queue lengths
// and the cache's occupancy, and returns the latter.
func (s *scheduler) report() kvcache.Usage {
	st := &s.stats
	st.Measured, st.Running, st.Waiting = LevelQueues|LevelLoRA, len(s.running), len(s.waiting)
	s.runningLoRA = loraNames(s.runningLoRA[:0], s.running)
	s.waitingLoRA = loraNames(s.waitingLoRA[:0], s.waiting)
	st.RunningLoRA, st.WaitingLoRA = s.runningLoRA, s.waitingLoRA
	u := s.kv.Usage()
	if u.Evictions > s.evictions {
		st.PrefixEvictions = int(u.Evictions - s.evictions)
		s.evictions = u.Evictions
	}
	if u.BlocksTotal > 0 {
		st.Measured |= LevelKV
		st.KVBlocksUsed, st.KVBlocksTotal = u.BlocksUsed, u.BlocksTotal
	}
	s.sink(*st)
	s.resetStats()
	return u
}

// loraNames appends to dst the distinct adapter names (LoRA.Name) of seqs,
// sorted.
func loraNames(dst []string, seqs []*seq) []string {
	for _, sq := range seqs {
		if l := sq.req.LoRA; l != nil && l.Name != "" {
			dst = append(dst, l.Name)
		}
	}
	slices.Sort(dst)
	return slices.Compact(dst)
}

// resetStats starts the next report's counts, keeping its slices' memory.
func (s *scheduler) resetStats() {
	clear(s.stats.Finished)
	clear(s.stats.SpecAcceptedPerPos)
	s.stats = Stats{Finished: s.stats.Finished[:0], SpecAcceptedPerPos: s.stats.SpecAcceptedPerPos[:0]}
}

// deliver hands finished sequences their results, after report so that a
// caller whose Stream ended sees the engine state without them.
func (s *scheduler) deliver() {
	for _, sq := range s.finished {
		sq.box.finish(sq.final)
		sq.final = nil
	}
	clear(s.finished)
	s.finished = s.finished[:0]
}
