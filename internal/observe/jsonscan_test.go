package observe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

var jsonSeeds = []string{
	``, ` `, `{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e-3`, `01`, `1.`, `.5`, `-`, `1e`, `"x"`,
	`{"model":"a"}`, ` {"model" : "a" , "x":[1,{"model":"b"}]} `, `{"model":1}`, `{"model":"a","model":"b"}`,
	`{"mod\u0065l":"c"}`, `{"model":"\u00e9\n\"q\""}`, `{"model":"a"`, `{"model":"a",}`, `{"model":}`, `{,}`,
	`{"a":1}{}`, `[1,2,]`, `[1 2]`, `{"a":tru}`, `{"a":nul}`, `"\x"`, `"\u12"`, `"tab	in"`, "\"\xff\"",
	`{"a":{"b":{"c":[[[]]]}}}`, `"\ud800"`, `{"":""}`, `[-1.0E+5, 2e10, 0.0]`, `{"model":null}`,
}

func FuzzScanTopLevel(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, found, valid := scanTopLevel(data, "model")
		if !utf8.Valid(data) || bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) >= maxJSONDepth {
			return // serde rules differ from encoding/json here on purpose
		}
		if valid != json.Valid(data) {
			t.Fatalf("valid=%v, encoding/json says %v for %q", valid, !valid, data)
		}
		if !valid {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			if found {
				t.Fatalf("found a key in a non-object %q", data)
			}
			return
		}
		// encoding/json matches keys case-insensitively; compare only when
		// no other spelling of "model" is present.
		for k := range m {
			if k != "model" && strings.EqualFold(k, "model") {
				return
			}
		}
		want, ok := m["model"]
		if ok != found || ok && !bytes.Equal(bytes.TrimSpace(want), raw) {
			t.Fatalf("model = %q (%v), want %q (%v) in %q", raw, found, want, ok, data)
		}
	})
}

func TestScanTopLevelSerdeRules(t *testing.T) {
	deep := strings.Repeat("[", 128) + strings.Repeat("]", 128)
	if _, _, valid := scanTopLevel([]byte(deep), "model"); valid {
		t.Error("nesting deeper than serde_json's 128 accepted")
	}
	ok := strings.Repeat("[", 127) + strings.Repeat("]", 127)
	if _, _, valid := scanTopLevel([]byte(ok), "model"); !valid {
		t.Error("127 levels rejected")
	}
	if _, _, valid := scanTopLevel([]byte("{\"model\":\"\xff\"}"), "model"); valid {
		t.Error("invalid UTF-8 accepted")
	}
	raw, found, valid := scanTopLevel([]byte(`{"mod\u0065l":"a\"b"}`), "model")
	s, _ := jsonString(raw)
	if !found || !valid || s != `a"b` {
		t.Errorf("%q %v %v", raw, found, valid)
	}
}
