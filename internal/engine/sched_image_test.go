package engine

import (
	"testing"

	"mistralrs/internal/kernels"
)

// costEncoder is an encoder that finishes after cost FLOPs, with rows of
// one value (the tests' scheduler has n_embd 1).
type costEncoder struct {
	cost int64
	rows []float32
}

func (c *costEncoder) Cost() int64 { return max(c.cost, 0) }
func (c *costEncoder) Advance(_ *kernels.Pool, flops int64) bool {
	c.cost -= max(flops, 1)
	return c.cost <= 0
}
func (c *costEncoder) Embeddings() []float32 { return c.rows }

func testImage(pos, n int, key byte, nonCausal bool, cost int64) Image {
	return Image{Pos: pos, Len: n, Key: [32]byte{key}, NonCausal: nonCausal, Encode: func() Encoder {
		return &costEncoder{cost: cost, rows: make([]float32, n)}
	}}
}

// addImages queues a request with images.
func (ts *testSched) addImages(prompt []int32, maxTokens int, imgs ...Image) uint64 {
	ts.next++
	sq := newSeq(&Request{Prompt: prompt, MaxTokens: maxTokens, Images: imgs}, maxTokens, ts.s.kv.NewState(len(prompt)+maxTokens))
	sq.id = ts.next
	ts.seqs[sq.id] = sq
	ts.s.waiting = append(ts.s.waiting, sq)
	return sq.id
}

func wantRun(t *testing.T, sch Schedule, id uint64, pos, n int) {
	t.Helper()
	for _, r := range sch.Runs {
		if r.ID == id {
			if r.Pos != pos || r.N != n {
				t.Fatalf("sequence %d runs [%d, %d), want [%d, %d)", id, r.Pos, r.Pos+r.N, pos, pos+n)
			}
			return
		}
	}
	if n > 0 {
		t.Fatalf("sequence %d not scheduled, want [%d, %d)", id, pos, pos+n)
	}
}

// A prefill runs the text before an image while the image encodes, stops
// before an image that is not ready, runs a non-causal image in one step
// (past the token budget), and after a prefix hit that ends inside such an
// image runs the rest of it in one step; a causal image may be split.
func TestSchedImageChunks(t *testing.T) {
	ts := newPagedSched(t, schedOptions(func(o *Options) { o.MaxNumBatchedTokens = 8; o.EncoderCacheBytes = 1 << 20 }), 64)
	ts.s.enc.embd = 1
	prompt := tokensOf(48)
	a := testImage(2, 28, 1, true, 100)     // [2, 30)
	b := testImage(33, 12, 2, false, 1<<40) // [33, 45), causal
	id := ts.addImages(prompt, 1, a, b)
	sq := ts.seqs[id]
	if sq.tokens[2] >= 0 || sq.tokens[33] >= 0 || sq.tokens[1] != 1 || prompt[2] != 2 {
		t.Fatalf("placeholders: tokens %v, prompt %v", sq.tokens[:4], prompt[:4])
	}
	wantRun(t, ts.step(), id, 0, 2) // the text before the image
	wantRun(t, ts.step(), id, 0, 0) // image a encoding
	ts.s.enc.advance(nil, 100, nil)
	if !sq.imgs[0].ready() || sq.imgs[1].ready() {
		t.Fatal("the oldest encoding did not go first")
	}
	wantRun(t, ts.step(), id, 2, 28) // the whole image, past the budget of 8
	wantRun(t, ts.step(), id, 30, 3) // up to image b, not ready
	wantRun(t, ts.step(), id, 33, 0)
	ts.s.enc.advance(nil, 1<<40, nil)
	wantRun(t, ts.step(), id, 33, 8) // a causal image may be split
	wantRun(t, ts.step(), id, 41, 7) // (the last token samples: the sequence ends)
	if st := ts.s.stats; st.EncoderMisses != 2 || st.EncoderHits != 0 {
		t.Errorf("lookups: %d hits, %d misses", st.EncoderHits, st.EncoderMisses)
	}
	if u := ts.s.enc.usage(); u.PinnedBytes != 0 || u.InFlight != 0 || u.CachedBytes != 4*(28+12) {
		t.Errorf("after the sequence: %+v", u)
	}

	// The same images, other text after them: a hit of 7 blocks of 4 ends
	// inside image a; its rest runs in one step.
	ts.s.opts.MaxNumBatchedTokens = 1
	p2 := tokensOf(48)
	p2[31] = 199
	id2 := ts.addImages(p2, 1, a, b)
	sch := ts.step()
	wantRun(t, sch, id2, 28, 2)
	if st := ts.s.stats; st.EncoderHits != 2 || st.PrefixHits != 1 {
		t.Errorf("second sequence: %d encoder hits, %d prefix hits", st.EncoderHits, st.PrefixHits)
	}
	// Preempted, it lets go of its images.
	ts.s.preempt(ts.seqs[id2], new(int))
	if u := ts.s.enc.usage(); u.PinnedBytes != 0 || u.CachedBytes != 4*(28+12) {
		t.Errorf("after the preemption: %+v", u)
	}
}

// An encoding nobody holds any more is dropped; an encoder that gives the
// wrong number of values fails its sequence.
func TestSchedImageRelease(t *testing.T) {
	ts := newPagedSched(t, schedOptions(func(o *Options) { o.EncoderCacheBytes = 0 }), 64)
	ts.s.enc.embd = 1
	id := ts.addImages(tokensOf(20), 1, testImage(4, 8, 1, true, 1<<40))
	ts.step()
	if u := ts.s.enc.usage(); u.InFlight != 1 || u.InFlightBytes != 32 {
		t.Fatalf("encoding: %+v", u)
	}
	ts.finish(id)
	if u := ts.s.enc.usage(); u != (EncoderUsage{}) {
		t.Errorf("after the end: %+v", u)
	}
	ts.checkPool(0)

	bad := testImage(4, 8, 2, true, 1)
	bad.Encode = func() Encoder { return &costEncoder{cost: 1, rows: make([]float32, 3)} }
	id = ts.addImages(tokensOf(20), 1, bad)
	ts.step()
	done := ts.s.enc.advance(nil, 10, nil)
	if len(done) != 1 || done[0].fails == nil {
		t.Fatalf("finished %v", done)
	}
	if !ts.seqs[id].holds(done[0]) {
		t.Fatal("the sequence does not hold its encoding")
	}
	ts.s.finish(ts.seqs[id], FinishError, done[0].fails)
	ts.s.deliver()
	if u := ts.s.enc.usage(); u != (EncoderUsage{}) || len(ts.s.enc.entries) != 0 {
		t.Errorf("after the failure: %+v, %d entries", u, len(ts.s.enc.entries))
	}
}
