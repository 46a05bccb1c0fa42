package gen

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"mistralrs/internal/constrain"
)

// Structured output: a request's response_format (json_object,
// json_schema) or mistral.rs's grammar field (regex, json_schema, lark)
// compiles into a constrain.Grammar that the engine enforces while
// decoding. Compiled grammars are cached by their source, so a repeated
// schema compiles once and the engine reuses its matcher.

// maxCachedGrammars bounds the compiled grammars kept for reuse.
const maxCachedGrammars = 256

type grammarCache struct {
	mu    sync.Mutex
	m     map[[32]byte]*constrain.Grammar
	order [][32]byte // oldest first
}

// compile returns the cached grammar of (kind, src), compiling it with fn
// the first time.
func (c *grammarCache) compile(kind string, src []byte, fn func() (*constrain.Grammar, error)) (*constrain.Grammar, error) {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write(src)
	var key [32]byte
	copy(key[:], h.Sum(nil))
	c.mu.Lock()
	if g, ok := c.m[key]; ok {
		c.mu.Unlock()
		return g, nil
	}
	c.mu.Unlock()
	g, err := fn()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]*constrain.Grammar{}
	}
	if prev, ok := c.m[key]; ok {
		return prev, nil
	}
	if len(c.order) >= maxCachedGrammars {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[key] = g
	c.order = append(c.order, key)
	return g, nil
}

// schemaError turns a compile error into a 400 naming the parameter; the
// error itself names the schema keyword at fault.
func schemaError(param string, err error) error {
	return BadRequest(param, "%s: %v", param, err)
}

// responseFormat compiles an OpenAI response_format (param names the
// field for errors): nil for text.
func (b *Base) responseFormat(param string, raw json.RawMessage) (*constrain.Grammar, error) {
	if IsNull(raw) {
		return nil, nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
		// The Responses API's text.format puts the schema at the top level.
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, BadRequest(param, "%s must be an object with a type", param)
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return b.grammars.compile("json_object", nil, func() (*constrain.Grammar, error) { return constrain.JSONObject(), nil })
	case "json_schema":
		schema := rf.Schema
		if rf.JSONSchema != nil && !IsNull(rf.JSONSchema.Schema) {
			schema = rf.JSONSchema.Schema
		}
		if IsNull(schema) {
			return nil, BadRequest(param, "%s of type json_schema needs json_schema.schema", param)
		}
		g, err := b.grammars.compile("json_schema", schema, func() (*constrain.Grammar, error) { return constrain.FromJSONSchema(schema) })
		if err != nil {
			return nil, schemaError(param, err)
		}
		return g, nil
	}
	return nil, BadRequest(param, "%s type %q is not supported (text, json_object, json_schema)", param, rf.Type)
}

// grammarField compiles mistral.rs's grammar field: {"type": "regex" |
// "json_schema" | "lark", "value": …}; llguidance is refused.
func (b *Base) grammarField(raw json.RawMessage) (*constrain.Grammar, error) {
	if IsNull(raw) {
		return nil, nil
	}
	var gf struct {
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &gf); err != nil {
		return nil, BadRequest("grammar", "grammar must be an object {\"type\", \"value\"}")
	}
	if IsNull(gf.Value) {
		return nil, BadRequest("grammar.value", "grammar of type %q needs a value", gf.Type)
	}
	text := func() (string, error) {
		var v string
		if err := json.Unmarshal(gf.Value, &v); err != nil {
			return "", BadRequest("grammar.value", "grammar.value of type %s must be a string", gf.Type)
		}
		return v, nil
	}
	switch gf.Type {
	case "regex":
		v, err := text()
		if err != nil {
			return nil, err
		}
		g, err := b.grammars.compile("regex", []byte(v), func() (*constrain.Grammar, error) { return constrain.FromRegex(v) })
		if err != nil {
			return nil, BadRequest("grammar.value", "regex: %v", err)
		}
		return g, nil
	case "lark":
		v, err := text()
		if err != nil {
			return nil, err
		}
		g, err := b.grammars.compile("lark", []byte(v), func() (*constrain.Grammar, error) { return constrain.FromLark(v) })
		if err != nil {
			return nil, BadRequest("grammar.value", "lark grammar: %v", err)
		}
		return g, nil
	case "json_schema":
		g, err := b.grammars.compile("json_schema", gf.Value, func() (*constrain.Grammar, error) { return constrain.FromJSONSchema(gf.Value) })
		if err != nil {
			return nil, schemaError("grammar.value", err)
		}
		return g, nil
	case "llguidance":
		return nil, BadRequest("grammar.type", "grammar type llguidance is not supported by this server (regex, json_schema, lark are)")
	}
	return nil, BadRequest("grammar.type", "grammar type %q is not supported (regex, json_schema, lark)", gf.Type)
}

// Constraint compiles a request's response_format and grammar: at most
// one of them may constrain the output.
func (b *Base) Constraint(param string, responseFormat, grammar json.RawMessage) (*constrain.Grammar, error) {
	rf, err := b.responseFormat(param, responseFormat)
	if err != nil {
		return nil, err
	}
	gf, err := b.grammarField(grammar)
	if err != nil {
		return nil, err
	}
	if rf != nil && gf != nil {
		return nil, BadRequest("grammar", "give either %s or grammar, not both", param)
	}
	if rf != nil {
		return rf, nil
	}
	return gf, nil
}
