package observe

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Usage is the token accounting a stream reports for its access-log line.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	PrefillTokPerSec float64 // usage.avg_prompt_tok_per_sec
	DecodeTokPerSec  float64 // usage.avg_compl_tok_per_sec
}

// Stream tracks one streamed (SSE) response: handlers report engine token
// steps, usage, errors and the end of the stream; the middleware turns them
// into the TTFT/ITL samples and the access line's outcome and usage fields.
//
// Only engine token steps are samples: keep-alive comments, pings, [DONE]
// and other protocol frames must not call TokenStep. All methods are safe
// for concurrent use and do nothing on a nil *Stream (no middleware) or
// after the response finished.
type Stream struct {
	mu  sync.Mutex
	rec *Record
	sse bool // the response turned out to be SSE (TTFT/ITL armed if metrics are on)
	end bool // the handler returned; later calls are ignored

	series  *doneSeries // the response's series when armed with metrics
	steps   int
	last    time.Time
	pending []time.Time // steps reported before the SSE header was written

	usage    Usage
	hasUsage bool
	errMsg   string
	done     bool
}

// maxPending bounds steps buffered before the response header is known.
const maxPending = 1024

// StreamLatency is the layer that turns the token steps a streamed (SSE)
// response reports on its Stream (StreamFromContext) into the time to first
// token and inter-token latency histograms of m, under the response's
// method, path, model and status labels. Steps reported before the SSE
// header is written wait for it. With m nil, or on housekeeping routes, the
// steps are counted but not observed.
func StreamLatency(m *Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec, w, r, own := enter(w, r)
			rec.whenHeader(func(code int) {
				if !rec.sse {
					return
				}
				var ds *doneSeries
				switch {
				case m == nil || rec.Housekeeping:
				case rec.series != nil && rec.series.h == m.http: // HTTPMetrics' on the same registry
					ds = rec.series.status(code)
				default:
					ds = m.http.start(rec.Method, rec.Route, rec.model).status(code)
				}
				rec.stream.arm(ds)
			})
			serveLayer(rec, own, next, w, r)
		})
	}
}

// StreamFromContext returns the request's stream tracker, or nil when the
// request did not pass through the middleware.
func StreamFromContext(ctx context.Context) *Stream {
	if rec := RecordFrom(ctx); rec != nil {
		return &rec.stream
	}
	return nil
}

// TokenStep records one engine token step (a chat or completion chunk pulled
// from the engine) at time t: the first gives the time to first token from
// the request start, each later one an inter-token gap. With n > 1 choices,
// every chunk is one step.
func (s *Stream) TokenStep(t time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end {
		return
	}
	if !s.sse {
		if len(s.pending) < maxPending {
			s.pending = append(s.pending, t)
		}
		return
	}
	s.record(t)
}

// record turns a step into a sample; s.mu is held.
func (s *Stream) record(t time.Time) {
	if s.series != nil {
		ds := s.series.sse()
		if s.steps == 0 {
			ds.ttft.observe(max(t.Sub(s.rec.Start).Seconds(), 0), s.rec.ID, s.rec.TraceID, t)
		} else {
			ds.itl.Observe(max(t.Sub(s.last).Seconds(), 0))
		}
	}
	s.steps++
	s.last = t
}

// SetUsage records the last usage object the stream saw (shown on the
// access line as prompt_tokens, completion_tokens, prefill_tok_s, decode_tok_s).
func (s *Stream) SetUsage(u Usage) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if !s.end {
		s.usage, s.hasUsage = u, true
	}
	s.mu.Unlock()
}

// Error records that the stream ended with an error (outcome=error); msg is
// the error text sent to the client.
func (s *Stream) Error(msg string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if !s.end {
		s.errMsg = msg
		if msg == "" {
			s.errMsg = "stream error"
		}
	}
	s.mu.Unlock()
}

// Done records that the stream reached its normal end (its final frame was
// written). Without it, a canceled request context counts as a disconnect.
func (s *Stream) Done() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if !s.end {
		s.done = true
	}
	s.mu.Unlock()
}

// arm is called when the SSE header is written: from now on token steps are
// samples under the response's labels (series is nil without metrics).
func (s *Stream) arm(series *doneSeries) {
	s.mu.Lock()
	s.sse = true
	s.series = series
	for _, t := range s.pending {
		s.record(t)
	}
	s.pending = nil
	s.mu.Unlock()
}

// finish closes the tracker and reports what the access line needs.
func (s *Stream) finish() (errMsg string, u Usage, hasUsage, done bool) {
	s.mu.Lock()
	s.end = true
	s.pending = nil
	errMsg, u, hasUsage, done = s.errMsg, s.usage, s.hasUsage, s.done
	s.mu.Unlock()
	return
}
