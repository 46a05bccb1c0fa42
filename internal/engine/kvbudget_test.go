package engine

import (
	"strings"
	"testing"
)

// A pool that can grow past kvWarnFraction of the machine's memory gets a
// startup warning that says how to lower it; a small one does not.
func TestKVMemoryWarning(t *testing.T) {
	total, _, err := physicalMemory()
	if err != nil {
		t.Skipf("no /proc/meminfo: %v", err)
	}
	if w := kvMemoryWarning(total / 10); w != "" {
		t.Errorf("a tenth of memory warned: %q", w)
	}
	w := kvMemoryWarning(total * 9 / 10)
	if !strings.Contains(w, "90% of this machine's") || !strings.Contains(w, "--pa-memory-mb") {
		t.Errorf("nine tenths of memory: %q", w)
	}
}
