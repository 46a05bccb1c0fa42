package engine

import (
	"context"
	"fmt"
	"math"
)

// Embeddings. A sequence that embeds computes its prompt like any other
// (batched, in chunks, with preemption) but samples nothing: each step
// hands it the final hidden states of the tokens it computed (the runner's
// scratch for the step), which it pools as the model's pooling type says
// (mean, first token, last token), and its last step ends it with the
// L2-normalised vector. It counts as completed with reason length, as
// mistral.rs marks embeddings Done(Length(0)).
//
// Generation goes first: the scheduler gives embeddings what the step's
// token budget has left after every generating sequence, at most
// EmbeddingStepTokens of it, and preempts an embedding before any
// generation. So one request of many long inputs delays a chat by a few
// tokens' work per step, not by the whole request.

// Embed returns the embedding of each prompt. The prompts enter the engine
// together, so they are computed in the same steps as far as the token
// budget allows. The end of ctx cancels them.
func (e *Engine) Embed(ctx context.Context, prompts [][]int32) ([][]float32, error) {
	return e.EmbedLoRA(ctx, prompts, nil)
}

// EmbedLoRA is Embed with LoRA adapters applied (nil: none). Embeddings
// never use the prefix cache, so the adapters' key salts nothing.
func (e *Engine) EmbedLoRA(ctx context.Context, prompts [][]int32, lora *LoRA) ([][]float32, error) {
	if len(prompts) == 0 {
		return nil, &RequestError{Msg: "no input to embed"}
	}
	if err := checkLoRA(lora); err != nil {
		return nil, &RequestError{Msg: err.Error()}
	}
	switch e.net.Config.Pooling {
	case "mean", "cls", "last":
	default:
		return nil, &RequestError{Msg: fmt.Sprintf("the model's pooling type %q cannot make embeddings", e.net.Config.Pooling)}
	}
	ctxLen, vocab := e.ContextLength(), int32(e.VocabSize())
	sink := e.statsSink()
	seqs := make([]*seq, len(prompts))
	for i, p := range prompts {
		switch {
		case len(p) == 0:
			return nil, &RequestError{Msg: fmt.Sprintf("input %d is empty", i)}
		case len(p) > ctxLen:
			return nil, &RequestError{Msg: fmt.Sprintf("input %d has %d tokens, more than the context length %d", i, len(p), ctxLen)}
		case e.kv.Capacity() > 0 && len(p) > e.kv.Capacity():
			sink(refused(RejectOverCapacity))
			return nil, &RequestError{Reason: RejectOverCapacity, Msg: fmt.Sprintf("input %d has %d tokens, more than the whole KV cache holds", i, len(p))}
		}
		for _, t := range p {
			if t < 0 {
				return nil, &RequestError{Msg: fmt.Sprintf("input %d: token %d is negative: embeddings take text only, not images", i, t)}
			}
			if t >= vocab {
				return nil, &RequestError{Msg: fmt.Sprintf("input %d: token %d outside the vocabulary (size %d)", i, t, vocab)}
			}
		}
		st := e.kv.NewState(len(p))
		st.NoPrefix()
		sq := newSeq(&Request{Prompt: p, LoRA: lora}, 0, st)
		sq.embed = make([]float32, e.net.Config.Embd)
		seqs[i] = sq
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	for _, sq := range seqs {
		// (Not a prefix-cache lookup: mistral.rs counts only sequences
		// that generate.)
		e.nextID++
		sq.id = e.nextID
	}
	e.inbox = append(e.inbox, seqs...)
	sink(Stats{Measured: LevelPending, PendingAdmission: len(e.inbox)})
	e.mu.Unlock()
	e.signal()

	stop := context.AfterFunc(ctx, func() {
		for _, sq := range seqs {
			sq.cancel.Store(true)
		}
		e.signal()
	})
	defer stop()
	out := make([][]float32, len(seqs))
	var firstErr error
	for i, sq := range seqs {
		var fins []*final
		for len(fins) == 0 {
			<-sq.box.notify
			_, fins = sq.box.take(nil)
		}
		f := fins[0]
		switch {
		case f.err != nil:
			firstErr = f.err
		case f.res.FinishReason != FinishLength:
			firstErr = fmt.Errorf("embedding %d ended with reason %s", i, f.res.FinishReason)
			if f.res.FinishReason == FinishCanceled && ctx.Err() != nil {
				firstErr = ctx.Err()
			}
		default:
			out[i] = f.res.Embedding
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// poolHidden adds the hidden states h of the n tokens a step computed from
// position pos to sq's embedding; last says the prompt is complete, and
// the embedding is then finished.
func (e *Engine) poolHidden(sq *seq, h []float32, pos, n int, last bool) {
	E := e.net.Config.Embd
	if pos == 0 {
		clear(sq.embed) // a new start (also after a preemption)
	}
	switch e.net.Config.Pooling {
	case "mean":
		for j := range n {
			for d, v := range h[j*E : (j+1)*E] {
				sq.embed[d] += v
			}
		}
	case "cls":
		if pos == 0 {
			copy(sq.embed, h[:E])
		}
	case "last":
		copy(sq.embed, h[(n-1)*E:n*E])
	}
	if !last {
		return
	}
	if e.net.Config.Pooling == "mean" {
		inv := 1 / float32(len(sq.tokens))
		for d := range sq.embed {
			sq.embed[d] *= inv
		}
	}
	var norm float64
	for _, v := range sq.embed {
		norm += float64(v) * float64(v)
	}
	if norm > 0 {
		inv := float32(1 / math.Sqrt(norm))
		for d := range sq.embed {
			sq.embed[d] *= inv
		}
	}
}
