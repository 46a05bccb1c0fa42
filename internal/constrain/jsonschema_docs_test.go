package constrain

import (
	"errors"
	"strings"
	"testing"
)

// A document's references resolve against its own root, never against
// the schema that embeds it nor against another document.
func TestJSONSchemaDocsResolveInTheirOwnRoot(t *testing.T) {
	schema := `{"type":"object","properties":{"x":{"$ref":"d1"},"y":{"$ref":"d2"},"w":{"$ref":"#/$defs/Loc"}},` +
		`"required":["x","y","w"],"additionalProperties":false,"$defs":{"Loc":{"enum":["w"]}}}`
	docs := map[string][]byte{
		// What pydantic writes: $defs beside the properties that use them.
		"d1": []byte(`{"type":"object","properties":{"loc":{"$ref":"#/$defs/Loc"}},"required":["loc"],"additionalProperties":false,` +
			`"$defs":{"Loc":{"enum":["a"]}}}`),
		// The same reference meaning another schema; definitions too.
		"d2": []byte(`{"type":"object","properties":{"loc":{"$ref":"#/$defs/Loc"},"n":{"$ref":"#/definitions/N"}},` +
			`"required":["loc","n"],"additionalProperties":false,"$defs":{"Loc":{"enum":["b"]}},"definitions":{"N":{"const":1}}}`),
	}
	g, err := FromJSONSchemaDocs([]byte(schema), docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, y := range []string{`{"x":{"loc":"a"},"y":{"loc":"b","n":1},"w":"w"}`, `{"x": {"loc": "a"}, "y": {"loc": "b", "n": 1}, "w": "w"}`} {
		if !jsDerives(g, y) {
			t.Errorf("%s: not derivable", y)
		}
	}
	for _, n := range []string{`{"x":{"loc":"b"},"y":{"loc":"b","n":1},"w":"w"}`, `{"x":{"loc":"w"},"y":{"loc":"b","n":1},"w":"w"}`,
		`{"x":{"loc":"a"},"y":{"loc":"a","n":1},"w":"w"}`, `{"x":{"loc":"a"},"y":{"loc":"b","n":1},"w":"a"}`} {
		if jsDerives(g, n) {
			t.Errorf("%s: derivable", n)
		}
	}
}

// "#" in a document is the document, "$id#…" its own identifier, and a
// $ref with sibling keywords merges a document's root with them.
func TestJSONSchemaDocsRootIDAndSiblings(t *testing.T) {
	for _, tc := range []struct {
		name, schema, doc string
		yes, no           []string
	}{
		{
			name:   "recursion through #",
			schema: `{"type":"object","properties":{"a":{"$ref":"d"}},"required":["a"],"additionalProperties":false}`,
			doc:    `{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["next"],"additionalProperties":false}`,
			yes:    []string{`{"a":{"next":null}}`, `{"a":{"next":{"next":{"next":null}}}}`},
			no:     []string{`{"a":{"next":{"a":{"next":null}}}}`},
		},
		{
			name:   "$id at the document's root",
			schema: `{"$ref":"d"}`,
			doc: `{"$id":"https://example.com/loc.json","type":"object","properties":{"l":{"$ref":"https://example.com/loc.json#/definitions/L"}},` +
				`"required":["l"],"additionalProperties":false,"definitions":{"L":{"const":1}}}`,
			yes: []string{`{"l":1}`},
			no:  []string{`{"l":2}`},
		},
		{
			name:   "siblings merged with a document's root",
			schema: `{"type":"object","$ref":"d"}`,
			doc:    `{"properties":{"a":{"$ref":"#/$defs/A"}},"required":["a"],"additionalProperties":false,"$defs":{"A":{"const":true}}}`,
			yes:    []string{`{"a":true}`},
			no:     []string{`{"a":false}`, `true`},
		},
		{
			name:   "siblings merged with a document whose root is a reference",
			schema: `{"type":"object","$ref":"d"}`,
			doc:    `{"$ref":"#/$defs/R","$defs":{"R":{"properties":{"a":{"const":1}},"required":["a"],"additionalProperties":false}}}`,
			yes:    []string{`{"a":1}`},
			no:     []string{`{"a":2}`, `{}`},
		},
		{
			name:   "a pointer into a document",
			schema: `{"$ref":"d#/$defs/A"}`,
			doc:    `{"$defs":{"A":{"type":"array","items":{"$ref":"#/$defs/B"}},"B":{"const":"b"}}}`,
			yes:    []string{`["b","b"]`, `[]`},
			no:     []string{`["a"]`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := FromJSONSchemaDocs([]byte(tc.schema), map[string][]byte{"d": []byte(tc.doc)})
			if err != nil {
				t.Fatal(err)
			}
			for _, y := range tc.yes {
				if !jsDerives(g, y) {
					t.Errorf("%s: not derivable", y)
				}
			}
			for _, n := range tc.no {
				if jsDerives(g, n) {
					t.Errorf("%s: derivable", n)
				}
			}
		})
	}
}

// Errors inside a document name it, with a path from its root.
func TestJSONSchemaDocsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		docs         map[string]string
		doc, path    string
		msg          string
	}{
		{"missing definition", `{"$ref":"d"}`, map[string]string{"d": `{"properties":{"loc":{"$ref":"#/$defs/Loc"}}}`}, "d", "/properties/loc", "no such definition"},
		{"the embedding schema's definitions are not the document's", `{"$ref":"d","$defs":{"Loc":true}}`,
			map[string]string{"d": `{"properties":{"loc":{"$ref":"#/$defs/Loc"}}}`}, "d", "/properties/loc", "no such definition"},
		{"nor the other way round", `{"$ref":"#/$defs/Loc"}`, map[string]string{"d": `{"$defs":{"Loc":true}}`}, "", "", "no such definition"},
		{"unsupported keyword", `{"anyOf":[{"$ref":"a"},{"$ref":"b"}]}`,
			map[string]string{"a": `{}`, "b": `{"properties":{"x":{"not":{}}}}`}, "b", "/properties/x", `unsupported keyword "not"`},
		{"invalid JSON", `{"$ref":"d"}`, map[string]string{"d": `{`}, "d", "", "invalid JSON"},
		{"$id not a string", `{"$ref":"d"}`, map[string]string{"d": `{"$id":1}`}, "d", "", "must be a string"},
		{"key with #", `{}`, map[string]string{"d#": `{}`}, "d#", "", "key"},
		{"unknown document", `{"$ref":"e"}`, map[string]string{"d": `{}`}, "", "", "only local references"},
	} {
		docs := map[string][]byte{}
		for k, v := range tc.docs {
			docs[k] = []byte(v)
		}
		_, err := FromJSONSchemaDocs([]byte(tc.schema), docs)
		var se *SchemaError
		if !errors.As(err, &se) || se.Doc != tc.doc || se.Path != tc.path || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %#v (%v), want doc %q path %q and %q", tc.name, se, err, tc.doc, tc.path, tc.msg)
		}
	}
}
