package engine

import (
	"errors"
	"slices"
	"testing"

	"mistralrs/internal/kvcache"
)

// The scheduler is tested on data: a KV manager over a pool of one-value
// rows, sequences made of token ids, and steps that pretend to compute
// (the positions a run covers are written and committed; a sampled
// sequence gets token 1). No model runs.

func tokensOf(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(i % 200)
	}
	return p
}

// schedOptions are small limits for the tests (the real defaults live in
// internal/config's table).
func schedOptions(mod func(*Options)) Options {
	o := Options{MaxSeqs: 32, MaxNumBatchedTokens: 4096, MaxDecodeStepsBeforePrefill: 8, BlockSize: 4, PrefixCacheN: 16,
		EmbeddingStepTokens: 64}
	if mod != nil {
		mod(&o)
	}
	return o
}

var rowShape = kvcache.Shape{Layers: 1, KDim: 1, VDim: 1}

type testSched struct {
	t    *testing.T
	s    *scheduler
	pool *kvcache.Pool // paged only
	seqs map[uint64]*seq
	next uint64
}

func newPagedSched(t *testing.T, o Options, blocks int) *testSched {
	pool := kvcache.NewPool(rowShape, o.BlockSize, blocks, false)
	kv := kvcache.NewPaged(pool, []byte("test"), o.PrefixCacheN > 0)
	return &testSched{t: t, s: newScheduler(o, kv), pool: pool, seqs: map[uint64]*seq{}}
}

func newSchedOn(t *testing.T, o Options, kv kvcache.Manager) *testSched {
	return &testSched{t: t, s: newScheduler(o, kv), seqs: map[uint64]*seq{}}
}

// add queues a request and returns its id (ids grow with arrival).
func (ts *testSched) add(prompt []int32, maxTokens int) uint64 {
	ts.next++
	sq := newSeq(&Request{Prompt: prompt, MaxTokens: maxTokens}, maxTokens, ts.s.kv.NewState(len(prompt)+maxTokens))
	sq.id = ts.next
	ts.seqs[sq.id] = sq
	ts.s.waiting = append(ts.s.waiting, sq)
	return sq.id
}

// step schedules one batch and computes it: every run's positions are
// written and committed; a sequence whose tokens are all computed gets
// token 1, and finishes (length) at its maximum. It returns a copy of the
// schedule.
func (ts *testSched) step() Schedule {
	s := ts.s
	sch := s.schedule()
	got := Schedule{Runs: slices.Clone(sch.Runs), Preempted: slices.Clone(sch.Preempted),
		Rejected: slices.Clone(sch.Rejected), Tokens: sch.Tokens}
	for _, r := range sch.Runs {
		sq := r.seq
		if err := sq.kv.Cache().Extend(r.Pos + r.N); err != nil {
			ts.t.Fatal(err)
		}
		sq.n = 0
		sq.computed = s.kv.Commit(sq.kv, sq.tokens, r.Pos+r.N)
		if r.Sample && sq.embed != nil {
			s.finish(sq, FinishLength, nil) // an embedding ends with its prompt
		} else if r.Sample {
			sq.tokens = append(sq.tokens, 1)
			if len(sq.tokens)-sq.promptLen == sq.maxTokens {
				s.finish(sq, FinishLength, nil)
			}
		}
	}
	s.deliver()
	for i := range got.Runs {
		got.Runs[i].seq = nil
	}
	return got
}

// finish ends sequence id now.
func (ts *testSched) finish(id uint64) {
	ts.s.finish(ts.seqs[id], FinishStop, nil)
	ts.s.deliver()
}

func (ts *testSched) running() []uint64 { return ids(ts.s.running) }
func (ts *testSched) waiting() []uint64 { return ids(ts.s.waiting) }

func ids(q []*seq) []uint64 {
	var out []uint64
	for _, sq := range q {
		out = append(out, sq.id)
	}
	return out
}

// checkPool reports the pool's used blocks and checks its invariants.
func (ts *testSched) checkPool(wantUsed int) {
	ts.t.Helper()
	if used, err := ts.pool.Used(), ts.pool.Check(); used != wantUsed || err != nil {
		ts.t.Fatalf("pool: %d used (want %d), %v", used, wantUsed, err)
	}
}

// tokens maps each run's id to its token count.
func tokens(sch Schedule) map[uint64]int {
	m := map[uint64]int{}
	for _, r := range sch.Runs {
		m[r.ID] = r.N
	}
	return m
}

// A prompt too big for the free blocks is passed over by smaller ones for
// max-decode-steps-before-prefill steps; then younger running sequences
// make room for it.
func TestSchedulerStarvedPrompt(t *testing.T) {
	s := newPagedSched(t, schedOptions(func(o *Options) { o.PrefixCacheN = 0; o.MaxDecodeStepsBeforePrefill = 2 }), 12)
	a := s.add(tokensOf(16), 3) // 4 blocks
	if got := tokens(s.step()); got[a] != 16 {
		t.Fatalf("step 1: %v", got)
	}
	b := s.add(tokensOf(34), 5) // 9 blocks: 7 are free
	c := s.add(tokensOf(8), 20) // 2 blocks each
	d := s.add(tokensOf(8), 20)
	if got := tokens(s.step()); got[a] != 1 || got[b] != 0 || got[c] != 8 || got[d] != 8 {
		t.Fatalf("step 2: %v: c and d should pass b", got)
	}
	s.step() // a finishes; b has waited 2 steps
	if r := s.running(); !slices.Equal(r, []uint64{c, d}) {
		t.Fatalf("after step 3 running %v", r)
	}
	sch := s.step() // b is starved: d, the youngest, makes room
	if got := tokens(sch); got[b] != 34 || got[c] != 1 || got[d] != 0 {
		t.Fatalf("step 4: %v", got)
	}
	if !slices.Equal(sch.Preempted, []uint64{d}) || len(sch.Rejected) != 0 {
		t.Fatalf("step 4: preempted %v rejected %v, want d preempted", sch.Preempted, sch.Rejected)
	}
	if r, w := s.running(), s.waiting(); !slices.Equal(r, []uint64{c, b}) || !slices.Equal(w, []uint64{d}) {
		t.Fatalf("after step 4 running %v waiting %v", r, w)
	}
	for range 100 {
		s.step()
	}
	if r, w := s.running(), s.waiting(); len(r)+len(w) != 0 {
		t.Fatalf("still running %v waiting %v", r, w)
	}
	s.checkPool(0)
}

// A starved prompt that would not fit even with every younger sequence
// preempted preempts nobody, but nobody passes it any more.
func TestSchedulerStarvedPromptBlocksQueue(t *testing.T) {
	s := newPagedSched(t, schedOptions(func(o *Options) { o.PrefixCacheN = 0; o.MaxDecodeStepsBeforePrefill = 1 }), 12)
	a := s.add(tokensOf(32), 50) // 8 blocks, for a long time
	s.step()
	b := s.add(tokensOf(24), 2) // 6 blocks: 4 are free
	c := s.add(tokensOf(4), 50) // 1 block
	s.step()                    // c passes b
	if sch := s.step(); len(sch.Preempted) != 0 {
		t.Fatalf("b starved: preempting c frees too little, yet %v preempted", sch.Preempted)
	}
	d := s.add(tokensOf(4), 2)
	if got := tokens(s.step()); got[d] != 0 || got[c] != 1 {
		t.Fatalf("step 4: %v: d must not pass the starved b, c keeps running", got)
	}
	if r, w := s.running(), s.waiting(); !slices.Equal(r, []uint64{a, c}) || !slices.Equal(w, []uint64{b, d}) {
		t.Fatalf("running %v waiting %v", r, w)
	}
	s.finish(a)
	if got := tokens(s.step()); got[b] != 24 || got[d] != 4 {
		t.Fatalf("after a: %v", got)
	}
}

// When a decode needs a block and none is free, the youngest running
// sequence goes back to the queue; its own full blocks stay cached, so it
// resumes from them.
func TestSchedulerPreemptsYoungestAndResumesFromCache(t *testing.T) {
	s := newPagedSched(t, schedOptions(nil), 6)
	a := s.add(tokensOf(12), 10)
	b := s.add(tokensOf(12)[1:], 10) // no shared prefix with a
	s.step()                         // 3 blocks each: the pool is full
	sch := s.step()                  // a needs a 4th block for its 13th token: b goes
	if got := tokens(sch); got[a] != 1 || got[b] != 0 || !slices.Equal(sch.Preempted, []uint64{b}) {
		t.Fatalf("step 2: %v, preempted %v", got, sch.Preempted)
	}
	if r, w := s.running(), s.waiting(); !slices.Equal(r, []uint64{a}) || !slices.Equal(w, []uint64{b}) {
		t.Fatalf("running %v waiting %v", r, w)
	}
	s.finish(a)
	// b had 2 full blocks cached (its third held its last token); a's
	// blocks went to the free list after them, so b's survive.
	sch = s.step()
	if len(sch.Runs) != 1 || !equalRun(sch.Runs[0], Run{ID: b, Pos: 8, N: 12 - 8, Sample: true}) {
		t.Fatalf("b resumed with %+v, want 4 tokens computed after 8 cached", sch.Runs)
	}
	s.checkPool(3)
}

// The schedule of a step lists its runs in order (decodes, then prompt
// chunks, then admissions) with their positions, within the token budget
// and the sequence limit.
func TestScheduleBudgetAndOrder(t *testing.T) {
	o := schedOptions(func(o *Options) { o.MaxNumBatchedTokens = 10; o.MaxSeqs = 2 })
	s := newSchedOn(t, o, kvcache.NewContiguous(rowShape, false, 0))
	a := s.add(tokensOf(25), 4)
	b := s.add(tokensOf(3), 4)
	c := s.add(tokensOf(3), 4)
	want := []Schedule{
		{Runs: []Run{{ID: a, Pos: 0, N: 10}}, Tokens: 10},
		{Runs: []Run{{ID: a, Pos: 10, N: 10}}, Tokens: 10},
		{Runs: []Run{{ID: a, Pos: 20, N: 5, Sample: true}, {ID: b, Pos: 0, N: 3, Sample: true}}, Tokens: 8},
		{Runs: []Run{{ID: a, Pos: 25, N: 1, Sample: true}, {ID: b, Pos: 3, N: 1, Sample: true}}, Tokens: 2}, // c: max-seqs
	}
	for i, w := range want {
		if got := s.step(); !equalSchedule(got, w) {
			t.Fatalf("step %d: %+v, want %+v", i+1, got, w)
		}
	}
	for range 2 {
		s.step()
	}
	// a and b are done (4 tokens each): c runs.
	if got := s.step(); !equalSchedule(got, Schedule{Runs: []Run{{ID: c, Pos: 0, N: 3, Sample: true}}, Tokens: 3}) {
		t.Fatalf("after a and b: %+v", got)
	}
}

// lastFinal is the result delivered to sq's stream, if any.
func lastFinal(sq *seq) *final {
	if n := len(sq.box.fins); n > 0 {
		return sq.box.fins[n-1]
	}
	return nil
}

func equalSchedule(a, b Schedule) bool {
	return slices.EqualFunc(a.Runs, b.Runs, equalRun) && slices.Equal(a.Preempted, b.Preempted) &&
		slices.Equal(a.Rejected, b.Rejected) && a.Tokens == b.Tokens && a.StagedDrops == b.StagedDrops
}

func equalRun(a, b Run) bool {
	return a.ID == b.ID && a.Pos == b.Pos && a.N == b.N && a.Sample == b.Sample && slices.Equal(a.Draft, b.Draft)
}

// A prompt the empty pool cannot hold is rejected (cache_exhausted, its
// request fails); a lone sequence that outgrows the pool ends (length).
func TestScheduleRejections(t *testing.T) {
	s := newPagedSched(t, schedOptions(nil), 4) // 16 positions
	big := s.add(tokensOf(17), 4)
	sch := s.step()
	if len(sch.Runs) != 0 || !slices.Equal(sch.Rejected, []Rejection{{ID: big, Reason: RejectCacheExhausted}}) {
		t.Fatalf("schedule %+v, want the prompt rejected", sch)
	}
	var re *RequestError
	if f := lastFinal(s.seqs[big]); f == nil || !errors.As(f.err, &re) || re.Reason != RejectCacheExhausted {
		t.Fatalf("rejected sequence's result %+v", f)
	}
	grow := s.add(tokensOf(14), 10)
	for i := 0; ; i++ {
		sch := s.step()
		if len(sch.Rejected) > 0 {
			if !slices.Equal(sch.Rejected, []Rejection{{ID: grow, Reason: FinishLength}}) || len(sch.Runs) != 0 {
				t.Fatalf("step %d: %+v, want grow ended by length", i, sch)
			}
			break
		}
		if i > 10 {
			t.Fatal("the sequence never outgrew the pool")
		}
	}
	if f := lastFinal(s.seqs[grow]); f == nil || f.res == nil || f.res.FinishReason != FinishLength || f.res.CompletionTokens != 16-14+1 {
		t.Fatalf("outgrown sequence's result %+v", f.res)
	}
	s.checkPool(0)
}

// With contiguous caches, a prompt starts from a copy of the longest
// prefix a finished sequence left, and (as mistral.rs's default scheduler)
// the copied positions count as processed tokens.
func TestScheduleContiguousPrefix(t *testing.T) {
	s := newSchedOn(t, schedOptions(nil), kvcache.NewContiguous(rowShape, false, 4))
	a := s.add(tokensOf(8), 1)
	if got := s.step(); !equalSchedule(got, Schedule{Runs: []Run{{ID: a, Pos: 0, N: 8, Sample: true}}, Tokens: 8}) {
		t.Fatalf("a: %+v", got)
	}
	b := s.add(tokensOf(10), 1)
	if got := s.step(); !equalSchedule(got, Schedule{Runs: []Run{{ID: b, Pos: 8, N: 2, Sample: true}}, Tokens: 8 + 2}) {
		t.Fatalf("b: %+v, want 8 positions from a's cache", got)
	}
	if s.seqs[b].cached != 8 {
		t.Fatalf("b's cached prompt tokens %d", s.seqs[b].cached)
	}
}

// Without a KV cache, every token recomputes the whole sequence.
func TestScheduleRecompute(t *testing.T) {
	s := newSchedOn(t, schedOptions(nil), kvcache.NewRecompute(rowShape, false))
	a := s.add(tokensOf(3), 3)
	for i, n := range []int{3, 4, 5} {
		if got := s.step(); !equalSchedule(got, Schedule{Runs: []Run{{ID: a, Pos: 0, N: n, Sample: true}}, Tokens: n}) {
			t.Fatalf("step %d: %+v", i+1, got)
		}
	}
	if len(s.running()) != 0 {
		t.Fatal("a still running")
	}
}
