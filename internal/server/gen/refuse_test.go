package gen

import (
	"errors"
	"testing"
)

func TestRefuse(t *testing.T) {
	table := []Unsupported{
		{Name: "adapter", Why: "no adapters"},
		{Name: "reasoning_effort", Why: "no budgets", Pass: ReasoningOff},
		{Name: "dry_", Prefix: true, Why: "no DRY"},
	}
	for _, c := range []struct {
		body, param string // param "": refused nothing
	}{
		{`{"model":"m","adapter":null}`, ""},
		{`{"adapter":"x"}`, "adapter"},
		{`{"reasoning_effort":"none"}`, ""},
		{`{"reasoning_effort":"off"}`, ""},
		{`{"reasoning_effort":"high"}`, "reasoning_effort"},
		{`{"dry_anything":1}`, "dry_anything"},
		{`{"dry_z":1,"adapter":"x","dry_a":2}`, "adapter"}, // name order
		{`{"dry_z":1,"dry_a":2}`, "dry_a"},
		{`[1,2]`, ""}, // not an object: DecodeJSON answers it
		{`null`, ""},
	} {
		err := Refuse([]byte(c.body), table)
		if c.param == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.body, err)
			}
			continue
		}
		var re *Error
		if !errors.As(err, &re) || re.Status != 400 || re.Param != c.param {
			t.Errorf("%s: %v, want a 400 naming %s", c.body, err, c.param)
		}
	}
}
