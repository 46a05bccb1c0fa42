package engine

import (
	"slices"

	"mistralrs/internal/sampler"
	"mistralrs/internal/tokenizer"
)

// Output handling: what a sampled token becomes. A token is appended to
// its sequence, detokenized (partial UTF-8 held back), matched against the
// stop strings (a possible prefix of one held back, a match cut off) and
// checked against the stop tokens; the sequence's Output carries the text
// now safe to emit. At the end, the tool-call hook decides the finish
// reason and the Result is made.

// accept appends a sampled token to sq, and sets sq.out to what to emit
// and sq.reason when the sequence is done.
func accept(tok *tokenizer.Tokenizer, sq *seq, choice sampler.Choice) {
	now := sq.out.Time
	gen := len(sq.tokens) - sq.promptLen // tokens generated before this one
	if gen == 0 {
		sq.firstTok = now
	}
	sq.lastTok = now
	id := choice.Token
	sq.tokens = append(sq.tokens, id)
	sq.out = Output{Index: sq.index, Token: id, Time: now}
	if sq.req.Sampling.Logprobs {
		c := choice
		sq.out.Logprob = &c
	}
	if isStopToken(tok, sq.req, id) {
		sq.out.StopToken = true
		sq.out.Text = sq.stops.Flush()
		sq.text = append(sq.text, sq.out.Text...)
		sq.reason = FinishStop
		return
	}
	final, broken := false, false // the grammar takes nothing more / the token left it
	if sq.cons != nil {
		if st, ok := sq.cons.Advance(sq.cstate, id); ok {
			sq.cstate = st
			final = st.Final()
		} else {
			broken = true
		}
	}
	last := gen+1 == sq.maxTokens || final || broken
	piece, stopped := sq.stops.Push(sq.dec.Add(id))
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
	case stopped, final:
		sq.reason = FinishStop
	case last:
		sq.reason = FinishLength
	}
}

// isStopToken: the model's end-of-generation tokens (unless ignored) and
// the request's extra stop ids end a generation.
func isStopToken(tok *tokenizer.Tokenizer, req *Request, id int32) bool {
	if !req.IgnoreEOS && tok.IsEOG(id) {
		return true
	}
	return slices.Contains(req.StopTokens, id)
}

// finalReason is the reason a sequence ending with reason reports: an
// answer that stopped and whose text the request's hook reads as tool
// calls finishes with FinishToolCalls (runs once per sequence).
func finalReason(sq *seq, reason string, err error) string {
	if reason == FinishStop && err == nil && sq.req.ToolCalls != nil && sq.req.ToolCalls(string(sq.text)) {
		return FinishToolCalls
	}
	return reason
}

// result summarises a finished sequence.
func result(sq *seq, reason string) *Result {
	res := &Result{
		Text: string(sq.text), Tokens: sq.tokens[sq.promptLen:], FinishReason: reason,
		PromptTokens: sq.promptLen, CompletionTokens: len(sq.tokens) - sq.promptLen, CachedTokens: sq.cached,
		Embedding: sq.embed,
	}
	if !sq.firstTok.IsZero() {
		res.PromptTime = sq.firstTok.Sub(sq.arrived)
		res.DecodeTime = sq.lastTok.Sub(sq.firstTok)
	}
	return res
}
