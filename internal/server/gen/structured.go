package gen

import (
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"mistralrs/internal/constrain"
)

// Structured output: a request's response_format (json_object,
// json_schema) or mistral.rs's grammar field (regex, json_schema, lark)
// compiles into a constrain.Grammar that the engine enforces while
// decoding. Compiled grammars are cached by their source, so a repeated
// schema compiles once and the engine reuses its matcher (which the
// grammar keeps, with its caches of masks and automaton states).
//
// The cache is bounded in bytes (--grammar-cache-mb): what its grammars
// hold by constrain.Grammar.Bytes, matchers included, measured again on
// every lookup since matchers grow as requests use them. The least
// recently used grammars are dropped first; the engine keeps no grammar,
// so a dropped one is freed when its running requests end. A grammar that
// alone needs more than the budget once prepared is refused.

// DefaultGrammarBudget is the grammar cache's budget when none is set:
// room for a dozen of the largest grammars the compilers accept
// (constrain.MaxGrammarSize elements, about 16 MiB prepared, plus their
// mask caches) or hundreds of ordinary schemas with theirs, small beside
// the memory of the model they constrain.
const DefaultGrammarBudget = 256 << 20

// maxCachedGrammars bounds the entries (each lookup measures them all).
const maxCachedGrammars = 1024

type grammarCache struct {
	mu     sync.Mutex
	budget int64 // 0: DefaultGrammarBudget
	m      map[[32]byte]*list.Element
	lru    list.List // of *grammarEntry, most recently used first
}

type grammarEntry struct {
	key [32]byte
	g   *constrain.Grammar
}

// SetGrammarBudget bounds the compiled grammars kept for reuse to n bytes
// (0: DefaultGrammarBudget).
func (b *Base) SetGrammarBudget(n int64) {
	b.grammars.mu.Lock()
	defer b.grammars.mu.Unlock()
	b.grammars.budget = n
}

func (c *grammarCache) limit() int64 {
	if c.budget > 0 {
		return c.budget
	}
	return DefaultGrammarBudget
}

// compile returns the cached grammar of (kind, src), compiling it with fn
// the first time and preparing it for matching (constrain.Grammar.Prepare:
// a start rule past the matcher's limits is the request's error). A
// grammar that needs more than the budget is an error; the caller names
// the parameter.
func (c *grammarCache) compile(note *GrammarCompile, kind string, src []byte, fn func() (*constrain.Grammar, error)) (*constrain.Grammar, error) {
	t0 := time.Now()
	note.Kind, note.Hit, note.At = kind, true, t0
	defer func() { note.Took = time.Since(t0) }()
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write(src)
	var key [32]byte
	copy(key[:], h.Sum(nil))
	if g := c.lookup(key); g != nil {
		return g, nil
	}
	note.Hit = false
	g, err := fn()
	if err != nil {
		return nil, err
	}
	if err := g.Prepare(); err != nil {
		return nil, err
	}
	return c.insert(key, g)
}

// lookup is the cached grammar of key, or nil.
func (c *grammarCache) lookup(key [32]byte) *constrain.Grammar {
	c.mu.Lock()
	e, ok := c.m[key]
	if !ok {
		c.mu.Unlock()
		return nil
	}
	c.lru.MoveToFront(e)
	over := c.trim()
	c.mu.Unlock()
	dropCaches(over)
	return e.Value.(*grammarEntry).g
}

// insert caches g under key, unless it alone needs more than the budget
// (or another request cached the same source meanwhile: that one is kept).
func (c *grammarCache) insert(key [32]byte, g *constrain.Grammar) (*constrain.Grammar, error) {
	c.mu.Lock()
	if n, budget := g.Bytes(), c.limit(); n > budget {
		c.mu.Unlock()
		return nil, fmt.Errorf("the compiled grammar needs %s, more than the grammar cache's budget of %s (--grammar-cache-mb)",
			mib(n), mib(budget))
	}
	if c.m == nil {
		c.m = map[[32]byte]*list.Element{}
	}
	if e, ok := c.m[key]; ok {
		c.lru.MoveToFront(e)
		g = e.Value.(*grammarEntry).g
	} else {
		c.m[key] = c.lru.PushFront(&grammarEntry{key: key, g: g})
	}
	over := c.trim()
	c.mu.Unlock()
	dropCaches(over)
	return g, nil
}

// trim drops the least recently used grammars until the rest fit the
// budget and the count. The most recent one stays; trim returns it when it
// alone is over, for its matchers' caches to be emptied (dropCaches, out
// of the lock: a matcher may be busy with a mask) and refill as it is used.
func (c *grammarCache) trim() *constrain.Grammar {
	budget := c.limit()
	var total int64
	for e := c.lru.Front(); e != nil; e = e.Next() {
		total += e.Value.(*grammarEntry).g.Bytes()
	}
	for c.lru.Len() > 1 && (total > budget || c.lru.Len() > maxCachedGrammars) {
		e := c.lru.Back()
		ge := e.Value.(*grammarEntry)
		total -= ge.g.Bytes()
		c.lru.Remove(e)
		delete(c.m, ge.key)
	}
	if total > budget {
		return c.lru.Front().Value.(*grammarEntry).g
	}
	return nil
}

func dropCaches(g *constrain.Grammar) {
	if g != nil {
		g.DropCaches()
	}
}

// mib is n bytes in MiB, for messages.
func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// schemaError turns a compile error into a 400 naming the parameter; the
// error itself names the schema keyword at fault.
func schemaError(param string, err error) error {
	return BadRequest(param, "%s: %v", param, err)
}

// responseFormat compiles an OpenAI response_format (param names the
// field for errors): nil for text.
func (b *Base) responseFormat(note *GrammarCompile, param string, raw json.RawMessage) (*constrain.Grammar, error) {
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
		return b.grammars.compile(note, "json_object", nil, func() (*constrain.Grammar, error) { return constrain.JSONObject(), nil })
	case "json_schema":
		schema := rf.Schema
		if rf.JSONSchema != nil && !IsNull(rf.JSONSchema.Schema) {
			schema = rf.JSONSchema.Schema
		}
		if IsNull(schema) {
			return nil, BadRequest(param, "%s of type json_schema needs json_schema.schema", param)
		}
		g, err := b.grammars.compile(note, "json_schema", schema, func() (*constrain.Grammar, error) { return constrain.FromJSONSchema(schema) })
		if err != nil {
			return nil, schemaError(param, err)
		}
		return g, nil
	}
	return nil, BadRequest(param, "%s type %q is not supported (text, json_object, json_schema)", param, rf.Type)
}

// grammarField compiles mistral.rs's grammar field: {"type": "regex" |
// "json_schema" | "lark", "value": …}; llguidance is refused.
func (b *Base) grammarField(note *GrammarCompile, raw json.RawMessage) (*constrain.Grammar, error) {
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
		g, err := b.grammars.compile(note, "regex", []byte(v), func() (*constrain.Grammar, error) { return constrain.FromRegex(v) })
		if err != nil {
			return nil, BadRequest("grammar.value", "regex: %v", err)
		}
		return g, nil
	case "lark":
		v, err := text()
		if err != nil {
			return nil, err
		}
		g, err := b.grammars.compile(note, "lark", []byte(v), func() (*constrain.Grammar, error) { return constrain.FromLark(v) })
		if err != nil {
			return nil, BadRequest("grammar.value", "lark grammar: %v", err)
		}
		return g, nil
	case "json_schema":
		g, err := b.grammars.compile(note, "json_schema", gf.Value, func() (*constrain.Grammar, error) { return constrain.FromJSONSchema(gf.Value) })
		if err != nil {
			return nil, schemaError("grammar.value", err)
		}
		return g, nil
	case "llguidance":
		return nil, BadRequest("grammar.type", "grammar type llguidance is not supported by this server (regex, json_schema, lark are)")
	}
	return nil, BadRequest("grammar.type", "grammar type %q is not supported (regex, json_schema, lark)", gf.Type)
}

// GrammarCompile is how a request's constraint was had from the grammar
// cache, for its generation spans: its kind (json_object, json_schema,
// regex, lark, tool_call), whether the cache held it, and the time it took.
type GrammarCompile struct {
	Kind string
	Hit  bool
	At   time.Time // when the lookup began
	Took time.Duration
}

// Constraint compiles a request's response_format and grammar: at most
// one of them may constrain the output.
func (b *Base) Constraint(param string, responseFormat, grammar json.RawMessage) (*constrain.Grammar, error) {
	g, _, err := b.ConstraintNoted(param, responseFormat, grammar)
	return g, err
}

// ConstraintNoted is Constraint, also saying how the grammar was compiled
// (Settings.Compile; zero without a constraint).
func (b *Base) ConstraintNoted(param string, responseFormat, grammar json.RawMessage) (*constrain.Grammar, GrammarCompile, error) {
	var rfNote, gfNote GrammarCompile
	rf, err := b.responseFormat(&rfNote, param, responseFormat)
	if err != nil {
		return nil, GrammarCompile{}, err
	}
	gf, err := b.grammarField(&gfNote, grammar)
	if err != nil {
		return nil, GrammarCompile{}, err
	}
	if rf != nil && gf != nil {
		return nil, GrammarCompile{}, BadRequest("grammar", "give either %s or grammar, not both", param)
	}
	if rf != nil {
		return rf, rfNote, nil
	}
	return gf, gfNote, nil
}
