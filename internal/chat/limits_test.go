package chat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// limitErr asserts that err is a limit *Error whose text contains want.
func limitErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) || !ce.Limit || ce.Raised {
		t.Fatalf("%s: got %v (%#v), want a limit error", what, err, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: got %q, want it to contain %q", what, err, want)
	}
}

func TestRecursiveMacroRefusedAtCompile(t *testing.T) {
	for _, src := range []string{
		`{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}`,
		// Mutual recursion, and recursion through a call block.
		`{% macro f() %}{{ g() }}{% endmacro %}{% macro g() %}{{ f() }}{% endmacro %}{{ f() }}`,
		`{% macro g() %}{{ caller() }}{% endmacro %}{% macro f() %}{% call g() %}{{ f() }}{% endcall %}{% endmacro %}{{ f() }}`,
	} {
		_, err := NewTemplate(src, "", "")
		limitErr(t, src, err, "nested more than 200 deep")
	}
	_, err := NewTemplate(`{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}`, "", "")
	if want := "chat template: a render of a sample conversation fails: macro f: macro calls nested more than 200 deep (unbounded recursion?)"; err.Error() != want {
		t.Fatalf("got %q, want %q", err, want)
	}
}

func TestRecursionFromRequestFailsTheRender(t *testing.T) {
	// Recursion as deep as the request says: fine for a small number, an error past the limit.
	tm, err := NewTemplate(`{% macro f(n) %}{% if n > 0 %}.{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(messages[0].content|int) }}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tm.Render([]Message{{Role: "user", Content: "150"}}, false, nil)
	if err != nil || out != strings.Repeat(".", 150) {
		t.Fatalf("depth 150: got %q, %v", out, err)
	}
	_, err = tm.Render([]Message{{Role: "user", Content: "1000000"}}, false, nil)
	limitErr(t, "depth 1000000", err, "macro f: macro calls nested more than 200 deep")
	// The depth count is per render and balanced: many shallow calls are fine.
	tm, err = NewTemplate(`{% macro f() %}x{% endmacro %}{% for i in range(1000) %}{{ f() }}{% endfor %}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tm.Render(nil, false, nil); err != nil || len(out) != 1000 {
		t.Fatalf("got %d bytes, %v", len(out), err)
	}
}

func TestMacroDefaultCallingMacroRefused(t *testing.T) {
	_, err := NewTemplate(`{% macro f(n=f()) %}{{ n }}{% endmacro %}{{ f() }}`, "", "")
	if err == nil || !strings.Contains(err.Error(), "line 1: macro f: a parameter default calls macro f") {
		t.Fatalf("got %v", err)
	}
}

func TestRangeLimits(t *testing.T) {
	for _, src := range []string{
		`{% for i in range(100000000) %}{% endfor %}`,
		`{{ range(0, 200000) | length }}`,
		`{{ range(-1, -300000, -2) | length }}`,
		`{{ range(99999999999999999999999) }}`,
	} {
		_, err := NewTemplate(src, "", "")
		if err == nil || !strings.Contains(err.Error(), "chat template: compile: line 1: range(") {
			t.Fatalf("%s: got %v, want a compile error", src, err)
		}
	}
	// Nested loops over ranges that always run too long fail at compile time, by the sample render.
	_, err := NewTemplate(`{% for i in range(1000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}`, "", "")
	limitErr(t, "nested", err, "more than 1000000 items in all")

	tm, err := NewTemplate(`{% for i in range(messages[0].content|int) %}x{% endfor %}{{ range(10, 0, -3) | list }}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tm.Render([]Message{{Role: "user", Content: "3"}}, false, nil)
	if err != nil || out != "xxx[10, 7, 4, 1]" {
		t.Fatalf("got %q, %v", out, err)
	}
	_, err = tm.Render([]Message{{Role: "user", Content: "100000000"}}, false, nil)
	limitErr(t, "range from request", err, "range: more than 100000 items")
	if _, err := tm.Render([]Message{{Role: "user", Content: "100000"}}, false, nil); err != nil {
		t.Fatalf("range at the limit: %v", err)
	}

	tm, err = NewTemplate(`{{ range(1, 2, 0) }}`, "", "")
	if err == nil {
		_, err = tm.Render(nil, false, nil)
	}
	if err == nil || !strings.Contains(err.Error(), "step must not be zero") {
		t.Fatalf("step 0: got %v", err)
	}
}

func TestOutputLimit(t *testing.T) {
	tm, err := NewTemplate(`{% for i in range(messages[0].content|int) %}{{ messages[0].content }}{% endfor %}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	content := "90000" + strings.Repeat(" ", 250)
	_, err = tm.Render([]Message{{Role: "user", Content: content}}, false, nil)
	limitErr(t, "output", err, "larger than 16777216 bytes")
}

// The limits change nothing for the real templates: they compile and the golden tests (which
// render them) pass; here they are also checked to hold no macro and no constant range the limits
// would refuse.
func TestRealTemplatesWithinLimits(t *testing.T) {
	files, err := filepath.Glob("testdata/templates/*.jinja")
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewTemplate(string(src), "<s>", "</s>"); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// Tool call arguments are a string nothing else has parsed: JSON nested too deep stays a string.
func TestDeepToolArgumentsStayAString(t *testing.T) {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	if v := argumentsValue(`{"a":` + deep + `}`); !v.IsString() {
		t.Fatalf("got a %v", v)
	}
	if _, err := decodeJSON([]byte(strings.Repeat("[", 9999) + strings.Repeat("]", 9999))); err != nil {
		t.Fatalf("depth 9999: %v", err)
	}
}

// What a render writes is counted as it is written, so a loop that writes a large value many
// times fails when it passes MaxWritten, not after it has built the whole text in memory.
func TestWrittenLimit(t *testing.T) {
	tm, err := NewTemplate(`{% set s = messages[0].content %}{% for i in range(100000) %}{{ s }}{% endfor %}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tm.Render([]Message{{Role: "user", Content: "ab"}}, false, nil); err != nil || len(out) != 200000 {
		t.Fatalf("got %d bytes, %v", len(out), err)
	}
	_, err = tm.Render([]Message{{Role: "user", Content: strings.Repeat("x", 1000)}}, false, nil)
	limitErr(t, "a large value written in a loop", err, "the render writes more than 67108864 bytes")

	// Literal text counts too, and so does what a macro writes.
	_, err = NewTemplate(`{% for i in range(100000) %}`+strings.Repeat("y", 1000)+`{% endfor %}`, "", "")
	limitErr(t, "literal text in a loop", err, "the render writes more than")
	_, err = NewTemplate(`{% macro f() %}`+strings.Repeat("y", 1000)+`{% endmacro %}{% for i in range(100000) %}{% set x = f() %}{% endfor %}`, "", "")
	limitErr(t, "a macro's output", err, "the render writes more than")
}
