package engine

import (
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"mistralrs/internal/gguf"
	"mistralrs/internal/model"
)

// runner is the engine loop: it takes new requests, lets the scheduler
// decide each step, runs the step's batch through the model, samples the
// sequences whose last token it computed, and delivers outputs.
type runner struct {
	e     *Engine
	sched *scheduler

	inputs   []model.SeqInput
	inPtrs   []*model.SeqInput
	sampled  []*seq
	sampleFn func(lo, hi int)
	staged   []*seq // sequences asked for guesses this step
	embedded []*seq // embeddings this step completed
	// hidden is the step's final hidden states of its embedding runs, one
	// after the other: scratch for one step (at most the token budget's),
	// not one per input, and dropped once a step has no embedding.
	hidden []float32

	// flopsPerToken is what the text model computes per token: the
	// encoders get the FLOPs of the tokens a step leaves of its budget.
	flopsPerToken int64
	encoded       []*encEntry // scratch: encodings this step finished
	encFailed     []*encEntry // encodings that gave unusable embeddings: their sequences fail next step

	// broken is set when a model file changed under its memory map (a
	// *gguf.ChangedError): every sequence, and every later one, fails with
	// it until the model is loaded again (a new engine).
	broken error
}

// run loops until the engine closes.
func (r *runner) run() {
	e, s := r.e, r.sched
	defer close(e.done)
	// The forward pass reads weights from the model file's memory map: a
	// file cut short faults (SIGBUS), which this turns into a panic that
	// safeStep recovers (the kernel workers do the same).
	debug.SetPanicOnFault(true)
	for {
		e.mu.Lock()
		s.sink = e.sink
		inbox, closed := e.inbox, e.closed
		e.inbox = nil
		if len(inbox) > 0 {
			// Under the lock, so that it cannot overtake Submit's report.
			s.sink(Stats{Measured: LevelPending})
		}
		e.mu.Unlock()
		// Arrivals are in id order, after everything already waiting
		// (preempted sequences keep their place by age).
		s.waiting = append(s.waiting, inbox...)
		traceQueued(inbox)
		if closed {
			s.closeAll()
			r.report()
			s.deliver()
			return
		}
		if len(inbox) > 0 {
			gguf.CheckMapped() // logs a model file changed on disk, at most once a second
			if r.broken == nil {
				// A file rewritten in place to the same length never
				// faults, but the weights are no longer the model's.
				for _, f := range e.files {
					if f == nil {
						continue
					}
					if err := f.Check(); err != nil {
						r.markBroken(err)
						break
					}
				}
			}
		}
		if r.broken != nil {
			r.failAll(r.broken)
		}
		s.reap()
		if len(s.running) == 0 && len(s.waiting) == 0 {
			r.report()
			s.deliver()
			r.hidden = nil
			<-e.wake
			continue
		}
		r.safeStep()
	}
}

// safeStep runs one step. A memory fault reading a mapped model file (the
// file was truncated or rewritten in place while serving) fails every
// sequence with a *gguf.ChangedError and marks the engine broken, instead
// of killing the process; any other panic goes on.
func (r *runner) safeStep() {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		err := gguf.Fault(v)
		if err == nil {
			panic(v)
		}
		r.markBroken(err)
		clear(r.inputs)
		clear(r.sampled)
		r.sampled = r.sampled[:0]
		clear(r.embedded)
		r.embedded = r.embedded[:0]
		r.failAll(err)
	}()
	r.step()
}

// markBroken makes every sequence, and every later one, fail with err.
func (r *runner) markBroken(err error) {
	slog.Error("model unusable: its file changed on disk while in use; reload the model", "error", err.Error())
	r.broken = err
	r.e.mu.Lock()
	r.e.broken = err
	r.e.mu.Unlock()
}

// failAll ends every running and waiting sequence with err.
func (r *runner) failAll(err error) {
	s := r.sched
	if len(s.running) == 0 && len(s.waiting) == 0 {
		return
	}
	for _, sq := range slices.Concat(s.running, s.waiting) {
		s.finish(sq, FinishError, err)
	}
	s.kv.DropPrefixes()
	r.report()
	s.deliver()
}

// step schedules one batch, runs it through the model and samples the
// sequences whose uncomputed tokens it completed.
func (r *runner) step() {
	e, s := r.e, r.sched
	t0 := time.Now()
	r.failEncodings()
	r.stage()
	sch := s.schedule()
	t1 := time.Now()
	r.encode(len(sch.Runs) > 0)
	r.report()
	if len(sch.Runs) == 0 {
		s.deliver()
		return
	}

	hidden, E := r.growHidden(sch.Runs), e.net.Config.Embd
	r.inputs = slices.Grow(r.inputs[:0], len(sch.Runs))[:len(sch.Runs)]
	r.inPtrs = r.inPtrs[:0]
	var err error
	for i, run := range sch.Runs {
		sq := run.seq
		in := &r.inputs[i]
		// The adapters apply to every forward of the sequence: prompt
		// chunks, decodes, recomputation after a preemption and the
		// verification of guesses.
		*in = model.SeqInput{Pos: run.Pos, Cache: sq.kv.Cache(), LoRA: sq.adapters()}
		if len(run.Draft) > 0 {
			// The last token and the guesses, with the logits of each.
			sq.feed = append(append(sq.feed[:0], sq.tokens[run.Pos]), run.Draft...)
			in.Tokens = sq.feed
			if n := run.N * e.net.Config.Vocab; cap(sq.allLogits) < n {
				sq.allLogits = make([]float32, n)
			}
			in.AllLogits = sq.allLogits[:run.N*e.net.Config.Vocab]
		} else if sq.embed != nil {
			// An embedding: every token's final hidden state, no logits.
			in.Tokens = sq.tokens[run.Pos : run.Pos+run.N]
			in.Hidden, hidden = hidden[:run.N*E:run.N*E], hidden[run.N*E:]
		} else {
			in.Tokens = sq.tokens[run.Pos : run.Pos+run.N]
			if in.Embeds, err = sq.embeds(run.Pos, run.N, E); err != nil {
				break
			}
			if run.Sample {
				if sq.logits == nil {
					sq.logits = make([]float32, e.net.Config.Vocab)
				}
				in.Logits = sq.logits
			}
		}
		r.inPtrs = append(r.inPtrs, in)
	}
	if err == nil {
		err = e.net.Forward(e.pool, &model.Batch{Seqs: r.inPtrs})
	}
	t2 := time.Now()
	if err != nil {
		clear(r.inputs) // do not keep caches alive through the scratch
		// Like mistral.rs's pipeline error path: the batch fails and the
		// non-paged prefix cache is dropped.
		for _, run := range sch.Runs {
			s.finish(run.seq, FinishError, err)
		}
		s.kv.DropPrefixes()
		r.report()
		s.deliver()
		return
	}
	s.stats.Tokens += sch.Tokens

	r.sampled = r.sampled[:0]
	for i, run := range sch.Runs {
		sq := run.seq
		sq.n = 0
		sq.traceRun(run.Pos, run.N, len(run.Draft) > 0)
		if len(run.Draft) == 0 {
			// (A verifying run commits once its guesses are decided.)
			sq.computed = s.kv.Commit(sq.kv, sq.tokens, run.Pos+run.N)
			s.releaseComputed(sq)
		}
		if sq.embed != nil {
			e.poolHidden(sq, r.inputs[i].Hidden, run.Pos, run.N, run.Sample)
			if run.Sample {
				r.embedded = append(r.embedded, sq)
			}
			continue
		}
		if run.Sample {
			sq.out.Time = t2
			r.sampled = append(r.sampled, sq)
			if len(sq.children) > 0 {
				r.fork(sq)
			}
		}
	}
	clear(r.inputs) // do not keep caches alive through the scratch
	// Sampling, detokenizing and stop matching touch only their own
	// sequence: spread them over the workers.
	if len(r.sampled) > 1 {
		e.pool.For(len(r.sampled), r.sampleFn)
	} else {
		r.sampleRange(0, len(r.sampled))
	}
	r.settle(sch)
	traceFirstTokens(r.sampled)
	for _, sq := range r.embedded {
		s.finish(sq, FinishLength, nil)
	}
	clear(r.embedded)
	r.embedded = r.embedded[:0]
	for _, sq := range r.sampled {
		if sq.reason != "" {
			s.finish(sq, sq.reason, nil)
		}
	}
	t3 := time.Now()
	r.report()
	s.deliver()

	e.mu.Lock()
	st := &e.stats
	st.steps++
	st.stepNanos += int64(t3.Sub(t0))
	st.fwdNanos += int64(t2.Sub(t1))
	st.schedNanos += int64(t1.Sub(t0))
	e.mu.Unlock()
}

// encode advances the encodings under way by what the step's token budget
// left (at least one unit when the step runs nothing else: busy says
// whether it runs something). An encoding that gave unusable embeddings
// fails its sequences at the start of the next step, outside this one's
// batch (they cannot have run past the image meanwhile).
func (r *runner) encode(busy bool) {
	s := r.sched
	if len(s.enc.inflight) == 0 {
		return
	}
	flops := int64(s.left) * r.flopsPerToken
	if flops <= 0 && !busy {
		flops = 1
	}
	r.encoded = s.enc.advance(r.e.pool, flops, r.encoded[:0])
	for _, ent := range r.encoded {
		if ent.fails != nil {
			r.encFailed = append(r.encFailed, ent)
		}
	}
	clear(r.encoded)
}

// failEncodings ends the sequences holding a failed encoding.
func (r *runner) failEncodings() {
	s := r.sched
	for _, ent := range r.encFailed {
		for _, sq := range slices.Clone(s.running) {
			if sq.holds(ent) {
				s.finish(sq, FinishError, ent.fails)
			}
		}
	}
	clear(r.encFailed)
	r.encFailed = r.encFailed[:0]
}

// growHidden sizes the hidden-state scratch for the embedding runs of a
// step, or drops it when the step has none, so that an embeddings request
// leaves no step-sized buffer behind, and returns it.
func (r *runner) growHidden(runs []Run) []float32 {
	n := 0
	for _, run := range runs {
		if run.seq.embed != nil {
			n += run.N
		}
	}
	n *= r.e.net.Config.Embd
	switch {
	case n == 0:
		r.hidden = nil
	case cap(r.hidden) < n:
		r.hidden = make([]float32, n)
	}
	r.hidden = r.hidden[:n]
	return r.hidden
}

// fork starts the other choices of p, whose prompt this step completed,
// from copies of its cache (shared blocks) and its logits: they sample
// their first tokens in this step, each with its own random stream. A
// choice that does not fit (sequence limit, no free block for the copy)
// waits in the queue and computes its prompt itself.
func (r *runner) fork(p *seq) {
	s := r.sched
	for _, c := range p.children {
		if len(s.running) < s.opts.MaxSeqs && s.kv.Fork(c.kv, p.kv, p.promptLen) {
			c.computed, c.cached = p.promptLen, p.cached
			c.running = true
			c.traceAdmit(p.promptLen)
			s.running = append(s.running, c)
			c.logits = append(c.logits[:0], p.logits...)
			c.out.Time = p.out.Time
			r.sampled = append(r.sampled, c)
			continue
		}
		s.enqueue(c)
	}
	p.children = nil
}

func (r *runner) sampleRange(lo, hi int) {
	for _, sq := range r.sampled[lo:hi] {
		if len(sq.draft) > 0 {
			sq.kept = verify(r.e, sq, sq.allLogits)
			continue
		}
		if sq.cons != nil && !r.e.constrainLogits(sq, sq.cstate, sq.logits) {
			// No token fits and the output is not whole: the constraint
			// cannot be met; the answer ends here.
			sq.reason = FinishLength
			continue
		}
		accept(r.e.tok, sq, sq.smp.Sample(sq.logits, sq.tokens))
		sq.box.push(sq.out)
	}
}

// settle commits what the verifying runs kept (their last token and the
// kept guesses; the rejected guesses' keys and values are rolled back) and
// counts them for the step's report.
func (r *runner) settle(sch Schedule) {
	s := r.sched
	st := &s.stats
	for _, run := range sch.Runs {
		sq := run.seq
		k := len(run.Draft)
		if k == 0 {
			continue
		}
		sq.computed = s.kv.Commit(sq.kv, sq.tokens, run.Pos+1+sq.kept)
		s.kv.Rollback(sq.kv)
		st.SpecDrafts++
		st.SpecProposed += k
		st.SpecAccepted += sq.kept
		sq.tr.proposed += k
		sq.tr.accepted += sq.kept
		if len(st.SpecAcceptedPerPos) < k {
			st.SpecAcceptedPerPos = append(st.SpecAcceptedPerPos, make([]int, k-len(st.SpecAcceptedPerPos))...)
		}
		for i := range sq.kept {
			st.SpecAcceptedPerPos[i]++
		}
		sq.draft, sq.draftQ = sq.draft[:0], sq.draftQ[:0]
	}
}

// report has the scheduler publish its state and keeps the pool's
// occupancy for KVCacheBlocks.
func (r *runner) report() {
	u := r.sched.report()
	if u.BlocksTotal > 0 {
		r.e.mu.Lock()
		r.e.stats.blocksUsed = u.BlocksUsed
		r.e.mu.Unlock()
	}
}
