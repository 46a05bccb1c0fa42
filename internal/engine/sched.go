package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync/atomic"
	"time"

	"mistralrs/internal/kvcache"
	"mistralrs/internal/model"
	"mistralrs/internal/sampler"
	"mistralrs/internal/tokenizer"
)

// seq is one generation as the scheduler sees it. Everything but cancel and
// box belongs to the scheduler goroutine.
type seq struct {
	id        uint64 // arrival order: smaller is older
	req       *Request
	maxTokens int
	arrived   time.Time

	tokens    []int32 // prompt, then the sampled tokens
	promptLen int
	computed  int // tokens whose keys and values are in the cache
	n         int // tokens scheduled in this step

	running bool
	paged   *kvcache.Seq           // paged mode
	cont    *model.ContiguousCache // contiguous mode
	hashes  []kvcache.Hash         // chained hashes of the full blocks of tokens, as far as computed
	commits int                    // blocks registered in the prefix cache
	starved int                    // steps it waited for KV blocks while others ran
	hit     bool                   // counted as a prefix-cache hit (once per sequence)
	cached  int                    // prompt tokens taken from the prefix cache at first admission

	smp    *sampler.Sampler
	stops  *sampler.StopMatcher
	dec    *tokenizer.StreamDecoder
	logits []float32
	text   []byte

	// outcome of the step's sampling
	out    Output
	reason string // non-empty: finished

	firstTok, lastTok time.Time

	final *final // result, delivered after the step is reported

	cancel atomic.Bool // set by Generate
	box    outbox
}

func newSeq(e *Engine, req *Request, maxTokens int) *seq {
	s := &seq{
		req: req, maxTokens: maxTokens, arrived: time.Now(),
		tokens:    append(make([]int32, 0, len(req.Prompt)+min(maxTokens, 256)), req.Prompt...),
		promptLen: len(req.Prompt),
		smp:       sampler.New(req.Sampling),
		stops:     sampler.NewStopMatcher(req.Stop),
	}
	if req.Continuation {
		s.dec = e.Model.Tok.NewContinuationDecoder()
	} else {
		s.dec = e.Model.Tok.NewDecoder()
	}
	s.box.notify = make(chan struct{}, 1)
	return s
}

func (s *seq) cache() model.KVCache {
	if s.paged != nil {
		return s.paged
	}
	return s.cont
}

// scheduler owns the waiting queue and the running set and runs the engine
// steps on its own goroutine.
type scheduler struct {
	e      *Engine
	obs    Observer
	kv     *kvcache.Pool
	bs     int
	prefix bool // reuse cached prefixes
	root   kvcache.Hash
	store  *kvcache.PrefixStore // contiguous mode

	waiting []*seq // oldest first
	running []*seq // in admission order

	// per-step scratch
	batch     []*seq
	order     []*seq
	inputs    []model.SeqInput
	inPtrs    []*model.SeqInput
	sampled   []*seq
	finished  []*seq
	tokens    int   // processed this step, as reported
	preempted bool  // this step preempted a sequence
	evictions int64 // pool evictions reported so far
	sampleFn  func(lo, hi int)
}

func newScheduler(e *Engine) *scheduler {
	s := &scheduler{e: e, obs: NopObserver{}, kv: e.kv}
	o := e.opts
	s.prefix = o.PrefixCacheN > 0 && !o.NoKVCache
	if s.kv != nil {
		s.bs = s.kv.BlockSize()
		s.root = kvcache.RootHash(modelSalt(e.Model))
	} else {
		s.store = kvcache.NewPrefixStore(o.PrefixCacheN)
		if !s.prefix {
			s.store = kvcache.NewPrefixStore(0)
		}
	}
	s.sampleFn = s.sampleRange
	return s
}

// modelSalt identifies the weights the keys and values come from, so that
// cached blocks are only ever reused with the model (and revision) that
// computed them.
func modelSalt(m *Model) []byte {
	h := sha256.New()
	h.Write([]byte(m.Path))
	h.Write([]byte{0})
	h.Write([]byte(m.File.Architecture()))
	if name, ok := m.File.String("general.name"); ok {
		h.Write([]byte(name))
	}
	for i := range m.File.Tensors {
		t := &m.File.Tensors[i]
		h.Write([]byte(t.Name))
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(t.Type)))
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(t.Data))))
		h.Write(t.Data[:min(len(t.Data), 64)])
	}
	return h.Sum(nil)
}

// run is the engine loop: take new requests, drop canceled ones, schedule
// and run one step, until the engine closes.
func (s *scheduler) run() {
	e := s.e
	defer close(e.done)
	for {
		e.mu.Lock()
		s.obs = e.obs
		inbox, closed := e.inbox, e.closed
		e.inbox = nil
		if len(inbox) > 0 {
			// Under the lock, so that it cannot overtake Generate's report.
			s.obs.PendingAdmission(0)
		}
		e.mu.Unlock()
		// Arrivals are in id order, after everything already waiting
		// (preempted sequences keep their place by age).
		s.waiting = append(s.waiting, inbox...)
		if closed {
			for _, sq := range slices.Concat(s.running, s.waiting) {
				s.finish(sq, FinishCanceled, ErrClosed)
			}
			s.report()
			s.deliver()
			return
		}
		s.reap()
		if len(s.running) == 0 && len(s.waiting) == 0 {
			s.report()
			s.deliver()
			<-e.wake
			continue
		}
		s.step()
	}
}

// reap finishes the sequences whose Generate call gave up.
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

// step schedules one batch, runs it through the model and samples the
// sequences whose uncomputed tokens it completed.
func (s *scheduler) step() {
	e := s.e
	t0 := time.Now()
	s.schedule()
	t1 := time.Now()
	s.report()
	if len(s.batch) == 0 {
		s.deliver()
		return
	}

	s.inputs = slices.Grow(s.inputs[:0], len(s.batch))[:len(s.batch)]
	s.inPtrs = s.inPtrs[:0]
	for i, sq := range s.batch {
		in := &s.inputs[i]
		*in = model.SeqInput{Tokens: sq.tokens[sq.computed : sq.computed+sq.n], Pos: sq.computed, Cache: sq.cache()}
		if sq.computed+sq.n == len(sq.tokens) {
			if sq.logits == nil {
				sq.logits = make([]float32, e.Model.Net.Config.Vocab)
			}
			in.Logits = sq.logits
		}
		s.inPtrs = append(s.inPtrs, in)
	}
	err := e.Model.Net.Forward(e.Pool, &model.Batch{Seqs: s.inPtrs})
	t2 := time.Now()
	clear(s.inputs) // do not keep caches alive through the scratch
	if err != nil {
		// Like mistral.rs's pipeline error path: the batch fails and the
		// non-paged prefix cache is dropped.
		for _, sq := range append(s.order[:0], s.batch...) {
			s.finish(sq, FinishError, err)
		}
		if n := s.dropPrefixCache(); n > 0 {
			s.obs.PrefixCacheEvictions(n)
		}
		s.report()
		s.deliver()
		return
	}
	s.obs.TokensProcessed(s.tokens)

	s.sampled = s.sampled[:0]
	for _, sq := range s.batch {
		sq.computed += sq.n
		sq.n = 0
		s.commitBlocks(sq)
		if sq.computed == len(sq.tokens) {
			sq.out.Time = t2
			s.sampled = append(s.sampled, sq)
		}
	}
	// Sampling, detokenizing and stop matching touch only their own
	// sequence: spread them over the workers.
	if len(s.sampled) > 1 {
		e.Pool.For(len(s.sampled), s.sampleFn)
	} else {
		s.sampleRange(0, len(s.sampled))
	}
	for _, sq := range s.sampled {
		sq.box.push(sq.out)
		switch {
		case sq.reason != "":
			s.finish(sq, sq.reason, nil)
		case e.opts.NoKVCache:
			// Nothing is kept between tokens: the next one recomputes all.
			sq.computed = 0
			sq.cont.Truncate(0)
		}
	}
	t3 := time.Now()
	s.report()
	s.deliver()

	e.mu.Lock()
	st := &e.stats
	st.steps++
	st.stepNanos += int64(t3.Sub(t0))
	st.fwdNanos += int64(t2.Sub(t1))
	st.schedNanos += int64(t1.Sub(t0))
	e.mu.Unlock()
}

func (s *scheduler) sampleRange(lo, hi int) {
	for _, sq := range s.sampled[lo:hi] {
		s.accept(sq, sq.smp.Sample(sq.logits, sq.tokens))
	}
}

// accept appends a sampled token to sq, and sets sq.out to what to emit
// and sq.reason when the sequence is done.
func (s *scheduler) accept(sq *seq, choice sampler.Choice) {
	now := sq.out.Time
	gen := len(sq.tokens) - sq.promptLen // tokens generated before this one
	if gen == 0 {
		sq.firstTok = now
	}
	sq.lastTok = now
	tok := choice.Token
	sq.tokens = append(sq.tokens, tok)
	sq.out = Output{Token: tok, Time: now}
	if sq.req.Sampling.Logprobs {
		c := choice
		sq.out.Logprob = &c
	}
	if s.isStopToken(sq.req, tok) {
		sq.out.StopToken = true
		sq.out.Text = sq.stops.Flush()
		sq.text = append(sq.text, sq.out.Text...)
		sq.reason = FinishStop
		return
	}
	last := gen+1 == sq.maxTokens
	piece, stopped := sq.stops.Push(sq.dec.Add(tok))
	if !stopped && last {
		// Last token: nothing more can complete a character or a stop string.
		tail, stoppedTail := sq.stops.Push(sq.dec.Flush())
		piece += tail
		stopped = stoppedTail
		if !stopped {
			piece += sq.stops.Flush()
		}
	}
	sq.out.Text = piece
	sq.text = append(sq.text, piece...)
	switch {
	case stopped:
		sq.reason = FinishStop
	case last:
		sq.reason = FinishLength
	}
}

func (s *scheduler) isStopToken(req *Request, tok int32) bool {
	if !req.IgnoreEOS && s.e.Model.Tok.IsEOG(tok) {
		return true
	}
	return slices.Contains(req.StopTokens, tok)
}

// schedule picks this step's batch: first one decode token for every
// running sequence, then the prompt chunks of sequences being prefilled,
// then new sequences from the waiting queue, within max-num-batched-tokens
// and max-seqs. When the paged pool runs out, the youngest running sequence
// goes back to the waiting queue to be recomputed later.
func (s *scheduler) schedule() {
	o := &s.e.opts
	budget := o.MaxNumBatchedTokens
	s.batch = s.batch[:0]
	s.tokens = 0
	s.preempted = false

	// Running sequences: decodes before prefill chunks, oldest first. (A
	// sequence is admitted only with budget left after every running one
	// got a token, so decodes never outnumber the budget.)
	s.order = append(s.order[:0], s.running...)
	for pass := range 2 {
		for _, sq := range s.order {
			need := len(sq.tokens) - sq.computed
			if !sq.running || sq.n > 0 || (need == 1) != (pass == 0) {
				continue
			}
			n := min(need, budget)
			if n == 0 {
				break
			}
			if !s.reserve(sq, sq.computed+n, &budget) {
				continue
			}
			s.add(sq, n, &budget)
		}
	}

	// New sequences, unless making room just cost a preemption.
	for i := 0; !s.preempted && i < len(s.waiting) && len(s.running) < o.MaxSeqs && budget > 0; {
		sq := s.waiting[i]
		if s.admit(sq, &budget) {
			continue // admit removed it from the waiting queue
		}
		if s.kv == nil {
			break
		}
		if len(s.running) == 0 {
			// Nothing to wait for: the pool is all free and still too small.
			s.exhausted(sq)
			continue
		}
		sq.starved++
		if sq.starved <= o.MaxDecodeStepsBeforePrefill {
			i++ // let a smaller prompt behind it use the blocks
			continue
		}
		// Starved: nobody passes it any more, and if preempting the running
		// sequences younger than it frees enough blocks, they go back to
		// the queue, youngest first.
		if s.freeable(sq.id) >= s.need(sq, budget) {
			for !s.admit(sq, &budget) {
				v := s.youngest(sq.id)
				if v == nil {
					break
				}
				s.preempt(v, &budget)
			}
		}
		if sq.running {
			continue
		}
		break
	}
}

// reserve makes room in the pool for sq to hold n positions, preempting
// the youngest running sequences as needed. It reports false when sq
// itself had to go.
func (s *scheduler) reserve(sq *seq, n int, budget *int) bool {
	if s.kv == nil {
		return true
	}
	for !sq.paged.Reserve(n) {
		v := s.youngest(0)
		if v == sq && len(s.running) == 1 {
			// Alone and still out of blocks: it has outgrown the pool.
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

// fit returns the cached blocks a waiting sequence can start from, the
// tokens it would compute in this step and the free blocks that takes.
func (s *scheduler) fit(sq *seq, budget int) (hit []int32, n, need int) {
	if s.prefix {
		// Whole blocks before the last token: that one is always computed,
		// for its logits.
		limit := (len(sq.tokens) - 1) / s.bs
		s.hashTo(sq, limit)
		hit = s.kv.Match(sq.hashes[:limit])
	}
	cached := len(hit) * s.bs
	n = min(len(sq.tokens)-cached, budget)
	// Taking back a cached block nobody uses removes it from the free ones.
	need = (cached+n+s.bs-1)/s.bs - len(hit) + s.kv.FreeAmong(hit)
	return hit, n, need
}

func (s *scheduler) need(sq *seq, budget int) int {
	_, _, need := s.fit(sq, budget)
	return need
}

// freeable is the number of blocks free once the running sequences younger
// than the one with id older are preempted (blocks they share with older
// ones stay in use).
func (s *scheduler) freeable(older uint64) int {
	n := s.kv.Free()
	for _, sq := range s.running {
		if sq.id > older {
			for _, b := range sq.paged.Blocks() {
				if s.kv.Refs(b) == 1 {
					n++
				}
			}
		}
	}
	return n
}

// admit starts sq if the pool has room for its first chunk (after any
// cached prefix), taking it out of the waiting queue.
func (s *scheduler) admit(sq *seq, budget *int) bool {
	e := s.e
	cached := 0
	if s.kv != nil {
		hit, n, need := s.fit(sq, *budget)
		if need > s.kv.Free() {
			return false
		}
		cached = len(hit) * s.bs
		if sq.paged == nil {
			sq.paged = s.kv.NewSeq()
		}
		sq.paged.Adopt(hit)
		sq.commits = len(hit)
		if !sq.paged.Reserve(cached + n) {
			panic("engine: reserved blocks vanished")
		}
		if cached > 0 && !sq.hit {
			sq.hit = true
			s.obs.PrefixCacheHit()
		}
	} else {
		if sq.cont == nil {
			sq.cont = e.newCache(min(e.ContextLength(), sq.promptLen+sq.maxTokens))
		}
		if src, n := s.store.Match(sq.tokens, len(sq.tokens)-1); n > 0 {
			cfg := &e.Model.Net.Config
			if err := kvcache.CopyPrefix(sq.cont, src, cfg.Layers, cfg.KDim(), cfg.VDim(), n); err == nil {
				cached = n
				if !sq.hit {
					sq.hit = true
					s.obs.PrefixCacheHit()
				}
			}
		}
		// mistral.rs's default scheduler counts a prompt's full length,
		// cached prefix included.
		s.tokens += cached
	}
	if sq.computed == 0 && len(sq.tokens) == sq.promptLen {
		sq.cached = cached
	}
	sq.computed = cached
	sq.starved = 0
	sq.running = true
	s.waiting = slices.DeleteFunc(s.waiting, func(w *seq) bool { return w == sq })
	s.running = append(s.running, sq)
	s.add(sq, min(len(sq.tokens)-cached, *budget), budget)
	return true
}

func (s *scheduler) add(sq *seq, n int, budget *int) {
	sq.n = n
	*budget -= n
	s.tokens += n
	s.batch = append(s.batch, sq)
}

// youngest returns the running sequence that arrived last, if it arrived
// after the sequence with id older (0: any).
func (s *scheduler) youngest(older uint64) *seq {
	var y *seq
	for _, sq := range s.running {
		if sq.id > older && (y == nil || sq.id > y.id) {
			y = sq
		}
	}
	return y
}

// preempt sends a running sequence back to the waiting queue, in arrival
// order, freeing its blocks; it will recompute its tokens (its full blocks
// stay in the prefix cache while the pool can keep them).
func (s *scheduler) preempt(sq *seq, budget *int) {
	s.unschedule(sq, budget)
	s.running = slices.DeleteFunc(s.running, func(r *seq) bool { return r == sq })
	sq.running = false
	sq.paged.Release()
	sq.computed = 0
	sq.commits = 0
	i, _ := slices.BinarySearchFunc(s.waiting, sq.id, func(w *seq, id uint64) int { return cmpID(w.id, id) })
	s.waiting = slices.Insert(s.waiting, i, sq)
	s.preempted = true
	s.obs.Preempted()
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
	s.tokens -= sq.n
	sq.n = 0
	s.batch = slices.DeleteFunc(s.batch, func(b *seq) bool { return b == sq })
}

// exhausted handles a waiting sequence the empty pool cannot hold: a
// prompt is rejected (cache_exhausted); a preempted sequence that has
// outgrown the pool ends with reason length.
func (s *scheduler) exhausted(sq *seq) {
	if len(sq.tokens) > sq.promptLen {
		s.finish(sq, FinishLength, nil)
		return
	}
	s.obs.SequenceRejected(RejectCacheExhausted)
	s.drop(sq)
	s.queueFinal(sq, &final{err: &RequestError{Reason: RejectCacheExhausted,
		Msg: "prompt does not fit the KV cache even with no other sequence running"}})
}

// hashTo extends sq.hashes to cover its first n full blocks.
func (s *scheduler) hashTo(sq *seq, n int) {
	for b := len(sq.hashes); b < n; b++ {
		parent := s.root
		if b > 0 {
			parent = sq.hashes[b-1]
		}
		sq.hashes = append(sq.hashes, kvcache.BlockHash(parent, sq.tokens[b*s.bs:(b+1)*s.bs]))
	}
}

// commitBlocks registers sq's newly completed blocks in the prefix cache.
func (s *scheduler) commitBlocks(sq *seq) {
	if s.kv == nil || !s.prefix {
		return
	}
	full := sq.computed / s.bs
	if sq.commits >= full {
		return
	}
	s.hashTo(sq, full)
	for ; sq.commits < full; sq.commits++ {
		sq.paged.Commit(sq.commits, sq.hashes[sq.commits])
	}
}

// drop removes sq from the queues and frees its cache.
func (s *scheduler) drop(sq *seq) {
	budget := 0
	s.unschedule(sq, &budget)
	s.running = slices.DeleteFunc(s.running, func(r *seq) bool { return r == sq })
	s.waiting = slices.DeleteFunc(s.waiting, func(w *seq) bool { return w == sq })
	sq.running = false
	if sq.paged != nil {
		sq.paged.Release()
		sq.paged = nil
	}
	sq.logits = nil
}

// finish ends sq with reason (err: the generation failed, or the engine
// closed) and queues its result for delivery after the step's state is
// reported.
func (s *scheduler) finish(sq *seq, reason string, err error) {
	if sq.cont != nil && err == nil && s.prefix {
		if n := s.store.Add(sq.tokens, sq.cont); n > 0 {
			s.obs.PrefixCacheEvictions(n)
		}
	}
	sq.cont = nil
	s.drop(sq)
	if reason == FinishStop && err == nil && sq.req.ToolCalls != nil && sq.req.ToolCalls(string(sq.text)) {
		reason = FinishToolCalls
	}
	s.obs.SequenceCompleted(reason)
	sq.reason = reason
	if err != nil {
		s.queueFinal(sq, &final{err: err})
		return
	}
	res := &Result{
		Text: string(sq.text), Tokens: sq.tokens[sq.promptLen:], FinishReason: reason,
		PromptTokens: sq.promptLen, CompletionTokens: len(sq.tokens) - sq.promptLen, CachedTokens: sq.cached,
	}
	if !sq.firstTok.IsZero() {
		res.PromptTime = sq.firstTok.Sub(sq.arrived)
		res.DecodeTime = sq.lastTok.Sub(sq.firstTok)
	}
	s.queueFinal(sq, &final{res: res})
}

func (s *scheduler) queueFinal(sq *seq, f *final) {
	sq.final = f
	s.finished = append(s.finished, sq)
}

// report publishes the queue lengths and the pool's occupancy.
func (s *scheduler) report() {
	s.obs.SchedulerState(len(s.running), len(s.waiting))
	if s.kv != nil {
		if ev := s.kv.Evictions(); ev > s.evictions {
			s.obs.PrefixCacheEvictions(int(ev - s.evictions))
			s.evictions = ev
		}
		used := s.kv.Used()
		s.obs.KVCacheBlocks(used, s.kv.Total())
		s.e.mu.Lock()
		s.e.stats.blocksUsed = used
		s.e.mu.Unlock()
	}
}

// deliver hands finished sequences their results, after report so that a
// caller whose Generate returned sees the engine state without them.
func (s *scheduler) deliver() {
	for _, sq := range s.finished {
		sq.box.finish(sq.final)
		sq.final = nil
	}
	clear(s.finished)
	s.finished = s.finished[:0]
}

// dropPrefixCache empties the non-paged prefix store; it returns the
// number of entries dropped.
func (s *scheduler) dropPrefixCache() int {
	if s.store == nil {
		return 0
	}
	return s.store.Clear()
}
