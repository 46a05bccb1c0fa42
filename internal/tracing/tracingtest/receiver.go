// Package tracingtest is the tests' local OTLP/HTTP collector: an
// httptest server that decodes every ExportTraceServiceRequest with
// go.opentelemetry.io/proto/otlp. Imported by tests only.
package tracingtest

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver collects what exporters send. Set Status or Block before the
// first export.
type Receiver struct {
	URL string // the server's base URL (spans go to URL + "/v1/traces")

	// Status, when not 0, answers every export (after decoding it).
	Status int
	// Block, when set, holds every export until it is closed; Entered, when
	// set, is sent to as each export arrives, before it waits.
	Block   chan struct{}
	Entered chan struct{}

	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []*collectortrace.ExportTraceServiceRequest
	paths   []string
	headers []http.Header
}

// Start runs a receiver until the test ends.
func Start(t testing.TB) *Receiver {
	rc := &Receiver{}
	rc.srv = httptest.NewServer(rc)
	rc.URL = rc.srv.URL
	t.Cleanup(func() {
		if rc.Block != nil {
			select {
			case <-rc.Block:
			default:
				close(rc.Block)
			}
		}
		rc.srv.CloseClientConnections()
		rc.srv.Close()
	})
	return rc
}

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if rc.Entered != nil {
		rc.Entered <- struct{}{}
	}
	if rc.Block != nil {
		select {
		case <-rc.Block:
		case <-r.Context().Done():
			return
		}
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, &req)
	rc.paths = append(rc.paths, r.URL.Path)
	rc.headers = append(rc.headers, r.Header.Clone())
	rc.mu.Unlock()
	if rc.Status != 0 {
		w.WriteHeader(rc.Status)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

// Span is one received span with its resource's service.name.
type Span struct {
	*tracepb.Span
	Service string
	Scope   string
}

// TraceID and SpanID and ParentID are the ids in hex ("" for no parent).
func (s Span) TraceID() string  { return hex.EncodeToString(s.Span.TraceId) }
func (s Span) SpanID() string   { return hex.EncodeToString(s.Span.SpanId) }
func (s Span) ParentID() string { return hex.EncodeToString(s.Span.ParentSpanId) }

// Attr returns an attribute's value, nil when absent.
func (s Span) Attr(key string) *commonpb.AnyValue {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// Spans returns every span received so far, in arrival order.
func (rc *Receiver) Spans() []Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []Span
	for _, req := range rc.reqs {
		for _, rs := range req.ResourceSpans {
			service := ""
			for _, kv := range rs.Resource.GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					out = append(out, Span{Span: sp, Service: service, Scope: ss.Scope.GetName()})
				}
			}
		}
	}
	return out
}

// Paths and Headers return each export's URL path and request headers.
func (rc *Receiver) Paths() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.paths...)
}

func (rc *Receiver) Headers() []http.Header {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]http.Header(nil), rc.headers...)
}
