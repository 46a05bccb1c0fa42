package observe

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestLoRAInfo: one series at a time, its labels the union of the
// engines' adapters (sorted, without repeats), its value the time of the
// last update; the HELP text is set.
func TestLoRAInfo(t *testing.T) {
	m := NewMetrics()
	clock := time.Unix(1000, 500_000_000)
	m.engine.lora.now = func() time.Time { return clock }
	a, b := m.Engine().LoRAInfo("m1"), m.Engine().LoRAInfo("m2")
	series := func() []*dto.Metric {
		t.Helper()
		fams, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == LoRAInfoName {
				if f.GetHelp() != LoRAInfoHelp || f.GetType() != dto.MetricType_GAUGE {
					t.Fatalf("HELP %q, type %v", f.GetHelp(), f.GetType())
				}
				return f.GetMetric()
			}
		}
		return nil
	}
	if s := series(); len(s) != 0 {
		t.Fatalf("series before any report: %v", s)
	}
	a(4, []string{"x", "b"}, nil)
	b(2, []string{"b", "c"}, []string{"z"})
	clock = clock.Add(time.Second)
	b(2, []string{"b", "c"}, []string{"z"})
	s := series()
	if len(s) != 1 {
		t.Fatalf("%d series, want 1: %v", len(s), s)
	}
	want := map[string]string{"max_lora": "4", "running_lora_adapters": "b,c,x", "waiting_lora_adapters": "z"}
	for _, l := range s[0].GetLabel() {
		if want[l.GetName()] != l.GetValue() {
			t.Errorf("label %s=%q, want %q", l.GetName(), l.GetValue(), want[l.GetName()])
		}
	}
	if v := s[0].GetGauge().GetValue(); v != 1001.5 {
		t.Errorf("value %v, want the last update time 1001.5", v)
	}
	a(4, nil, nil)
	m.Engine().LoRAInfo("m2")(2, nil, nil) // m2 loaded again: its new engine replaces the old one's report
	if s := series(); len(s) != 1 || s[0].GetLabel()[1].GetValue() != "" {
		t.Fatalf("after the adapters finished: %v", s)
	}
	var nilMetrics *EngineMetrics
	nilMetrics.LoRAInfo("m")(1, []string{"a"}, nil) // metrics disabled: nothing, no panic
}
