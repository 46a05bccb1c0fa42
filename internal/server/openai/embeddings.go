package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"

	"mistralrs/internal/engine"
	"mistralrs/internal/server/gen"
)

// POST /v1/embeddings, as OpenAI and mistral.rs serve it. Every model
// embeds: a text model (kind text or auto) pools its own final hidden
// states, as a model served with kind embedding does; the pooling is the
// GGUF's pooling_type (mean when absent, cls, last), L2-normalised
// (engine.Embed). The inputs of one request enter the engine together, as
// one batch as far as the token budget allows, after the generation of
// the same step (engine.Embed), so that a long request delays no chat. A
// request holds at most --max-embedding-inputs inputs (OpenAI's 2048 by
// default); more are a 422, as mistral.rs answers the other invalid inputs.

// embeddingRequest is the body of POST /v1/embeddings.
type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat *string         `json:"encoding_format"`
	// Dimensions is refused whatever its value (mistral.rs: 422).
	Dimensions json.RawMessage `json:"dimensions"`
	User       json.RawMessage `json:"user"` // accepted and ignored
	// TruncateSequence cuts inputs longer than the context length to their
	// first tokens instead of refusing them.
	TruncateSequence *bool `json:"truncate_sequence"`
}

// embeddingInput is one input: a text, or token ids.
type embeddingInput struct {
	text   string
	tokens []int32
	isText bool
}

type embeddingJSON struct {
	Object    string `json:"object"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
	Index     int    `json:"index"`
}

type embeddingUsageJSON struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

type embeddingListJSON struct {
	Object string             `json:"object"`
	Data   []embeddingJSON    `json:"data"`
	Model  string             `json:"model"`
	Usage  embeddingUsageJSON `json:"usage"`
}

// invalidEmbedding is a 422: the status mistral.rs gives an embeddings
// request whose model, dimensions or input it refuses.
func invalidEmbedding(param, code, format string, args ...any) *gen.Error {
	return &gen.Error{Status: http.StatusUnprocessableEntity, Param: param, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Embeddings is POST /v1/embeddings.
func (a *API) Embeddings(w http.ResponseWriter, r *http.Request) {
	body, ok := a.b.ReadBody(w, r, gen.OpenAI)
	if !ok {
		return
	}
	var req embeddingRequest
	if err := gen.DecodeJSON(body, &req); err != nil {
		a.writeEmbeddingError(w, r, err)
		return
	}
	entry, err := a.b.Resolve(req.Model)
	if err != nil {
		// 422, not the generation routes' 404, as mistral.rs answers.
		a.writeEmbeddingError(w, r, invalidEmbedding("model", "model_not_found", "%s", err.Error()))
		return
	}
	if card, ok := entry.(gen.AdapterCard); ok {
		// The embeddings pool the base model's hidden states: an adapter
		// would be silently ignored.
		a.writeEmbeddingError(w, r, invalidEmbedding("model", "model_not_found",
			"model %s is LoRA adapter %s: embeddings are computed without adapters; name the base model", card.ID(), card.CardAdapter()))
		return
	}
	if d := bytes.TrimSpace(req.Dimensions); len(d) > 0 && string(d) != "null" {
		a.writeEmbeddingError(w, r, invalidEmbedding("dimensions", "invalid_dimensions",
			"Custom embedding dimensions (%s) are not supported.", compactJSON(d)))
		return
	}
	base64Out := false
	if f := req.EncodingFormat; f != nil {
		switch *f {
		case "float":
		case "base64":
			base64Out = true
		default:
			a.writeEmbeddingError(w, r, gen.BadRequest("encoding_format", `encoding_format must be "float" or "base64", got %q`, *f))
			return
		}
	}
	inputs, err := parseEmbeddingInput(req.Input, a.maxEmbeddingInputs)
	if err != nil {
		a.writeEmbeddingError(w, r, err)
		return
	}

	// The span covers a reload of the model too (its own span beneath).
	tr := gen.StartEmbeddings(r.Context(), entry.ID(), len(inputs))
	fail := func(err error) {
		tr.End(0, err)
		a.writeEmbeddingError(w, r, err)
	}
	lm, release, err := entry.Acquire(r.Context())
	if err != nil {
		fail(err)
		return
	}
	defer release()
	prompts, used, err := embeddingPrompts(lm, inputs, req.TruncateSequence != nil && *req.TruncateSequence)
	if err != nil {
		fail(err)
		return
	}
	vecs, err := lm.Engine.Embed(r.Context(), prompts)
	if err != nil {
		fail(embedError(err))
		return
	}
	resp := embeddingListJSON{Object: "list", Model: entry.ID(), Data: make([]embeddingJSON, len(vecs)),
		Usage: embeddingUsageJSON{PromptTokens: used, TotalTokens: used}}
	for i, v := range vecs {
		if !finite(v) {
			fail(fmt.Errorf("embedding %d of model %s is not finite (NaN or infinity in the hidden states)", i, entry.ID()))
			return
		}
		var e any = v
		if base64Out {
			e = base64Floats(v)
		}
		resp.Data[i] = embeddingJSON{Object: "embedding", Embedding: e, Index: i}
	}
	tr.End(used, nil)
	a.b.Respond(w, r, resp)
}

// objectInput finds an object in input (as multimodal embedding APIs send
// an image: {"image": …} or an image_url part), naming where it is.
func objectInput(b []byte) (string, bool) {
	if b[0] == '{' {
		return "input", true
	}
	var items []json.RawMessage
	if json.Unmarshal(b, &items) != nil {
		return "", false
	}
	for i, it := range items {
		if len(it) > 0 && it[0] == '{' {
			return fmt.Sprintf("input[%d]", i), true
		}
	}
	return "", false
}

// parseEmbeddingInput reads input: a string, an array of strings, an array
// of token ids, or an array of arrays of token ids. No input, an empty
// one, or more than limit entries, is a 422 (as in mistral.rs); another shape
// is a 400.
func parseEmbeddingInput(raw json.RawMessage, limit int) ([]embeddingInput, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return nil, gen.BadRequest("input", "input is required")
	}
	var out []embeddingInput
	var text string
	var texts []string
	var toks []int32
	var batch [][]int32
	switch {
	case json.Unmarshal(b, &text) == nil:
		out = []embeddingInput{{text: text, isText: true}}
	case json.Unmarshal(b, &texts) == nil:
		for _, t := range texts {
			out = append(out, embeddingInput{text: t, isText: true})
		}
	case json.Unmarshal(b, &toks) == nil:
		if len(toks) > 0 {
			out = []embeddingInput{{tokens: toks}}
		}
	case json.Unmarshal(b, &batch) == nil:
		for _, t := range batch {
			out = append(out, embeddingInput{tokens: t})
		}
	default:
		if param, ok := objectInput(b); ok {
			return nil, gen.BadRequest(param, "%s: image and other object inputs cannot be embedded here; input must be a string, an array of strings, an array of token ids (integers), or an array of arrays of token ids", param)
		}
		return nil, gen.BadRequest("input", "input must be a string, an array of strings, an array of token ids (integers), or an array of arrays of token ids")
	}
	if len(out) == 0 {
		return nil, invalidEmbedding("input", "invalid_input", "input must contain at least one entry.")
	}
	if len(out) > limit {
		return nil, invalidEmbedding("input", "invalid_input",
			"input has %d entries; at most %d are allowed per request (the server's max_embedding_inputs).", len(out), limit)
	}
	for i, in := range out {
		if (in.isText && in.text == "") || (!in.isText && len(in.tokens) == 0) {
			return nil, invalidEmbedding("input", "invalid_input", "input[%d] is empty.", i)
		}
	}
	return out, nil
}

// embeddingPrompts tokenizes the text inputs as completions does (BOS, and
// EOS, as the model's tokenizer adds them; control tokens written in the
// text are recognised) and, with truncate, cuts every input to the context
// length, keeping its first tokens (a text input the tokenizer ends with EOS
// keeps EOS as its last token). It returns the prompts and their tokens in
// all.
// Without truncate, a text input longer than the context is refused as soon
// as that is certain, without tokenizing all of it.
func embeddingPrompts(lm *gen.Loaded, inputs []embeddingInput, truncate bool) ([][]int32, int, error) {
	tok := lm.Model.Tok
	ctxLen := lm.Engine.ContextLength()
	prompts := make([][]int32, len(inputs))
	n := 0
	for i, in := range inputs {
		p := in.tokens
		switch {
		case in.isText && truncate:
			var all bool
			p, all = tok.EncodePrefix(in.text, true, true, ctxLen)
			if !all && tok.AddEOS() && ctxLen > 0 {
				p[ctxLen-1] = tok.EOS()
			}
		case in.isText:
			var ok bool
			if p, ok = tok.EncodeLimit(in.text, true, true, ctxLen); !ok {
				return nil, 0, invalidEmbedding("input", "invalid_input", "input %d has more than %d tokens, more than the context length %d", i, ctxLen, ctxLen)
			}
		case truncate && len(p) > ctxLen:
			p = p[:ctxLen:ctxLen]
		}
		prompts[i] = p
		n += len(p)
	}
	return prompts, n, nil
}

// embedError maps an engine.Embed error: a refused input is a 422 (as
// mistral.rs answers validation errors), the rest as generation errors.
func embedError(err error) error {
	var ee *engine.RequestError
	if errors.As(err, &ee) {
		return invalidEmbedding("input", "invalid_input", "%s", ee.Msg)
	}
	return gen.GenerateError(err)
}

// writeEmbeddingError answers err in the OpenAI error shape.
func (a *API) writeEmbeddingError(w http.ResponseWriter, r *http.Request, err error) {
	a.b.WriteError(w, r, gen.OpenAI, err)
}

// base64Floats is OpenAI's base64 encoding of an embedding: the float32
// values as little-endian bytes, in standard base64.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func finite(v []float32) bool {
	for _, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return false
		}
	}
	return true
}

// compactJSON is a JSON value on one line, for messages.
func compactJSON(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}
