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

func TestRefuseMatchesDecoding(t *testing.T) {
	table := []Unsupported{{Name: "adapter", Why: "no adapters"}, {Name: "dry_", Prefix: true, Why: "no DRY"}}
	for _, c := range []struct {
		body, param string
	}{
		{`{"ADAPTER":"x"}`, "ADAPTER"},                                       // as encoding/json matches fields
		{`{"ad\u0061pter":"x"}`, "adapter"},                                  // escaped name
		{`{"adapter":"x","adapter":null}`, ""},                               // the last member counts
		{`{"Dry_Base":1}`, "Dry_Base"},                                       // prefix, any case
		{` { "messages" : [{"content":"\"adapter\": 1, }{"}] , "n":1 }`, ""}, // names inside values are values
		{`{"a":{"adapter":1},"b":[1,{"dry_x":2}],"adapter":"y"}`, "adapter"},
	} {
		err := Refuse([]byte(c.body), table)
		var re *Error
		switch {
		case c.param == "" && err != nil:
			t.Errorf("%s: refused: %v", c.body, err)
		case c.param != "" && (!errors.As(err, &re) || re.Param != c.param):
			t.Errorf("%s: %v, want a 400 naming %s", c.body, err, c.param)
		}
	}
}

func BenchmarkRefuse(b *testing.B) {
	body := []byte(`{"messages":[{"role":"user","content":"abc"}],"max_tokens":4,"temperature":0,"ignore_eos":true}`)
	table := []Unsupported{{Name: "adapter"}, {Name: "dry_", Prefix: true}}
	b.ReportAllocs()
	for b.Loop() {
		_ = Refuse(body, table)
	}
}
