package constrain

// JSON Schema → Grammar.
//
// FromJSONSchema compiles a subset of JSON Schema draft 2020-12 into a
// Grammar whose language is a subset of the JSON texts the schema accepts:
// every text the grammar derives validates, but not every valid text is
// derivable (the policies below pick one canonical layout). The policies:
//
// Whitespace: none, except one optional space after each ':' and ','
// (`{"a": 1, "b": [1, 2]}` and `{"a":1,"b":[1,2]}` both derive; two
// spaces, newlines and spaces before ':' or inside brackets do not), so a
// model cannot loop on whitespace.
//
// Objects: declared properties come in declaration order; required ones
// must appear, optional ones may be left out. Names listed in required but
// not declared follow, in the order of required, with the schema of
// additionalProperties (any value when it is absent or true). Extra
// properties come last, only when additionalProperties is true or a
// schema, or when it is absent and the schema declares no properties
// ({"type":"object"} is any object, while {"properties":{...}} without
// additionalProperties gets the declared properties only, as OpenAI's
// strict mode asks); their keys are strings without escapes that differ
// from every declared name.
//
// Arrays: prefixItems, items (a schema; false ends the array after the
// prefix), minItems, maxItems (a bounded array is a chain of maxItems
// rules). uniqueItems only when false or maxItems ≤ 1.
//
// Strings: any string is '"', characters, '"' where a character is a
// valid UTF-8 sequence of a code point ≥ U+0020 other than '"' and '\',
// or an escape (\" \\ \/ \b \f \n \r \t, or \uXXXX other than a
// surrogate). minLength / maxLength count code points. pattern is a Go
// regexp (RE2 syntax, as the validators in Go use), unanchored as JSON
// Schema says (^ and $ anchor at the ends only; \b and multi-line anchors
// are refused); the pattern is compiled into a DFA over the JSON-encoded
// bytes (a character needing an escape uses its short or \u00XX escape).
// format: date, time, date-time (RFC 3339, years 1000-2999, no leap
// second, at most 6 fraction digits), uuid, ipv4, hostname, email and uri
// (a plain subset of each); any other format is refused.
//
// Numbers: integer parts have at most 15 digits, fractions at most 15,
// exponents (only for numbers without bounds) at most 3, so a model
// cannot loop on digits. minimum / maximum / exclusiveMinimum /
// exclusiveMaximum are exact for integers (digit-range grammars, within
// ±(10^15-1)). Numbers with bounds have no exponent; a bound with up to 3
// decimals is exact, a finer one is rounded inwards to 3 decimals, and an
// exclusive bound is tightened to the next unit of one more decimal
// (exclusiveMinimum 0 → ≥ 0.1, exclusiveMinimum 0.5 → ≥ 0.51). Such a
// number is written with the bounds' decimals, trailing zeros optional,
// then (below the maximum) any further decimals: with minimum -2.5 and
// maximum 3.75, "-2.5", "-2.50", "3", "1.234" and "3.75" derive, "3.751"
// does not. multipleOf is refused.
//
// Combinators: anyOf and oneOf are alternatives (oneOf is taken as anyOf:
// the branches of a oneOf should be disjoint); allOf and keywords beside
// $ref / anyOf / oneOf are merged into one schema (types intersected,
// required united, properties merged, bounds tightened; conflicting
// patterns or formats are refused). $ref takes local JSON pointers ("#",
// "#/$defs/x", "#/definitions/x", "#/properties/…"; with FromJSONSchemaDocs
// also the key of a document, each resolving its own references against
// its own root); recursive references
// work as long as each cycle goes through some JSON text (a $ref cycle
// that consumes nothing is refused). enum and const accept any JSON value,
// emitted compact; the other keywords beside them only filter by type.
// A schema without "type" gets the types its keywords imply (properties →
// object, items → array, pattern → string, minimum → number), or any
// value.
//
// Annotations (title, description, default, examples, $comment, $schema,
// $id at the root, $defs, definitions, deprecated, readOnly, writeOnly,
// contentEncoding, contentMediaType, discriminator, nullable) and keywords
// starting with "x-" are ignored; every other keyword is a SchemaError
// naming it.
//
// Limits: the grammar has at most MaxSchemaGrammar elements ("schema too
// large"), so a bounded array or string costs a few elements per item of
// its maximum (maxItems 30000 or maxLength 60000 are too large); a
// pattern's automaton has at most 10000 states and all of a schema's
// automata together at most about 4M steps of construction ("too
// complex"); schemas nest at most 200 levels deep. Compiling a schema
// takes milliseconds (a 50-property schema about 2-3 ms), the worst accepted
// inputs a few hundred.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// MaxSchemaGrammar is the most elements (Grammar.Size) a grammar compiled
// from a JSON schema may have, about 40 bytes each: a larger schema is
// refused with "schema too large" before it can take much memory.
const MaxSchemaGrammar = MaxGrammarSize

const (
	jsMaxDepth     = 200   // nesting of schemas (and of the JSON document)
	jsMaxMerges    = 2000  // allOf / sibling merges per schema
	jsMaxDFAStates = 10000 // states of one pattern's DFA
)

// SchemaError is a schema FromJSONSchema cannot compile. Keyword is set
// when the problem is a keyword it does not support, or a use of one it
// does not (uniqueItems true, format "ipv6", a remote $ref, \b in a
// pattern); Msg then says what, if more than the name. Otherwise Keyword
// is empty and Msg names the problem (invalid JSON, a bad value of a
// keyword, which it names, a missing $ref target, a pattern that does not
// compile, a schema too large, no value possible). Path is the JSON
// pointer of the subschema ("" for the root); Doc is the key of the
// document of FromJSONSchemaDocs it is in ("" for the schema itself), and
// Path is then from that document's root.
type SchemaError struct {
	Keyword string
	Path    string
	Msg     string
	Doc     string
}

func (e *SchemaError) Error() string {
	var b strings.Builder
	b.WriteString("json schema")
	if e.Doc != "" {
		fmt.Fprintf(&b, " %q", e.Doc)
	}
	if e.Path != "" {
		b.WriteString(" at ")
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	if e.Keyword != "" {
		fmt.Fprintf(&b, "unsupported keyword %q", e.Keyword)
		if e.Msg != "" {
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Msg)
	return b.String()
}

// JSONObject is the grammar of any JSON object (response_format
// json_object), with the whitespace policy of FromJSONSchema.
func JSONObject() *Grammar {
	c := newJSC(nil)
	g, err := c.run(func() int { return c.anyObject() })
	if err != nil {
		panic("constrain: JSONObject: " + err.Error())
	}
	return g
}

// FromJSONSchema compiles a JSON schema (draft 2020-12 subset; see the
// comment at the top of jsonschema.go for what is covered and how) into a
// grammar of the JSON texts it accepts. Errors are *SchemaError.
func FromJSONSchema(schema []byte) (*Grammar, error) {
	root, err := jsParse(schema)
	if err != nil {
		return nil, &SchemaError{Msg: "invalid JSON: " + err.Error()}
	}
	c := newJSC(root)
	return c.run(func() int {
		if id := root.get("$id"); id != nil && id.kind != jString {
			c.fail("$id", "", "must be a string")
		}
		return c.schema(root, "")
	})
}

// FromJSONSchemaDocs compiles schema as FromJSONSchema does, given more
// documents that its $refs may name by key: "key" is that document's root,
// "key#/pointer" a schema inside it. A document is a schema resource of its
// own, as if it had come from its own URL: the references inside it ("#",
// "#/$defs/x", "#/definitions/x", its root $id followed by a fragment)
// resolve against its own root, wherever it is used. This is how a schema
// embeds schemas written on their own (a tool's parameters inside the
// wrapper of a call) without their references changing meaning. A
// SchemaError inside a document names its key in Doc.
func FromJSONSchemaDocs(schema []byte, docs map[string][]byte) (*Grammar, error) {
	root, err := jsParse(schema)
	if err != nil {
		return nil, &SchemaError{Msg: "invalid JSON: " + err.Error()}
	}
	c := newJSC(root)
	if err := c.addDocs(docs); err != nil {
		return nil, err
	}
	return c.run(func() int {
		if id := root.get("$id"); id != nil && id.kind != jString {
			c.fail("$id", "", "must be a string")
		}
		return c.schema(root, "")
	})
}

// addDocs parses the documents (in key order, so that the first error is
// always the same one) and notes, for each $ref string in them, the
// document it belongs to: a $ref keeps its string node through merges, so
// a merged schema still resolves each reference in its own document.
func (c *jsc) addDocs(docs map[string][]byte) error {
	keys := slices.Sorted(maps.Keys(docs))
	c.docs = make(map[string]*jval, len(docs))
	c.docOf = map[*jval]string{}
	for _, k := range keys {
		if k == "" || strings.Contains(k, "#") {
			return &SchemaError{Doc: k, Msg: "a document's key must be non-empty, without '#'"}
		}
		root, err := jsParse(docs[k])
		if err != nil {
			return &SchemaError{Doc: k, Msg: "invalid JSON: " + err.Error()}
		}
		if id := root.get("$id"); id != nil && id.kind != jString {
			return &SchemaError{Doc: k, Msg: `keyword "$id": must be a string`}
		}
		c.docs[k] = root
		jsRefStrings(root, func(ref *jval) { c.docOf[ref] = k })
	}
	return nil
}

// jsRefStrings calls f with the value of every "$ref" member in v that is
// a string. Values that are data (an enum's) are visited too; they are
// never resolved, so noting them is harmless.
func jsRefStrings(v *jval, f func(*jval)) {
	for _, x := range v.arr {
		jsRefStrings(x, f)
	}
	for i, k := range v.keys {
		if k == "$ref" && v.vals[i].kind == jString {
			f(v.vals[i])
		}
		jsRefStrings(v.vals[i], f)
	}
}

// ---- an ordered JSON tree (object keys keep their order) ----

type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

type jval struct {
	kind jkind
	b    bool
	s    string // a string, or a number's literal
	arr  []*jval
	keys []string
	vals []*jval
}

func (v *jval) get(k string) *jval {
	if v == nil || v.kind != jObject {
		return nil
	}
	for i, kk := range v.keys {
		if kk == k {
			return v.vals[i]
		}
	}
	return nil
}

// with is a copy of object v with k set to x.
func (v *jval) with(k string, x *jval) *jval {
	out := &jval{kind: jObject, keys: slices.Clone(v.keys), vals: slices.Clone(v.vals)}
	for i, kk := range out.keys {
		if kk == k {
			out.vals[i] = x
			return out
		}
	}
	out.keys = append(out.keys, k)
	out.vals = append(out.vals, x)
	return out
}

// without is a copy of object v without keys ks.
func (v *jval) without(ks ...string) *jval {
	out := &jval{kind: jObject}
	for i, k := range v.keys {
		if !slices.Contains(ks, k) {
			out.keys = append(out.keys, k)
			out.vals = append(out.vals, v.vals[i])
		}
	}
	return out
}

var jFalse = &jval{kind: jBool}

func jsParse(data []byte) (*jval, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := jsRead(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the schema")
	}
	return v, nil
}

func jsRead(dec *json.Decoder, depth int) (*jval, error) {
	if depth > jsMaxDepth {
		return nil, fmt.Errorf("nested over %d levels", jsMaxDepth)
	}
	t, err := dec.Token()
	if err == io.EOF {
		if depth > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, errors.New("empty document")
	}
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case nil:
		return &jval{kind: jNull}, nil
	case bool:
		return &jval{kind: jBool, b: t}, nil
	case json.Number:
		return &jval{kind: jNumber, s: string(t)}, nil
	case string:
		return &jval{kind: jString, s: t}, nil
	case json.Delim:
		switch t {
		case '[':
			v := &jval{kind: jArray}
			for dec.More() {
				x, err := jsRead(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, x)
			}
			_, err := dec.Token()
			return v, err
		case '{':
			v := &jval{kind: jObject}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				if v.get(k) != nil {
					return nil, fmt.Errorf("duplicate key %q", k)
				}
				x, err := jsRead(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, k)
				v.vals = append(v.vals, x)
			}
			_, err := dec.Token()
			return v, err
		}
	}
	return nil, fmt.Errorf("unexpected token %v", t)
}

// compact is v as compact JSON (object keys in their order).
func (v *jval) compact(b *strings.Builder) {
	switch v.kind {
	case jNull:
		b.WriteString("null")
	case jBool:
		b.WriteString(strconv.FormatBool(v.b))
	case jNumber:
		b.WriteString(v.s)
	case jString:
		b.WriteString(jsQuote(v.s))
	case jArray:
		b.WriteByte('[')
		for i, x := range v.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			x.compact(b)
		}
		b.WriteByte(']')
	case jObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsQuote(k))
			b.WriteByte(':')
			v.vals[i].compact(b)
		}
		b.WriteByte('}')
	}
}

func (v *jval) String() string {
	var b strings.Builder
	v.compact(&b)
	return b.String()
}

// jsonEqual is JSON equality: numbers by value, objects whatever their
// key order.
func jsonEqual(a, b *jval) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case jNull:
		return true
	case jBool:
		return a.b == b.b
	case jString:
		return a.s == b.s
	case jNumber:
		x, y := jsRat(a), jsRat(b)
		return x != nil && y != nil && x.Cmp(y) == 0
	case jArray:
		return slices.EqualFunc(a.arr, b.arr, jsonEqual)
	default:
		if len(a.keys) != len(b.keys) {
			return false
		}
		for i, k := range a.keys {
			y := b.get(k)
			if y == nil || !jsonEqual(a.vals[i], y) {
				return false
			}
		}
		return true
	}
}

// jsEqualBucket is a key that values equal by jsonEqual share: the value
// itself for strings, booleans and null, the exact number for numbers,
// the items' keys for arrays, the length for objects; "" for a number
// jsonEqual finds equal to nothing.
func jsEqualBucket(v *jval) string {
	switch v.kind {
	case jString:
		return "s" + v.s
	case jBool:
		return strconv.FormatBool(v.b)
	case jNumber:
		if x := jsRat(v); x != nil {
			return "d" + jsRatHash(x)
		}
		return ""
	case jArray:
		k := "["
		for _, x := range v.arr {
			k += strconv.Quote(jsEqualBucket(x))
		}
		return k
	case jObject:
		return "o" + strconv.Itoa(len(v.keys))
	}
	return "n"
}

// jsRatHash is a hash of x's value (its normalised numerator and
// denominator), in time linear in their size: a number written with a
// large exponent is never printed in full.
func jsRatHash(x *big.Rat) string {
	h := fnv.New64a()
	var w [8]byte
	h.Write([]byte{byte(x.Sign() + 1)})
	for _, part := range []*big.Int{x.Num(), x.Denom()} {
		for _, word := range part.Bits() {
			binary.LittleEndian.PutUint64(w[:], uint64(word))
			h.Write(w[:])
		}
		h.Write([]byte{'/'})
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

func jsRat(v *jval) *big.Rat {
	if v == nil || v.kind != jNumber {
		return nil
	}
	r, ok := new(big.Rat).SetString(v.s)
	if !ok {
		return nil
	}
	return r
}

// jsQuote is s as a JSON string: '"', '\' and control characters
// escaped (short escapes where JSON has them, else \u00XX), the rest raw.
func jsQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if e, ok := jsEscape(r); ok {
			b.WriteString(e)
		} else {
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// jsEscape is the escape jsQuote writes for r, if r needs one.
func jsEscape(r rune) (string, bool) {
	switch r {
	case '"':
		return `\"`, true
	case '\\':
		return `\\`, true
	case '\b':
		return `\b`, true
	case '\f':
		return `\f`, true
	case '\n':
		return `\n`, true
	case '\r':
		return `\r`, true
	case '\t':
		return `\t`, true
	}
	if r < 0x20 {
		return fmt.Sprintf(`\u%04x`, r), true
	}
	return "", false
}

// ---- the compiler ----

// jsc compiles one schema. Errors are panics of *SchemaError, recovered
// by run.
type jsc struct {
	b      *Builder
	root   *jval
	size   int
	refs   map[string]int    // $ref → its rule
	shared map[string]int    // rules shared by name (json.value, ws, …)
	dfas   map[string]*jsDFA // compiled patterns
	strs   map[string]int    // string rules by their constraints
	digits map[string]int    // digit-range rules
	depth  int
	merges int
	work   [2]int // automata work left: subset constructions, minimisation

	// The documents of FromJSONSchemaDocs: their roots by key, and the key
	// of the document each of their $ref strings is in.
	docs  map[string]*jval
	docOf map[*jval]string
}

func newJSC(root *jval) *jsc {
	return &jsc{
		b: NewBuilder(), root: root,
		refs: map[string]int{}, shared: map[string]int{}, dfas: map[string]*jsDFA{},
		strs: map[string]int{}, digits: map[string]int{},
		work: [2]int{jsMaxDFAWork, jsMaxMinimizeWork},
	}
}

// fail stops the compilation: a bad value of keyword kw (or of the schema
// when kw is ""); SchemaError.Keyword stays empty, the message names kw.
func (c *jsc) fail(kw, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if kw != "" {
		msg = fmt.Sprintf("keyword %q: %s", kw, msg)
	}
	panic(&SchemaError{Path: path, Msg: msg})
}

// unsupported stops the compilation: keyword kw, or this use of it, is not
// supported (SchemaError.Keyword names it).
func (c *jsc) unsupported(kw, path, format string, args ...any) {
	panic(&SchemaError{Keyword: kw, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func jsTooLarge() *SchemaError {
	return &SchemaError{Msg: fmt.Sprintf("schema too large: its grammar would exceed %d elements", MaxSchemaGrammar)}
}

// alt adds an alternative, counting the grammar's size.
func (c *jsc) alt(r int, elems ...Elem) {
	c.size += len(elems) + 1
	if c.size > MaxSchemaGrammar {
		panic(jsTooLarge())
	}
	c.b.Alt(r, elems...)
}

func (c *jsc) fresh(prefix string) int {
	c.size++
	if c.size > MaxSchemaGrammar {
		panic(jsTooLarge())
	}
	return c.b.Fresh(prefix)
}

// named returns the shared rule name, building it with build the first
// time (the rule exists before build runs, so build may refer to it).
func (c *jsc) named(name string, build func(r int)) int {
	if r, ok := c.shared[name]; ok {
		return r
	}
	r := c.b.Rule(name)
	c.shared[name] = r
	build(r)
	return r
}

// run compiles with f (which returns the start rule, or -1 when no value
// is possible) and finishes the grammar: rules that can never finish and
// the alternatives using them are dropped, unreachable rules removed, and
// the result validated.
func (c *jsc) run(f func() int) (g *Grammar, err error) {
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(*SchemaError)
			if !ok {
				panic(r)
			}
			g, err = nil, se
		}
	}()
	start := f()
	if start < 0 {
		return nil, &SchemaError{Msg: "the schema admits no value"}
	}
	g = jsPrune(&c.b.g, start)
	if g == nil {
		return nil, &SchemaError{Msg: "the schema admits no finite value (every alternative recurses forever)"}
	}
	if g.Size() > MaxSchemaGrammar {
		return nil, jsTooLarge()
	}
	if err := g.Validate(); err != nil {
		return nil, &SchemaError{Msg: "a $ref cycle that consumes no input: " + err.Error()}
	}
	return g, nil
}

// jsPrune keeps the rules of g that can finish and are reachable from start
// through alternatives whose rules can all finish. It returns nil when
// start cannot finish.
func jsPrune(g *Grammar, start int) *Grammar {
	prod := finiteRules(g.Rules)
	okAlt := func(a Seq) bool {
		for _, e := range a {
			if e.Rule >= 0 && !prod[e.Rule] {
				return false
			}
		}
		return true
	}
	if !prod[start] {
		return nil
	}
	index := make([]int, len(g.Rules))
	for i := range index {
		index[i] = -1
	}
	order := []int{start}
	index[start] = 0
	for k := 0; k < len(order); k++ {
		for _, a := range g.Rules[order[k]].Alts {
			if !okAlt(a) {
				continue
			}
			for _, e := range a {
				if e.Rule >= 0 && index[e.Rule] < 0 {
					index[e.Rule] = len(order)
					order = append(order, e.Rule)
				}
			}
		}
	}
	out := &Grammar{Rules: make([]Rule, len(order))}
	for k, old := range order {
		r := g.Rules[old]
		nr := Rule{Name: r.Name}
		for _, a := range r.Alts {
			if !okAlt(a) {
				continue
			}
			na := make(Seq, len(a))
			for i, e := range a {
				if e.Rule >= 0 {
					e.Rule = index[e.Rule]
				}
				na[i] = e
			}
			nr.Alts = append(nr.Alts, na)
		}
		out.Rules[k] = nr
	}
	return out
}

// ---- keywords ----

var jsAnnotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true, "contentEncoding": true, "contentMediaType": true,
	"discriminator": true, "nullable": true,
}

var jsSupported = map[string]bool{
	"type": true, "enum": true, "const": true, "$ref": true, "anyOf": true, "oneOf": true, "allOf": true,
	"properties": true, "required": true, "additionalProperties": true,
	"items": true, "prefixItems": true, "minItems": true, "maxItems": true, "uniqueItems": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
}

func jsIgnored(k string) bool { return jsAnnotations[k] || strings.HasPrefix(k, "x-") }

func (c *jsc) checkKeywords(s *jval, path string) {
	for _, k := range s.keys {
		if !jsSupported[k] && !jsIgnored(k) {
			c.unsupported(k, path, "")
		}
		if k == "$id" && path != "" {
			c.unsupported(k, path, "only at the root")
		}
	}
}

// jsConstrains reports whether s has a keyword other than annotations and
// those in except.
func jsConstrains(s *jval, except ...string) bool {
	for _, k := range s.keys {
		if !jsIgnored(k) && !slices.Contains(except, k) {
			return true
		}
	}
	return false
}

// jsPtrEscape escapes a JSON pointer token.
func jsPtrEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// count reads a non-negative integer keyword (def when absent); values
// over 2^30 are taken as 2^30.
func (c *jsc) count(s *jval, kw, path string, def int) int {
	v := s.get(kw)
	if v == nil {
		return def
	}
	r := jsRat(v)
	if r == nil || !r.IsInt() || r.Sign() < 0 {
		c.fail(kw, path, "must be a non-negative integer")
	}
	if r.Cmp(big.NewRat(1<<30, 1)) > 0 {
		return 1 << 30
	}
	return int(r.Num().Int64())
}

// ---- types ----

const (
	jtNull = 1 << iota
	jtBool
	jtInt
	jtNum // any number (integers included)
	jtStr
	jtArr
	jtObj
	jtAll = jtNull | jtBool | jtInt | jtNum | jtStr | jtArr | jtObj
)

var jsTypeNames = []struct {
	name string
	bit  int
}{{"null", jtNull}, {"boolean", jtBool}, {"integer", jtInt}, {"number", jtNum}, {"string", jtStr}, {"array", jtArr}, {"object", jtObj}}

func jsTypeBit(name string) int {
	for _, t := range jsTypeNames {
		if t.name == name {
			return t.bit
		}
	}
	return 0
}

// explicitTypes is the set "type" names (0, false when absent).
func (c *jsc) explicitTypes(s *jval, path string) (int, bool) {
	t := s.get("type")
	if t == nil {
		return 0, false
	}
	var names []*jval
	switch t.kind {
	case jString:
		names = []*jval{t}
	case jArray:
		names = t.arr
	default:
		c.fail("type", path, "must be a type name or an array of them")
	}
	bits := 0
	for _, n := range names {
		if n.kind != jString || jsTypeBit(n.s) == 0 {
			c.fail("type", path, "unknown type %s", n)
		}
		bits |= jsTypeBit(n.s)
	}
	if bits&jtNum != 0 {
		bits |= jtInt
	}
	return bits, true
}

var jsTypeKeywords = []struct {
	bit int
	kws []string
}{
	{jtObj, []string{"properties", "required", "additionalProperties"}},
	{jtArr, []string{"items", "prefixItems", "minItems", "maxItems", "uniqueItems"}},
	{jtStr, []string{"pattern", "format", "minLength", "maxLength"}},
	{jtNum | jtInt, []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
}

// types is the set of types s allows: "type", or the types its keywords
// imply, or all.
func (c *jsc) types(s *jval, path string) int {
	if bits, ok := c.explicitTypes(s, path); ok {
		return bits
	}
	bits := 0
	for _, tk := range jsTypeKeywords {
		for _, k := range tk.kws {
			if s.get(k) != nil {
				bits |= tk.bit
			}
		}
	}
	if bits == 0 {
		return jtAll
	}
	return bits
}

// jsTypeOf is the type bits a JSON value has.
func jsTypeOf(v *jval) int {
	switch v.kind {
	case jNull:
		return jtNull
	case jBool:
		return jtBool
	case jString:
		return jtStr
	case jArray:
		return jtArr
	case jObject:
		return jtObj
	}
	if r := jsRat(v); r != nil && r.IsInt() {
		return jtInt | jtNum
	}
	return jtNum
}

// ---- schemas ----

// schema compiles s and returns its rule, or -1 when s admits no value.
func (c *jsc) schema(s *jval, path string) int {
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > jsMaxDepth {
		c.fail("", path, "schemas nested over %d levels (or a $ref cycle under allOf)", jsMaxDepth)
	}
	switch s.kind {
	case jBool:
		if s.b {
			return c.anyValue()
		}
		return -1
	case jObject:
	default:
		c.fail("", path, "a schema must be an object or a boolean, not %s", s)
	}
	c.checkKeywords(s, path)
	if ref := s.get("$ref"); ref != nil {
		if !jsConstrains(s, "$ref") {
			return c.ref(ref, path)
		}
		// The target merged with the siblings, once per (target,
		// siblings): a recursive target may come back with the same ones.
		key := "merge:" + c.refKey(ref) + "|" + s.without("$ref").String()
		if r, ok := c.refs[key]; ok {
			return r
		}
		target, doc, frag := c.resolve(ref, path)
		r := c.fresh("ref+")
		c.refs[key] = r
		if doc != c.docOf[ref] {
			path = frag
		}
		body := c.inDoc(doc, func() int { return c.schema(c.merge(target, s.without("$ref"), path), path) })
		if body >= 0 {
			c.alt(r, Ref(body))
		}
		return r
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		br := s.get(kw)
		if br == nil {
			continue
		}
		if br.kind != jArray || len(br.arr) == 0 {
			c.fail(kw, path, "must be a non-empty array of schemas")
		}
		rest := s.without(kw)
		r := c.fresh(kw)
		n := 0
		for i, b := range br.arr {
			sub := b
			if jsConstrains(rest) {
				sub = c.merge(rest, b, path)
			}
			if x := c.schema(sub, fmt.Sprintf("%s/%s/%d", path, kw, i)); x >= 0 {
				c.alt(r, Ref(x))
				n++
			}
		}
		if n == 0 {
			return -1
		}
		return r
	}
	if all := s.get("allOf"); all != nil {
		if all.kind != jArray || len(all.arr) == 0 {
			c.fail("allOf", path, "must be a non-empty array of schemas")
		}
		m := s.without("allOf")
		for _, b := range all.arr {
			m = c.merge(m, b, path)
		}
		return c.schema(m, path)
	}
	return c.base(s, path)
}

// ref compiles a $ref (once per target).
func (c *jsc) ref(v *jval, path string) int {
	if v.kind != jString {
		c.fail("$ref", path, "must be a string")
	}
	key := c.refKey(v)
	if r, ok := c.refs[key]; ok {
		return r
	}
	target, doc, frag := c.resolve(v, path)
	r := c.fresh("ref:" + v.s)
	c.refs[key] = r
	at := strings.TrimPrefix(v.s, "#")
	if doc != "" {
		at = frag
	}
	if body := c.inDoc(doc, func() int { return c.schema(target, at) }); body >= 0 {
		c.alt(r, Ref(body))
	}
	return r
}

// refKey names a $ref's target among the compiled ones: the same string
// means different schemas in different documents.
func (c *jsc) refKey(v *jval) string {
	if doc := c.docOf[v]; doc != "" {
		return doc + "#" + v.s
	}
	return v.s
}

// inDoc compiles with f a schema of document doc: an error from inside it
// that names no document names doc.
func (c *jsc) inDoc(doc string, f func() int) int {
	if doc == "" {
		return f()
	}
	defer func() {
		if r := recover(); r != nil {
			if se, ok := r.(*SchemaError); ok && se.Doc == "" {
				se.Doc = doc
			}
			panic(r)
		}
	}()
	return f()
}

// resolve finds the schema a local $ref points to, in the document of the
// $ref or, for a reference to another document (FromJSONSchemaDocs), in
// that one; it returns the document's key and the pointer within it.
func (c *jsc) resolve(v *jval, path string) (*jval, string, string) {
	if v.kind != jString {
		c.fail("$ref", path, "must be a string")
	}
	doc := c.docOf[v]
	root := c.root
	if doc != "" {
		root = c.docs[doc]
	}
	ref := v.s
	if id := root.get("$id"); id != nil && strings.HasPrefix(ref, id.s+"#") {
		ref = ref[len(id.s):]
	} else if base, frag, _ := strings.Cut(ref, "#"); c.docs[base] != nil {
		doc, root, ref = base, c.docs[base], "#"+frag
	}
	if !strings.HasPrefix(ref, "#") {
		c.unsupported("$ref", path, "%q: only local references (#, #/$defs/…) are supported", v.s)
	}
	frag := ref[1:]
	if strings.Contains(frag, "%") {
		var err error
		if frag, err = jsUnescapeFragment(frag); err != nil {
			c.fail("$ref", path, "%q: %v", v.s, err)
		}
	}
	node := root
	if frag == "" {
		return node, doc, ""
	}
	if !strings.HasPrefix(frag, "/") {
		c.unsupported("$ref", path, "%q: anchors are not supported, use a JSON pointer", v.s)
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var next *jval
		switch node.kind {
		case jObject:
			next = node.get(tok)
		case jArray:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(node.arr) {
				next = node.arr[i]
			}
		}
		if next == nil {
			c.fail("$ref", path, "%q: no such definition", v.s)
		}
		node = next
	}
	return node, doc, frag
}

func jsUnescapeFragment(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("bad %-escape")
		}
		x, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", errors.New("bad %-escape")
		}
		b.WriteByte(byte(x))
		i += 2
	}
	return b.String(), nil
}

// base compiles a schema without $ref or combinators.
func (c *jsc) base(s *jval, path string) int {
	types := c.types(s, path)
	if s.get("enum") != nil || s.get("const") != nil {
		return c.enum(s, types, path)
	}
	if types == jtAll {
		return c.anyValue()
	}
	var subs []int
	add := func(r int) {
		if r >= 0 {
			subs = append(subs, r)
		}
	}
	if types&jtNull != 0 {
		add(c.literal("null"))
	}
	if types&jtBool != 0 {
		add(c.boolean())
	}
	switch {
	case types&jtNum != 0:
		add(c.number(s, path))
	case types&jtInt != 0:
		add(c.integer(s, path))
	}
	if types&jtStr != 0 {
		add(c.str(s, path))
	}
	if types&jtArr != 0 {
		add(c.array(s, path))
	}
	if types&jtObj != 0 {
		add(c.object(s, path))
	}
	switch len(subs) {
	case 0:
		return -1
	case 1:
		return subs[0]
	}
	r := c.fresh("types")
	for _, x := range subs {
		c.alt(r, Ref(x))
	}
	return r
}

// enum compiles enum / const: their values (of the allowed types) as
// compact JSON literals.
func (c *jsc) enum(s *jval, types int, path string) int {
	var vals []*jval
	if e := s.get("enum"); e != nil {
		if e.kind != jArray {
			c.fail("enum", path, "must be an array")
		}
		vals = e.arr
	}
	if k := s.get("const"); k != nil {
		if s.get("enum") != nil && !slices.ContainsFunc(vals, func(v *jval) bool { return jsonEqual(v, k) }) {
			return -1
		}
		vals = []*jval{k}
	}
	r := c.fresh("enum")
	n := 0
	// Duplicates are found within buckets of values that may be equal, so
	// a long enum of distinct values costs linear time.
	seen := map[string][]*jval{}
	for _, v := range vals {
		if jsTypeOf(v)&types == 0 {
			continue
		}
		k := jsEqualBucket(v)
		if k != "" && slices.ContainsFunc(seen[k], func(x *jval) bool { return jsonEqual(x, v) }) {
			continue
		}
		seen[k] = append(seen[k], v)
		c.alt(r, Literal(v.String())...)
		n++
	}
	if n == 0 {
		return -1
	}
	return r
}

func (c *jsc) literal(s string) int {
	return c.named("lit:"+s, func(r int) { c.alt(r, Literal(s)...) })
}

func (c *jsc) boolean() int {
	return c.named("boolean", func(r int) {
		c.alt(r, Literal("true")...)
		c.alt(r, Literal("false")...)
	})
}

// ws is the optional single space after ':' and ','.
func (c *jsc) ws() int {
	return c.named("ws", func(r int) {
		c.alt(r, Bytes(Byte(' ')))
		c.alt(r)
	})
}

func (c *jsc) comma() []Elem { return []Elem{Bytes(Byte(',')), Ref(c.ws())} }

// anyValue is any JSON value.
func (c *jsc) anyValue() int {
	return c.named("value", func(r int) {
		c.alt(r, Ref(c.anyObject()))
		c.alt(r, Ref(c.anyArray()))
		c.alt(r, Ref(c.anyString()))
		c.alt(r, Ref(c.anyNumber()))
		c.alt(r, Literal("true")...)
		c.alt(r, Literal("false")...)
		c.alt(r, Literal("null")...)
	})
}

// anyObject is any JSON object:
//
//	object ::= '{' objA;  objA ::= '}' | member objB;  objB ::= '}' | ',' ws member objB
//	member ::= string ':' ws value
func (c *jsc) anyObject() int {
	return c.named("object", func(r int) {
		member := c.named("member", func(m int) {
			c.alt(m, Ref(c.anyString()), Bytes(Byte(':')), Ref(c.ws()), Ref(c.anyValue()))
		})
		b := c.named("object.more", func(b int) {
			c.alt(b, Bytes(Byte('}')))
			c.alt(b, append(c.comma(), Ref(member), Ref(b))...)
		})
		a := c.named("object.first", func(a int) {
			c.alt(a, Bytes(Byte('}')))
			c.alt(a, Ref(member), Ref(b))
		})
		c.alt(r, Bytes(Byte('{')), Ref(a))
	})
}

// anyArray is any JSON array.
func (c *jsc) anyArray() int {
	return c.named("array", func(r int) {
		b := c.named("array.more", func(b int) {
			c.alt(b, Bytes(Byte(']')))
			c.alt(b, append(c.comma(), Ref(c.anyValue()), Ref(b))...)
		})
		a := c.named("array.first", func(a int) {
			c.alt(a, Bytes(Byte(']')))
			c.alt(a, Ref(c.anyValue()), Ref(b))
		})
		c.alt(r, Bytes(Byte('[')), Ref(a))
	})
}

// ---- objects ----

type jsProp struct {
	name string
	rule int
	req  bool
}

// object compiles the object part of s (see the policy at the top).
func (c *jsc) object(s *jval, path string) int {
	props := s.get("properties")
	if props != nil && props.kind != jObject {
		c.fail("properties", path, "must be an object of schemas")
	}
	required := map[string]bool{}
	var reqOrder []string
	if rv := s.get("required"); rv != nil {
		if rv.kind != jArray {
			c.fail("required", path, "must be an array of strings")
		}
		for _, x := range rv.arr {
			if x.kind != jString {
				c.fail("required", path, "must be an array of strings")
			}
			if !required[x.s] {
				required[x.s] = true
				reqOrder = append(reqOrder, x.s)
			}
		}
	}
	ap := s.get("additionalProperties")
	if ap != nil && ap.kind != jBool && ap.kind != jObject {
		c.fail("additionalProperties", path, "must be a schema")
	}
	apFalse := ap != nil && ap.kind == jBool && !ap.b
	apRule := func() int { // the rule of an additional property's value
		if ap == nil || ap.kind == jBool {
			if apFalse {
				return -1
			}
			return c.anyValue()
		}
		return c.schema(ap, path+"/additionalProperties")
	}

	var ps []jsProp
	declared := map[string]bool{}
	var names []string
	if props != nil {
		for i, name := range props.keys {
			declared[name] = true
			names = append(names, name)
			r := c.schema(props.vals[i], path+"/properties/"+jsPtrEscape(name))
			if r < 0 {
				if required[name] {
					return -1
				}
				continue
			}
			ps = append(ps, jsProp{name, r, required[name]})
		}
	}
	for _, name := range reqOrder {
		if declared[name] {
			continue
		}
		r := apRule()
		if r < 0 {
			return -1
		}
		declared[name] = true
		names = append(names, name)
		ps = append(ps, jsProp{name, r, true})
	}
	extra := -1
	if ap != nil || props == nil {
		extra = apRule()
	}

	var more int // after the declared properties, with one written
	key := -1
	if extra >= 0 {
		key = c.keyExcept(names)
		more = c.fresh("obj.more")
		c.alt(more, Bytes(Byte('}')))
		c.alt(more, append(c.comma(), Ref(key), Bytes(Byte(':')), Ref(c.ws()), Ref(extra), Ref(more))...)
	}
	memo := map[[2]int]int{}
	var state func(i int, after bool) int
	state = func(i int, after bool) int {
		k := [2]int{i, 0}
		if after {
			k[1] = 1
		}
		if r, ok := memo[k]; ok {
			return r
		}
		if i == len(ps) && after && extra >= 0 {
			memo[k] = more
			return more
		}
		r := c.fresh("obj")
		memo[k] = r
		var sep []Elem
		if after {
			sep = c.comma()
		}
		if i == len(ps) {
			c.alt(r, Bytes(Byte('}')))
			if extra >= 0 {
				c.alt(r, append(sep, Ref(key), Bytes(Byte(':')), Ref(c.ws()), Ref(extra), Ref(more))...)
			}
			return r
		}
		p := ps[i]
		if !p.req {
			c.alt(r, Ref(state(i+1, after)))
		}
		kv := append(sep, Literal(jsQuote(p.name)+":")...)
		c.alt(r, append(kv, Ref(c.ws()), Ref(p.rule), Ref(state(i+1, true)))...)
		return r
	}
	r := c.fresh("object")
	c.alt(r, Bytes(Byte('{')), Ref(state(0, false)))
	return r
}

// ---- arrays ----

func (c *jsc) array(s *jval, path string) int {
	var prefix []*jval
	if p := s.get("prefixItems"); p != nil {
		if p.kind != jArray {
			c.fail("prefixItems", path, "must be an array of schemas")
		}
		prefix = p.arr
	}
	items := s.get("items")
	if items != nil && items.kind == jArray {
		c.unsupported("items", path, "an array of schemas (draft 7 tuples): use prefixItems")
	}
	lo := c.count(s, "minItems", path, 0)
	hi := c.count(s, "maxItems", path, -1)
	if u := s.get("uniqueItems"); u != nil {
		if u.kind != jBool {
			c.fail("uniqueItems", path, "must be a boolean")
		}
		if u.b && (hi < 0 || hi > 1) {
			c.unsupported("uniqueItems", path, "only false, or with maxItems ≤ 1")
		}
	}
	elems := make([]int, len(prefix))
	for i, p := range prefix {
		elems[i] = c.schema(p, fmt.Sprintf("%s/prefixItems/%d", path, i))
		if elems[i] < 0 {
			if hi < 0 || hi > i {
				hi = i
			}
			break
		}
	}
	itemRule := -2 // not compiled yet
	elem := func(i int) int {
		if i < len(prefix) {
			return elems[i]
		}
		if itemRule == -2 {
			if items == nil {
				itemRule = c.anyValue()
			} else {
				itemRule = c.schema(items, path+"/items")
			}
		}
		return itemRule
	}
	if (hi < 0 || hi > len(prefix)) && elem(len(prefix)) < 0 {
		hi = len(prefix)
	}
	if hi >= 0 && lo > hi {
		return -1
	}
	last := hi // the last state; with no maxItems it loops
	if hi < 0 {
		last = max(len(prefix), lo, 1)
	}
	states := make([]int, last+1)
	for i := range states {
		states[i] = c.fresh("arr")
	}
	for i, r := range states {
		if i >= lo {
			c.alt(r, Bytes(Byte(']')))
		}
		if hi >= 0 && i >= hi {
			continue
		}
		next := i + 1
		if i == last {
			next = i
		}
		var seq []Elem
		if i > 0 {
			seq = c.comma()
		}
		c.alt(r, append(seq, Ref(elem(i)), Ref(states[next]))...)
	}
	r := c.fresh("array")
	c.alt(r, Bytes(Byte('[')), Ref(states[0]))
	return r
}

// ---- merging (allOf, keywords beside $ref / anyOf / oneOf) ----

var (
	jsLowerBounds = map[string]bool{"minimum": true, "exclusiveMinimum": true, "minLength": true, "minItems": true}
	jsUpperBounds = map[string]bool{"maximum": true, "exclusiveMaximum": true, "maxLength": true, "maxItems": true}
)

// merge is one schema that accepts what both a and b accept (for the
// keywords it can combine; others conflicting are refused).
func (c *jsc) merge(a, b *jval, path string) *jval {
	c.merges++
	if c.merges > jsMaxMerges {
		c.fail("allOf", path, "too many merges (a $ref cycle under allOf?)")
	}
	switch {
	case a.kind == jBool && a.b:
		return b
	case b.kind == jBool && b.b:
		return a
	case a.kind == jBool || b.kind == jBool:
		return jFalse
	case a.kind != jObject:
		c.fail("", path, "a schema must be an object or a boolean")
	case b.kind != jObject:
		c.fail("", path, "a schema must be an object or a boolean")
	}
	c.checkKeywords(b, path)
	out := a.without()
	for i, k := range b.keys {
		v := b.vals[i]
		if k == "properties" || k == "additionalProperties" {
			continue
		}
		av := out.get(k)
		if av == nil {
			out = out.with(k, v)
			continue
		}
		if jsIgnored(k) || jsonEqual(av, v) {
			continue
		}
		switch {
		case k == "type":
			ta, _ := c.explicitTypes(a, path)
			tb, _ := c.explicitTypes(b, path)
			t := ta & tb
			if t&jtNum != 0 && t&jtInt == 0 {
				t &^= jtNum
			}
			var names []*jval
			for _, tn := range jsTypeNames {
				if t&tn.bit != 0 && (tn.bit != jtInt || t&jtNum == 0) {
					names = append(names, &jval{kind: jString, s: tn.name})
				}
			}
			if len(names) == 0 {
				return jFalse
			}
			out = out.with(k, &jval{kind: jArray, arr: names})
		case k == "required":
			u := &jval{kind: jArray, arr: slices.Clone(av.arr)}
			for _, x := range v.arr {
				if !slices.ContainsFunc(u.arr, func(y *jval) bool { return jsonEqual(x, y) }) {
					u.arr = append(u.arr, x)
				}
			}
			out = out.with(k, u)
		case jsLowerBounds[k] || jsUpperBounds[k]:
			x, y := jsRat(av), jsRat(v)
			if x == nil || y == nil {
				c.fail(k, path, "must be a number")
			}
			if (x.Cmp(y) < 0) == jsLowerBounds[k] {
				out = out.with(k, v)
			}
		case k == "enum":
			var keep []*jval
			for _, x := range av.arr {
				if slices.ContainsFunc(v.arr, func(y *jval) bool { return jsonEqual(x, y) }) {
					keep = append(keep, x)
				}
			}
			out = out.with(k, &jval{kind: jArray, arr: keep})
		case k == "const":
			return jFalse
		case k == "items":
			out = out.with(k, jsAllOf(av, v))
		case k == "$ref" || k == "anyOf" || k == "oneOf":
			out = out.with("allOf", jsAppendAllOf(out.get("allOf"), &jval{kind: jObject, keys: []string{k}, vals: []*jval{v}}))
		case k == "allOf":
			out = out.with(k, &jval{kind: jArray, arr: append(slices.Clone(av.arr), v.arr...)})
		default:
			c.unsupported(k, path, "cannot combine two different values (%s and %s) under allOf", av, v)
		}
	}
	return c.mergeObject(a, b, out, path)
}

func jsAllOf(x, y *jval) *jval {
	return &jval{kind: jObject, keys: []string{"allOf"}, vals: []*jval{{kind: jArray, arr: []*jval{x, y}}}}
}

func jsAppendAllOf(list, x *jval) *jval {
	if list == nil {
		return &jval{kind: jArray, arr: []*jval{x}}
	}
	return &jval{kind: jArray, arr: append(slices.Clone(list.arr), x)}
}

// mergeObject merges properties and additionalProperties: a key allowed
// by one side only through its additionalProperties takes that schema too,
// and additionalProperties false on one side drops the other's extra keys.
func (c *jsc) mergeObject(a, b, out *jval, path string) *jval {
	pa, pb := a.get("properties"), b.get("properties")
	xa, xb := a.get("additionalProperties"), b.get("additionalProperties")
	if pb == nil && xb == nil {
		return out
	}
	if pa == nil && xa == nil {
		if pb != nil {
			out = out.with("properties", pb)
		}
		if xb != nil {
			out = out.with("additionalProperties", xb)
		}
		return out
	}
	for _, p := range []*jval{pa, pb} {
		if p != nil && p.kind != jObject {
			c.fail("properties", path, "must be an object of schemas")
		}
	}
	props := &jval{kind: jObject}
	add := func(name string) {
		if props.get(name) != nil {
			return
		}
		var parts []*jval
		for _, side := range []struct{ p, x *jval }{{pa, xa}, {pb, xb}} {
			switch {
			case side.p.get(name) != nil:
				parts = append(parts, side.p.get(name))
			case side.x != nil:
				parts = append(parts, side.x)
			}
		}
		s := parts[0]
		for _, q := range parts[1:] {
			s = jsAllOf(s, q)
		}
		props = props.with(name, s)
	}
	for _, p := range []*jval{pa, pb} {
		if p != nil {
			for _, name := range p.keys {
				add(name)
			}
		}
	}
	out = out.with("properties", props)
	switch {
	case xa == nil || (xa.kind == jBool && xa.b):
		if xb != nil {
			out = out.with("additionalProperties", xb)
		}
	case xb == nil || (xb.kind == jBool && xb.b):
		out = out.with("additionalProperties", xa)
	case (xa.kind == jBool) || (xb.kind == jBool):
		out = out.with("additionalProperties", jFalse)
	default:
		out = out.with("additionalProperties", jsAllOf(xa, xb))
	}
	return out
}
