package constrain

import (
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// testLarkRegular are Lark grammars with regular languages and a regex
// with the same language.
var testLarkRegular = []struct{ lark, regex string }{
	{`start: "yes" | "no"`, `yes|no`},
	{"start: DIGIT+ (\".\" DIGIT+)?\nDIGIT: \"0\"..\"9\"", `[0-9]+(\.[0-9]+)?`},
	{"%import common.SIGNED_NUMBER\nstart: SIGNED_NUMBER", `[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?`},
	{"%import common (ESCAPED_STRING, WS)\nstart: ESCAPED_STRING", `"([^"\\\n]|\\[^\n])*"`},
	{"%import common.CNAME -> NAME\nstart: NAME", `[_a-zA-Z][_a-zA-Z0-9]*`},
	{"%import common.WS\n%ignore WS\nstart: \"a\" \"b\"+", `[ \t\f\r\n]*a([ \t\f\r\n]*b)+[ \t\f\r\n]*`},
	{"%ignore \" \"\nstart: x \"c\"?\nx: \"a\" Y\nY: \"b\" \"b\"", `( )*a( )*bb(( )*c)?( )*`},
	{`start: "ab" ~ 2..3 "c" ~ 2`, `(ab){2,3}cc`},
	{`start: ["+"|"-"] /[0-9]+/`, `[+-]?[0-9]+`},
	{`start: [a-z_] [a-z0-9_]* [^"\\]? [ \t]`, `[a-z_][a-z0-9_]*[^"\\]?[ \t]`},
	{"start: \"select\"i \" \" NAME\nNAME: /[a-z]+/", `(?i:select) [a-z]+`},
	{`start: ("α".."ω")+ "😀".."😂"`, `[α-ω]+[😀-😂]`},
	{`start: "\n\t\"\\\u00e9\x41\U0001F600\q"`, "\n\t\"\\\\éA😀\\\\q"},
	{`// a comment
?start: greeting   # another
      | farewell -> bye
greeting.2: "hi" NAME?
!farewell: "bye"
   | "ciao" |
     "adieu"
NAME: " " /[A-Z][a-z]*/`, `hi( [A-Z][a-z]*)?|bye|ciao|adieu`},
	{`start: ("a"? "b"?)* "c"`, `(a?b?)*c`},
	{`start: (x | "b")+
x: "a"*`, `[ab]*`},
	{`start: /hello/i /./s /^x$/`, `(?i:hello)(?s:.)x`},
	{`start: ( "a"
	| "b" // comment inside brackets
	) [
	"c" ]`, `(a|b)c?`},
	{"%import common.C_COMMENT\nstart: C_COMMENT", `/\*([^*]|\*+[^*/])*\*+/`},
	{"%import common (WS_INLINE, NEWLINE)\nstart: WS_INLINE NEWLINE", `[ \t]+(\r?\n)+`},
	{"start: a b\na: \"x\"?\nb: \"y\"*", `x?y*`},
}

func TestLarkAgreesWithRegex(t *testing.T) {
	for i, c := range testLarkRegular {
		g, err := FromLark(c.lark)
		if err != nil {
			t.Errorf("FromLark(%q): %v", c.lark, err)
			continue
		}
		re := regexp.MustCompile(`^(?:` + c.regex + `)$`)
		testAgree(t, c.lark, g, re, uint64(100+i), testPool...)
		// And the other way: the regex's sentences are the grammar's.
		rg, err := FromRegex(c.regex)
		if err != nil {
			t.Fatal(err)
		}
		gen := newTestGen(rg, uint64(i))
		for range 100 {
			if s := gen.sample(30, 60); !testAccepts(g, s) {
				t.Errorf("%q refuses %q (of %s)", c.lark, s, c.regex)
				break
			}
		}
	}
}

func testBalanced(s string) bool {
	d := 0
	for _, c := range s {
		switch c {
		case '(':
			d++
		case ')':
			if d--; d < 0 {
				return false
			}
		default:
			return false
		}
	}
	return d == 0
}

// TestLarkRecursive checks a grammar that is not regular: balanced
// parentheses.
func TestLarkRecursive(t *testing.T) {
	g, err := FromLark(`start: ("(" start ")")*`)
	if err != nil {
		t.Fatal(err)
	}
	gen := newTestGen(g, 1)
	var samples []string
	for range 200 {
		s := gen.sample(12, 80)
		if !testBalanced(s) {
			t.Fatalf("sample %q is not balanced", s)
		}
		samples = append(samples, s)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for _, c := range testCandidates(rng, samples, 2000) {
		if got, want := testAccepts(g, c), testBalanced(c); got != want {
			t.Fatalf("%q: accepted %v, balanced %v", c, got, want)
		}
	}
}

// testLarkJSON is JSON in Lark.
const testLarkJSON = `?start: value
?value: object
      | array
      | STRING
      | NUMBER             -> number
      | "true"             -> true
      | "false"            -> false
      | "null"             -> null

array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : STRING ":" value

NUMBER: "-"? ("0" | "1".."9" DIGIT*) ("." DIGIT+)? (("e"|"E") ["+"|"-"] DIGIT+)?
STRING: "\"" (/[^"\\\x00-\x1f]/ | "\\" (/["\\\/bfnrt]/ | "u" HEXDIGIT ~ 4))* "\""
%import common (DIGIT, HEXDIGIT)
%ignore /[ \t\n\r]+/
`

// TestLarkJSON checks a JSON grammar in Lark (recursive, with %ignore)
// against encoding/json: samples are JSON, and mutations are accepted
// exactly when they are JSON.
func TestLarkJSON(t *testing.T) {
	g, err := FromLark(testLarkJSON)
	if err != nil {
		t.Fatal(err)
	}
	gen := newTestGen(g, 2)
	var samples []string
	for range 300 {
		s := gen.sample(14, 200)
		if !json.Valid([]byte(s)) {
			t.Fatalf("sample %q is not JSON", s)
		}
		if !testAccepts(g, s) {
			t.Fatalf("refuses its sample %q", s)
		}
		samples = append(samples, s)
	}
	rng := rand.New(rand.NewPCG(2, 2))
	extra := []string{`{"a": [1, 2.5e3, -0.5, true, null, {}]}`, ` [ ] `, `"x"`, `{ "k" : "v" , "l" : [ ] }`,
		`{"a" 1}`, `[1,]`, `{a: 1}`, `tru`, `[1 2]`, `01`, `1.`, `.5`, `+1`, `"\q"`, `"\u12"`, "\"\x01\"", `"\u00e9\n"`}
	bad := 0
	for _, c := range append(testCandidates(rng, samples, 3000), extra...) {
		want := utf8.ValidString(c) && json.Valid([]byte(c))
		if got := testAccepts(g, c); got != want {
			t.Errorf("%q: accepted %v, JSON %v", c, got, want)
			if bad++; bad > 10 {
				break
			}
		}
	}
}

func TestLarkErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`start: "a" |  )`, `lark: 1:15: unexpected ')'`},
		{`start "a"`, `lark: 1:7: expected ':' after start, found '"'`},
		{`start: "abc`, `lark: 1:8: unterminated string`},
		{`start: /abc`, `lark: 1:8: unterminated regex`},
		{`start: a`, `lark: 1:8: undefined rule a`},
		{"start: \"x\"\n  | \"y\" B", `lark: 2:9: undefined terminal B`},
		{"start: \"a\"\nstart: \"b\"", `lark: 2:1: start is defined twice (first at 1:1)`},
		{`a: "x"`, `lark: no start rule`},
		{"start: a\na: \"x\" a", `lark: 2:1: a can never finish (each alternative recurses forever or matches nothing); neither can start`},
		{"start: \"x\" | a\na: (\"x\" a)+", `lark: 2:1: a can never finish`},
		{"start: a\na: a \"x\" | \"y\"", `lark: 2:1: rule a is left recursive (a -> a); left recursion is not supported`},
		{"start: b\nb: c? b \"x\" | \"y\"\nc: \"z\"", `lark: 2:1: rule b is left recursive`},
		{"start: start \"x\" | \"y\"", `lark: 1:1: rule start is left recursive`},
		{"%declare FOO\nstart: \"a\"", `lark: 1:1: %declare is not supported`},
		{"%import foo.BAR\nstart: \"a\"", `lark: 1:9: %import foo: only the common library`},
		{"%import common.NOPE\nstart: \"a\"", `lark: 1:9: %import common.NOPE: not available (available: CNAME CPP_COMMENT CR C_COMMENT DECIMAL DIGIT`},
		{`start: /a(?=b)/`, `lark: 1:8: regex: error parsing regexp: invalid or unsupported Perl syntax`},
		{`start: /\bfoo/`, `\b (word boundary)`},
		{`start: "ab".."z"`, `lark: 1:8: a range needs single characters, not "ab"`},
		{`start: "z".."a"`, `lark: 1:8: empty range "z".."a"`},
		{`start: "a" ~ 1001`, `lark: 1:12: repetition count 1001 is over the limit of 1000`},
		{`start: "a" ~ 3..2`, `lark: 1:12: bad repetition ~ 3..2`},
		{`start: "a" ~ x`, `lark: 1:14: expected a number`},
		{`start: ("a" "b"`, `lark: 1:16: expected ')' (for the '(' at 1:8), found end of grammar`},
		{`start: ["a" "b"`, `lark: 1:16: expected ']' (for the '[' at 1:8), found end of grammar`},
		{`start: [("a" | "b"]`, `lark: 1:19: expected ')' (for the '(' at 1:9), found ']'`},
		{"start: \"a\"\n  \"b\"", `lark: 2:3: expected a rule or terminal name, found '"'`},
		{`sta-rt: "a"`, `lark: 1:4: expected ':' after sta, found '-'`},
		{`start: "a" -> `, `lark: 1:15: expected an alias name after ->`},
		{`start: "a" -> x "b"`, `lark: 1:17: unexpected '"' after an alias`},
		{`start: /x/q`, `lark: 1:11: regex flag q is not supported`},
		{`start: "\u12"`, `lark: 1:9: bad escape \u12"`},
		{`start{x}: "a"`, `lark: 1:6: templates (start{...}) are not supported`},
		{`start: "a" ; "b"`, `lark: 1:12: unexpected ';'`},
		{`start: //`, ``},
		{"start: " + strings.Repeat(`"a" ~ 1000 `, 101), `counted repetitions expand to over 100000 grammar elements`},
		{"start: \"é\" \"x\" /\n", `lark: 1:16: unterminated regex`},
		{"start: A\nA: /[^\\x00-\\x{10FFFF}]/", `lark: 2:1: A can never finish`},
		{"start: " + strings.Repeat("(", 1001) + `"a"` + strings.Repeat(")", 1001), `lark: 1:1008: brackets nested deeper than 1000`},
		{"start: " + strings.Repeat("[", 1000) + `"a"` + strings.Repeat("]", 1000), ``},
		{"start: a | b\na: b \"x\"\nb: a \"y\"", `lark: 2:1: a can never finish (each alternative recurses forever or matches nothing); neither can start, b`},
	} {
		_, err := FromLark(c.src)
		if c.want == "" {
			if err != nil {
				t.Errorf("FromLark(%q): %v", c.src, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FromLark(%.60q) = %v,\n want an error with %q", c.src, err, c.want)
		}
	}
}

// TestLarkCommon compiles every terminal of the common library.
func TestLarkCommon(t *testing.T) {
	for _, n := range lkCommonNames() {
		g, err := FromLark("%import common." + n + "\nstart: " + n)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		gen := newTestGen(g, 3)
		if s := gen.sample(20, 40); !testAccepts(g, s) {
			t.Errorf("%s: refuses %q", n, s)
		}
	}
}
