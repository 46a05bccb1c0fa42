package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// decodeJSON decodes one JSON value into template values, keeping object key order (Python dicts
// from json.loads keep it, and templates print tools with tojson in that order).
func decodeJSON(data []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("invalid JSON: trailing data")
	}
	return v, nil
}

// maxJSONDepth bounds the nesting of decoded JSON (encoding/json's own limit, which its
// token API does not apply). Tool call arguments arrive as a string that nothing else has
// parsed, and deeper nesting would only deepen the recursion here and in the engine.
const maxJSONDepth = 10000

func decodeValue(dec *json.Decoder, depth int) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	if depth >= maxJSONDepth {
		return jinja.Undefined(), fmt.Errorf("nested more than %d deep", maxJSONDepth)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			dv := jinja.NewDict()
			d := dv.AsDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				key, ok := kt.(string)
				if !ok {
					return jinja.Undefined(), errors.New("object key is not a string")
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.Set(key, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Undefined(), err
			}
			return dv, nil
		case '[':
			items := []jinja.Value{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Undefined(), err
			}
			return jinja.NewList(items), nil
		}
		return jinja.Undefined(), fmt.Errorf("unexpected %v", t)
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(t), nil
	case string:
		return jinja.NewString(t), nil
	case json.Number:
		// Python's json keeps ints and floats apart ("1" vs "1.0"); so do we.
		s := string(t)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return jinja.NewInt(i), nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewFloat(f), nil
	}
	return jinja.Undefined(), fmt.Errorf("unexpected token %v", tok)
}

// toJSONFilter is the name every "| tojson" of a template is rewritten to: the engine's own tojson
// cannot be replaced (built-in filters are looked up first), and it differs from transformers'
// with indent (sorted keys, HTML escaping) and for floats.
const toJSONFilter = "__chat_tojson"

// filterToJSON is transformers' tojson: json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys).
func filterToJSON(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), errors.New("tojson: missing value")
	}
	opts := jsonOpts{itemSep: ", ", keySep: ": "}
	// Positional arguments after the value follow json.dumps' keyword order used by transformers:
	// tojson(x, ensure_ascii, indent, separators, sort_keys).
	get := func(name string, pos int) (jinja.Value, bool) {
		if v, ok := kwargs[name]; ok {
			return v, true
		}
		if pos < len(args) {
			return args[pos], true
		}
		return jinja.Undefined(), false
	}
	if v, ok := get("ensure_ascii", 1); ok {
		opts.ensureASCII = v.IsTruthy()
	}
	if v, ok := get("indent", 2); ok && !v.IsNone() && !v.IsUndefined() {
		switch {
		case v.IsInt():
			opts.indent = strings.Repeat(" ", max(0, int(v.AsInt())))
		case v.IsString():
			opts.indent = v.AsString()
		default:
			return jinja.Undefined(), errors.New("tojson: indent must be an integer or a string")
		}
		opts.pretty = true
		opts.itemSep = ","
	}
	if v, ok := get("separators", 3); ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Undefined(), errors.New("tojson: separators must be two strings")
		}
		opts.itemSep = v.AsList().Get(0).AsString()
		opts.keySep = v.AsList().Get(1).AsString()
	}
	if v, ok := get("sort_keys", 4); ok {
		opts.sortKeys = v.IsTruthy()
	}
	var b strings.Builder
	if err := opts.encode(&b, args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(b.String()), nil
}

type jsonOpts struct {
	ensureASCII bool
	pretty      bool
	indent      string
	itemSep     string
	keySep      string
	sortKeys    bool
}

func (o *jsonOpts) newline(b *strings.Builder, level int) {
	b.WriteByte('\n')
	for range level {
		b.WriteString(o.indent)
	}
}

func (o *jsonOpts) encode(b *strings.Builder, v jinja.Value, level int) error {
	switch {
	case v.IsNone(), v.IsUndefined():
		b.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pythonFloat(v.AsFloat()))
	case v.IsString():
		o.encodeString(b, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			if o.pretty {
				o.newline(b, level+1)
			}
			if err := o.encode(b, it, level+1); err != nil {
				return err
			}
		}
		if o.pretty {
			o.newline(b, level)
		}
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.Keys
		if o.sortKeys {
			keys = d.OrderedKeys()
			sort.Strings(keys)
		}
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			if o.pretty {
				o.newline(b, level+1)
			}
			o.encodeString(b, k)
			b.WriteString(o.keySep)
			val, _ := d.Get(k)
			if err := o.encode(b, val, level+1); err != nil {
				return err
			}
		}
		if o.pretty {
			o.newline(b, level)
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("tojson: cannot encode %s", v.String())
	}
	return nil
}

// encodeString writes s as Python's json.dumps does: only '"', '\\' and control characters are
// escaped, plus everything outside ASCII when ensure_ascii is set.
func (o *jsonOpts) encodeString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				if c < 0x20 || (o.ensureASCII && c == 0x7f) {
					b.WriteString(`\u00`)
					b.WriteByte(hex[c>>4])
					b.WriteByte(hex[c&0xf])
				} else {
					b.WriteByte(c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if o.ensureASCII {
			writeU := func(u rune) {
				b.WriteString(`\u`)
				for sh := 12; sh >= 0; sh -= 4 {
					b.WriteByte(hex[(u>>sh)&0xf])
				}
			}
			if r >= 0x10000 {
				r -= 0x10000
				writeU(0xd800 + (r >> 10))
				writeU(0xdc00 + (r & 0x3ff))
			} else {
				writeU(r)
			}
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}

// pythonFloat formats f as Python's repr (which json.dumps uses): shortest round-trip digits,
// always with a fraction or exponent, exponent form outside [1e-4, 1e16).
func pythonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}
