package constrain

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// FromLark compiles a grammar written in a subset of Lark
// (https://lark-parser.readthedocs.io/en/latest/grammar.html) into a
// grammar whose sentences are those of the rule start.
//
// Supported:
//
//   - Definitions name: expansion, one per line; a line starting with |
//     (after blanks) continues the previous one, as does a line after a
//     trailing |, and newlines inside ( ) and [ ] are blanks. Names are
//     letters, digits and _; lowercase names are rules, UPPERCASE names
//     terminals; both compile alike (terminals differ only under %ignore).
//     The modifiers ?name and !name, priorities name.2 and aliases
//     -> name are accepted and ignored (they shape Lark's parse tree, not
//     the language).
//   - Expansions: sequences, alternation |, grouping ( ), optional [ ] and
//     ?, repetition * and +, counted repetition item ~ n and item ~ n..m,
//     references to rules and terminals (in any order, recursion allowed
//     but left recursion, below).
//   - Terminals: "strings" with Python escapes (\n \t \r \" \\ \xHH
//     \uHHHH \UHHHHHHHH ...; an unknown escape keeps its backslash) and the
//     flag i ("select"i, case-insensitive); ranges "a".."z" between two
//     single characters; /regex/ with flags i, m, s (and u, ignored) in Go
//     RE2 syntax as FromRegex reads it (no lookaround; \/ is a slash);
//     character classes [a-z], [^"\\], [ \t] written bare: a bracket whose
//     content does not parse as a Lark expansion is read as a regex
//     character class if it can be one, does not start with a quote and
//     holds no ( ) or | (so [item] and ["+"|"-"] are Lark optionals,
//     [a-z] and [0-9_] classes; a class of letters only, like [abc], or
//     with those characters must be written /[abc]/).
//   - Comments: // or # to the end of the line.
//   - %import common.NAME [-> ALIAS] and %import common (NAME, ...) for
//     Lark's common.lark terminals: DIGIT HEXDIGIT INT SIGNED_INT DECIMAL
//     FLOAT SIGNED_FLOAT NUMBER SIGNED_NUMBER ESCAPED_STRING LCASE_LETTER
//     UCASE_LETTER LETTER WORD CNAME WS_INLINE WS CR LF NEWLINE SH_COMMENT
//     CPP_COMMENT C_COMMENT SQL_COMMENT. Other modules are refused.
//   - %ignore item (repeatable): any number of the ignored items may appear
//     between two items of a rule (lowercase name: the places where Lark's
//     lexer would skip them), before and after the whole text, but never
//     inside a terminal (UPPERCASE definitions, strings, regexes). With
//     %ignore WS, a model may pad with whitespace (until max_tokens).
//
// Refused with an error naming the problem and, where there is one, its
// line:column (columns count characters, from 1): syntax errors, brackets
// nested over 1000 deep, an undefined or twice-defined name, no start
// rule, a definition that can never finish (every alternative recurses
// forever or matches nothing; the message names one that causes it), left
// recursion, also through rules that may match nothing (a: a "x" | "y", or
// a: b? a "x" | "y"; write a: "y" "x"* instead: Lark accepts it, but this
// runtime expands rules depth first), templates, %declare, %override,
// %extend and other directives, regex features RE2 lacks (lookaround,
// backreferences), regex flags but i m s u, counted repetitions past
// MaxRepeat or MaxExpansion, grammars of more than MaxGrammarSize
// elements. Lark's lexer semantics (longest match, priorities, terminal
// collisions) do not apply: the grammar is one context-free grammar over
// bytes, with all the sentences Lark's parser would accept, and possibly
// some its lexer would split otherwise.
func FromLark(src string) (g *Grammar, err error) {
	defer catchTooLarge(&err)
	p := &lkParser{src: src, byName: map[string]*lkDef{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p.compile()
}

type lkKind uint8

const (
	lkAlt   lkKind = iota // subs: alternatives
	lkSeq                 // subs: items
	lkRef                 // text: name
	lkLit                 // text: bytes; fold: case-insensitive
	lkRegex               // text: pattern
	lkRange               // lo..hi
	lkRep                 // subs[0] repeated min..max (max < 0: unbounded)
)

type lkNode struct {
	kind     lkKind
	off      int
	subs     []*lkNode
	text     string
	fold     bool
	lo, hi   rune
	min, max int
}

type lkDef struct {
	name string
	off  int
	body *lkNode
}

type lkParser struct {
	src     string
	pos     int
	depth   int // inside ( ) or [ ]: newlines are blanks
	defs    []*lkDef
	byName  map[string]*lkDef
	ignores []*lkNode
}

// lkError is an error at a position of the source.
func (p *lkParser) errorf(off int, format string, args ...any) error {
	line, col := 1, 1
	for _, r := range p.src[:min(off, len(p.src))] {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("lark: %d:%d: %s", line, col, fmt.Sprintf(format, args...))
}

func (p *lkParser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

func (p *lkParser) eof() bool { return p.pos >= len(p.src) }

// blank skips blanks, comments and newlines.
func (p *lkParser) blank() {
	for !p.eof() {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\n':
			p.pos++
		case c == '#' || strings.HasPrefix(p.src[p.pos:], "//"):
			for !p.eof() && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

// space skips blanks and comments inside a definition: newlines too inside
// brackets, or when the next line continues the definition with |.
func (p *lkParser) space() {
	for !p.eof() {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			p.pos++
		case c == '#' || strings.HasPrefix(p.src[p.pos:], "//"):
			for !p.eof() && p.src[p.pos] != '\n' {
				p.pos++
			}
		case c == '\n':
			if p.depth > 0 {
				p.pos++
				continue
			}
			save := p.pos
			p.blank()
			if p.peek() != '|' {
				p.pos = save
			}
			return
		default:
			return
		}
	}
}

func lkIdentByte(c byte, first bool) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
}

func (p *lkParser) ident() string {
	start := p.pos
	for !p.eof() && lkIdentByte(p.src[p.pos], p.pos == start) {
		p.pos++
	}
	return p.src[start:p.pos]
}

func (p *lkParser) number() (int, error) {
	start := p.pos
	if p.peek() == '-' {
		p.pos++
	}
	for !p.eof() && '0' <= p.src[p.pos] && p.src[p.pos] <= '9' {
		p.pos++
	}
	n, err := strconv.Atoi(p.src[start:p.pos])
	if err != nil {
		return 0, p.errorf(start, "expected a number")
	}
	return n, nil
}

// lkTerminal reports whether a name is a terminal's (UPPERCASE, the part
// after a module prefix).
func lkTerminal(name string) bool {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return strings.ToUpper(name) == name
}

func (p *lkParser) parse() error {
	for {
		p.blank()
		if p.eof() {
			return nil
		}
		var err error
		if p.peek() == '%' {
			err = p.directive()
		} else {
			err = p.definition()
		}
		if err != nil {
			return err
		}
		p.space()
		if !p.eof() && p.peek() != '\n' {
			return p.errorf(p.pos, "unexpected %s", p.what())
		}
	}
}

// what names what is at the current position, for messages.
func (p *lkParser) what() string {
	if p.eof() {
		return "end of grammar"
	}
	if p.peek() == '\n' {
		return "end of line"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return strconv.QuoteRune(r)
}

func (p *lkParser) define(name string, off int, body *lkNode) error {
	if d, ok := p.byName[name]; ok {
		return p.errorf(off, "%s is defined twice (first at %s)", name, p.at(d.off))
	}
	d := &lkDef{name: name, off: off, body: body}
	p.defs = append(p.defs, d)
	p.byName[name] = d
	return nil
}

func (p *lkParser) definition() error {
	if c := p.peek(); c == '?' || c == '!' {
		p.pos++
	}
	nameOff := p.pos
	name := p.ident()
	if name == "" {
		return p.errorf(p.pos, "expected a rule or terminal name, found %s", p.what())
	}
	p.space()
	if p.peek() == '.' { // priority
		p.pos++
		if _, err := p.number(); err != nil {
			return err
		}
		p.space()
	}
	if p.peek() == '{' {
		return p.errorf(p.pos, "templates (%s{...}) are not supported", name)
	}
	if p.peek() != ':' {
		return p.errorf(p.pos, "expected ':' after %s, found %s", name, p.what())
	}
	p.pos++
	body, err := p.expansions()
	if err != nil {
		return err
	}
	return p.define(name, nameOff, body)
}

func (p *lkParser) directive() error {
	off := p.pos
	p.pos++
	name := p.ident()
	p.space()
	switch name {
	case "ignore":
		body, err := p.expansions()
		if err != nil {
			return err
		}
		p.ignores = append(p.ignores, body)
		return nil
	case "import":
		return p.importDirective()
	case "":
		return p.errorf(off, "expected a directive name after %%")
	}
	return p.errorf(off, "%%%s is not supported", name)
}

func (p *lkParser) importDirective() error {
	off := p.pos
	var parts []string
	for {
		id := p.ident()
		if id == "" {
			return p.errorf(p.pos, "expected a module name, found %s", p.what())
		}
		parts = append(parts, id)
		if p.peek() != '.' {
			break
		}
		p.pos++
	}
	p.space()
	var names, aliases []string
	if p.peek() == '(' {
		if len(parts) != 1 {
			return p.errorf(off, "expected %%import module (NAME, ...)")
		}
		p.pos++
		for {
			p.blank()
			n := p.ident()
			if n == "" {
				return p.errorf(p.pos, "expected a name to import, found %s", p.what())
			}
			names, aliases = append(names, n), append(aliases, n)
			p.blank()
			if p.peek() == ',' {
				p.pos++
				continue
			}
			if p.peek() != ')' {
				return p.errorf(p.pos, "expected ',' or ')', found %s", p.what())
			}
			p.pos++
			break
		}
	} else {
		if len(parts) < 2 {
			return p.errorf(off, "expected %%import module.NAME")
		}
		n := parts[len(parts)-1]
		parts = parts[:len(parts)-1]
		alias := n
		if strings.HasPrefix(p.src[p.pos:], "->") {
			p.pos += 2
			p.space()
			alias = p.ident()
			if alias == "" {
				return p.errorf(p.pos, "expected a name after ->, found %s", p.what())
			}
		}
		names, aliases = []string{n}, []string{alias}
	}
	if mod := strings.Join(parts, "."); mod != "common" {
		return p.errorf(off, "%%import %s: only the common library (%%import common.NAME) is available", mod)
	}
	for i, n := range names {
		if err := p.importCommon(n, aliases[i], off); err != nil {
			return err
		}
	}
	return nil
}

// lkCommonSrc is the part of Lark's common.lark that FromLark provides,
// rewritten without lookbehind or lazy quantifiers.
const lkCommonSrc = `
DIGIT: "0".."9"
HEXDIGIT: "a".."f" | "A".."F" | DIGIT
INT: DIGIT+
SIGNED_INT: ["+"|"-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e"|"E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+"|"-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+"|"-"] NUMBER
ESCAPED_STRING: "\"" /([^"\\\n]|\\[^\n])*/ "\""
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_"|LETTER) ("_"|LETTER|DIGIT)*
WS_INLINE: (" "|/\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: /\/\*([^*]|\*+[^*\/])*\*+\//
SQL_COMMENT: /--[^\n]*/
`

var (
	lkCommonOnce sync.Once
	lkCommonDefs map[string]*lkDef
)

// lkCommon is the common library's definitions by name.
func lkCommon() map[string]*lkDef {
	lkCommonOnce.Do(func() {
		p := &lkParser{src: lkCommonSrc, byName: map[string]*lkDef{}}
		if err := p.parse(); err != nil {
			panic(err)
		}
		lkCommonDefs = p.byName
	})
	return lkCommonDefs
}

// importCommon defines alias as common's name; what it refers to is
// defined as common.NAME, apart from the user's names.
func (p *lkParser) importCommon(name, alias string, off int) error {
	lib := lkCommon()
	d, ok := lib[name]
	if !ok {
		return p.errorf(off, "%%import common.%s: not available (available: %s)", name, strings.Join(lkCommonNames(), " "))
	}
	var deps []string
	if err := p.define(alias, off, lkRename(d.body, off, &deps)); err != nil {
		return err
	}
	for len(deps) > 0 {
		n := deps[0]
		deps = deps[1:]
		if _, ok := p.byName["common."+n]; ok {
			continue
		}
		if err := p.define("common."+n, off, lkRename(lib[n].body, off, &deps)); err != nil {
			return err
		}
	}
	return nil
}

func lkCommonNames() []string {
	var names []string
	for n := range lkCommon() {
		if !strings.HasPrefix(n, "_") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// lkRename copies n with references to X renamed common.X (collected in
// deps) and positions set to off.
func lkRename(n *lkNode, off int, deps *[]string) *lkNode {
	c := *n
	c.off = off
	if c.kind == lkRef {
		*deps = append(*deps, c.text)
		c.text = "common." + c.text
	}
	c.subs = make([]*lkNode, len(n.subs))
	for i, s := range n.subs {
		c.subs[i] = lkRename(s, off, deps)
	}
	return &c
}

// expansions parses alternatives separated by |.
func (p *lkParser) expansions() (*lkNode, error) {
	n := &lkNode{kind: lkAlt, off: p.pos}
	for {
		a, err := p.alternative()
		if err != nil {
			return nil, err
		}
		n.subs = append(n.subs, a)
		p.space()
		if p.peek() != '|' {
			return n, nil
		}
		p.pos++
		p.blank()
	}
}

// alternative parses a sequence of items, up to |, ), ], the end of the
// definition, and an alias.
func (p *lkParser) alternative() (*lkNode, error) {
	n := &lkNode{kind: lkSeq, off: p.pos}
	for {
		p.space()
		switch p.peek() {
		case 0, '\n', '|', ')', ']':
			return n, nil
		}
		if strings.HasPrefix(p.src[p.pos:], "->") {
			p.pos += 2
			p.space()
			if p.ident() == "" {
				return nil, p.errorf(p.pos, "expected an alias name after ->, found %s", p.what())
			}
			p.space()
			switch p.peek() {
			case 0, '\n', '|', ')', ']':
				return n, nil
			}
			return nil, p.errorf(p.pos, "unexpected %s after an alias", p.what())
		}
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		n.subs = append(n.subs, it)
	}
}

// item parses an atom and its operator.
func (p *lkParser) item() (*lkNode, error) {
	a, err := p.atom()
	if err != nil {
		return nil, err
	}
	p.space()
	off := p.pos
	switch p.peek() {
	case '?':
		p.pos++
		return &lkNode{kind: lkRep, off: off, subs: []*lkNode{a}, min: 0, max: 1}, nil
	case '*':
		p.pos++
		return &lkNode{kind: lkRep, off: off, subs: []*lkNode{a}, min: 0, max: -1}, nil
	case '+':
		p.pos++
		return &lkNode{kind: lkRep, off: off, subs: []*lkNode{a}, min: 1, max: -1}, nil
	case '~':
		p.pos++
		p.space()
		lo, err := p.number()
		if err != nil {
			return nil, err
		}
		hi := lo
		p.space()
		if strings.HasPrefix(p.src[p.pos:], "..") {
			p.pos += 2
			p.space()
			if hi, err = p.number(); err != nil {
				return nil, err
			}
		}
		if lo < 0 || hi < lo {
			return nil, p.errorf(off, "bad repetition ~ %d..%d", lo, hi)
		}
		if hi > MaxRepeat {
			return nil, p.errorf(off, "repetition count %d is over the limit of %d", hi, MaxRepeat)
		}
		return &lkNode{kind: lkRep, off: off, subs: []*lkNode{a}, min: lo, max: hi}, nil
	}
	return a, nil
}

// lkMaxDepth bounds the nesting of ( ) and [ ] (as RE2 bounds a regex's).
const lkMaxDepth = 1000

func (p *lkParser) atom() (*lkNode, error) {
	off := p.pos
	if c := p.peek(); (c == '(' || c == '[') && p.depth >= lkMaxDepth {
		return nil, p.errorf(off, "brackets nested deeper than %d", lkMaxDepth)
	}
	switch c := p.peek(); {
	case c == '(':
		p.pos++
		p.depth++
		e, err := p.expansions()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.peek() != ')' {
			return nil, p.errorf(p.pos, "expected ')' (for the '(' at %s), found %s", p.at(off), p.what())
		}
		p.pos++
		p.depth--
		return e, nil
	case c == '[':
		save, depth := p.pos, p.depth
		p.pos++
		p.depth++
		e, err := p.expansions()
		if err == nil {
			p.space()
			if p.peek() == ']' {
				p.pos++
				p.depth--
				return &lkNode{kind: lkRep, off: off, subs: []*lkNode{e}, min: 0, max: 1}, nil
			}
			err = p.errorf(p.pos, "expected ']' (for the '[' at %s), found %s", p.at(off), p.what())
		}
		p.pos, p.depth = save, depth
		if cls, ok := p.charClass(); ok {
			return cls, nil
		}
		return nil, err
	case c == '"':
		s, fold, err := p.str()
		if err != nil {
			return nil, err
		}
		save := p.pos
		p.space()
		if !strings.HasPrefix(p.src[p.pos:], "..") {
			p.pos = save
			return &lkNode{kind: lkLit, off: off, text: s, fold: fold}, nil
		}
		p.pos += 2
		p.space()
		off2 := p.pos
		if p.peek() != '"' {
			return nil, p.errorf(p.pos, "expected a string after .., found %s", p.what())
		}
		s2, _, err := p.str()
		if err != nil {
			return nil, err
		}
		lo, n1 := utf8.DecodeRuneInString(s)
		hi, n2 := utf8.DecodeRuneInString(s2)
		if s == "" || n1 != len(s) || lo == utf8.RuneError && n1 == 1 {
			return nil, p.errorf(off, "a range needs single characters, not %q", s)
		}
		if s2 == "" || n2 != len(s2) || hi == utf8.RuneError && n2 == 1 {
			return nil, p.errorf(off2, "a range needs single characters, not %q", s2)
		}
		if hi < lo {
			return nil, p.errorf(off, "empty range %q..%q", s, s2)
		}
		return &lkNode{kind: lkRange, off: off, lo: lo, hi: hi}, nil
	case c == '/':
		return p.regex()
	case lkIdentByte(c, true):
		return &lkNode{kind: lkRef, off: off, text: p.ident()}, nil
	}
	return nil, p.errorf(off, "unexpected %s", p.what())
}

// at is the line:column of off.
func (p *lkParser) at(off int) string {
	msg := p.errorf(off, "").Error()
	msg = strings.TrimPrefix(msg, "lark: ")
	return strings.TrimSuffix(msg, ": ")
}

// charClass reads [...] at the position as a regex character class, up to
// the first ] (not escaped, not first) on the same line. So that a broken
// Lark optional is reported rather than read as a class, a class may not
// start with a quote nor hold ( ) or |.
func (p *lkParser) charClass() (*lkNode, bool) {
	off := p.pos
	i := off + 1
	if i < len(p.src) && p.src[i] == '"' {
		return nil, false
	}
	if i < len(p.src) && p.src[i] == '^' {
		i++
	}
	if i < len(p.src) && p.src[i] == ']' {
		i++
	}
	for ; i < len(p.src) && p.src[i] != '\n'; i++ {
		switch p.src[i] {
		case '(', ')', '|':
			return nil, false
		case '\\':
			i++
		case ']':
			pat := p.src[off : i+1]
			b := newRxBuilder()
			if _, _, err := b.regex(pat, "class"); err != nil {
				return nil, false
			}
			p.pos = i + 1
			return &lkNode{kind: lkRegex, off: off, text: pat}, true
		}
	}
	return nil, false
}

// str reads a "string" with its escapes and an i flag.
func (p *lkParser) str() (string, bool, error) {
	off := p.pos
	p.pos++
	var b strings.Builder
	for {
		if p.eof() || p.peek() == '\n' {
			return "", false, p.errorf(off, "unterminated string")
		}
		c := p.src[p.pos]
		if c == '"' {
			p.pos++
			break
		}
		if c != '\\' {
			b.WriteByte(c)
			p.pos++
			continue
		}
		escOff := p.pos
		p.pos++
		if p.eof() {
			return "", false, p.errorf(off, "unterminated string")
		}
		e := p.src[p.pos]
		p.pos++
		switch e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case '0':
			b.WriteByte(0)
		case '\\', '"', '\'':
			b.WriteByte(e)
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if p.pos+n > len(p.src) {
				return "", false, p.errorf(escOff, "bad escape \\%c%s", e, p.src[p.pos:])
			}
			v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
			if err != nil || e != 'x' && !utf8.ValidRune(rune(v)) {
				return "", false, p.errorf(escOff, "bad escape \\%c%s", e, p.src[p.pos:p.pos+n])
			}
			p.pos += n
			b.WriteRune(rune(v)) // as in Python, \xHH is the character U+00HH

		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	fold := false
	if p.peek() == 'i' && (p.pos+1 >= len(p.src) || !lkIdentByte(p.src[p.pos+1], false)) {
		p.pos++
		fold = true
	}
	return b.String(), fold, nil
}

// regex reads a /regex/ with its flags.
func (p *lkParser) regex() (*lkNode, error) {
	off := p.pos
	p.pos++
	var b strings.Builder
	for {
		if p.eof() || p.peek() == '\n' {
			return nil, p.errorf(off, "unterminated regex")
		}
		c := p.src[p.pos]
		p.pos++
		if c == '/' {
			break
		}
		if c == '\\' && p.peek() == '/' {
			b.WriteByte('/')
			p.pos++
			continue
		}
		b.WriteByte(c)
		if c == '\\' && !p.eof() && p.peek() != '\n' {
			b.WriteByte(p.src[p.pos])
			p.pos++
		}
	}
	var flags string
	for !p.eof() && lkIdentByte(p.peek(), false) {
		switch f := p.peek(); f {
		case 'i', 'm', 's':
			if !strings.ContainsRune(flags, rune(f)) {
				flags += string(f)
			}
		case 'u':
		default:
			return nil, p.errorf(p.pos, "regex flag %c is not supported (i, m, s are)", f)
		}
		p.pos++
	}
	pat := b.String()
	if pat == "" {
		return nil, p.errorf(off, "empty regex")
	}
	if flags != "" {
		pat = "(?" + flags + ")" + pat
	}
	return &lkNode{kind: lkRegex, off: off, text: pat}, nil
}

// lkCompiler turns the parsed definitions into a grammar.
type lkCompiler struct {
	p   *lkParser
	b   *rxBuilder
	idx map[string]int
	sep Seq // between the items of a rule: the ignored items, or nothing
}

func (p *lkParser) compile() (*Grammar, error) {
	if _, ok := p.byName["start"]; !ok {
		return nil, fmt.Errorf("lark: no start rule (the grammar's sentences are those of the rule named start)")
	}
	c := &lkCompiler{p: p, b: newRxBuilder(), idx: map[string]int{}}
	// The user's rules come first, so that a left recursion is reported
	// on one of them (Validate checks rules in order).
	for _, d := range p.defs {
		c.idx[d.name] = c.b.rule(d.name)
	}
	start := c.idx["start"]
	if len(p.ignores) > 0 {
		ig := c.b.rule("%ignore")
		for _, n := range p.ignores {
			alts, err := c.alts(n, true, "%ignore")
			if err != nil {
				return nil, err
			}
			for _, a := range alts {
				c.b.alt(ig, a...)
			}
		}
		c.sep = Seq{Ref(c.b.star("%ignore", Seq{Ref(ig)}))}
		s := c.b.rule("start/ignore")
		c.b.alt(s, append(append(append(Seq{}, c.sep...), Ref(start)), c.sep...)...)
		start = s
	}
	for _, d := range p.defs {
		alts, err := c.alts(d.body, lkTerminal(d.name), d.name)
		if err != nil {
			return nil, err
		}
		r := c.idx[d.name]
		for _, a := range alts {
			c.b.alt(r, a...)
		}
	}
	if err := c.checkProductive(); err != nil {
		return nil, err
	}
	g, err := c.b.finish(start)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "grammar: ")
		if strings.Contains(msg, "left recursive") {
			for _, d := range p.defs {
				if strings.HasPrefix(msg, "rule "+d.name+" is left recursive") {
					return nil, p.errorf(d.off, "%s; left recursion is not supported: write it with repetition (a: a \"x\" | \"y\" as a: \"y\" \"x\"*)", msg)
				}
			}
		}
		return nil, fmt.Errorf("lark: %s", msg)
	}
	return g, nil
}

// checkProductive refuses definitions that can never finish, naming a
// cause: a definition that needs itself, or one that matches nothing
// without needing any other failing definition (the others fail because
// they need these).
func (c *lkCompiler) checkProductive() error {
	prod := finiteRules(c.b.rules)
	var bad []*lkDef
	user := map[int]*lkDef{}
	for _, d := range c.p.defs {
		if !prod[c.idx[d.name]] {
			bad = append(bad, d)
			user[c.idx[d.name]] = d
		}
	}
	if len(bad) == 0 {
		return nil
	}
	// needs returns the failing definitions that d's rule reaches.
	needs := func(d *lkDef) map[*lkDef]bool {
		out := map[*lkDef]bool{}
		seen := map[int]bool{}
		stack := []int{c.idx[d.name]}
		for len(stack) > 0 {
			r := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, a := range c.b.rules[r].Alts {
				for _, e := range a {
					if e.Rule < 0 || prod[e.Rule] || seen[e.Rule] {
						continue
					}
					seen[e.Rule] = true
					if u, ok := user[e.Rule]; ok {
						out[u] = true
					}
					stack = append(stack, e.Rule)
				}
			}
		}
		return out
	}
	cause := bad[0]
	for _, d := range bad {
		if n := needs(d); n[d] || len(n) == 0 {
			cause = d
			break
		}
	}
	msg := fmt.Sprintf("%s can never finish (each alternative recurses forever or matches nothing)", cause.name)
	var others []string
	for _, d := range bad {
		if d != cause {
			others = append(others, d.name)
		}
	}
	if len(others) > 0 {
		msg += "; neither can " + strings.Join(others, ", ")
	}
	return c.p.errorf(cause.off, "%s", msg)
}

// alts compiles n as a list of alternatives (n's own when it is an
// alternation).
func (c *lkCompiler) alts(n *lkNode, term bool, prefix string) ([]Seq, error) {
	if n.kind != lkAlt {
		s, err := c.node(n, term, prefix)
		return []Seq{s}, err
	}
	var out []Seq
	for _, a := range n.subs {
		s, err := c.node(a, term, prefix)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// node compiles n in a terminal (no ignored items between its items) or a
// rule.
func (c *lkCompiler) node(n *lkNode, term bool, prefix string) (Seq, error) {
	switch n.kind {
	case lkAlt:
		alts, err := c.alts(n, term, prefix)
		if err != nil {
			return nil, err
		}
		if len(alts) == 1 {
			return alts[0], nil
		}
		r := c.b.fresh(prefix + "/alt")
		for _, a := range alts {
			c.b.alt(r, a...)
		}
		return Seq{Ref(r)}, nil
	case lkSeq:
		var out Seq
		for _, it := range n.subs {
			s, err := c.node(it, term, prefix)
			if err != nil {
				return nil, err
			}
			if len(s) == 0 {
				continue
			}
			if len(out) > 0 && !term {
				out = append(out, c.sep...)
			}
			out = append(out, s...)
		}
		return out, nil
	case lkRef:
		r, ok := c.idx[n.text]
		if !ok {
			kind := "rule"
			if lkTerminal(n.text) {
				kind = "terminal"
			}
			return nil, c.p.errorf(n.off, "undefined %s %s", kind, n.text)
		}
		return Seq{Ref(r)}, nil
	case lkLit:
		if n.fold && utf8.ValidString(n.text) {
			s, _, _ := c.b.literal(prefix, []rune(n.text), true)
			return s, nil
		}
		return Literal(n.text), nil
	case lkRegex:
		s, ok, err := c.b.regex(n.text, prefix)
		if err != nil {
			return nil, c.p.errorf(n.off, "%v", err)
		}
		if !ok {
			return Seq{c.b.nothing()}, nil
		}
		return s, nil
	case lkRange:
		e, ok := c.b.class(prefix, []rune{n.lo, n.hi})
		if !ok {
			return Seq{c.b.nothing()}, nil
		}
		return Seq{e}, nil
	case lkRep:
		s, err := c.node(n.subs[0], term, prefix)
		if err != nil {
			return nil, err
		}
		sep := c.sep
		if term {
			sep = nil
		}
		out, err := c.b.repeat(prefix, s, sep, n.min, n.max)
		if err != nil {
			return nil, c.p.errorf(n.off, "%v", err)
		}
		return out, nil
	}
	return nil, c.p.errorf(n.off, "internal error: node kind %d", n.kind)
}
