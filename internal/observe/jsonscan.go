package observe

import (
	"encoding/json"
	"unicode/utf8"
)

// A validating JSON scanner for the model label. The middleware reads every
// inference body, so this must be fast: encoding/json's Valid plus a second
// pass cost several times more than the rest of the layer. Validity follows
// serde_json (what mistral.rs parses with): strings must be UTF-8, and
// nesting deeper than 128 levels is an error.

// serde_json starts with 128 and fails when a container brings it to 0, so
// 127 levels is the deepest accepted nesting.
const maxJSONDepth = 128

// scanTopLevel validates data as one JSON value and, when it is an object,
// returns the raw value of its last member named key.
func scanTopLevel(data []byte, key string) (val []byte, found, valid bool) {
	s := jsonScanner{d: data}
	s.ws()
	if s.i < len(s.d) && s.d[s.i] == '{' {
		s.i++
		s.ws()
		if s.i < len(s.d) && s.d[s.i] == '}' {
			s.i++
		} else {
			for {
				kStart := s.i
				hasEsc, ok := s.str()
				if !ok {
					return nil, false, false
				}
				k := s.d[kStart:s.i]
				s.ws()
				if s.i >= len(s.d) || s.d[s.i] != ':' {
					return nil, false, false
				}
				s.i++
				s.ws()
				vStart := s.i
				if !s.value(1) {
					return nil, false, false
				}
				if rawKeyIs(k, hasEsc, key) {
					val, found = s.d[vStart:s.i], true
				}
				s.ws()
				if s.i >= len(s.d) {
					return nil, false, false
				}
				if s.d[s.i] == '}' {
					s.i++
					break
				}
				if s.d[s.i] != ',' {
					return nil, false, false
				}
				s.i++
				s.ws()
			}
		}
	} else if !s.value(0) {
		return nil, false, false
	}
	s.ws()
	if s.i != len(s.d) {
		return nil, false, false
	}
	return val, found, true
}

// jsonString decodes a raw JSON string value.
func jsonString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c == '\\' {
			var s string
			return s, json.Unmarshal(raw, &s) == nil
		}
	}
	return string(inner), true
}

func rawKeyIs(k []byte, hasEsc bool, key string) bool {
	if !hasEsc {
		return len(k) == len(key)+2 && string(k[1:len(k)-1]) == key
	}
	s, ok := jsonString(k)
	return ok && s == key
}

type jsonScanner struct {
	d []byte
	i int
}

func (s *jsonScanner) ws() {
	for s.i < len(s.d) {
		switch s.d[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) value(depth int) bool {
	if s.i >= len(s.d) {
		return false
	}
	switch c := s.d[s.i]; {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '{':
		if depth+1 >= maxJSONDepth {
			return false
		}
		s.i++
		s.ws()
		if s.i < len(s.d) && s.d[s.i] == '}' {
			s.i++
			return true
		}
		for {
			if _, ok := s.str(); !ok {
				return false
			}
			s.ws()
			if s.i >= len(s.d) || s.d[s.i] != ':' {
				return false
			}
			s.i++
			s.ws()
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.i >= len(s.d) {
				return false
			}
			if s.d[s.i] == '}' {
				s.i++
				return true
			}
			if s.d[s.i] != ',' {
				return false
			}
			s.i++
			s.ws()
		}
	case c == '[':
		if depth+1 >= maxJSONDepth {
			return false
		}
		s.i++
		s.ws()
		if s.i < len(s.d) && s.d[s.i] == ']' {
			s.i++
			return true
		}
		for {
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.i >= len(s.d) {
				return false
			}
			if s.d[s.i] == ']' {
				s.i++
				return true
			}
			if s.d[s.i] != ',' {
				return false
			}
			s.i++
			s.ws()
		}
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.num()
	}
	return false
}

func (s *jsonScanner) lit(w string) bool {
	if len(s.d)-s.i < len(w) || string(s.d[s.i:s.i+len(w)]) != w {
		return false
	}
	s.i += len(w)
	return true
}

func (s *jsonScanner) digits() int {
	n := 0
	for s.i < len(s.d) && s.d[s.i] >= '0' && s.d[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *jsonScanner) num() bool {
	if s.d[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.d) {
		return false
	}
	if s.d[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return false
	}
	if s.i < len(s.d) && s.d[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.d) && (s.d[s.i] == 'e' || s.d[s.i] == 'E') {
		s.i++
		if s.i < len(s.d) && (s.d[s.i] == '+' || s.d[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

// str scans a string starting at its quote; it reports whether it held an
// escape (so the raw bytes are not its value).
func (s *jsonScanner) str() (hasEsc, ok bool) {
	if s.i >= len(s.d) || s.d[s.i] != '"' {
		return false, false
	}
	s.i++
	for s.i < len(s.d) {
		c := s.d[s.i]
		switch {
		case c == '"':
			s.i++
			return hasEsc, true
		case c == '\\':
			hasEsc = true
			if s.i+1 >= len(s.d) {
				return hasEsc, false
			}
			switch s.d[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if len(s.d)-s.i < 6 || !isHex(s.d[s.i+2]) || !isHex(s.d[s.i+3]) || !isHex(s.d[s.i+4]) || !isHex(s.d[s.i+5]) {
					return hasEsc, false
				}
				s.i += 6
			default:
				return hasEsc, false
			}
		case c < 0x20:
			return hasEsc, false
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, size := utf8.DecodeRune(s.d[s.i:])
			if r == utf8.RuneError && size <= 1 {
				return hasEsc, false
			}
			s.i += size
		}
	}
	return hasEsc, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
