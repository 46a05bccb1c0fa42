package gen

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzMembers checks Refuse's scanner against encoding/json: on any valid
// JSON object, the members it walks are the object's, in order, with their
// values.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, ` {"a" : [1,{"b":"}"}] , "c\"d":"x\\"}`, `{"a":{"b":{"c":[]}},"d":null}`, `[1]`, `"s"`, `{"a":-1.5e3,"b":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var want []string // names and values, alternating
		dec := json.NewDecoder(bytes.NewReader(data))
		if tok, _ := dec.Token(); tok == json.Delim('{') {
			for dec.More() {
				k, _ := dec.Token()
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
				want = append(want, k.(string), string(v))
			}
		}
		var got []string
		for m := (members{data: data}); m.next(); {
			var k string
			if err := json.Unmarshal(m.key, &k); err != nil {
				t.Fatalf("%q: key %q: %v", data, m.key, err)
			}
			var v bytes.Buffer
			if err := json.Compact(&v, m.val); err != nil {
				t.Fatalf("%q: value %q: %v", data, m.val, err)
			}
			got = append(got, k, v.String())
		}
		if len(got) != len(want) {
			t.Fatalf("%q: members %q, want %q", data, got, want)
		}
		for i := range got {
			if i%2 == 1 {
				var w bytes.Buffer
				_ = json.Compact(&w, []byte(want[i]))
				want[i] = w.String()
			}
			if got[i] != want[i] {
				t.Fatalf("%q: members %q, want %q", data, got, want)
			}
		}
	})
}
