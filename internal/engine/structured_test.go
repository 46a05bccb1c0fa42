package engine_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"mistralrs/internal/constrain"
	"mistralrs/internal/engine"
	"mistralrs/internal/sampler"
)

// structuredSchemas are the schemas of the end-to-end test: the free output
// of the random-weight model is garbage, so whatever it writes under a
// schema shows the constraint at work.
var structuredSchemas = []string{
	`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}`,
	`{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"],"additionalProperties":false}`,
	`{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":4}`,
	`{"type":"string","enum":["red","green","blue"]}`,
	`{"const":{"x":[1,2,null]}}`,
	`{"type":"integer","minimum":-5,"maximum":37}`,
	`{"type":"number","minimum":0,"maximum":1}`,
	`{"type":"string","pattern":"^[a-z]{2,5}-[0-9]{3}$"}`,
	`{"type":"string","format":"date"}`,
	`{"type":"string","format":"date-time"}`,
	`{"type":"string","format":"uuid"}`,
	`{"type":"null"}`,
	`{"anyOf":[{"type":"integer"},{"type":"string","maxLength":6}]}`,
	`{"oneOf":[{"type":"object","properties":{"k":{"const":"a"}},"required":["k"],"additionalProperties":false},{"type":"boolean"}]}`,
	`{"type":["string","null"],"maxLength":5}`,
	`{"$defs":{"p":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x","y"],"additionalProperties":false}},"type":"array","items":{"$ref":"#/$defs/p"},"maxItems":3}`,
	`{"$defs":{"t":{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},"kids":{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":2}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/t"}`,
	`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","maxLength":4},"maxItems":3},"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}`,
	`{"type":"object","properties":{"n":{"type":"number"},"s":{"type":"string","maxLength":8}},"additionalProperties":false}`,
	`{"type":"object","properties":{"id":{"type":"string","format":"uuid"},"when":{"type":"string","format":"date"}},"required":["id","when"],"additionalProperties":false}`,
	`{"type":"boolean"}`,
}

var structuredRegexes = []string{`[0-9]{3}-[0-9]{4}`, `(yes|no|maybe)`, `[A-Z][a-z]{1,8}( [A-Z][a-z]{1,8})?`, `0x[0-9a-f]{2,6}`, `\d+(\.\d{1,2})?`}

// samplesPerSchema is how many sampled generations each schema gets:
// MISTRALRS_STRUCTURED_SAMPLES, default 200 (the count).
func samplesPerSchema(t *testing.T) int {
	if s := os.Getenv("MISTRALRS_STRUCTURED_SAMPLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if testing.Short() {
		return 32
	}
	return 200
}

// Every sampled generation at temperature 1 under a JSON schema parses
// and validates against it (real validator); every regex one matches.
func TestStructuredOutputValidates(t *testing.T) {
	e, _ := newEngine(t, tiny(t), opts(nil))
	n := samplesPerSchema(t)
	const choices = 16
	run := func(t *testing.T, g *constrain.Grammar, check func(string) error) {
		done, stopped := 0, 0
		for r := 0; done < n; r++ {
			seed := uint64(r)
			res, _ := collectChoices(t, e, &engine.Request{Prompt: promptOf(5 + r%7), MaxTokens: 600, Grammar: g, N: min(choices, n-done),
				Sampling: sampler.Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1, Seed: &seed}})
			for _, c := range res {
				done++
				if c.FinishReason != engine.FinishStop {
					continue // the token limit came first: a partial answer, as documented
				}
				stopped++
				if err := check(c.Text); err != nil {
					t.Fatalf("%q: %v", c.Text, err)
				}
			}
		}
		if stopped < n*9/10 {
			t.Errorf("only %d of %d generations finished within the token limit", stopped, n)
		}
	}
	for i, src := range structuredSchemas {
		t.Run(fmt.Sprintf("schema%d", i), func(t *testing.T) {
			g, err := constrain.FromJSONSchema([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			var doc any
			if err := json.Unmarshal([]byte(src), &doc); err != nil {
				t.Fatal(err)
			}
			c := jsonschema.NewCompiler()
			if err := c.AddResource("schema.json", doc); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("schema.json")
			if err != nil {
				t.Fatal(err)
			}
			run(t, g, func(text string) error {
				v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
				if err != nil {
					return fmt.Errorf("not JSON: %v", err)
				}
				return sch.Validate(v)
			})
		})
	}
	for i, p := range structuredRegexes {
		t.Run(fmt.Sprintf("regex%d", i), func(t *testing.T) {
			g, err := constrain.FromRegex(p)
			if err != nil {
				t.Fatal(err)
			}
			re := regexp.MustCompile(`^(?:` + p + `)$`)
			run(t, g, func(text string) error {
				if !re.MatchString(text) {
					return fmt.Errorf("does not match %s", p)
				}
				return nil
			})
		})
	}
}
