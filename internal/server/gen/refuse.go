package gen

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// Unsupported is a request field a dialect does not implement: a request
// that sets it is refused with a 400 naming it rather than answered as if
// it had not been asked. This is the one way every dialect refuses fields.
type Unsupported struct {
	Name   string // the field; with Prefix, every field starting with it
	Prefix bool
	Why    string
	// Pass are JSON values that ask for nothing (compared as bytes, after
	// trimming space): `null` always passes.
	Pass []string
}

// Refuse answers the first field of body, in name order, that table
// refuses and the body sets. A body that is not a JSON object refuses
// nothing (DecodeJSON has answered it).
func Refuse(body []byte, table []Unsupported) error {
	// BodyJSON, not json.RawMessage: the values (the prompt among them)
	// stay in the body instead of being copied.
	var top map[string]BodyJSON
	if json.Unmarshal(body, &top) != nil {
		return nil
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		u := lookupUnsupported(table, k)
		if u == nil || passes(bytes.TrimSpace(top[k]), u.Pass) {
			continue
		}
		return BadRequest(k, "%s is not supported by this server: %s", k, u.Why)
	}
	return nil
}

func lookupUnsupported(table []Unsupported, k string) *Unsupported {
	for i := range table {
		u := &table[i]
		if u.Name == k || u.Prefix && strings.HasPrefix(k, u.Name) {
			return u
		}
	}
	return nil
}

func passes(v []byte, pass []string) bool {
	if IsJSON(v, "null") {
		return true
	}
	for _, p := range pass {
		if IsJSON(v, p) {
			return true
		}
	}
	return false
}

// ReasoningOff are the reasoning_effort values that ask for nothing.
var ReasoningOff = []string{`"off"`, `"none"`}
