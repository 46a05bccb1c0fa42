package observe

import (
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// exemplarLabel names the request id on exemplars, traceLabel the trace id
// (when the request has a sampled span), so a panel jumps to the trace.
const (
	exemplarLabel = "request_id"
	traceLabel    = "trace_id"
)

// exemplarEvery bounds how often one bucket of one series replaces its
// exemplar: each replacement costs several allocations in client_golang, and
// a bucket holds only its latest exemplar anyway.
const exemplarEvery = int64(time.Second)

type httpMetrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	inflight  *prometheus.GaugeVec
	bodyBytes *prometheus.HistogramVec
	ttft      *prometheus.HistogramVec
	itl       *prometheus.HistogramVec

	// Series handles by (method, path, model), copied on write so the
	// request path reads them without locks or label hashing.
	mu     sync.Mutex
	starts atomic.Pointer[map[string]*startSeries]
}

func newHTTPMetrics(reg *prometheus.Registry) *httpMetrics {
	labels4 := []string{"method", "path", "model", "status"}
	labels3 := []string{"method", "path", "model"}
	h := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_total", Help: metricHelp["http_requests_total"]}, labels4),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "http_request_duration_seconds", Help: metricHelp["http_request_duration_seconds"],
			Buckets: DurationBuckets}, labels4),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "http_requests_in_flight", Help: metricHelp["http_requests_in_flight"]}, labels3),
		bodyBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "http_request_body_bytes", Help: metricHelp["http_request_body_bytes"],
			Buckets: BodyBytesBuckets}, labels3),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mistralrs_time_to_first_token_seconds", Help: metricHelp["mistralrs_time_to_first_token_seconds"],
			Buckets: TTFTBuckets}, labels4),
		itl: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mistralrs_inter_token_latency_seconds", Help: metricHelp["mistralrs_inter_token_latency_seconds"],
			Buckets: ITLBuckets}, labels4),
	}
	reg.MustRegister(h.requests, h.duration, h.inflight, h.bodyBytes, h.ttft, h.itl)
	empty := map[string]*startSeries{}
	h.starts.Store(&empty)
	return h
}

// HTTPMetrics is the layer that counts requests in m's http_* families:
// http_requests_in_flight and http_request_body_bytes once the model label
// is known, http_requests_total and http_request_duration_seconds (with the
// request id as exemplar) when the handler returned, labelled by method,
// route, model and status. Housekeeping requests are not counted. With m nil
// the layer is next itself.
func HTTPMetrics(m *Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if m == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec, w, r, own := enter(w, r)
			if rec.Housekeeping {
				serveLayer(rec, own, next, w, r)
				return
			}
			rec.whenModel(func() {
				rec.series = m.http.start(rec.Method, rec.Route, rec.model)
				rec.series.inflight.Inc()
				if rec.ContentLength >= 0 {
					rec.series.observeBodyBytes(float64(rec.ContentLength))
				}
			})
			serveSettled(rec, next, w, r, func() {
				now := time.Now()
				ds := rec.series.status(rec.rw.status).done()
				ds.requests.Inc()
				ds.duration.observe(now.Sub(rec.Start).Seconds(), rec.ID, rec.TraceID, now)
				rec.series.inflight.Dec()
			})
		})
	}
}

// methodLabel keeps the standard methods; any other method token (a client
// can send any) becomes OTHER so it cannot grow the series count.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// startSeries holds the series of one (method, path, model).
type startSeries struct {
	h                   *httpMetrics
	method, path, model string
	inflight            prometheus.Gauge

	bodyOnce  sync.Once // created at the first known body size
	bodyBytes prometheus.Observer

	mu   sync.Mutex
	done atomic.Pointer[map[int]*doneSeries]
}

// doneSeries holds the series of one (method, path, model, status). Each
// group is created at its first use, so no series is exported before it has
// a sample (an SSE response arms TTFT/ITL long before it is counted).
type doneSeries struct {
	doneOnce sync.Once
	requests prometheus.Counter
	duration exemplarHist

	sseOnce sync.Once
	ttft    exemplarHist
	itl     prometheus.Observer

	s      *startSeries
	status string
}

func (h *httpMetrics) start(method, path, model string) *startSeries {
	method = methodLabel(method)
	var kb [256]byte
	k := append(kb[:0], method...)
	k = append(k, 0)
	k = append(k, path...)
	k = append(k, 0)
	k = append(k, model...)
	if s := (*h.starts.Load())[string(k)]; s != nil {
		return s
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := *h.starts.Load()
	if s := old[string(k)]; s != nil {
		return s
	}
	s := &startSeries{
		h: h, method: method, path: path, model: model,
		inflight: h.inflight.WithLabelValues(method, path, model),
	}
	empty := map[int]*doneSeries{}
	s.done.Store(&empty)
	m := make(map[string]*startSeries, len(old)+1)
	for key, v := range old {
		m[key] = v
	}
	m[string(k)] = s
	h.starts.Store(&m)
	return s
}

func (s *startSeries) observeBodyBytes(n float64) {
	s.bodyOnce.Do(func() { s.bodyBytes = s.h.bodyBytes.WithLabelValues(s.method, s.path, s.model) })
	s.bodyBytes.Observe(n)
}

func (s *startSeries) status(code int) *doneSeries {
	if d := (*s.done.Load())[code]; d != nil {
		return d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.done.Load()
	if d := old[code]; d != nil {
		return d
	}
	d := &doneSeries{s: s, status: statusText(code)}
	m := make(map[int]*doneSeries, len(old)+1)
	for key, v := range old {
		m[key] = v
	}
	m[code] = d
	s.done.Store(&m)
	return d
}

// done returns the doneSeries with its completion series created.
func (d *doneSeries) done() *doneSeries {
	d.doneOnce.Do(func() {
		s := d.s
		d.requests = s.h.requests.WithLabelValues(s.method, s.path, s.model, d.status)
		d.duration = newExemplarHist(s.h.duration.WithLabelValues(s.method, s.path, s.model, d.status), DurationBuckets)
	})
	return d
}

// sse returns the doneSeries with its streaming-latency series created.
func (d *doneSeries) sse() *doneSeries {
	d.sseOnce.Do(func() {
		s := d.s
		d.ttft = newExemplarHist(s.h.ttft.WithLabelValues(s.method, s.path, s.model, d.status), TTFTBuckets)
		d.itl = s.h.itl.WithLabelValues(s.method, s.path, s.model, d.status)
	})
	return d
}

// exemplarHist observes into a histogram and attaches the request id as an
// exemplar at most once per exemplarEvery per bucket.
type exemplarHist struct {
	obs    prometheus.Observer
	ex     prometheus.ExemplarObserver
	bounds []float64
	last   []atomic.Int64 // unix ns of the last exemplar, per bucket (+Inf last)
}

func newExemplarHist(o prometheus.Observer, bounds []float64) exemplarHist {
	eo, _ := o.(prometheus.ExemplarObserver)
	return exemplarHist{obs: o, ex: eo, bounds: bounds, last: make([]atomic.Int64, len(bounds)+1)}
}

func (e *exemplarHist) observe(v float64, requestID, traceID string, now time.Time) {
	labels := exemplarLabels(requestID, traceID)
	if e.ex == nil || labels == nil {
		e.obs.Observe(v)
		return
	}
	b := sort.SearchFloat64s(e.bounds, v)
	ns := now.UnixNano()
	last := e.last[b].Load()
	if (last != 0 && ns-last < exemplarEvery) || !e.last[b].CompareAndSwap(last, ns) {
		e.obs.Observe(v)
		return
	}
	e.ex.ObserveWithExemplar(v, labels)
}

// exemplarLabels returns an exemplar's labels, nil for none. OpenMetrics
// limits them to 128 runes in all (names and values; the ids are ASCII):
// the trace id (8+32) goes first, the request id when it fits beside it.
func exemplarLabels(requestID, traceID string) prometheus.Labels {
	const limit = 128
	n := 0
	var l prometheus.Labels
	if traceID != "" {
		n = len(traceLabel) + len(traceID)
		l = prometheus.Labels{traceLabel: traceID}
	}
	if requestID != "" && n+len(exemplarLabel)+len(requestID) <= limit {
		if l == nil {
			l = prometheus.Labels{exemplarLabel: requestID}
		} else {
			l[exemplarLabel] = requestID
		}
	}
	return l
}

// statusText returns the decimal status code without allocating.
func statusText(code int) string {
	if code >= 100 && code < 1000 {
		return statusStrings[code]
	}
	return strconv.Itoa(code)
}

var statusStrings = func() (t [1000]string) {
	for i := 100; i < 1000; i++ {
		t[i] = strconv.Itoa(i)
	}
	return t
}()
