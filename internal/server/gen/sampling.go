package gen

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	"mistralrs/internal/constrain"
	"mistralrs/internal/engine"
	"mistralrs/internal/sampler"
)

// Sampling are the sampling fields every dialect shares, with OpenAI's names
// (chat, completions and Responses embed it; Anthropic fills one from its
// own fields). Unknown request fields are ignored, as in mistral.rs.
type Sampling struct {
	Model               string             `json:"model"`
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	N                   *int               `json:"n"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	TopK                *int               `json:"top_k"`
	MinP                *float64           `json:"min_p"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	RepetitionPenalty   *float64           `json:"repetition_penalty"`
	Stop                Stop               `json:"stop"`
	Seed                *int64             `json:"seed"`
	LogitBias           map[string]float64 `json:"logit_bias"`
	Stream              bool               `json:"stream"`
	StreamOptions       *StreamOptions     `json:"stream_options"`
	IgnoreEOS           bool               `json:"ignore_eos"`
	// Speculative false turns speculative decoding off for the request (an
	// extension; default: on where the model has a proposer).
	Speculative *bool `json:"speculative"`
	// Grammar is mistral.rs's constraint field ({"type": "regex" |
	// "json_schema" | "lark", "value": …}), compiled by Base.Constraint.
	Grammar json.RawMessage `json:"grammar"`
}

// StreamOptions is OpenAI's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Stop is "stop": a string or a list of strings.
type Stop []string

func (s *Stop) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = Stop{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("must be a string or an array of strings")
	}
	*s = many
	return nil
}

// strings returns the non-empty stop strings.
func (s Stop) strings() []string {
	var out []string
	for _, v := range s {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Limits on the stop strings and logit_bias of one request: every stop
// string is matched against each generated token's text and every bias
// applied to each step's logits, so their size is the cost of every step
// (OpenAI allows 4 stop strings and 300 biases).
const (
	MaxStopStrings     = 16   // stop strings per request
	MaxStopStringBytes = 256  // bytes per stop string
	MaxLogitBias       = 1024 // logit_bias entries per request
)

// CheckStop refuses more than MaxStopStrings stop strings or one longer
// than MaxStopStringBytes; param is the field's name on the route.
func CheckStop(param string, stops []string) error {
	if len(stops) > MaxStopStrings {
		return BadRequest(param, "%s has %d strings; at most %d are allowed", param, len(stops), MaxStopStrings)
	}
	for i, v := range stops {
		if len(v) > MaxStopStringBytes {
			return BadRequest(param, "%s[%d] is %d bytes long; at most %d are allowed", param, i, len(v), MaxStopStringBytes)
		}
	}
	return nil
}

// Settings are the checked, engine-ready settings of a request.
type Settings struct {
	Params    sampler.Params
	MaxTokens int // 0: up to the context length
	Stop      []string
	IgnoreEOS bool
	NoSpec    bool // "speculative": false
	N         int  // choices
	Grammar   *constrain.Grammar
	// Compile says how Grammar came from the grammar cache (its
	// generation spans report it; ConstraintNoted).
	Compile GrammarCompile
}

// Settings checks the sampling fields; logprobs and topLogprobs come from
// the endpoint's own fields. globalSeed applies when the request has none.
func (f *Sampling) Settings(logprobs bool, topLogprobs int, globalSeed *uint64) (*Settings, error) {
	if err := CheckStop("stop", f.Stop); err != nil {
		return nil, err
	}
	if len(f.LogitBias) > MaxLogitBias {
		return nil, BadRequest("logit_bias", "logit_bias has %d entries; at most %d are allowed", len(f.LogitBias), MaxLogitBias)
	}
	g := &Settings{Params: sampler.DefaultParams(), Stop: f.Stop.strings(), IgnoreEOS: f.IgnoreEOS,
		NoSpec: f.Speculative != nil && !*f.Speculative}
	if err := f.limits(g); err != nil {
		return nil, err
	}
	f.params(&g.Params, globalSeed)
	p := &g.Params
	if err := f.logitBias(p); err != nil {
		return nil, err
	}
	p.Logprobs = logprobs
	p.TopLogprobs = topLogprobs
	if err := p.Validate(); err != nil {
		return nil, f.paramError(err)
	}
	return g, nil
}

// limits checks max_tokens (or max_completion_tokens) and n.
func (f *Sampling) limits(g *Settings) error {
	max := f.MaxTokens
	if f.MaxCompletionTokens != nil {
		max = f.MaxCompletionTokens
	}
	if max != nil {
		if *max < 1 {
			return BadRequest("max_tokens", "max_tokens must be at least 1, got %d", *max)
		}
		g.MaxTokens = *max
	}
	g.N = 1
	if f.N != nil {
		if *f.N < 1 || *f.N > engine.MaxChoices {
			return BadRequest("n", "n must be between 1 and %d, got %d", engine.MaxChoices, *f.N)
		}
		g.N = *f.N
	}
	return nil
}

// params copies the sampling fields the request sets onto p.
func (f *Sampling) params(p *sampler.Params, globalSeed *uint64) {
	set32 := func(dst *float32, v *float64) {
		if v != nil {
			*dst = float32(*v)
		}
	}
	set32(&p.Temperature, f.Temperature)
	set32(&p.TopP, f.TopP)
	if f.TopK != nil {
		p.TopK = *f.TopK
	}
	set32(&p.MinP, f.MinP)
	set32(&p.PresencePenalty, f.PresencePenalty)
	set32(&p.FrequencyPenalty, f.FrequencyPenalty)
	set32(&p.RepetitionPenalty, f.RepetitionPenalty)
	if f.Seed != nil {
		s := uint64(*f.Seed)
		p.Seed = &s
	} else if globalSeed != nil {
		s := *globalSeed
		p.Seed = &s
	}
}

// logitBias reads logit_bias: token ids as keys, biases in [-100, 100].
func (f *Sampling) logitBias(p *sampler.Params) error {
	if len(f.LogitBias) == 0 {
		return nil
	}
	p.LogitBias = make(map[int32]float32, len(f.LogitBias))
	for k, v := range f.LogitBias {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return BadRequest("logit_bias", "logit_bias: key %q is not a token id", k)
		}
		if v < -100 || v > 100 {
			return BadRequest("logit_bias", "logit_bias: bias for token %d must be between -100 and 100, got %v", id, v)
		}
		p.LogitBias[int32(id)] = float32(v)
	}
	return nil
}

// paramError turns sampler.Params.Validate's error into a 400 naming the
// field; a value beyond float32 is quoted as the client sent it, not +Inf.
func (f *Sampling) paramError(err error) error {
	msg := err.Error()
	param := paramOf(msg)
	given := map[string]*float64{"temperature": f.Temperature, "top_p": f.TopP, "min_p": f.MinP,
		"presence_penalty": f.PresencePenalty, "frequency_penalty": f.FrequencyPenalty, "repetition_penalty": f.RepetitionPenalty}
	if v := given[param]; v != nil && math.IsInf(float64(float32(*v)), 0) && !math.IsInf(*v, 0) {
		if i := strings.LastIndex(msg, ", got "); i >= 0 {
			msg = msg[:i] + ", got " + strconv.FormatFloat(*v, 'g', -1, 64)
		}
	}
	return BadRequest(param, "%s", msg)
}

// paramOf takes the field name that sampler.Params.Validate's messages start with.
func paramOf(msg string) string {
	if i := strings.IndexAny(msg, " :"); i > 0 {
		return msg[:i]
	}
	return ""
}
