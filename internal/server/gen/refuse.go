package gen

import (
	"bytes"
	"encoding/json"
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
// refuses and the body sets. Names match as encoding/json matches a
// struct's fields (case-insensitively), and the last of repeated members
// counts, as in the decoded request. A body that is not a JSON object
// refuses nothing (DecodeJSON has answered it). The body is scanned, not
// decoded: a request that names none of the fields costs no allocation.
func Refuse(body []byte, table []Unsupported) error {
	type refusal struct {
		name string // as sent
		u    *Unsupported
	}
	// By lower-cased name: a later member of the same field replaces it.
	var set map[string]refusal
	for m := (members{data: body}); m.next(); {
		name, u := refusedBy(table, m.key)
		switch {
		case u == nil:
		case passes(bytes.TrimSpace(m.val), u.Pass):
			delete(set, strings.ToLower(name))
		default:
			if set == nil {
				set = map[string]refusal{}
			}
			set[strings.ToLower(name)] = refusal{name, u}
		}
	}
	if len(set) == 0 {
		return nil
	}
	first := refusal{}
	for _, f := range set {
		if first.u == nil || f.name < first.name {
			first = f
		}
	}
	return BadRequest(first.name, "%s is not supported by this server: %s", first.name, first.u.Why)
}

// refusedBy is the table's entry for the raw member name key (quoted), and
// the name; nil when the table does not refuse it.
func refusedBy(table []Unsupported, key []byte) (string, *Unsupported) {
	raw := key[1 : len(key)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		var s string
		_ = json.Unmarshal(key, &s)
		raw = []byte(s)
	}
	for i := range table {
		u := &table[i]
		n := []byte(u.Name)
		if bytes.EqualFold(raw, n) || u.Prefix && len(raw) >= len(n) && bytes.EqualFold(raw[:len(n)], n) {
			return string(raw), u
		}
	}
	return "", nil
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

// members walks the members of the JSON object data (nothing when data
// is not an object), trusting data to be valid JSON (DecodeJSON has read
// it): key is a member's raw name with its quotes, val its raw value.
type members struct {
	data     []byte
	i        int
	started  bool
	key, val []byte
}

func (m *members) next() bool {
	d := m.data
	i := skipSpace(d, m.i)
	if !m.started {
		m.started = true
		if i >= len(d) || d[i] != '{' {
			return false
		}
		i++
	} else {
		if i >= len(d) || d[i] != ',' {
			return false
		}
		i++
	}
	i = skipSpace(d, i)
	if i >= len(d) || d[i] != '"' {
		return false // '}' or not valid
	}
	end := skipString(d, i)
	m.key = d[i:end]
	i = skipSpace(d, end)
	if i >= len(d) || d[i] != ':' {
		return false
	}
	start := skipSpace(d, i+1)
	m.i = skipValue(d, start)
	m.val = d[start:m.i]
	return true
}

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at d[i] ('"').
func skipString(d []byte, i int) int {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(d)
}

// skipValue returns the index after the value that starts at d[i].
func skipValue(d []byte, i int) int {
	if i >= len(d) {
		return i
	}
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '{', '[':
		depth := 0
		for ; i < len(d); i++ {
			switch d[i] {
			case '"':
				i = skipString(d, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(d)
	}
	for i < len(d) && d[i] != ',' && d[i] != '}' && d[i] != ']' && d[i] != ' ' && d[i] != '\t' && d[i] != '\n' && d[i] != '\r' {
		i++
	}
	return i
}
