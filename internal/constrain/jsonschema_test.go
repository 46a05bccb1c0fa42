package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ---- helpers: random derivations and a recognizer ----

// jsGen expands a grammar with random choices; past maxDepth it takes,
// for each rule, the alternative that finishes soonest.
type jsGen struct {
	g        *Grammar
	best     []int // per rule, the alternative of least cost
	rng      *rand.Rand
	maxDepth int
	out      []byte
}

func newJSGen(t testing.TB, g *Grammar, seed uint64) *jsGen {
	const inf = 1 << 30
	cost := make([]int, len(g.Rules))
	best := make([]int, len(g.Rules))
	for i := range cost {
		cost[i] = inf
	}
	for changed := true; changed; {
		changed = false
		for i, r := range g.Rules {
			for ai, a := range r.Alts {
				c := 1
				for _, e := range a {
					if e.Rule < 0 {
						c++
					} else {
						c += cost[e.Rule]
					}
				}
				if c < cost[i] {
					cost[i], best[i], changed = c, ai, true
				}
			}
		}
	}
	for i, c := range cost {
		if c >= inf {
			t.Fatalf("rule %s can never finish", g.Rules[i].Name)
		}
	}
	return &jsGen{g: g, best: best, rng: rand.New(rand.NewPCG(seed, 7)), maxDepth: 40}
}

func (x *jsGen) text() []byte {
	x.out = x.out[:0]
	x.expand(x.g.Start, 0)
	return slices.Clone(x.out)
}

func (x *jsGen) expand(r, depth int) {
	alts := x.g.Rules[r].Alts
	a := alts[x.best[r]]
	if depth < x.maxDepth {
		a = alts[x.rng.IntN(len(alts))]
	}
	for _, e := range a {
		if e.Rule >= 0 {
			x.expand(e.Rule, depth+1)
			continue
		}
		n := 0
		for _, w := range e.Set {
			n += bits.OnesCount64(w)
		}
		k := x.rng.IntN(n)
		for b := range 256 {
			if e.Set.Has(byte(b)) {
				if k == 0 {
					x.out = append(x.out, byte(b))
					break
				}
				k--
			}
		}
	}
}

// jsDerives reports whether g derives text (all derivations, memoised by
// rule and position; g has no left recursion).
func jsDerives(g *Grammar, text string) bool {
	type key struct{ r, pos int }
	memo := map[key][]int{}
	var ruleEnds func(r, pos int) []int
	var seqEnds func(s Seq, i, pos int) []int
	ruleEnds = func(r, pos int) []int {
		k := key{r, pos}
		if v, ok := memo[k]; ok {
			return v
		}
		memo[k] = nil
		var out []int
		for _, a := range g.Rules[r].Alts {
			for _, p := range seqEnds(a, 0, pos) {
				if !slices.Contains(out, p) {
					out = append(out, p)
				}
			}
		}
		memo[k] = out
		return out
	}
	seqEnds = func(s Seq, i, pos int) []int {
		if i == len(s) {
			return []int{pos}
		}
		e := s[i]
		if e.Rule < 0 {
			if pos < len(text) && e.Set.Has(text[pos]) {
				return seqEnds(s, i+1, pos+1)
			}
			return nil
		}
		var out []int
		for _, p := range ruleEnds(e.Rule, pos) {
			for _, q := range seqEnds(s, i+1, p) {
				if !slices.Contains(out, q) {
					out = append(out, q)
				}
			}
		}
		return out
	}
	return slices.Contains(ruleEnds(g.Start, 0), len(text))
}

func jsCompileValidator(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("validator: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("mem:///schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem:///schema.json")
	if err != nil {
		t.Fatalf("validator: %v", err)
	}
	return sch
}

func jsValidate(sch *jsonschema.Schema, text []byte) error {
	if !json.Valid(text) {
		return errors.New("not JSON")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// ---- the schema table ----

var jsonSchemaTable = []struct {
	name   string
	schema string
	yes    []string // must be derivable (and valid)
	no     []string // must not be derivable
}{
	{
		name:   "object required additionalProperties false",
		schema: `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false}`,
		yes:    []string{`{"name":"Ann","age":42}`, `{"name": "Ann", "age": 0}`, `{"name":"\u00e9\n","age":150}`},
		no: []string{`{"name":"Ann"}`, `{"age":42,"name":"Ann"}`, `{"name":"Ann","age":151}`, `{"name":"Ann","age":42,"x":1}`,
			`{"name":"Ann",  "age":42}`, `{ "name":"Ann","age":42}`, `{"name" :"Ann","age":42}`, `{"name":"Ann","age":042}`, `{"name":"Ann","age":-1}`},
	},
	{
		name:   "optional properties in order",
		schema: `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"boolean"}},"required":["b"]}`,
		yes:    []string{`{"b":1}`, `{"a":"x","b":1,"c":true}`, `{"b":-5, "c":false}`},
		no:     []string{`{}`, `{"a":"x"}`, `{"b":1,"d":2}`, `{"b":1,}`},
	},
	{
		name:   "additionalProperties true",
		schema: `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":true}`,
		yes:    []string{`{"id":1,"extra":[1,2]}`, `{"id":1}`, `{"id":1, "i":{}, "idx":null}`},
		no:     []string{`{"id":1,"id":2}`, `{"x":1}`},
	},
	{
		name:   "additionalProperties schema",
		schema: `{"type":"object","additionalProperties":{"type":"number","minimum":-10,"maximum":10}}`,
		yes:    []string{`{}`, `{"a":1.5,"b":-2}`, `{"a":10}`},
		no:     []string{`{"a":"x"}`, `{"a":10.5}`, `{"a":1, "b":11}`},
	},
	{
		name:   "any object",
		schema: `{"type":"object"}`,
		yes:    []string{`{"a":{"b":[null, 1e5, -0.25, "😀\u00e9"]}}`, `{}`},
		no:     []string{`[]`, `{"a":1}x`, `{"a":"\ud800"}`},
	},
	{
		name:   "array items minItems maxItems",
		schema: `{"type":"array","items":{"type":"string","maxLength":5},"minItems":1,"maxItems":3}`,
		yes:    []string{`["a","b"]`, `["abcde"]`, `["", "é€😀", "x"]`},
		no:     []string{`[]`, `["a","b","c","d"]`, `["abcdef"]`, `[1]`},
	},
	{
		name:   "prefixItems tuple",
		schema: `{"type":"array","prefixItems":[{"type":"integer"},{"type":"string","enum":["x","y"]}],"items":false}`,
		yes:    []string{`[1,"x"]`, `[1]`, `[]`},
		no:     []string{`[1,"x",2]`, `["x"]`, `[1,"z"]`},
	},
	{
		name:   "string enum",
		schema: `{"type":"string","enum":["red","green","blue",7]}`,
		yes:    []string{`"red"`, `"blue"`},
		no:     []string{`"yellow"`, `7`, `"Red"`},
	},
	{
		name:   "enum of any values",
		schema: `{"enum":[1,"two",null,true,{"a":[1,2]},[3,"\"q\""],2.5]}`,
		yes:    []string{`1`, `"two"`, `null`, `true`, `{"a":[1,2]}`, `[3,"\"q\""]`, `2.5`},
		no:     []string{`false`, `{"a":[1, 2]}`, `3`},
	},
	{
		name:   "const object",
		schema: `{"type":"object","properties":{"v":{"const":{"x":"y"}},"k":{"const":"fixed"}},"required":["v","k"],"additionalProperties":false}`,
		yes:    []string{`{"v":{"x":"y"},"k":"fixed"}`},
		no:     []string{`{"v":{"x":"z"},"k":"fixed"}`},
	},
	{
		name:   "anchored pattern",
		schema: `{"type":"string","pattern":"^[A-Z]{2}-\\d{3,5}$"}`,
		yes:    []string{`"AB-123"`, `"ZZ-12345"`},
		no:     []string{`"AB-12"`, `"ab-123"`, `"AB-123456"`, `"xAB-123"`},
	},
	{
		name:   "unanchored pattern with maxLength",
		schema: `{"type":"string","pattern":"ab+c","maxLength":8}`,
		yes:    []string{`"abc"`, `"xxabbcyy"`, `"\nabc"`},
		no:     []string{`"ac"`, `"xxxxxabbc"`, `"abd"`},
	},
	{
		name:   "pattern with characters that need escapes",
		schema: `{"type":"string","pattern":"^[\"\\\\\\n a\u00e9]{1,4}$"}`,
		yes:    []string{`"\"\\"`, `"a\n"`, `"\u000a"`, `"é a"`},
		no:     []string{`""`, `"b"`, `"aaaaa"`},
	},
	{
		name:   "case-insensitive unicode pattern",
		schema: `{"type":"string","pattern":"(?i)^straße-[α-ω]+$"}`,
		yes:    []string{`"STRAßE-Αβ"`, `"straße-ω"`, `"StraßE-Ωα"`},
		no:     []string{`"strasse-"`, `"straße-a"`},
	},
	{
		name: "formats date date-time uuid time",
		schema: `{"type":"object","properties":{"d":{"type":"string","format":"date"},"dt":{"type":"string","format":"date-time"},` +
			`"u":{"type":"string","format":"uuid"},"t":{"type":"string","format":"time"}},"required":["d","dt","u","t"],"additionalProperties":false}`,
		yes: []string{`{"d":"2024-02-29","dt":"2023-12-31T23:59:59.123Z","u":"123e4567-e89b-12d3-a456-426614174000","t":"08:30:00+02:00"}`},
		no: []string{
			`{"d":"2023-02-29","dt":"2023-12-31T23:59:59Z","u":"123e4567-e89b-12d3-a456-426614174000","t":"08:30:00Z"}`,
			`{"d":"2023-04-31","dt":"2023-12-31T23:59:59Z","u":"123e4567-e89b-12d3-a456-426614174000","t":"08:30:00Z"}`,
			`{"d":"2023-01-01","dt":"2023-12-31 23:59:59Z","u":"123e4567-e89b-12d3-a456-426614174000","t":"08:30:00Z"}`,
			`{"d":"2023-01-01","dt":"2023-12-31T23:59:59Z","u":"123e4567e89b12d3a456426614174000","t":"08:30:00Z"}`,
		},
	},
	{
		name: "formats email ipv4 hostname uri",
		schema: `{"type":"object","properties":{"e":{"type":"string","format":"email"},"ip":{"type":"string","format":"ipv4"},` +
			`"h":{"type":"string","format":"hostname"},"u":{"type":"string","format":"uri"}},"required":["e","ip","h","u"]}`,
		yes: []string{`{"e":"a.b@example.com","ip":"192.168.0.255","h":"my-host.local","u":"https://example.com/a/b.html"}`},
		no:  []string{`{"e":"a@b","ip":"192.168.0.255","h":"x","u":"https://x"}`, `{"e":"a@b.c","ip":"256.1.1.1","h":"x","u":"https://x"}`},
	},
	{
		name:   "integer range across zero",
		schema: `{"type":"integer","minimum":-37,"maximum":1234}`,
		yes:    []string{`-37`, `0`, `-0`, `1234`, `999`},
		no:     []string{`-38`, `1235`, `01`, `1.0`, `+1`},
	},
	{
		name:   "integer exclusive bounds",
		schema: `{"type":"integer","exclusiveMinimum":-5.5,"exclusiveMaximum":20}`,
		yes:    []string{`-5`, `19`},
		no:     []string{`-6`, `20`},
	},
	{
		name:   "number exclusiveMinimum 0 maximum 1",
		schema: `{"type":"number","exclusiveMinimum":0,"maximum":1}`,
		yes:    []string{`0.5`, `1.0`, `1`, `0.1234`},
		no:     []string{`0`, `0.0`, `1.5`, `1.01`, `-0.5`},
	},
	{
		name:   "number with decimal bounds",
		schema: `{"type":"number","minimum":-2.5,"maximum":3.75}`,
		yes:    []string{`-2.5`, `-2.50`, `-2.49`, `3`, `1.234`, `3.75`, `0.00`, `-0.001`},
		no:     []string{`-2.51`, `3.76`, `3.751`, `4`},
	},
	{
		name:   "type arrays",
		schema: `{"type":"object","properties":{"s":{"type":["string","null"]},"n":{"type":["integer","boolean"]},"x":{"type":["number","integer"],"minimum":0}},"required":["s","n","x"]}`,
		yes:    []string{`{"s":null,"n":true,"x":0.5}`, `{"s":"a","n":-3,"x":7}`},
		no:     []string{`{"s":1,"n":true,"x":1}`, `{"s":null,"n":null,"x":1}`, `{"s":null,"n":1,"x":-1}`},
	},
	{
		name:   "anyOf",
		schema: `{"anyOf":[{"type":"string","maxLength":3},{"type":"integer","minimum":10},{"type":"null"}]}`,
		yes:    []string{`"abc"`, `10`, `null`},
		no:     []string{`"abcd"`, `9`, `true`},
	},
	{
		name: "oneOf discriminated union",
		schema: `{"oneOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number","minimum":0}},"required":["kind","r"],"additionalProperties":false},` +
			`{"type":"object","properties":{"kind":{"const":"rect"},"w":{"type":"integer"},"h":{"type":"integer"}},"required":["kind","w","h"],"additionalProperties":false}],"discriminator":{"propertyName":"kind"}}`,
		yes: []string{`{"kind":"circle","r":1.5}`, `{"kind":"rect","w":1,"h":2}`},
		no:  []string{`{"kind":"circle","w":1,"h":2}`},
	},
	{
		name: "$ref $defs",
		schema: `{"$defs":{"addr":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"^\\d{5}$"}},"required":["city","zip"]}},` +
			`"type":"object","properties":{"home":{"$ref":"#/$defs/addr"},"work":{"$ref":"#/$defs/addr","description":"office"}},"required":["home"]}`,
		yes: []string{`{"home":{"city":"Paris","zip":"75001"}}`, `{"home":{"city":"A","zip":"00000"},"work":{"city":"B","zip":"12345"}}`},
		no:  []string{`{"home":{"city":"Paris","zip":"7500"}}`},
	},
	{
		name: "recursive $ref tree",
		schema: `{"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3}},` +
			`"required":["value"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
		yes: []string{`{"value":1}`, `{"value":1,"children":[{"value":2,"children":[]},{"value":3}]}`},
		no:  []string{`{"value":1,"children":[{}]}`, `{"value":1,"children":[{"value":1},{"value":1},{"value":1},{"value":1}]}`},
	},
	{
		name:   "recursive $ref to the root (linked list)",
		schema: `{"type":"object","properties":{"v":{"type":"string"},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}`,
		yes:    []string{`{"v":"a","next":{"v":"b","next":null}}`},
		no:     []string{`{"v":"a","next":{"v":"b"}}`},
	},
	{
		name:   "recursive $ref with sibling keywords",
		schema: `{"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/n","required":["v"]}}}},"$ref":"#/$defs/n"}`,
		yes:    []string{`{}`, `{"v":1,"next":{"v":2,"next":{"v":3}}}`},
		no:     []string{`{"next":{}}`},
	},
	{
		name:   "allOf merge",
		schema: `{"allOf":[{"type":"object","properties":{"a":{"type":"integer","minimum":0}},"required":["a"]},{"properties":{"a":{"maximum":5},"b":{"type":"string"}},"required":["b"]}]}`,
		yes:    []string{`{"a":5,"b":""}`},
		no:     []string{`{"a":6,"b":""}`, `{"a":1}`},
	},
	{
		name: "pydantic style",
		schema: `{"$defs":{"Color":{"enum":["red","green"],"title":"Color","type":"string"},"Item":{"properties":{"name":{"title":"Name","type":"string"},` +
			`"price":{"anyOf":[{"type":"number","minimum":0},{"type":"null"}],"default":null,"title":"Price"}},"required":["name"],"title":"Item","type":"object"}},` +
			`"properties":{"color":{"$ref":"#/$defs/Color"},"items":{"items":{"$ref":"#/$defs/Item"},"title":"Items","type":"array"},` +
			`"tags":{"items":{"type":"string"},"type":"array","uniqueItems":false},"when":{"format":"date-time","type":"string"}},` +
			`"required":["color","items","when"],"title":"Order","type":"object"}`,
		yes: []string{`{"color":"red","items":[{"name":"x","price":null}],"when":"2020-01-01T00:00:00Z"}`},
		no:  []string{`{"color":"blue","items":[],"when":"2020-01-01T00:00:00Z"}`},
	},
	{
		name:   "strings with length",
		schema: `{"type":"array","prefixItems":[{"type":"string","minLength":2,"maxLength":4},{"type":"string","minLength":3}],"minItems":2,"items":false}`,
		yes:    []string{`["ab","abc"]`, `["\u00e9\t","😀😀😀😀"]`, `["abcd","abcdefgh"]`},
		no:     []string{`["a","abc"]`, `["abcde","abc"]`, `["ab","ab"]`},
	},
	{
		name:   "types implied by keywords",
		schema: `{"properties":{"x":{"minimum":5,"maximum":7},"y":{"maxLength":2},"z":{"items":{"type":"null"}}},"required":["x","y","z"]}`,
		yes:    []string{`{"x":5,"y":"ab","z":[null]}`, `{"x":6.5,"y":"","z":[]}`},
		no:     []string{`{"x":8,"y":"ab","z":[]}`},
	},
	{
		name:   "nested arrays of numbers",
		schema: `{"type":"array","items":{"type":"array","items":{"type":"number"},"maxItems":2}}`,
		yes:    []string{`[[1.5e3,-0.0],[],[12345678]]`},
		no:     []string{`[[1,2,3]]`, `[[1e1234]]`},
	},
	{
		name:   "required names not declared",
		schema: `{"type":"object","required":["a","b"],"additionalProperties":{"type":"integer"}}`,
		yes:    []string{`{"a":1,"b":2}`, `{"a":1,"b":2,"c":3}`},
		no:     []string{`{"a":1}`, `{"a":1,"b":"x"}`, `{"b":1,"a":2}`},
	},
	{
		name:   "odd property names and extras",
		schema: `{"type":"object","properties":{"we\"ird":{"type":"null"},"ü":{"type":"boolean"}},"required":["we\"ird","ü"],"additionalProperties":{"type":"boolean"}}`,
		yes:    []string{`{"we\"ird":null,"ü":true}`, `{"we\"ird":null,"ü":true,"üü":false}`},
		no:     []string{`{"we\"ird":null,"ü":true,"ü":false}`},
	},
	{
		name:   "boolean schemas",
		schema: `{"type":"object","properties":{"any":true,"never":false},"required":["any"]}`,
		yes:    []string{`{"any":[true]}`},
		no:     []string{`{"any":1,"never":1}`},
	},
}

func TestJSONSchemaTable(t *testing.T) {
	if len(jsonSchemaTable) < 20 {
		t.Fatalf("%d schemas, want at least 20", len(jsonSchemaTable))
	}
	for i, tc := range jsonSchemaTable {
		t.Run(tc.name, func(t *testing.T) {
			g, err := FromJSONSchema([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Validate(); err != nil {
				t.Fatal(err)
			}
			sch := jsCompileValidator(t, tc.schema)
			gen := newJSGen(t, g, uint64(i))
			distinct := map[string]bool{}
			for range 200 {
				text := gen.text()
				distinct[string(text)] = true
				if !utf8.Valid(text) {
					t.Fatalf("invalid UTF-8: %q", text)
				}
				if err := jsValidate(sch, text); err != nil {
					t.Fatalf("generated %s: %v", text, err)
				}
				if !jsDerives(g, string(text)) {
					t.Fatalf("recognizer refuses generated %s", text)
				}
			}
			for _, y := range tc.yes {
				if err := jsValidate(sch, []byte(y)); err != nil {
					t.Errorf("bad test: %s does not validate: %v", y, err)
				}
				if !jsDerives(g, y) {
					t.Errorf("%s: not derivable", y)
				}
			}
			for _, n := range tc.no {
				if jsDerives(g, n) {
					t.Errorf("%s: derivable", n)
				}
			}
			t.Logf("%d rules, size %d, %d distinct texts of 200", len(g.Rules), g.Size(), len(distinct))
		})
	}
}

func TestJSONObject(t *testing.T) {
	g := JSONObject()
	sch := jsCompileValidator(t, `{"type":"object"}`)
	gen := newJSGen(t, g, 1)
	for range 300 {
		text := gen.text()
		if err := jsValidate(sch, text); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
	}
	for _, y := range []string{`{}`, `{"a": [1, {"b": null}], "c": "\u00e9\n", "d": -1.5E+3}`, `{"":true,"x":false}`} {
		if !jsDerives(g, y) {
			t.Errorf("%s: not derivable", y)
		}
	}
	for _, n := range []string{`[]`, `"x"`, `{"a":1,}`, `{"a":01}`, `{"a":1 }`, "{\n}", `{"a":"\x01"}`, `{"a":"\ud800"}`, `{'a':1}`} {
		if jsDerives(g, n) {
			t.Errorf("%s: derivable", n)
		}
	}
}

// Integer bounds are exact: every integer in a window derives iff it is
// in range.
func TestJSONSchemaIntegerRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 40 {
		lo := rng.IntN(4000) - 2000
		hi := lo + rng.IntN(3000)
		excl := rng.IntN(2) == 0
		var schema string
		if excl {
			schema = fmt.Sprintf(`{"type":"integer","exclusiveMinimum":%d,"exclusiveMaximum":%d}`, lo, hi)
		} else {
			schema = fmt.Sprintf(`{"type":"integer","minimum":%d,"maximum":%d}`, lo, hi)
		}
		g, err := FromJSONSchema([]byte(schema))
		if err != nil {
			if excl && hi-lo < 2 && strings.Contains(err.Error(), "no value") {
				continue
			}
			t.Fatalf("%s: %v", schema, err)
		}
		for n := lo - 50; n <= hi+50; n++ {
			in := n >= lo && n <= hi
			if excl {
				in = n > lo && n < hi
			}
			if got := jsDerives(g, strconv.Itoa(n)); got != in {
				t.Fatalf("%s: %d derivable %v", schema, n, got)
			}
		}
	}
	// One-sided bounds.
	g, err := FromJSONSchema([]byte(`{"type":"integer","minimum":-3}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s  string
		ok bool
	}{{"-3", true}, {"-4", false}, {"999999999999999", true}, {"1000000000000000", false}, {"-30", false}} {
		if jsDerives(g, c.s) != c.ok {
			t.Errorf("minimum -3: %s derivable %v", c.s, !c.ok)
		}
	}
	g, err = FromJSONSchema([]byte(`{"type":"integer","exclusiveMaximum":-100}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s  string
		ok bool
	}{{"-101", true}, {"-100", false}, {"-99", false}, {"5", false}, {"-123456789", true}} {
		if jsDerives(g, c.s) != c.ok {
			t.Errorf("exclusiveMaximum -100: %s derivable %v", c.s, !c.ok)
		}
	}
}

// Number bounds: whatever derives is in range, and the bounds themselves
// (when inclusive and within 3 decimals) derive.
func TestJSONSchemaNumberRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 40 {
		a := float64(rng.IntN(20000)-10000) / 1000
		b := a + float64(rng.IntN(5000))/100
		kwLo, kwHi := "minimum", "maximum"
		if rng.IntN(3) == 0 {
			kwLo = "exclusiveMinimum"
		}
		if rng.IntN(3) == 0 {
			kwHi = "exclusiveMaximum"
		}
		as, bs := strconv.FormatFloat(a, 'f', -1, 64), strconv.FormatFloat(b, 'f', -1, 64)
		schema := fmt.Sprintf(`{"type":"number","%s":%s,"%s":%s}`, kwLo, as, kwHi, bs)
		g, err := FromJSONSchema([]byte(schema))
		if err != nil {
			if strings.Contains(err.Error(), "no value") && b-a < 0.01 {
				continue
			}
			t.Fatalf("%s: %v", schema, err)
		}
		sch := jsCompileValidator(t, schema)
		gen := newJSGen(t, g, uint64(i))
		for range 100 {
			text := gen.text()
			if err := jsValidate(sch, text); err != nil {
				t.Fatalf("%s: %s: %v", schema, text, err)
			}
		}
		if kwLo == "minimum" && !jsDerives(g, as) && !jsDerives(g, as+".0") {
			t.Errorf("%s: minimum %s not derivable", schema, as)
		}
	}
}

// Patterns: a string derives iff Go's regexp matches it.
func TestJSONSchemaPatterns(t *testing.T) {
	patterns := []string{`^a+b?$`, `ab`, `^(ab|ba)*$`, `^x`, `y$`, `^$`, `^[^a]{2}$`, `(a|b)*c`, `^.{1,3}$`, `^(?:a*)*b$`,
		`^\d+(\.\d+)?$`, `^[a-c]+\n?$`, `^(a|$)`, `^\p{Greek}+$`, `(?i)^ab$`, `^(a?){3}a{3}$`}
	alphabet := []string{"a", "b", "c", "x", "y", ".", "1", "\n", "\"", "\\", "α", "é", "😀"}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, p := range patterns {
		schema, _ := json.Marshal(map[string]string{"type": "string", "pattern": p})
		g, err := FromJSONSchema(schema)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		re := regexp.MustCompile(p)
		for range 2000 {
			var b strings.Builder
			for range rng.IntN(7) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			s := b.String()
			if got, want := jsDerives(g, jsQuote(s)), re.MatchString(s); got != want {
				t.Fatalf("pattern %q, string %q: derivable %v, matches %v", p, s, got, want)
			}
		}
	}
}

func TestJSONSchemaUTF8Seqs(t *testing.T) {
	seqs := jsUTF8Seqs(0, 0x10ffff, nil)
	match := func(b []byte) int {
		n := 0
		for _, s := range seqs {
			if len(s) == len(b) {
				ok := true
				for i := range b {
					ok = ok && s[i].Has(b[i])
				}
				if ok {
					n++
				}
			}
		}
		return n
	}
	var buf [4]byte
	for r := rune(0); r <= 0x10ffff; r += 1 + rune(r/4096) {
		n := utf8.EncodeRune(buf[:], r)
		want := 1
		if r >= 0xd800 && r <= 0xdfff {
			// EncodeRune refuses surrogates: encode by hand.
			buf[0], buf[1], buf[2] = 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f
			n, want = 3, 0
		}
		if got := match(buf[:n]); got != want {
			t.Fatalf("%U: %d sequences match", r, got)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		s := seqs[rng.IntN(len(seqs))]
		var b []byte
		for _, set := range s {
			var opts []byte
			for x := range 256 {
				if set.Has(byte(x)) {
					opts = append(opts, byte(x))
				}
			}
			b = append(b, opts[rng.IntN(len(opts))])
		}
		if r, n := utf8.DecodeRune(b); r == utf8.RuneError || n != len(b) {
			t.Fatalf("% x is not one valid code point", b)
		}
	}
}

func TestJSONSchemaErrors(t *testing.T) {
	for _, c := range []struct {
		schema  string
		keyword string
		msg     string
	}{
		{``, "", "invalid JSON"},
		{`{"type":`, "", "invalid JSON"},
		{`{"type":"object"} x`, "", "invalid JSON"},
		{`{"type":"object","type":"string"}`, "", "duplicate key"},
		{`{"type":"string","not":{"const":"a"}}`, "not", `json schema: unsupported keyword "not"`},
		{`{"properties":{"a":{"if":{},"then":{}}}}`, "if", `json schema at /properties/a: unsupported keyword "if"`},
		{`{"type":"integer","multipleOf":3}`, "multipleOf", "unsupported keyword"},
		{`{"type":"object","patternProperties":{"^a":{}}}`, "patternProperties", "unsupported keyword"},
		{`{"type":"object","minProperties":1}`, "minProperties", "unsupported keyword"},
		{`{"type":"array","uniqueItems":true}`, "uniqueItems", "unsupported"},
		{`{"type":"array","items":[{"type":"string"}]}`, "items", "prefixItems"},
		{`{"type":"strin"}`, "", `keyword "type": unknown type`},
		{`{"type":"string","format":"ipv6"}`, "format", `unsupported keyword "format": format "ipv6"`},
		{`{"type":"string","pattern":"(["}`, "", `keyword "pattern": invalid regular expression`},
		{`{"type":"string","pattern":"\\bword"}`, "pattern", "not supported"},
		{`{"type":"integer","minimum":"1"}`, "", `keyword "minimum": must be a number`},
		{`{"type":"array","maxItems":-1}`, "", "non-negative"},
		{`{"$ref":"#/$defs/nope"}`, "", "no such definition"},
		{`{"$ref":"https://example.com/s.json"}`, "$ref", "only local references"},
		{`{"properties":{"a":{"$ref":"#/properties/b"}}}`, "", "no such definition"},
		{`false`, "", "admits no value"},
		{`{"type":"integer","minimum":5,"maximum":4}`, "", "admits no value"},
		{`{"allOf":[{"type":"string"},{"type":"integer"}]}`, "", "admits no value"},
		{`{"type":"string","enum":[1,2]}`, "", "admits no value"},
		{`{"type":"object","properties":{"self":{"$ref":"#"}},"required":["self"]}`, "", "no finite value"},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "", "no finite value"},
		{`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"}`, "", "consumes no input"},
		{`{"$defs":{"a":{"$ref":"#/$defs/a","type":"string"}},"$ref":"#/$defs/a"}`, "", "no finite value"},
		{`{"type":"array","items":{"type":"integer"},"maxItems":100000}`, "", "schema too large"},
		{`{"type":"string","maxLength":1000000}`, "", "schema too large"},
		{`{"type":"string","pattern":"^(a|b)*a(a|b){16}$"}`, "", "too complex"},
		{`{"type":"integer","minimum":1e20}`, "", "supported range"},
		{`{"type":"object","properties":{"a":{"const":1}},"allOf":[{"properties":{"a":{"pattern":"x"}}},{"properties":{"a":{"pattern":"y"}}}]}`, "pattern", "cannot combine"},
		{`{"properties":{"a":{"type":"string","$id":"x"}}}`, "$id", "only at the root"},
	} {
		g, err := FromJSONSchema([]byte(c.schema))
		if err == nil {
			t.Errorf("%s: no error (%d rules)", c.schema, len(g.Rules))
			continue
		}
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Errorf("%s: %T %v, want *SchemaError", c.schema, err, err)
			continue
		}
		if se.Keyword != c.keyword || !strings.Contains(se.Error(), c.msg) {
			t.Errorf("%s: keyword %q, error %q; want keyword %q, %q", c.schema, se.Keyword, se.Error(), c.keyword, c.msg)
		}
	}
	// A big enum is refused by size, not by memory.
	var b strings.Builder
	b.WriteString(`{"enum":[`)
	for i := range 20000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"value number %d"`, i)
	}
	b.WriteString(`]}`)
	if _, err := FromJSONSchema([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("huge enum: %v", err)
	}
}

// jsFiftyProps is a schema of 50 properties of assorted kinds.
func jsFiftyProps() string {
	kinds := []string{
		`{"type":"string"}`,
		`{"type":"integer","minimum":0,"maximum":1000}`,
		`{"type":"number","minimum":-1.5,"maximum":99.25}`,
		`{"type":"boolean"}`,
		`{"type":"string","enum":["low","medium","high"]}`,
		`{"type":"string","format":"date-time"}`,
		`{"type":"array","items":{"type":"string","maxLength":20},"maxItems":5}`,
		`{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}`,
		`{"anyOf":[{"type":"string","pattern":"^[A-Z]{3}-\\d{4}$"},{"type":"null"}]}`,
		`{"type":"string","format":"uuid"}`,
	}
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	var req []string
	for i := range 50 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"field_%02d":%s`, i, kinds[i%len(kinds)])
		if i%3 != 2 {
			req = append(req, fmt.Sprintf(`"field_%02d"`, i))
		}
	}
	fmt.Fprintf(&b, `},"required":[%s],"additionalProperties":false}`, strings.Join(req, ","))
	return b.String()
}

func TestJSONSchemaFiftyProperties(t *testing.T) {
	schema := jsFiftyProps()
	g, err := FromJSONSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	sch := jsCompileValidator(t, schema)
	gen := newJSGen(t, g, 50)
	for range 50 {
		text := gen.text()
		if err := jsValidate(sch, text); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
	}
	t.Logf("50 properties: %d rules, size %d", len(g.Rules), g.Size())
}

func BenchmarkJSONSchemaCompile50(b *testing.B) {
	schema := []byte(jsFiftyProps())
	for b.Loop() {
		if _, err := FromJSONSchema(schema); err != nil {
			b.Fatal(err)
		}
	}
}

// The Matcher agrees with the recognizer on the table's grammars: it
// consumes every generated and every "yes" text to a Complete state, and
// never completes a "no" text.
func TestJSONSchemaMatcher(t *testing.T) {
	tokens := make([][]byte, 256)
	for i := range tokens {
		tokens[i] = []byte{byte(i)}
	}
	vocab := NewVocab(tokens)
	accepts := func(m *Matcher, text string) bool {
		st, ok := m.AdvanceBytes(m.Start(), []byte(text))
		return ok && st.Complete()
	}
	for i, tc := range jsonSchemaTable {
		g, err := FromJSONSchema([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		m, err := NewMatcher(g, vocab)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		gen := newJSGen(t, g, uint64(100+i))
		for range 50 {
			if text := gen.text(); !accepts(m, string(text)) {
				t.Errorf("%s: matcher refuses generated %s", tc.name, text)
			}
		}
		for _, y := range tc.yes {
			if !accepts(m, y) {
				t.Errorf("%s: matcher refuses %s", tc.name, y)
			}
		}
		for _, n := range tc.no {
			if accepts(m, n) {
				t.Errorf("%s: matcher accepts %s", tc.name, n)
			}
		}
	}
}

// FuzzFromJSONSchema: no input panics, and what compiles is a valid
// grammar within the size limit.
func FuzzFromJSONSchema(f *testing.F) {
	for _, tc := range jsonSchemaTable {
		f.Add(tc.schema)
	}
	f.Add(jsFiftyProps())
	f.Fuzz(func(t *testing.T, schema string) {
		g, err := FromJSONSchema([]byte(schema))
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		if g.Size() > MaxSchemaGrammar {
			t.Fatalf("size %d", g.Size())
		}
	})
}
