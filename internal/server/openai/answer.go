package openai

import (
	"encoding/hex"
	"math"

	"github.com/google/uuid"

	"mistralrs/internal/chat"
	"mistralrs/internal/engine"
	"mistralrs/internal/sampler"
	"mistralrs/internal/server/gen"
	"mistralrs/internal/tokenizer"
)

// usage is the usage object of a finished generation, with mistral.rs's
// timing fields.
func usage(res *engine.Result) *usageJSON {
	prompt, compl := res.PromptTime.Seconds(), res.DecodeTime.Seconds()
	total := prompt + compl
	return &usageJSON{
		CompletionTokens:       res.CompletionTokens,
		PromptTokens:           res.PromptTokens,
		TotalTokens:            res.PromptTokens + res.CompletionTokens,
		AvgTokPerSec:           gen.PerSecond(res.PromptTokens+res.CompletionTokens, total),
		AvgPromptTokPerSec:     gen.PerSecond(res.PromptTokens, prompt),
		AvgComplTokPerSec:      gen.PerSecond(res.CompletionTokens, compl),
		TotalTimeSec:           total,
		TotalPromptTimeSec:     prompt,
		TotalCompletionTimeSec: compl,
	}
}

// tokenText is a token's text as it appears in the output, and its bytes.
func tokenText(tok *tokenizer.Tokenizer, id int32) (string, []int) {
	b := tok.TokenBytes(id)
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return string(b), ints
}

// logprob converts a float32 logprob for JSON (which has no -Inf).
func logprob(v float32) float64 {
	f := float64(v)
	if math.IsInf(f, -1) || math.IsNaN(f) {
		return -9999
	}
	return f
}

// ChatLogprob is a sampled token's logprob entry in the chat (and
// Responses) form.
func ChatLogprob(tok *tokenizer.Tokenizer, c *sampler.Choice) TokenLogprob {
	text, b := tokenText(tok, c.Token)
	e := TokenLogprob{Token: text, Logprob: logprob(c.Logprob), Bytes: b, TopLogprobs: []TopLogprob{}}
	for _, t := range c.Top {
		tt, tb := tokenText(tok, t.Token)
		e.TopLogprobs = append(e.TopLogprobs, TopLogprob{Token: tt, Logprob: logprob(t.Logprob), Bytes: tb})
	}
	return e
}

// Logprobs collects the chat-form logprob entries of the outputs that
// carry one (not the end-of-generation token's).
type Logprobs struct {
	tok *tokenizer.Tokenizer
	On  bool
}

// Wants reports whether o's logprob goes into the answer.
func (l Logprobs) Wants(o engine.Output) bool {
	return l.On && o.Logprob != nil && !o.StopToken
}

// Of is o's entry, or nil.
func (l Logprobs) Of(o engine.Output) *TokenLogprob {
	if !l.Wants(o) {
		return nil
	}
	e := ChatLogprob(l.tok, o.Logprob)
	return &e
}

// NewLogprobs reads entries with tok when on.
func NewLogprobs(tok *tokenizer.Tokenizer, on bool) Logprobs { return Logprobs{tok: tok, On: on} }

// toolCallsJSON gives the calls their ids; index numbers them in a stream
// delta (OpenAI's tool_calls[].index).
func toolCallsJSON(calls []chat.ToolCall, index bool) []toolCall {
	out := make([]toolCall, len(calls))
	for i, c := range calls {
		id := uuid.New()
		out[i] = toolCall{ID: "call_" + hex.EncodeToString(id[:]), Type: "function"}
		out[i].Function.Name = c.Function.Name
		out[i].Function.Arguments = c.Function.Arguments
		if index {
			out[i].Index = &i
		}
	}
	return out
}
