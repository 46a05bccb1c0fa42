package engine_test

import (
	"context"
	"sync"
	"testing"

	"mistralrs/internal/config"
	"mistralrs/internal/engine"
)

// traceBuffer is the hook the server's generation spans give a traced
// request: it buffers the events under a lock, nothing more.
type traceBuffer struct {
	mu     sync.Mutex
	events []engine.Event
}

func (t *traceBuffer) hook(ev engine.Event) {
	t.mu.Lock()
	t.events = append(t.events, ev)
	t.mu.Unlock()
}

// BenchmarkDecodeTracing runs 4 concurrent greedy streams of 32 tokens
// each (one op: all four, from submission to their ends) with no Trace
// hook (tracing off: the engine's cost is one nil check per event site)
// and with the buffering hook of a traced request.
//
//	go test ./internal/engine -run - -bench DecodeTracing -benchmem -count 3
func BenchmarkDecodeTracing(b *testing.B) {
	m := benchModel(b)
	const streams, gen = 4, 32
	for _, traced := range []bool{false, true} {
		name := "off"
		if traced {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			o := config.DefaultEngineOptions()
			o.Threads = benchThreads(b)
			o.PrefixCacheN = 0 // every op computes its prompts
			e, err := engine.New(m, o)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			events := 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				events += tracedStreams(b, e, streams, gen, traced)
			}
			b.ReportMetric(float64(events)/float64(b.N), "events/op")
		})
	}
}

// tracedStreams runs streams greedy generations of gen tokens at once and
// returns the trace events they reported.
func tracedStreams(b *testing.B, e *engine.Engine, streams, gen int, traced bool) int {
	var wg sync.WaitGroup
	bufs := make([]traceBuffer, streams)
	for s := range streams {
		prompt := []int32{int32(1 + s), int32(2 + s), int32(3 + s), int32(4 + s), int32(5 + s), int32(6 + s), int32(7 + s), int32(8 + s)}
		req := &engine.Request{Prompt: prompt, Sampling: greedy(), MaxTokens: gen, IgnoreEOS: true}
		if traced {
			req.Trace = bufs[s].hook
		}
		wg.Go(func() {
			if _, err := e.Generate(context.Background(), req, func(engine.Output) error { return nil }); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	n := 0
	for i := range bufs {
		n += len(bufs[i].events)
	}
	if traced && n < streams*4 {
		b.Fatalf("%d trace events for %d traced streams", n, streams)
	}
	return n
}
