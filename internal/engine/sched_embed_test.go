package engine

import (
	"slices"
	"testing"
)

// addEmbed queues an embedding of prompt, as Engine.Embed does, and
// returns its id.
func (ts *testSched) addEmbed(prompt []int32) uint64 {
	ts.next++
	st := ts.s.kv.NewState(len(prompt))
	st.NoPrefix()
	sq := newSeq(&Request{Prompt: prompt}, 0, st)
	sq.embed = make([]float32, 1)
	sq.id = ts.next
	ts.seqs[sq.id] = sq
	ts.s.waiting = append(ts.s.waiting, sq)
	return sq.id
}

// embedTokens is the number of embedding tokens a step computed.
func (ts *testSched) embedTokens(sch Schedule) int {
	n := 0
	for _, r := range sch.Runs {
		if ts.seqs[r.ID].embed != nil {
			n += r.N
		}
	}
	return n
}

// A generation that arrives behind a large embeddings request starts at
// the next step and decodes a token every step, with at most
// EmbeddingStepTokens embedding tokens beside it, as in the steps before
// and after it (issue 26: one embeddings request of 400 long inputs held a
// chat back 40 s).
func TestScheduleEmbeddingsYieldToGeneration(t *testing.T) {
	const budget, share, inputs, inputLen, maxTokens = 512, 64, 20, 200, 10
	s := newPagedSched(t, schedOptions(func(o *Options) {
		o.MaxNumBatchedTokens, o.EmbeddingStepTokens = budget, share
	}), 4096)
	var embeds []uint64
	for i := range inputs {
		embeds = append(embeds, s.addEmbed(tokensOf(inputLen+i)))
	}
	if n := s.embedTokens(s.step()); n != share {
		t.Fatalf("alone, embeddings computed %d tokens, want %d", n, share)
	}
	gen := s.add(tokensOf(11)[1:], maxTokens) // no prefix in common with the embeddings' cached blocks
	for step := 1; step <= maxTokens; step++ {
		sch := s.step()
		got := tokens(sch)
		want := 1
		if step == 1 {
			want = 10 // the prompt, first
		}
		if got[gen] != want || sch.Runs[0].ID != gen {
			t.Fatalf("step %d: runs %+v: the generation should run first with %d tokens", step, sch.Runs, want)
		}
		if n := s.embedTokens(sch); n != share {
			t.Fatalf("step %d: %d embedding tokens beside the generation, want %d", step, n, share)
		}
	}
	if f := lastFinal(s.seqs[gen]); f == nil || f.res == nil || f.res.CompletionTokens != maxTokens {
		t.Fatalf("the generation has not finished after %d steps: %+v", maxTokens, f)
	}
	done := 0
	for _, id := range embeds {
		if lastFinal(s.seqs[id]) != nil {
			done++
		}
	}
	if done > (maxTokens+1)*share/inputLen {
		t.Fatalf("%d embeddings finished while the generation ran", done)
	}
	if n := s.embedTokens(s.step()); n != share {
		t.Fatalf("after the generation, embeddings computed %d tokens, want %d", n, share)
	}
	for range 100 {
		s.step()
	}
	for _, id := range embeds {
		if f := lastFinal(s.seqs[id]); f == nil || f.res == nil || f.res.FinishReason != FinishLength {
			t.Fatalf("embedding %d: %+v", id, f)
		}
	}
	if r, w := s.running(), s.waiting(); len(r)+len(w) != 0 {
		t.Fatalf("still running %v waiting %v", r, w)
	}
	s.checkPool(0)
}

// When the pool runs out, an embedding is preempted before any generation,
// even an older one, and an embedding never preempts a generation: the
// generation runs to its end while the embedding waits for room.
func TestScheduleEmbeddingsPreemptedFirst(t *testing.T) {
	s := newPagedSched(t, schedOptions(func(o *Options) {
		o.PrefixCacheN, o.EmbeddingStepTokens = 0, 4
	}), 8) // 32 positions
	emb := s.addEmbed(tokensOf(28)) // 7 blocks, 4 tokens a step beside the generation
	gen := s.add(tokensOf(4), 20)   // grows to 24 positions, 6 blocks
	preempted := 0
	for step := 1; lastFinal(s.seqs[gen]) == nil; step++ {
		if step > 30 {
			t.Fatal("the generation never finished")
		}
		sch := s.step()
		if tokens(sch)[gen] == 0 {
			t.Fatalf("step %d: %+v: the generation did not run", step, sch)
		}
		for _, id := range sch.Preempted {
			if id != emb {
				t.Fatalf("step %d: %d preempted, want only the embedding %d", step, id, emb)
			}
			preempted++
		}
	}
	if preempted == 0 || lastFinal(s.seqs[emb]) != nil {
		t.Fatalf("embedding preempted %d times, finished %v: the pool cannot hold both", preempted, lastFinal(s.seqs[emb]) != nil)
	}
	if f := lastFinal(s.seqs[gen]); f.res == nil || f.res.CompletionTokens != 20 {
		t.Fatalf("generation: %+v", f)
	}
	for range 10 {
		s.step()
	}
	if f := lastFinal(s.seqs[emb]); f == nil || f.res == nil || f.res.FinishReason != FinishLength {
		t.Fatalf("embedding after the generation: %+v", f)
	}
	if r, w := s.running(), s.waiting(); !slices.Equal(r, nil) || len(w) != 0 {
		t.Fatalf("still running %v waiting %v", r, w)
	}
	s.checkPool(0)
}
