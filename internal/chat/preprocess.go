package chat

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// preprocess rewrites a template into an equivalent one that the engine renders exactly as Python
// Jinja2 does under transformers' settings (trim_blocks, lstrip_blocks, keep_trailing_newline off).
//
// The engine's own whitespace control applies a tag's trimming to the nearest text segment even
// when another tag stands in between (so "{% for %}{{ x }}\n{% endfor %}" loses its newline), and
// its string literals know only a few escapes. So this pass does Jinja2's lexer-level work itself,
// step by step as jinja2.lexer does:
//   - newlines are normalised to "\n" and one trailing newline is dropped;
//   - "-" and "+" markers, trim_blocks and lstrip_blocks are applied to the literal text;
//   - every literal text (and raw block) becomes a {{ '...' }} expression and comments are
//     dropped, so no text is left for the engine to trim;
//   - string literals inside tags are decoded with Python's escapes and re-encoded with the
//     two escapes the engine knows (\\ and \');
//   - "| tojson" is pointed at toJSONFilter (see filterToJSON), and the filters that can make a
//     string far larger than their input at their bounded versions (boundedFilters);
//   - the binary operators *, + and ~ and the string methods replace and format become calls
//     that bound what they make (rewriteOps, rewriteMethods), and every output tag a call that
//     counts what is written (renderLimits.out).
func preprocess(src string) (string, error) {
	src = normalizeNewlines(src)
	var out strings.Builder
	out.Grow(len(src) + len(src)/4)
	emitText := func(s string) {
		if s != "" {
			out.WriteString("{{ " + outName + "(")
			out.WriteString(quote(s))
			out.WriteString(") }}")
		}
	}
	pos := 0
	lineStarting := true // whether the last lexer match ended with a newline
	var macros []macroTag
	for {
		start := nextTag(src, pos)
		if start < 0 {
			emitText(src[pos:])
			if err := checkMacroDefaults(macros); err != nil {
				return "", err
			}
			return out.String(), nil
		}
		kind := src[start+1] // '{', '%' or '#'
		sign := byte(0)
		if start+2 < len(src) && (src[start+2] == '-' || src[start+2] == '+') {
			sign = src[start+2]
		}
		emitText(lstripData(src[pos:start], sign, kind != '{', lineStarting))
		line := 1 + strings.Count(src[:start], "\n")

		if kind == '%' {
			if end, ok := rawBegin(src, start); ok {
				body, next, err := rawBlock(src, end, line)
				if err != nil {
					return "", err
				}
				emitText(body)
				pos, lineStarting = next.pos, next.lineStarting
				continue
			}
		}

		innerStart := start + 2
		if sign != 0 {
			innerStart++
		}
		closer := "}}"
		switch kind {
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		}
		var inner string
		var closeAt int
		if kind == '#' {
			i := strings.Index(src[innerStart:], closer)
			if i < 0 {
				return "", fmt.Errorf("line %d: unclosed comment", line)
			}
			closeAt = innerStart + i
		} else {
			var err error
			inner, closeAt, err = scanTag(src, innerStart, closer, line)
			if err != nil {
				return "", err
			}
		}
		rsign := byte(0)
		if closeAt > innerStart && (src[closeAt-1] == '-' || (src[closeAt-1] == '+' && kind != '{')) {
			rsign = src[closeAt-1]
			if kind != '#' {
				inner = inner[:len(inner)-1]
			}
		}
		if kind != '#' {
			if err := checkConstantRanges(inner, line); err != nil {
				return "", err
			}
			var err error
			if inner, err = rewriteOps(inner, line); err != nil {
				return "", err
			}
			if inner, err = rewriteMethods(inner, line); err != nil {
				return "", err
			}
			word := ""
			if kind == '%' {
				word = firstWord(inner)
			}
			if word == "endmacro" {
				out.WriteString(macroExitCall)
			}
			if kind == '{' && strings.TrimSpace(inner) != "" {
				// Counted as it is written (renderLimits.out).
				inner = " " + outName + "(" + strings.TrimSpace(inner) + ") "
			}
			out.WriteByte('{')
			out.WriteByte(kind)
			out.WriteString(inner)
			out.WriteString(closer)
			if word == "macro" {
				m := parseMacroTag(inner, line)
				macros = append(macros, m)
				out.WriteString(macroEnterCall(m.name))
			}
		}
		pos = closeAt + 2
		pos, lineStarting = consumeAfterTag(src, pos, rsign, kind != '{')
	}
}

type lexPos struct {
	pos          int
	lineStarting bool
}

// consumeAfterTag skips what the end of a tag swallows: all whitespace after "-", one newline
// after a block or comment tag (trim_blocks) unless "+".
func consumeAfterTag(src string, pos int, rsign byte, block bool) (int, bool) {
	switch {
	case rsign == '-':
		end := pos
		for end < len(src) {
			r, n := utf8.DecodeRuneInString(src[end:])
			if !isSpace(r) {
				break
			}
			end += n
		}
		return end, end > pos && src[end-1] == '\n'
	case block && rsign != '+' && pos < len(src) && src[pos] == '\n':
		return pos + 1, true
	}
	return pos, false
}

// lstripData applies the whitespace control of the tag that follows data.
func lstripData(data string, sign byte, block, lineStarting bool) string {
	if sign == '-' {
		return strings.TrimRightFunc(data, isSpace)
	}
	if sign == '+' || !block {
		return data
	}
	l := strings.LastIndexByte(data, '\n') + 1
	if (l > 0 || lineStarting) && l < len(data) && strings.TrimFunc(data[l:], isSpace) == "" {
		return data[:l]
	}
	return data
}

// isSpace is Python's str.isspace, which Jinja2's strip and \s use.
func isSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

func normalizeNewlines(src string) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	return strings.TrimSuffix(src, "\n")
}

// nextTag returns the index of the next "{{", "{%" or "{#" at or after pos, or -1.
func nextTag(src string, pos int) int {
	for {
		i := strings.IndexByte(src[pos:], '{')
		if i < 0 || pos+i+1 >= len(src) {
			return -1
		}
		pos += i
		if c := src[pos+1]; c == '{' || c == '%' || c == '#' {
			return pos
		}
		pos++
	}
}

// rawBegin matches "{%[-+]? raw [-]%}" at start and returns the index after it.
func rawBegin(src string, start int) (int, bool) {
	i := start + 2
	if i < len(src) && (src[i] == '-' || src[i] == '+') {
		i++
	}
	i = skipSpace(src, i)
	if !strings.HasPrefix(src[i:], "raw") {
		return 0, false
	}
	i = skipSpace(src, i+3)
	if strings.HasPrefix(src[i:], "-%}") {
		end, _ := consumeAfterTag(src, i+3, '-', true)
		return end, true
	}
	if strings.HasPrefix(src[i:], "%}") {
		return i + 2, true // no trim_blocks after raw, as in Jinja2
	}
	return 0, false
}

// rawBlock finds the endraw tag after a raw block's body and returns the body (with the endraw
// tag's left whitespace control applied) and the position after the endraw tag.
func rawBlock(src string, bodyStart, line int) (string, lexPos, error) {
	for p := bodyStart; ; {
		i := strings.Index(src[p:], "{%")
		if i < 0 {
			return "", lexPos{}, fmt.Errorf("line %d: raw block without endraw", line)
		}
		tag := p + i
		j := tag + 2
		sign := byte(0)
		if j < len(src) && (src[j] == '-' || src[j] == '+') {
			sign = src[j]
			j++
		}
		j = skipSpace(src, j)
		if !strings.HasPrefix(src[j:], "endraw") {
			p = tag + 2
			continue
		}
		j = skipSpace(src, j+6)
		rsign := byte(0)
		if j < len(src) && (src[j] == '-' || src[j] == '+') {
			rsign = src[j]
			j++
		}
		if !strings.HasPrefix(src[j:], "%}") {
			p = tag + 2
			continue
		}
		// The raw body and the endraw tag are one lexer match: lstrip sees the raw-begin's state.
		body := lstripData(src[bodyStart:tag], sign, true, bodyStart > 0 && src[bodyStart-1] == '\n')
		end, ls := consumeAfterTag(src, j+2, rsign, true)
		return body, lexPos{end, ls}, nil
	}
}

func skipSpace(src string, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
		i++
	}
	return i
}

// scanTag reads a tag's inside from pos to closer (outside string literals) and returns it
// rewritten, with the index of the closer.
func scanTag(src string, pos int, closer string, line int) (string, int, error) {
	var b strings.Builder
	for i := pos; i < len(src); {
		c := src[i]
		switch {
		case c == '\'' || c == '"':
			s, n, err := decodeString(src[i:])
			if err != nil {
				return "", 0, fmt.Errorf("line %d: %v", line, err)
			}
			b.WriteString(quote(s))
			i += n
		case strings.HasPrefix(src[i:], closer):
			return b.String(), i, nil
		case strings.HasPrefix(src[i:], "-"+closer) || (closer == "%}" && strings.HasPrefix(src[i:], "+"+closer)):
			b.WriteByte(c)
			return b.String(), i + 1, nil
		case c == '|':
			j := skipSpace(src, i+1)
			k := j
			for k < len(src) && isIdentByte(src[k]) {
				k++
			}
			if to, ok := filterRenames[src[j:k]]; ok {
				b.WriteString(src[i:j])
				b.WriteString(to)
				i = k
				continue
			}
			b.WriteByte(c)
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return "", 0, fmt.Errorf("line %d: unclosed tag (missing %q)", line, closer)
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// quote writes s as a string literal the engine reads back unchanged.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '\'' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('\'')
	return b.String()
}

// decodeString decodes the Python string literal at the start of s (Jinja2 unescapes string
// literals with Python's unicode-escape codec) and returns its value and length in s.
func decodeString(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); {
		c := s[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		e := s[i+1]
		i += 2
		switch e {
		case '\n': // line continuation
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i - 1
			for j < len(s) && j < i+2 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(s[i-1:j], 8, 32)
			b.WriteRune(rune(v))
			i = j
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n > len(s) {
				return "", 0, fmt.Errorf("truncated \\%c escape in string literal", e)
			}
			v, err := strconv.ParseUint(s[i:i+n], 16, 32)
			if err != nil || v > unicode.MaxRune {
				return "", 0, fmt.Errorf("invalid \\%c escape in string literal", e)
			}
			b.WriteRune(rune(v))
			i += n
		default: // unknown escapes stay as written
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return "", 0, fmt.Errorf("unterminated string literal")
}
