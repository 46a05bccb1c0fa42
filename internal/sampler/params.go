// Package sampler picks the next token from a model's logits, as the OpenAI-compatible API asks:
// logit bias, repetition/frequency/presence penalties, temperature, top-k, top-p and min-p, in
// that order (the order of llama.cpp's default chain and vLLM), with a seedable, platform
// independent random generator and OpenAI-style log probabilities. StopMatcher handles stop
// strings over streamed text.
//
// # Log probabilities
//
// Choice.Logprob and Choice.Top are natural-log probabilities of the model's raw distribution:
// the log-softmax of the logits as given to Sample, before bias, penalties, temperature and
// truncation. That is vLLM's default (raw logprobs) and keeps them comparable across sampling
// settings; every token has a finite value, including ones that top-k or top-p would exclude.
package sampler

import (
	"fmt"
	"math"
)

// DefaultRepeatLastN is the history window of the repetition penalty when Params.RepeatLastN is
// 0 (llama.cpp's default).
const DefaultRepeatLastN = 64

// MaxTopLogprobs is the most alternatives TopLogprobs may ask for (the OpenAI limit).
const MaxTopLogprobs = 20

// Params configures a Sampler. The "off" value of each setting disables it; New treats values
// outside the ranges Validate accepts as off rather than failing.
type Params struct {
	// Temperature divides the logits; 0 picks the most likely token (greedy). [0, 2].
	Temperature float32
	// TopK keeps the K most likely tokens; 0 or -1: off.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability adds up to at least
	// TopP; 1: off. (0, 1].
	TopP float32
	// MinP drops tokens less likely than MinP times the most likely one; 0: off. [0, 1].
	MinP float32
	// RepetitionPenalty (llama.cpp semantics) divides the positive logits and multiplies the
	// negative ones of every token that occurs in the last RepeatLastN tokens of the history
	// (prompt included); 1: off. > 0.
	RepetitionPenalty float32
	// RepeatLastN is the repetition penalty's window: 0 means DefaultRepeatLastN, -1 the whole
	// history.
	RepeatLastN int
	// FrequencyPenalty and PresencePenalty (OpenAI semantics) subtract count*FrequencyPenalty +
	// PresencePenalty from the logit of every token generated count > 0 times so far (the prompt
	// does not count); 0: off. [-2, 2].
	FrequencyPenalty float32
	PresencePenalty  float32
	// LogitBias is added to the logits of the given token ids before anything else (OpenAI
	// logit_bias, [-100, 100]); ids outside the vocabulary are ignored.
	LogitBias map[int32]float32
	// Seed makes sampling reproducible: the same seed and the same sequence of logits give the
	// same tokens, on any platform. nil: a random seed.
	Seed *uint64
	// Logprobs asks for Choice.Logprob; TopLogprobs (0..20, needs Logprobs) for that many most
	// likely alternatives in Choice.Top.
	Logprobs    bool
	TopLogprobs int
}

// DefaultParams are OpenAI's defaults: temperature 1 and every other setting off.
func DefaultParams() Params {
	return Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}
}

// Validate reports the first setting out of its range, in the words of the API's field names.
func (p *Params) Validate() error {
	bad := func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }
	switch {
	case bad(p.Temperature) || p.Temperature < 0 || p.Temperature > 2:
		return fmt.Errorf("temperature must be between 0 and 2, got %v", p.Temperature)
	case p.TopK < -1:
		return fmt.Errorf("top_k must be -1 (disabled) or at least 1, got %d", p.TopK)
	case bad(p.TopP) || p.TopP <= 0 || p.TopP > 1:
		return fmt.Errorf("top_p must be in (0, 1], got %v", p.TopP)
	case bad(p.MinP) || p.MinP < 0 || p.MinP > 1:
		return fmt.Errorf("min_p must be in [0, 1], got %v", p.MinP)
	case bad(p.RepetitionPenalty) || p.RepetitionPenalty <= 0:
		return fmt.Errorf("repetition_penalty must be greater than 0, got %v", p.RepetitionPenalty)
	case p.RepeatLastN < -1:
		return fmt.Errorf("repeat_last_n must be -1 (whole history) or at least 0, got %d", p.RepeatLastN)
	case bad(p.FrequencyPenalty) || p.FrequencyPenalty < -2 || p.FrequencyPenalty > 2:
		return fmt.Errorf("frequency_penalty must be between -2 and 2, got %v", p.FrequencyPenalty)
	case bad(p.PresencePenalty) || p.PresencePenalty < -2 || p.PresencePenalty > 2:
		return fmt.Errorf("presence_penalty must be between -2 and 2, got %v", p.PresencePenalty)
	case p.TopLogprobs < 0 || p.TopLogprobs > MaxTopLogprobs:
		return fmt.Errorf("top_logprobs must be between 0 and %d, got %d", MaxTopLogprobs, p.TopLogprobs)
	case p.TopLogprobs > 0 && !p.Logprobs:
		return fmt.Errorf("top_logprobs requires logprobs to be true")
	}
	for id, b := range p.LogitBias {
		if id < 0 {
			return fmt.Errorf("logit_bias: invalid token id %d", id)
		}
		if bad(b) || b < -100 || b > 100 {
			return fmt.Errorf("logit_bias: bias for token %d must be between -100 and 100, got %v", id, b)
		}
	}
	return nil
}
