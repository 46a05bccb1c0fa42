package engine

import (
	"fmt"

	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
	"mistralrs/internal/sampler"
)

// Speculative decoding. Before a step is scheduled, a proposer stages up
// to SpecTokens guessed tokens on each decoding sequence (stage). The
// scheduler makes room for them (or drops them: a staged drop); the step's
// forward pass computes the logits of the last token and of every guess at
// once; verify keeps the longest run of guesses the model agrees with (the
// sampler's speculative acceptance) plus the token the model itself chose
// after it, commits their keys and values and rolls the rest back.

// proposer guesses the next tokens of decoding sequences.
type proposer interface {
	// propose stages up to want(sq) guesses on each sequence (sq.draft,
	// and sq.draftQ when they were sampled from a distribution). It
	// returns the number of sequences whose proposal failed (they no
	// longer speculate).
	propose(seqs []*seq, want func(*seq) int) (failed int)
}

// ngramProposer is prompt-lookup decoding (vLLM's "ngram", llama.cpp's
// lookup decoding): it finds the last earlier occurrence of the sequence's
// final n tokens, longest n first, and proposes the tokens that followed
// it. It needs no model and guesses deterministically.
type ngramProposer struct{ n int }

func (p ngramProposer) propose(seqs []*seq, want func(*seq) int) int {
	for _, sq := range seqs {
		sq.draft = ngramLookup(sq.draft[:0], sq.tokens, p.n, want(sq))
		sq.draftQ = nil
	}
	return 0
}

// ngramLookup appends to dst k tokens that followed the last earlier
// occurrence of the final n (n..1) tokens of toks, nothing when there is
// none.
func ngramLookup(dst, toks []int32, maxN, k int) []int32 {
	L := len(toks)
	for n := min(maxN, L-1); n >= 1; n-- {
		suffix := toks[L-n:]
		// An occurrence ending at e (exclusive) < L, latest first.
		for e := L - 1; e >= n; e-- {
			if toks[e-1] != suffix[n-1] || !equalTokens(toks[e-n:e], suffix) {
				continue
			}
			// Copy on from the match, past the sequence's end into the
			// guesses made so far (as LZ77 does): in an output loop of
			// period p the match is p tokens back, and the loop goes on.
			start := len(dst)
			for j := e; j < e+k; j++ {
				if j < L {
					dst = append(dst, toks[j])
				} else {
					dst = append(dst, dst[start+j-L])
				}
			}
			return dst
		}
	}
	return dst
}

func equalTokens(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// draftProposer runs a smaller model of the same vocabulary: each sequence
// has its own contiguous cache in it, caught up with the tokens the draft
// has not seen, then the draft samples its guesses one position at a time
// (all sequences in one forward pass per position), with the request's
// sampling settings, keeping each guess's distribution for the verification.
type draftProposer struct {
	net  *model.Model
	pool *kernels.Pool
	f16  bool // the draft cache stores halves (newDraftProposer)

	inputs []model.SeqInput
	ptrs   []*model.SeqInput
	active []*seq
}

// draftState is a sequence's state in the draft model.
type draftState struct {
	cache  *kvcache.ContiguousCache
	n      int // positions of the cache, holding hist[:n]
	base   int // len(sq.tokens) when the guesses were made: hist[:base] are its tokens
	smp    *sampler.Sampler
	logits []float32
	hist   []int32
}

// newDraftProposer makes the proposer of draft model d. f16 stores the
// draft's keys and values as halves: the target's cache holds anything
// but float32, so that the model as its own draft computes what the target
// does under the default (f16) and the draft's cache is half the memory.
func newDraftProposer(d *loader.Model, pool *kernels.Pool, f16 bool) *draftProposer {
	return &draftProposer{net: d.Net, pool: pool, f16: f16}
}

func (p *draftProposer) state(sq *seq) *draftState {
	if sq.ds == nil {
		params := sq.req.Sampling
		if params.Seed != nil {
			// Its own stream, reproducible with the request's seed.
			seed := *params.Seed ^ 0x9e3779b97f4a7c15
			params.Seed = &seed
		}
		params.Logprobs = false
		maxLen := min(p.net.Config.ContextLen, sq.promptLen+sq.maxTokens)
		sq.ds = &draftState{
			cache:  kvcache.NewContiguousCache(p.net.Config.KVShape(), maxLen, p.f16),
			smp:    sampler.New(params),
			logits: make([]float32, p.net.Config.Vocab),
		}
	}
	return sq.ds
}

func (p *draftProposer) propose(seqs []*seq, want func(*seq) int) (failed int) {
	V := p.net.Config.Vocab
	p.active = p.active[:0]
	for _, sq := range seqs {
		sq.draft, sq.draftQ = sq.draft[:0], sq.draftQ[:0]
		ds := p.state(sq)
		// The cache keeps the positions whose tokens the sequence still
		// has: its tokens then, and the guesses it kept (none if they
		// were dropped).
		n := ds.base
		for lim := min(ds.n, len(sq.tokens)); n < lim && ds.hist[n] == sq.tokens[n]; n++ {
		}
		ds.n = n
		ds.cache.Truncate(n)
		k := want(sq)
		// The draft's cache must hold the guesses' positions too.
		k = min(k, ds.cache.Cap()-len(sq.tokens)+1)
		if k <= 0 {
			continue
		}
		ds.base = len(sq.tokens)
		ds.hist = append(ds.hist[:0], sq.tokens...)
		sq.specWant = k
		p.active = append(p.active, sq)
	}
	for round := 0; len(p.active) > 0; round++ {
		p.inputs = p.inputs[:0]
		p.ptrs = p.ptrs[:0]
		for _, sq := range p.active {
			ds := sq.ds
			// Without the request's LoRA adapters: they fit the target's
			// weights, not the draft's; the verification applies them.
			p.inputs = append(p.inputs, model.SeqInput{Tokens: ds.hist[ds.n:], Pos: ds.n, Cache: ds.cache, Logits: ds.logits})
		}
		for i := range p.inputs {
			p.ptrs = append(p.ptrs, &p.inputs[i])
		}
		if err := p.net.Forward(p.pool, &model.Batch{Seqs: p.ptrs}); err != nil {
			// A draft that fails turns speculation off for these
			// sequences; their requests go on without it.
			for _, sq := range p.active {
				sq.spec = false
				sq.draft, sq.draftQ, sq.ds = nil, nil, nil
			}
			failed += len(p.active)
			break
		}
		next := p.active[:0]
		for _, sq := range p.active {
			ds := sq.ds
			ds.n = len(ds.hist)
			i := len(sq.draft)
			if cap(sq.draftQ) < (i+1)*V {
				sq.draftQ = append(sq.draftQ[:cap(sq.draftQ)], make([]float32, (i+1)*V-cap(sq.draftQ))...)
			}
			sq.draftQ = sq.draftQ[:(i+1)*V]
			c := ds.smp.SampleDist(ds.logits, ds.hist, sq.draftQ[i*V:])
			sq.draft = append(sq.draft, c.Token)
			ds.hist = append(ds.hist, c.Token)
			if len(sq.draft) < sq.specWant {
				next = append(next, sq)
			}
		}
		p.active = next
	}
	clear(p.inputs)
	return failed
}

// checkDraft refuses a draft model whose vocabulary is not the model's:
// the same number of tokens, with the same strings.
func checkDraft(m, d *loader.Model) error {
	if d.Net.Config.Vocab != m.Net.Config.Vocab || d.Tok.VocabSize() != m.Tok.VocabSize() {
		return fmt.Errorf("draft model %s has %d tokens, %s has %d: speculative decoding needs the same vocabulary",
			d.Path, d.Tok.VocabSize(), m.Path, m.Tok.VocabSize())
	}
	for id := range int32(m.Tok.VocabSize()) {
		if a, b := d.Tok.TokenText(id), m.Tok.TokenText(id); a != b {
			return fmt.Errorf("draft model %s does not share the vocabulary of %s: token %d is %q there and %q here", d.Path, m.Path, id, a, b)
		}
	}
	return nil
}

// specWant is how many guesses sq may verify in its next step: none after
// its last token, and never past its token limit (the step's own token
// counts too).
func (e *Engine) specWant(sq *seq) int {
	left := sq.maxTokens - (len(sq.tokens) - sq.promptLen)
	return min(e.opts.SpecTokens, left-1)
}

// stage asks the proposer for guesses for the running sequences that
// decode next.
func (r *runner) stage() {
	e, s := r.e, r.sched
	if e.prop == nil {
		return
	}
	r.staged = r.staged[:0]
	for _, sq := range s.running {
		if sq.spec && sq.computed == len(sq.tokens)-1 && e.specWant(sq) > 0 {
			r.staged = append(r.staged, sq)
		}
	}
	if len(r.staged) == 0 {
		return
	}
	s.stats.SpecStagedDrops += e.prop.propose(r.staged, e.specWant)
}

// verify decides the guesses of a sequence whose step computed them:
// logits holds the step's logits for the last token and each guess. It
// appends the kept tokens, emitting each, and returns how many guesses
// were kept: the accepted ones, unless a stop or the token limit came
// first.
func verify(e *Engine, sq *seq, logits []float32) (kept int) {
	V := e.net.Config.Vocab
	k := len(sq.draft)
	L := len(sq.tokens)
	hist := append(sq.tokens, sq.draft...) // the guesses after the tokens: the penalties' history
	accepted := 0
	var own sampler.Choice // the model's token after the accepted guesses
	haveOwn := true
	st := sq.cstate // a constrained sequence's grammar state at position i
	for i := 0; i <= k; i++ {
		row := logits[i*V : (i+1)*V]
		if sq.cons != nil && !e.constrainLogits(sq, st, row) {
			haveOwn = false // nothing fits the grammar here: the answer ends
			break
		}
		if i == k {
			own = sq.smp.Sample(row, hist[:L+k])
			break
		}
		var q []float32
		if len(sq.draftQ) >= (i+1)*V {
			q = sq.draftQ[i*V : (i+1)*V]
		}
		c, ok := sq.smp.Verify(row, hist[:L+i], sq.draft[i], q)
		if !ok {
			own = c
			break
		}
		accepted++
		if sq.cons != nil {
			st, _ = sq.cons.Advance(st, sq.draft[i]) // allowed by the mask
		}
	}
	for i := 0; i <= accepted && sq.reason == ""; i++ {
		if i == accepted && !haveOwn {
			sq.reason = FinishLength
			break
		}
		c := own
		if i < accepted {
			c = sampler.Choice{Token: sq.draft[i]}
			if sq.req.Sampling.Logprobs {
				c = sq.smp.Logprobs(logits[i*V:(i+1)*V], c.Token)
			}
			kept++
		}
		accept(e.tok, sq, c)
		sq.box.push(sq.out)
	}
	return kept
}
