package chat

import (
	"strings"
	"testing"

	"github.com/ardanlabs/jinja"
)

// The rewrite of *, + and ~ into callables keeps every expression's value: each template renders as the
// engine renders it unrewritten.
func TestOperatorRewriteKeepsValues(t *testing.T) {
	for _, src := range []string{
		`{{ 2 * 3 }}`, `{{ 'ab' * 3 }}`, `{{ 2 * 3 + 1 }}`, `{{ 1 + 2 * 3 }}`, `{{ 1 - 2 * 3 }}`,
		`{{ -2 * 3 }}`, `{{ 2 * -3 }}`, `{{ 2 - -2 * 3 }}`, `{{ 2 ** 3 * 2 }}`, `{{ 2 * 2 ** 3 }}`,
		`{{ 10 / 4 * 3 }}`, `{{ 7 % 4 * 2 }}`, `{{ 9 // 2 * 2 }}`, `{{ 2 * 9 // 2 }}`, `{{ 2 * 3 * 4 }}`,
		`{{ (1 + 2) * 3 }}`, `{{ 3 * (1 + 2) }}`, `{{ '-' * 3 ~ 'x' }}`, `{{ 'x' ~ '-' * 3 }}`,
		`{{ [1, 2, 3] | length * 2 }}`, `{{ 2 * [1, 2, 3] | length }}`, `{{ [1, 2][1] * 3 }}`,
		`{{ {'a': 2 * 3}['a'] }}`, `{{ {'a': 2}.a * 5 }}`, `{{ 'ab' * 2 if true else 'c' }}`,
		`{{ 'c' if false else 'ab' * 2 }}`, `{{ range(2 * 3) | list }}`, `{{ 1.5 * 2 }}`, `{{ '3' * 2 }}`,
		`{{ 2 * '3' }}`, `{{ true * 3 }}`, `{{ 'abcdef'[1:2 * 2] }}`, `{{ not 0 * 1 }}`, `{{ 2 * 3 == 6 }}`,
		`{{ 'x' * 0 }}|`, `{{ 1.5e1 * 2 }}`, `{{ 'a*b' * 2 }}`, `{{ "q\"*" * 2 }}`, `{{ ('a' ~ 'b') * 2 }}`,
		`{{ ['a', 'b'] | join('*') * 2 }}`, `{{ 'ab'.upper() * 2 }}`, `{{ 2 * 'ab'.upper() | length }}`,
		`{% set y = 'a' * 3 %}{{ y }}`, `{% if 2 * 2 == 4 %}ok{% endif %}`,
		`{% for i in range(2 * 2) %}{{ i * 2 }},{% endfor %}`, `{% for i in [1, 2] if i * 2 > 2 %}{{ i }}{% endfor %}`,
		`{% macro f(n) %}{{ n * 2 }}{% endmacro %}{{ f(3) * 2 }}{{ f(2 * 2) }}`,
		`{% set ns = namespace(v=2) %}{% set ns.v = ns.v * 5 %}{{ ns.v }}`,
		`{{ 1 + 2 }}`, `{{ 1 + 2.5 }}`, `{{ 'a' + 'b' }}`, `{{ 'a' + 1 }}`, `{{ 1 + 'a' }}`, `{{ [1] + [2, 3] }}`,
		`{{ 'a' ~ 1 }}`, `{{ 1 ~ 2 }}`, `{{ none ~ 'x' }}`, `{{ true ~ [1] }}`, `{{ 1.5 ~ 'x' }}`, `{{ 'a' ~ b ~ 'c' }}`,
		`{{ 1 + 2 ~ 3 + 4 }}`, `{{ 1 - 2 + 3 }}`, `{{ -1 + -2 }}`, `{{ 2 + 3 * 4 - 1 }}`, `{{ (1 + 2) ~ 'x' }}`,
		`{{ 'x' if 1 + 1 == 2 else 'y' }}`, `{{ [1, 2] + [3] | length }}`, `{{ ([1, 2] + [3]) | length }}`,
		`{{ {'a': 1 + 1}.a }}`, `{{ 'abc'[1 + 0:] }}`, `{{ true + 1 }}`, `{{ none + 1 }}`, `{{ 'a' ~ 'b' | upper }}`,
		`{% set ns = namespace(s='') %}{% for i in range(3) %}{% set ns.s = ns.s ~ i + 1 %}{% endfor %}{{ ns.s }}`,
		`{% for m in [1, 2] %}{{ loop.index0 + 1 }}{{ '-' ~ loop.index }}{% endfor %}`,
		`{{ ['a', 'b'] | join(', ') }}`, `{{ ['a', 1] | join }}`, `{{ 'ab' | join('-') }}`, `{{ [{'n': 'a'}, {'n': 'b'}] | join(',', attribute='n') }}`,
		`{{ 'a\nb' | indent(2) }}`, `{{ 'a\nb' | indent(2, true) }}`, `{{ 'a\nb' | indent(width=3) }}`, `{{ 'a\nb' | indent }}`,
		`{{ 'abcb' | replace('b', 'X') }}`, `{{ 'abcb' | replace('b', 'X', 1) }}`, `{{ 'ab' | replace('', '-') }}`,
		`{{ 'abcb'.replace('b', 'X') }}`, `{{ 'abcb'.replace('b', 'X', 1) }}`, `{{ 'abcb'.replace('b') }}`, `{{ 'ab'.replace('', 1) }}`,
		`{{ 'a b'.replace(' ', '_').upper() }}`, `{{ ('x' ~ 'y').replace('x', 'z') }}`, `{{ -1 if 'ab'.replace('a', '') == 'b' else 0 }}`,
		`{{ '{} and {}'.format('a', 2) }}`, `{{ '{0}{1}{0}'.format('x', none) }}`, `{{ '{1}{0}'.format('{1}', 'y') }}`,
		`{{ '{}'.format([1, 'a'], true) }}`, `{{ 'none'.format() }}`, `{{ {'replace': 'k'}.replace }}`,
		`{% set d = {'a': 'x'} %}{{ d.a.replace('x', 'yy') }}{{ d['a'].format() }}`,
	} {
		want, err := jinja.Compile(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		wantOut, err := want.Render(nil)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		pre, err := preprocess(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if strings.ContainsAny(strings.NewReplacer("'a*b'", "", `'q"*'`, "", "'*'", "", "**", "").Replace(pre), "*+~") {
			t.Errorf("%s: a *, + or ~ is left: %s", src, pre)
		}
		tm, err := NewTemplate(src, "", "")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		got, err := tm.Render(nil, false, nil)
		if err != nil || got != wantOut {
			t.Errorf("%s: got %q, %v; the engine renders %q (rewritten: %s)", src, got, err, wantOut, pre)
		}
	}
}

func TestOperatorRewriteShape(t *testing.T) {
	for in, want := range map[string]string{
		` 'x' * n `:               ` __chat_mul('x', n) `,
		` a * b * c `:             ` __chat_mul(__chat_mul(a, b), c) `,
		` a - b * -c ** 2 - d `:   ` a - __chat_mul(b, -c ** 2) - d `,
		` a + b * -c ** 2 - d `:   ` __chat_add(a, __chat_mul(b, -c ** 2)) - d `,
		` x|f(1) * y.z[0](2) `:    ` __chat_mul(x|f(1), y.z[0](2)) `,
		` f(*args) `:              ` f(*args) `,
		` set s = s ~ s * 2 `:     ` set s = __chat_cat(s, __chat_mul(s, 2)) `,
		` a ~ b ~ c `:             ` __chat_cat(__chat_cat(a, b), c) `,
		` a - b + c `:             ` __chat_add(a - b, c) `,
		` -a + +b `:               ` __chat_add(-a, +b) `,
		` a ~ b + c ~ d `:         ` __chat_cat(__chat_cat(a, __chat_add(b, c)), d) `,
		` if a + 1 > b ~ 'x' `:    ` if __chat_add(a, 1) > __chat_cat(b, 'x') `,
		` 'a+b' ~ "c~d" `:         ` __chat_cat('a+b', "c~d") `,
		` not x ~ y `:             ` not __chat_cat(x, y) `,
		` a if b else c ~ d `:     ` a if b else __chat_cat(c, d) `,
		` {'k': a + 1}[k] `:       ` {'k': __chat_add(a, 1)}[k] `,
		` for i in range(n + 1) `: ` for i in range(__chat_add(n, 1)) `,
	} {
		got, err := rewriteOps(in, 1)
		if err != nil || got != want {
			t.Errorf("%q: got %q, %v, want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		` s.replace('a', b) `:            ` __chat_method_replace(s, 'a', b) `,
		` x.y[0].replace(a, b).upper() `: ` __chat_method_replace(x.y[0], a, b).upper() `,
		` '{}'.format(a).format(b) `:     ` __chat_method_format(__chat_method_format('{}', a), b) `,
		` -s.replace(a, b) `:             ` -__chat_method_replace(s, a, b) `,
		` f(s).format() `:                ` __chat_method_format(f(s)) `,
		` s | replace(a, b) `:            ` s | replace(a, b) `,
	} {
		got, err := rewriteMethods(in, 1)
		if err != nil || got != want {
			t.Errorf("%q: got %q, %v, want %q", in, got, err, want)
		}
	}
	if _, err := rewriteOps(` a * `, 3); err == nil || !strings.Contains(err.Error(), "line 3: cannot bound the *") {
		t.Errorf("a dangling *: %v", err)
	}
}

// String repetition is bounded by MaxOutput: a constant one fails the load, one the request
// sizes fails its render, and so do many small ones (in a loop) that together pass the limit.
func TestStringRepetitionLimits(t *testing.T) {
	for _, src := range []string{
		`{{ "x" * 1000000000 }}`,
		`{{ "x" * 1000000000000000 }}`,
		`{% set s = 'ab' * 9000000 %}`,
		`{% for i in range(100) %}{{ 'x' * 1000000 }}{% endfor %}`,
	} {
		_, err := NewTemplate(src, "", "")
		limitErr(t, src, err, "string repetition")
	}

	tm, err := NewTemplate(`{{ "x" * (messages[0].content|int) }}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tm.Render([]Message{{Role: "user", Content: "5"}}, false, nil); err != nil || out != "xxxxx" {
		t.Fatalf("got %q, %v", out, err)
	}
	if out, err := tm.Render([]Message{{Role: "user", Content: "-5"}}, false, nil); err != nil || out != "" {
		t.Fatalf("negative count: got %q, %v (Python gives the empty string)", out, err)
	}
	_, err = tm.Render([]Message{{Role: "user", Content: "1000000000"}}, false, nil)
	limitErr(t, "repetition from the request", err, "string repetition: 1 bytes * 1000000000 is more than 16777216 bytes")
	if out, err := tm.Render([]Message{{Role: "user", Content: "16777216"}}, false, nil); err != nil || len(out) != MaxOutput {
		t.Fatalf("at the limit: %d bytes, %v", len(out), err)
	}

	tm, err = NewTemplate(`{% for m in messages %}{% for i in range(100) %}{{ 'x' * (m.content|int) }}{% endfor %}{% endfor %}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tm.Render([]Message{{Role: "user", Content: "1000000"}}, false, nil)
	limitErr(t, "repetition in a loop", err, "repetitions make more than 16777216 bytes in all")
}

// Concatenation (+ and ~) is bounded: a string that doubles in a loop fails when it passes
// MaxOutput, a list when it passes MaxRangeTotal items, and a loop that copies a large string at
// every turn when it has built MaxBuilt bytes.
func TestConcatenationLimits(t *testing.T) {
	for src, want := range map[string]string{
		`{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}`:          "concatenation: 33554432 bytes is more than 16777216",
		`{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}`:          "concatenation: 33554432 bytes",
		`{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}`:          "concatenation: a list of 1048576 items is more than 1000000",
		`{% set ns = namespace(s='x' * 10000000) %}{% for i in range(1000) %}{% set t = ns.s ~ 'y' %}{% endfor %}`: "builds more than 1073741824 bytes",
	} {
		_, err := NewTemplate(src, "", "")
		limitErr(t, src, err, want)
	}
	// A template that gathers the conversation in a variable is fine.
	tm, err := NewTemplate(`{% set ns = namespace(s='') %}{% for m in messages %}{% set ns.s = ns.s + m.role + ': ' + m.content + '\n' %}{% endfor %}{{ ns.s }}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]Message, 200)
	for i := range msgs {
		msgs[i] = Message{Role: "user", Content: strings.Repeat("z", 10000)}
	}
	if out, err := tm.Render(msgs, false, nil); err != nil || len(out) != 200*(10000+7) {
		t.Fatalf("got %d bytes, %v", len(out), err)
	}
}

// The filters that can make a string far larger than their input (join, replace, indent) are
// bounded by MaxOutput too.
func TestFilterLimits(t *testing.T) {
	for src, want := range map[string]string{
		`{% set s = 'x' * 1000000 %}{% set ns = namespace(l=[]) %}{% for i in range(100) %}{% set ns.l = ns.l + [s] %}{% endfor %}{{ ns.l | join }}`: "filter join: the result would be about 100000000 bytes",
		`{{ 'a\nb' | indent(1000000000) }}`:               "filter indent",
		`{{ 'a\nb' | indent(width=1000000000000) }}`:      "filter indent",
		`{{ ('x' * 100000) | replace('', 'y' * 1000) }}`:  "filter replace",
		`{{ ('x' * 100000) | replace('x', 'y' * 1000) }}`: "filter replace",
	} {
		_, err := NewTemplate(src, "", "")
		limitErr(t, src, err, want)
	}
	tm, err := NewTemplate(`{{ messages[0].content | replace('', messages[0].content) }}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tm.Render([]Message{{Role: "user", Content: "ab"}}, false, nil); err != nil || out != "abaabbab" {
		t.Fatalf("got %q, %v", out, err)
	}
	_, err = tm.Render([]Message{{Role: "user", Content: strings.Repeat("z", 100000)}}, false, nil)
	limitErr(t, "replace from the request", err, "filter replace")
}

// The string methods replace and format are bounded as the filters are.
func TestMethodLimits(t *testing.T) {
	for src, want := range map[string]string{
		`{{ ('x' * 100000).replace('', 'y' * 1000) }}`:          "method replace: the result would be about",
		`{{ ('x' * 100000).replace('x', 'y' * 1000, 100000) }}`: "method replace",
		`{{ ('{0}' * 100000).format('y' * 1000) }}`:             "method format",
		`{{ ('{0}' * 1000).format('{1}' * 1000, 'z' * 1000) }}`: "method format",
	} {
		_, err := NewTemplate(src, "", "")
		limitErr(t, src, err, want)
	}
	tm, err := NewTemplate(`{{ messages[0].content.replace('', messages[0].content) }}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tm.Render([]Message{{Role: "user", Content: "ab"}}, false, nil); err != nil || out != "abaabbab" {
		t.Fatalf("got %q, %v", out, err)
	}
	_, err = tm.Render([]Message{{Role: "user", Content: strings.Repeat("z", 100000)}}, false, nil)
	limitErr(t, "replace from the request", err, "method replace")
}

// The variables the limits add to a render have names of their own: one shadowing another would
// silently drop a bound (as a filter and a method of the same name once did).
func TestLimitNamesDistinct(t *testing.T) {
	data := map[string]jinja.Value{}
	var l renderLimits
	l.install(data)
	seen := map[string]bool{}
	add := func(n string) {
		if seen[n] {
			t.Errorf("%s is used twice", n)
		}
		seen[n] = true
	}
	for _, n := range []string{mulName, addName, catName, outName, macroEnterName, macroExitName, "range"} {
		add(n)
	}
	for _, n := range filterRenames {
		add(n)
	}
	for _, n := range boundedMethods {
		add(n)
	}
	if len(data) != len(seen)-1 { // tojson's is installed by RenderOptions
		t.Errorf("install adds %d variables, the names are %d", len(data), len(seen)-1)
	}
}
