package chat

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/ardanlabs/jinja"
)

// Three operators of the engine make values larger than their operands: string repetition
// ("x" * 1000000000 asks for a gigabyte, and n may come from the request), and + and ~, which in a
// loop can double a string or a list at every turn. The engine has no hook for operators, so the
// preprocessor rewrites every binary *, + and ~ of a tag into a call of a callable (rewriteOps)
// that bounds what the operator makes before it is made, and leaves everything else (numbers) to
// the engine's own operator (byEngine).

// mulName is the callable the preprocessor puts in place of the * operator.
const mulName = "__chat_mul"

// exprTok is a token of a tag's inside, as the engine's expression lexer splits it, with its
// place in the text.
type exprTok struct {
	kind       byte // 'n' name, '1' number, 's' string, 'o' operator or punctuation
	val        string
	start, end int
}

// lexTag splits a tag's inside into tokens by the engine's lexical rules (string literals with
// backslash escapes, digits, names, the two-character operators ** // == != <= >=, and single
// characters); spaces separate tokens.
func lexTag(s string) []exprTok {
	var toks []exprTok
	for i := 0; i < len(s); {
		c := s[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '\'' || c == '"':
			i++
			for i < len(s) && s[i] != c {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				i++
			}
			if i < len(s) {
				i++
			}
			toks = append(toks, exprTok{'s', s[start:i], start, i})
			continue
		case c >= '0' && c <= '9':
			for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
				(s[i] == '+' || s[i] == '-') && (s[i-1] == 'e' || s[i-1] == 'E')) {
				i++
			}
			toks = append(toks, exprTok{'1', s[start:i], start, i})
			continue
		case isIdentByte(c) && !(c >= '0' && c <= '9'):
			for i < len(s) && isIdentByte(s[i]) {
				i++
			}
			toks = append(toks, exprTok{'n', s[start:i], start, i})
			continue
		}
		if i+1 < len(s) {
			switch two := s[i : i+2]; two {
			case "**", "//", "==", "!=", "<=", ">=":
				toks = append(toks, exprTok{'o', two, i, i + 2})
				i += 2
				continue
			}
		}
		toks = append(toks, exprTok{'o', s[i : i+1], i, i + 1})
		i++
	}
	return toks
}

// tagKeywords are the names that are not operands: the statement and operator keywords. An
// operand ends where one begins.
var tagKeywords = map[string]bool{
	"and": true, "or": true, "not": true, "in": true, "is": true, "if": true, "else": true, "elif": true,
	"for": true, "set": true, "macro": true, "call": true, "filter": true, "with": true, "without": true,
	"import": true, "from": true, "as": true, "include": true, "extends": true, "block": true,
	"recursive": true, "do": true, "return": true, "generation": true,
}

// endsOperand reports whether t can be the last token of an operand (so that a + or - after it
// is binary, and a * after it is a product).
func endsOperand(t exprTok) bool {
	switch t.kind {
	case 's', '1':
		return true
	case 'n':
		return !tagKeywords[t.val]
	}
	return t.val == ")" || t.val == "]" || t.val == "}"
}

// matching returns the index of the bracket that closes (dir 1) or opens (dir -1) toks[i], or -1.
func matching(toks []exprTok, i, dir int) int {
	depth := 0
	for j := i; j >= 0 && j < len(toks); j += dir {
		if toks[j].kind != 'o' {
			continue
		}
		switch toks[j].val {
		case "(", "[", "{":
			depth += dir
		case ")", "]", "}":
			depth -= dir
		}
		if depth == 0 {
			return j
		}
	}
	return -1
}

// binaryLevel is the precedence of the binary operator at toks[i] in the engine's grammar (~ 1,
// + and - 2, * / // % 3, ** 4), or 0 when toks[i] is no binary operator (a + or - that does not
// follow an operand is a sign).
func binaryLevel(toks []exprTok, i int) int {
	if toks[i].kind != 'o' {
		return 0
	}
	switch toks[i].val {
	case "~":
		return 1
	case "+", "-":
		if i > 0 && endsOperand(toks[i-1]) {
			return 2
		}
	case "*", "/", "//", "%":
		return 3
	case "**":
		return 4
	}
	return 0
}

// operandStart is the first token of the left operand of the binary operator at toks[i], of
// precedence level: the operands and operators before it that bind at least as tightly (the
// engine's binary operators are left-associative), each operand with its unary signs and postfix
// attributes, subscripts, calls and filters. It returns -1 when the tokens do not have that shape.
func operandStart(toks []exprTok, i, level int) int {
	j := i - 1
	for {
		// One postfix expression, read backwards: an atom or bracket group, and what it follows
		// (".", "|", or an operand a call or subscript applies to).
		for {
			if j < 0 {
				return -1
			}
			t := toks[j]
			switch {
			case t.kind == 'o' && (t.val == ")" || t.val == "]" || t.val == "}"):
				j = matching(toks, j, -1)
				if j < 0 {
					return -1
				}
			case endsOperand(t):
			default:
				return -1
			}
			// toks[j] starts the piece just read.
			if j > 0 && toks[j-1].kind == 'o' && (toks[j-1].val == "." || toks[j-1].val == "|") {
				j -= 2
				continue
			}
			if (toks[j].val == "(" || toks[j].val == "[") && toks[j].kind == 'o' && j > 0 && endsOperand(toks[j-1]) {
				j--
				continue
			}
			break
		}
		// Unary signs: a + or - that does not follow an operand (they bind less tightly than a
		// postfix, level 5, such as a method call).
		for level <= 4 && j > 0 && toks[j-1].kind == 'o' && (toks[j-1].val == "-" || toks[j-1].val == "+") && binaryLevel(toks, j-1) == 0 {
			j--
		}
		if j > 0 && binaryLevel(toks, j-1) >= level {
			j -= 2
			continue
		}
		return j
	}
}

// operandEnd is the last token of the right operand of the binary operator at toks[i], of
// precedence level: the operands and operators after it that bind more tightly, or -1.
func operandEnd(toks []exprTok, i, level int) int {
	j := i + 1
	for {
		for j < len(toks) && toks[j].kind == 'o' && (toks[j].val == "-" || toks[j].val == "+") {
			j++
		}
		if j >= len(toks) {
			return -1
		}
		t := toks[j]
		switch {
		case t.kind == 'o' && (t.val == "(" || t.val == "[" || t.val == "{"):
			j = matching(toks, j, 1)
			if j < 0 {
				return -1
			}
		case endsOperand(t):
		default:
			return -1
		}
		// Postfix: .name, (args), [key], | filter.
		for j+1 < len(toks) && toks[j+1].kind == 'o' {
			switch toks[j+1].val {
			case ".", "|":
				if j+2 >= len(toks) || toks[j+2].kind != 'n' && toks[j+2].kind != '1' {
					return -1
				}
				j += 2
				continue
			case "(", "[":
				j = matching(toks, j+1, 1)
				if j < 0 {
					return -1
				}
				continue
			}
			break
		}
		if j+1 >= len(toks) || binaryLevel(toks, j+1) <= level {
			return j
		}
		j += 2
	}
}

// boundedOps are the binary operators the preprocessor rewrites, with their callables: those
// whose result can be larger than their operands.
var boundedOps = map[string]string{"*": mulName, "+": addName, "~": catName}

// rewriteOps turns every binary *, + and ~ of a tag's inside into a call of its callable with the
// same operands, so that "a * b" becomes "__chat_mul(a, b)" and "a ~ b ~ c" becomes
// "__chat_cat(__chat_cat(a, b), c)". An operator whose operands it cannot delimit is refused: the
// engine would not bound it.
func rewriteOps(inner string, line int) (string, error) {
	from := 0
	for {
		toks := lexTag(inner)
		op := -1
		for k, t := range toks {
			if t.start >= from && t.kind == 'o' && boundedOps[t.val] != "" {
				op = k
				break
			}
		}
		if op < 0 {
			return inner, nil
		}
		level := binaryLevel(toks, op)
		if level == 0 || op == 0 || !endsOperand(toks[op-1]) {
			// Not a binary operator (a sign, f(*args)): left as it is.
			from = toks[op].end
			continue
		}
		l, r := operandStart(toks, op, level), operandEnd(toks, op, level)
		if l < 0 || r < 0 {
			return "", fmt.Errorf("line %d: cannot bound the %s in %q (the limits of a chat template need its operands plain)", line, toks[op].val, strings.TrimSpace(inner))
		}
		var b strings.Builder
		b.WriteString(inner[:toks[l].start])
		b.WriteString(boundedOps[toks[op].val] + "(")
		b.WriteString(strings.TrimSpace(inner[toks[l].start:toks[op].start]))
		b.WriteString(", ")
		b.WriteString(inner[toks[op+1].start:toks[r].end])
		b.WriteString(")")
		b.WriteString(inner[toks[r].end:])
		// What is left to look at starts with this call: its operands may hold more.
		from = toks[l].start
		inner = b.String()
	}
}

// mul is the * operator with string repetition bounded: the result of one repetition, and all the
// repetitions of a render together, may not pass MaxOutput bytes (a repetition the size of a
// whole prompt is already suspect; a bigger one never fits). A count below one gives the empty
// string, as in Python. Any other product is the engine's.
func (l *renderLimits) mul(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 2 {
		return jinja.Undefined(), fmt.Errorf("*: expected two operands")
	}
	a, b := args[0], args[1]
	if !a.IsString() || !b.IsInt() {
		return byEngine("*", a, b)
	}
	s, n := a.AsString(), b.AsInt()
	if n <= 0 || s == "" {
		return jinja.NewString(""), nil
	}
	if n > int64(MaxOutput/len(s)) {
		return jinja.Undefined(), &limitError{fmt.Sprintf("string repetition: %d bytes * %d is more than %d bytes (the largest rendered prompt)", len(s), n, MaxOutput)}
	}
	size := int64(len(s)) * n
	l.repeated += size
	if l.repeated > MaxOutput {
		return jinja.Undefined(), &limitError{fmt.Sprintf("string repetition: the render's repetitions make more than %d bytes in all (the largest rendered prompt)", MaxOutput)}
	}
	if err := l.build(size); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(strings.Repeat(s, int(n))), nil
}

// Names of the callables that take the place of + and ~.
const (
	addName = "__chat_add"
	catName = "__chat_cat"
)

// printedLen is about the length of v's text (exact for a string).
func printedLen(v jinja.Value) int64 {
	switch {
	case v.IsString():
		return int64(len(v.AsString()))
	case v.IsList() || v.IsDict():
		return int64(len(v.String()))
	}
	return 24 // a number, a boolean or nothing
}

// build counts n bytes a render makes by concatenation or repetition against MaxBuilt.
func (l *renderLimits) build(n int64) error {
	l.built += n
	if l.built > MaxBuilt {
		return &limitError{fmt.Sprintf("the render builds more than %d bytes of text by concatenation and repetition", MaxBuilt)}
	}
	return nil
}

// concat is + (op "+") or ~ (op "~") with the size of what they make bounded: a string no longer
// than MaxOutput, a list of at most MaxRangeTotal items, and all of them together within
// MaxBuilt; a sum of numbers is the engine's.
func (l *renderLimits) concat(op string) func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
	return func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 2 {
			return jinja.Undefined(), fmt.Errorf("%s: expected two operands", op)
		}
		a, b := args[0], args[1]
		switch {
		case op == "~" || a.IsString() || b.IsString():
			n := printedLen(a) + printedLen(b)
			if n > MaxOutput {
				return jinja.Undefined(), &limitError{fmt.Sprintf("concatenation: %d bytes is more than %d bytes (the largest rendered prompt)", n, MaxOutput)}
			}
			if err := l.build(n); err != nil {
				return jinja.Undefined(), err
			}
			if a.IsString() && b.IsString() {
				return jinja.NewString(a.AsString() + b.AsString()), nil
			}
		case a.IsList() && b.IsList():
			n := int64(len(a.AsList().Items) + len(b.AsList().Items))
			if n > MaxRangeTotal {
				return jinja.Undefined(), &limitError{fmt.Sprintf("concatenation: a list of %d items is more than %d", n, MaxRangeTotal)}
			}
			if err := l.build(16 * n); err != nil {
				return jinja.Undefined(), err
			}
		case a.IsInt() && b.IsInt():
			return jinja.NewInt(a.AsInt() + b.AsInt()), nil
		}
		return byEngine(op, a, b)
	}
}

// engineOps are templates whose render hands the engine's own a <op> b to a callable.
var engineOps = sync.OnceValue(func() map[string]*jinja.Template {
	m := map[string]*jinja.Template{}
	for _, op := range []string{"*", "+", "~"} {
		t, err := jinja.Compile("{{ __keep(__a " + op + " __b) }}")
		if err != nil {
			panic("chat: " + err.Error())
		}
		m[op] = t
	}
	return m
})

// byEngine is the engine's a <op> b, for the operands whose result the limits leave alone.
func byEngine(op string, a, b jinja.Value) (jinja.Value, error) {
	out := jinja.Undefined()
	keep := jinja.NewCallable("__keep", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) > 0 {
			out = args[0]
		}
		return jinja.NewString(""), nil
	})
	if _, err := engineOps()[op].RenderValues(map[string]jinja.Value{"__a": a, "__b": b, "__keep": keep}); err != nil {
		return jinja.Undefined(), err
	}
	return out, nil
}

// Three of the engine's filters can also make a string far larger than their input: join (a
// list holding the same large string many times), replace (every occurrence, or with an empty
// pattern every character, replaced by a large string) and indent (a width of a billion). The
// preprocessor points "| join", "| replace" and "| indent" at bounded versions (filterRenames),
// variables of the render that check the size first and then call the engine's own filter. (The
// block form, {% filter indent %}, keeps the engine's, which looks block filters up among its
// built-ins only; it takes no arguments there, so its width is 4 and its result at most five
// times what the block wrote.)

// boundedFilters are the filters given bounded versions.
var boundedFilters = []string{"join", "replace", "indent"}

// filterRenames maps a filter's name in a template to the variable the preprocessor points it at.
var filterRenames = func() map[string]string {
	m := map[string]string{"tojson": toJSONFilter}
	for _, f := range boundedFilters {
		m[f] = "__chat_" + f
	}
	return m
}()

// engineFilters are the engine's own callables of the bounded filters.
var engineFilters = sync.OnceValue(func() map[string]jinja.Value {
	m := map[string]jinja.Value{}
	for _, name := range boundedFilters {
		t, err := jinja.Compile("{{ __keep(__filter_" + name + ") }}")
		if err != nil {
			panic("chat: " + err.Error())
		}
		var f jinja.Value
		keep := jinja.NewCallable("__keep", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			f = args[0]
			return jinja.NewString(""), nil
		})
		if _, err := t.RenderValues(map[string]jinja.Value{"__keep": keep}); err != nil || !f.IsCallable() {
			panic(fmt.Sprintf("chat: the engine has no filter %s (%v)", name, err))
		}
		m[name] = f
	}
	return m
})

// intArg is about the integer a filter reads from v (an upper bound for the size checks).
func intArg(v jinja.Value) int64 {
	switch {
	case v.IsInt():
		return v.AsInt()
	case v.IsFloat():
		f := v.AsFloat()
		if f > 1<<62 {
			return 1 << 62
		}
		return int64(f)
	case v.IsString():
		n, err := strconv.ParseInt(strings.TrimSpace(v.AsString()), 10, 64)
		if err != nil {
			return 0
		}
		return n
	}
	return 0
}

// arg is the filter argument at position i (after the filtered value) or named name.
func arg(args []jinja.Value, kwargs map[string]jinja.Value, i int, name string) (jinja.Value, bool) {
	if v, ok := kwargs[name]; ok {
		return v, true
	}
	if i < len(args) {
		return args[i], true
	}
	return jinja.Undefined(), false
}

// filterSize is about the size of what filter name makes of args (-1: no bound needed).
func filterSize(name string, args []jinja.Value, kwargs map[string]jinja.Value) int64 {
	if len(args) == 0 {
		return -1
	}
	switch name {
	case "join":
		if !args[0].IsList() {
			return -1
		}
		var sep int64
		if v, ok := arg(args, kwargs, 1, "d"); ok {
			sep = printedLen(v)
		}
		items := args[0].AsList().Items
		n := sep * int64(max(len(items)-1, 0))
		for _, it := range items {
			n += printedLen(it)
		}
		return n
	case "replace":
		s := args[0]
		old, ok1 := arg(args, kwargs, 1, "old")
		repl, ok2 := arg(args, kwargs, 2, "new")
		if !s.IsString() || !ok1 || !ok2 || !old.IsString() {
			return -1
		}
		n := int64(strings.Count(s.AsString(), old.AsString()))
		if c, ok := arg(args, kwargs, 3, "count"); ok {
			if c := intArg(c); c >= 0 {
				n = min(n, c)
			}
		}
		return printedLen(s) + n*max(printedLen(repl)-int64(len(old.AsString())), 0)
	case "indent":
		width := int64(4)
		if v, ok := arg(args, kwargs, 1, "width"); ok {
			width = intArg(v)
		}
		if width <= 0 {
			return -1
		}
		lines := int64(strings.Count(printedLenText(args[0]), "\n") + 1)
		if width > MaxOutput {
			return width
		}
		return printedLen(args[0]) + lines*width
	}
	return -1
}

// printedLenText is v's text when v is a string ("" otherwise: only strings have lines that
// matter for the bound).
func printedLenText(v jinja.Value) string {
	if v.IsString() {
		return v.AsString()
	}
	return ""
}

// boundedFilter is filter name with its result bounded by MaxOutput, and counted in MaxBuilt.
func (l *renderLimits) boundedFilter(name string, engine jinja.Value) jinja.Value {
	fn := engine.AsCallable().Fn
	return jinja.NewCallable(name, func(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
		if n := filterSize(name, args, kwargs); n >= 0 {
			if n > MaxOutput {
				return jinja.Undefined(), &limitError{fmt.Sprintf("filter %s: the result would be about %d bytes, more than %d bytes (the largest rendered prompt)", name, n, MaxOutput)}
			}
			if err := l.build(n); err != nil {
				return jinja.Undefined(), err
			}
		}
		return fn(args, kwargs)
	})
}

// Two string methods can make a string far larger than the string and its arguments: replace
// (as the filter) and format (every "{0}" replaced by a large argument, whose own "{1}"s the next
// argument replaces). The preprocessor rewrites "x.replace(a, b)" into
// "__chat_method_replace(x, a, b)" and "x.format(...)" into "__chat_method_format(x, ...)"
// (rewriteMethods); on a string they check the size first, on anything else they are the
// engine's own attribute call (methodByEngine).

// boundedMethods are the methods given bounded versions, with their callables' names.
var boundedMethods = map[string]string{"replace": "__chat_method_replace", "format": "__chat_method_format"}

// rewriteMethods turns the calls of the bounded methods in a tag's inside into calls of their
// callables, with the receiver as first argument.
func rewriteMethods(inner string, line int) (string, error) {
	from := 0
	for {
		toks := lexTag(inner)
		dot := -1
		for k := 0; k+2 < len(toks); k++ {
			t := toks[k]
			if t.start >= from && t.kind == 'o' && t.val == "." && toks[k+1].kind == 'n' && boundedMethods[toks[k+1].val] != "" &&
				toks[k+2].kind == 'o' && toks[k+2].val == "(" && k > 0 && endsOperand(toks[k-1]) {
				dot = k
				break
			}
		}
		if dot < 0 {
			return inner, nil
		}
		l, r := operandStart(toks, dot, 5), matching(toks, dot+2, 1)
		if l < 0 || r < 0 {
			return "", fmt.Errorf("line %d: cannot bound the .%s call in %q (the limits of a chat template need its receiver plain)", line, toks[dot+1].val, strings.TrimSpace(inner))
		}
		var b strings.Builder
		b.WriteString(inner[:toks[l].start])
		b.WriteString(boundedMethods[toks[dot+1].val] + "(")
		b.WriteString(inner[toks[l].start:toks[dot].start])
		if args := strings.TrimSpace(inner[toks[dot+2].end:toks[r].start]); args != "" {
			b.WriteString(", ")
			b.WriteString(args)
		}
		b.WriteString(")")
		b.WriteString(inner[toks[r].end:])
		from = toks[l].start
		inner = b.String()
	}
}

// printText is the text the engine prints for v.
func printText(v jinja.Value) string {
	switch {
	case v.IsString():
		return v.AsString()
	case v.IsNone() || v.IsUndefined() || v.IsCallable():
		return ""
	}
	return v.String()
}

// method is the callable of a bounded method: replace checks the size of its result before the
// engine makes it; format on a string is made here, each substitution checked (the engine's
// rules: for each argument i, every "{i}" and then the first "{}" become its text).
func (l *renderLimits) method(name string) func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
	return func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) == 0 {
			return jinja.Undefined(), fmt.Errorf(".%s: no receiver", name)
		}
		recv, rest := args[0], args[1:]
		if !recv.IsString() {
			return methodByEngine(name, recv, rest)
		}
		s := recv.AsString()
		tooLarge := func(n int64) error {
			if n > MaxOutput {
				return &limitError{fmt.Sprintf("method %s: the result would be about %d bytes, more than %d bytes (the largest rendered prompt)", name, n, MaxOutput)}
			}
			return l.build(n)
		}
		switch name {
		case "replace":
			if len(rest) >= 2 {
				old, repl := printText(rest[0]), printText(rest[1])
				n := int64(strings.Count(s, old))
				if len(rest) > 2 && rest[2].IsInt() && rest[2].AsInt() >= 0 {
					n = min(n, rest[2].AsInt())
				}
				if err := tooLarge(int64(len(s)) + n*int64(max(len(repl)-len(old), 0))); err != nil {
					return jinja.Undefined(), err
				}
			}
			return methodByEngine(name, recv, rest)
		default: // format
			out := s
			for i, a := range rest {
				text := printText(a)
				ph := "{" + strconv.Itoa(i) + "}"
				if err := tooLarge(int64(len(out)) + int64(strings.Count(out, ph))*int64(max(len(text)-len(ph), 0))); err != nil {
					return jinja.Undefined(), err
				}
				out = strings.ReplaceAll(out, ph, text)
				if err := tooLarge(int64(len(out)) + int64(max(len(text)-2, 0))); err != nil {
					return jinja.Undefined(), err
				}
				out = strings.Replace(out, "{}", text, 1)
			}
			return jinja.NewString(out), nil
		}
	}
}

// methodTemplates are compiled templates that call a method on __o with n arguments and hand
// the result to __keep, by method and n.
var methodTemplates sync.Map

// methodByEngine is the engine's own recv.name(args...).
func methodByEngine(name string, recv jinja.Value, args []jinja.Value) (jinja.Value, error) {
	key := name + "/" + strconv.Itoa(len(args))
	t, ok := methodTemplates.Load(key)
	if !ok {
		names := make([]string, len(args))
		for i := range args {
			names[i] = "__a" + strconv.Itoa(i)
		}
		c, err := jinja.Compile("{{ __keep(__o." + name + "(" + strings.Join(names, ", ") + ")) }}")
		if err != nil {
			return jinja.Undefined(), err
		}
		t, _ = methodTemplates.LoadOrStore(key, c)
	}
	out := jinja.Undefined()
	data := map[string]jinja.Value{"__o": recv, "__keep": jinja.NewCallable("__keep", func(a []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(a) > 0 {
			out = a[0]
		}
		return jinja.NewString(""), nil
	})}
	for i, a := range args {
		data["__a"+strconv.Itoa(i)] = a
	}
	if _, err := t.(*jinja.Template).RenderValues(data); err != nil {
		return jinja.Undefined(), err
	}
	return out, nil
}
