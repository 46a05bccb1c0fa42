package chat

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/ardanlabs/jinja"
)

// Limits on what one render may do. The engine has no limits of its own: unbounded macro
// recursion overflows the Go stack (a fatal error that recover cannot catch) and range(10**9)
// allocates a list of a billion items. A template comes from the model file or the operator, but
// the values it computes with may come from the request, so a render that passes a limit fails
// with an *Error (the request fails) instead of taking the process down.
const (
	// MaxMacroDepth is how deeply macro calls may nest (a macro calling itself counts each call).
	MaxMacroDepth = 200
	// MaxRangeItems is the most items one range() call may produce.
	MaxRangeItems = 100_000
	// MaxRangeTotal is the most items all range() calls of one render may produce together, which
	// bounds nested loops over ranges.
	MaxRangeTotal = 1_000_000
	// MaxOutput is the largest rendered prompt, in bytes.
	MaxOutput = 16 << 20
	// MaxWritten is the most bytes one render may write in all, checked as it writes: the prompt,
	// and the output of macros and blocks, which is written again where it is used. It bounds
	// the memory of a loop that writes a large value many times, long before the prompt is
	// complete and MaxOutput can be checked.
	MaxWritten = 4 * MaxOutput
	// MaxBuilt is the most bytes of text one render may make by concatenation (+, ~) and string
	// repetition (*), each result being at most MaxOutput: it bounds the time of a loop that
	// copies a large string again at every turn (a template that adds each message to a
	// variable copies the conversation once per message).
	MaxBuilt = 1 << 30
)

// Names of the functions the preprocessor puts at the start and end of every macro body to count
// the macro call depth (see renderLimits).
const (
	macroEnterName = "__chat_macro_enter"
	macroExitName  = "__chat_macro_exit"
	macroExitCall  = "{{ " + macroExitName + "() }}"
)

func macroEnterCall(name string) string { return "{{ " + macroEnterName + "(" + quote(name) + ") }}" }

// limitError is returned by the limit callables; the engine passes callable errors through
// unwrapped, so RenderOptions can tell a limit from other failures.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// renderLimits is the per-render state of the limit callables. A render runs on one goroutine, so
// it needs no locking; every render gets its own.
type renderLimits struct {
	depth      int
	rangeTotal int64
	repeated   int64 // bytes made by string repetition (mul)
	written    int64 // bytes written by output tags (out)
	built      int64 // bytes made by concatenation and repetition (build)
}

// install adds the limit callables to a render's variables; "range" shadows the engine's
// built-in, which has no bound.
func (l *renderLimits) install(data map[string]jinja.Value) {
	empty := jinja.NewString("")
	data[macroEnterName] = jinja.NewCallable(macroEnterName, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		l.depth++
		if l.depth > MaxMacroDepth {
			name := "?"
			if len(args) > 0 && args[0].IsString() {
				name = args[0].AsString()
			}
			return jinja.Undefined(), &limitError{fmt.Sprintf("macro %s: macro calls nested more than %d deep (unbounded recursion?)", name, MaxMacroDepth)}
		}
		return empty, nil
	})
	data[macroExitName] = jinja.NewCallable(macroExitName, func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
		l.depth--
		return empty, nil
	})
	data["range"] = jinja.NewCallable("range", l.rangeFunc)
	data[mulName] = jinja.NewCallable("*", l.mul)
	data[addName] = jinja.NewCallable("+", l.concat("+"))
	data[catName] = jinja.NewCallable("~", l.concat("~"))
	for name, callable := range boundedMethods {
		data[callable] = jinja.NewCallable(name, l.method(name))
	}
	for name, f := range engineFilters() {
		data[filterRenames[name]] = l.boundedFilter(name, f)
	}
	data[outName] = jinja.NewCallable("output", l.out)
}

// outName is the callable the preprocessor wraps the expression of every output tag in
// ({{ x }} becomes {{ __chat_out(x) }}, literal text included), to count what a render writes.
const outName = "__chat_out"

// out passes its argument through, counting the bytes it prints against MaxWritten.
func (l *renderLimits) out(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 1 {
		return jinja.Undefined(), fmt.Errorf("output: expected one value")
	}
	v := args[0]
	switch {
	case v.IsString():
		l.written += int64(len(v.AsString()))
	case v.IsList() || v.IsDict():
		l.written += int64(len(v.String()))
	default:
		l.written += 8 // a number, a boolean or nothing
	}
	if l.written > MaxWritten {
		return jinja.Undefined(), &limitError{fmt.Sprintf("the render writes more than %d bytes (the output of loops, macros and blocks included)", MaxWritten)}
	}
	return v, nil
}

// rangeFunc is Python's range with a bound on the number of items, checked before allocating.
func (l *renderLimits) rangeFunc(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) < 1 || len(args) > 3 {
		return jinja.Undefined(), fmt.Errorf("range: expected 1 to 3 arguments, got %d", len(args))
	}
	n := make([]int64, len(args))
	for i, a := range args {
		v, ok := rangeArg(a)
		if !ok {
			return jinja.Undefined(), fmt.Errorf("range: argument %d is not an integer", i+1)
		}
		n[i] = v
	}
	start, stop, step := int64(0), n[0], int64(1)
	if len(n) > 1 {
		start, stop = n[0], n[1]
	}
	if len(n) > 2 {
		step = n[2]
	}
	count, err := rangeLen(start, stop, step)
	if err != nil {
		return jinja.Undefined(), err
	}
	l.rangeTotal += count
	if l.rangeTotal > MaxRangeTotal {
		return jinja.Undefined(), &limitError{fmt.Sprintf("range: the render's range() calls produce more than %d items in all", MaxRangeTotal)}
	}
	items := make([]jinja.Value, count)
	for i := range items {
		items[i] = jinja.NewInt(start + int64(i)*step)
	}
	return jinja.NewList(items), nil
}

func rangeArg(v jinja.Value) (int64, bool) {
	switch {
	case v.IsInt():
		return v.AsInt(), true
	case v.IsBool():
		if v.AsBool() {
			return 1, true
		}
		return 0, true
	case v.IsFloat():
		f := v.AsFloat()
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1<<62 {
			return 0, false
		}
		return int64(f), true // as the engine's own range did
	}
	return 0, false
}

// rangeLen is the number of items of range(start, stop, step), or a limit error past
// MaxRangeItems. It is computed in float64 first so that huge bounds cannot overflow.
func rangeLen(start, stop, step int64) (int64, error) {
	if step == 0 {
		return 0, fmt.Errorf("range: step must not be zero")
	}
	span := (float64(stop) - float64(start)) / float64(step)
	if span <= 0 {
		return 0, nil
	}
	if span > MaxRangeItems {
		return 0, &limitError{fmt.Sprintf("range: more than %d items", MaxRangeItems)}
	}
	d, s := stop-start, step
	if s < 0 {
		d, s = -d, -s
	}
	return (d + s - 1) / s, nil
}

// rangeCall matches a range() call whose arguments are all integer literals.
var rangeCall = regexp.MustCompile(`\brange\s*\(\s*([-+]?\d+)\s*(?:,\s*([-+]?\d+)\s*)?(?:,\s*([-+]?\d+)\s*)?\)`)

// checkConstantRanges refuses, at compile time, a range() with literal arguments that would pass
// MaxRangeItems: such a template would fail every render that reaches it.
func checkConstantRanges(tag string, line int) error {
	for _, m := range rangeCall.FindAllStringSubmatch(tag, -1) {
		var n []int64
		for _, a := range m[1:] {
			if a == "" {
				continue
			}
			v, err := strconv.ParseInt(a, 10, 64)
			if err != nil {
				return fmt.Errorf("line %d: %s: more than %d items", line, m[0], MaxRangeItems)
			}
			n = append(n, v)
		}
		start, stop, step := int64(0), n[0], int64(1)
		if len(n) > 1 {
			start, stop = n[0], n[1]
		}
		if len(n) > 2 {
			step = n[2]
		}
		if _, err := rangeLen(start, stop, step); err != nil {
			if _, ok := err.(*limitError); ok {
				return fmt.Errorf("line %d: %s: more than %d items (the limit of a chat template's range)", line, m[0], MaxRangeItems)
			}
			return fmt.Errorf("line %d: %s: %v", line, m[0], err)
		}
	}
	return nil
}

// firstWord returns the statement keyword of a block tag's content ("macro", "endmacro", ...).
func firstWord(inner string) string {
	s := strings.TrimLeftFunc(inner, unicode.IsSpace)
	end := strings.IndexFunc(s, func(r rune) bool { return !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) })
	if end < 0 {
		return s
	}
	return s[:end]
}

// macroTag is a {% macro %} tag: the macro's name and the text of its parameter list.
type macroTag struct {
	name, params string
	line         int
}

func parseMacroTag(inner string, line int) macroTag {
	s := strings.TrimLeftFunc(inner, unicode.IsSpace)
	s = strings.TrimLeftFunc(strings.TrimPrefix(s, "macro"), unicode.IsSpace)
	name := firstWord(s)
	return macroTag{name: name, params: s[len(name):], line: line}
}

// callOf matches a call of a name: the name and an opening parenthesis.
var callOf = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*\(`)

// checkMacroDefaults refuses a macro whose parameter defaults call a macro of the template. The
// engine evaluates defaults before the body, where the depth count starts, so a default that
// calls its own macro (directly or through another default) would recurse without bound.
func checkMacroDefaults(macros []macroTag) error {
	names := make(map[string]bool, len(macros))
	for _, m := range macros {
		names[m.name] = true
	}
	for _, m := range macros {
		params := strings.TrimPrefix(strings.TrimSpace(m.params), "(")
		for _, c := range callOf.FindAllStringSubmatch(params, -1) {
			if names[c[1]] {
				return fmt.Errorf("line %d: macro %s: a parameter default calls macro %s, which is not supported (it could recurse without bound)", m.line, m.name, c[1])
			}
		}
	}
	return nil
}
