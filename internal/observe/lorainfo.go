package observe

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LoRAInfoName is the LoRA info gauge: vLLM's lora_requests_info in our
// namespace, the series routers read for LoRA affinity (the Gateway API
// Inference Extension's LoRA-aware scheduling).
const LoRAInfoName = "mistralrs_lora_requests_info"

// LoRAInfoHelp is its HELP text.
const LoRAInfoHelp = "LoRA adapters of the running and waiting sequences (vLLM's lora_requests_info): labels max_lora, running_lora_adapters and waiting_lora_adapters (comma-joined names); the value is the time of the last update, in Unix seconds. One series at a time."

// loraInfo is the gauge and what each engine last reported to it: one
// series for the whole server, its labels the union of the engines' (a
// multi-model server), so a router sees every adapter that runs here.
type loraInfo struct {
	vec *prometheus.GaugeVec
	now func() time.Time

	mu      sync.Mutex
	sources map[string]*loraSource // by served model
	labels  []string               // of the current series; nil: none yet
}

type loraSource struct {
	maxLoRA          int
	running, waiting []string
}

func newLoRAInfo(reg *prometheus.Registry) *loraInfo {
	vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: LoRAInfoName, Help: LoRAInfoHelp},
		[]string{"max_lora", "running_lora_adapters", "waiting_lora_adapters"})
	reg.MustRegister(vec)
	return &loraInfo{vec: vec, now: time.Now, sources: map[string]*loraSource{}}
}

// LoRAInfo returns the recorder of one served model's LoRA levels (model
// names it: the engine of a model loaded again reports in its place):
// maxLoRA is the most adapters the model holds at once, running and
// waiting the distinct adapter names of its running and waiting sequences.
// Each call updates the gauge's one series (a new label set replaces the
// old one), its value set to the time of the call. On a nil *EngineMetrics
// it does nothing.
func (m *EngineMetrics) LoRAInfo(model string) func(maxLoRA int, running, waiting []string) {
	if m == nil {
		return func(int, []string, []string) {}
	}
	l := m.lora
	l.mu.Lock()
	src := l.sources[model]
	if src == nil {
		src = &loraSource{}
		l.sources[model] = src
	}
	l.mu.Unlock()
	return func(maxLoRA int, running, waiting []string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		src.maxLoRA, src.running, src.waiting = maxLoRA, running, waiting
		l.publish()
	}
}

// publish sets the series of the sources' union; called with mu held.
func (l *loraInfo) publish() {
	maxLoRA := 0
	var running, waiting []string
	for _, s := range l.sources {
		maxLoRA = max(maxLoRA, s.maxLoRA)
		running = append(running, s.running...)
		waiting = append(waiting, s.waiting...)
	}
	labels := []string{strconv.Itoa(maxLoRA), joinNames(running), joinNames(waiting)}
	if l.labels != nil && !slices.Equal(l.labels, labels) {
		l.vec.DeleteLabelValues(l.labels...)
	}
	l.labels = labels
	l.vec.WithLabelValues(labels...).Set(float64(l.now().UnixNano()) / 1e9)
}

// joinNames is the names sorted, without repeats, comma-joined.
func joinNames(names []string) string {
	if len(names) == 0 {
		return ""
	}
	s := append([]string(nil), names...)
	sort.Strings(s)
	out := s[:1]
	for _, n := range s[1:] {
		if n != out[len(out)-1] {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}
