package gen

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// enumFormat is a response_format of a string enum of n values, distinct
// per seed.
func enumFormat(n, seed int) json.RawMessage {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("value-%d-%d", seed, i)
	}
	schema, _ := json.Marshal(map[string]any{"type": "string", "enum": vals})
	return json.RawMessage(`{"type":"json_schema","json_schema":{"name":"e","schema":` + string(schema) + `}}`)
}

// cached is the total Bytes of the cache's grammars and their count.
func (c *grammarCache) cached() (total int64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.Front(); e != nil; e = e.Next() {
		total += e.Value.(*grammarEntry).g.Bytes()
		n++
	}
	return total, n
}

// The grammar cache keeps what fits its budget in bytes, the most
// recently used first, and refuses a grammar that alone is over it.
func TestGrammarCacheBudget(t *testing.T) {
	const budget = 4 << 20
	var b Base
	b.SetGrammarBudget(budget)
	first, err := b.Constraint("response_format", enumFormat(1000, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	size := first.Bytes()
	if size < budget/16 || size > budget/2 {
		t.Fatalf("a 1000-value enum holds %d bytes: resize the test", size)
	}
	for seed := 1; seed < 40; seed++ {
		if _, err := b.Constraint("response_format", enumFormat(1000, seed), nil); err != nil {
			t.Fatal(err)
		}
		// The first stays cached while it is used.
		if g, _ := b.Constraint("response_format", enumFormat(1000, 0), nil); g != first {
			t.Fatalf("after %d others, the most used grammar was dropped", seed)
		}
	}
	total, n := b.grammars.cached()
	if total > budget || n < 2 {
		t.Errorf("%d grammars of %d bytes in all cached, budget %d", n, total, budget)
	}
	if g, _ := b.Constraint("response_format", enumFormat(1000, 1), nil); g == nil {
		t.Fatal("no grammar")
	}
	// Alone over the budget: a 400 naming the parameter and the setting.
	_, err = b.Constraint("response_format", enumFormat(5000, 0), nil)
	var re *Error
	if !errors.As(err, &re) || re.Status != 400 || re.Param != "response_format" || !strings.Contains(re.Msg, "--grammar-cache-mb") {
		t.Errorf("a grammar over the budget: %#v", err)
	}
}

// Grammars whose start rule is past the matcher's limits are 400s naming
// the grammar's field and the limit.
func TestGrammarLimitErrors(t *testing.T) {
	var b Base
	alts := make([]string, 20_000)
	for i := range alts {
		alts[i] = fmt.Sprintf(`"a%d"`, i)
	}
	lark, _ := json.Marshal(map[string]any{"type": "lark", "value": "start: " + strings.Join(alts, " | ")})
	_, err := b.Constraint("response_format", nil, lark)
	var re *Error
	if !errors.As(err, &re) || re.Status != 400 || re.Param != "grammar.value" || !strings.Contains(re.Msg, "MaxStacks") {
		t.Errorf("20,000 alternatives: %#v", err)
	}
	// The size limit, also named.
	alts = make([]string, 50_000)
	for i := range alts {
		alts[i] = fmt.Sprintf(`"a%d"`, i)
	}
	lark, _ = json.Marshal(map[string]any{"type": "lark", "value": "start: " + strings.Join(alts, " | ")})
	_, err = b.Constraint("response_format", nil, lark)
	if !errors.As(err, &re) || re.Status != 400 || re.Param != "grammar.value" || !strings.Contains(re.Msg, "MaxGrammarSize") {
		t.Errorf("50,000 alternatives: %#v", err)
	}
}
