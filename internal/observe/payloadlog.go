package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// PayloadLog is the -l/--log file: every model request, response and error,
// appended as mistral.rs writes them ("Request at {time}: …", "Response at
// {time}: …", "Error response at {time}: …", each followed by a blank line,
// local time in chrono's format). It holds full payloads, so the file is
// created, and kept, with mode 0600. It is not the access log.
// A nil *PayloadLog ignores everything.
type PayloadLog struct {
	mu   sync.Mutex
	f    *os.File
	now  func() time.Time
	path string
}

// OpenPayloadLog opens path for appending, creating it with mode 0600 and
// tightening an existing file to 0600.
func OpenPayloadLog(path string) (*PayloadLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("request log: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("request log %s: %w", path, err)
	}
	return &PayloadLog{f: f, now: time.Now, path: path}, nil
}

// Path returns the file's path.
func (p *PayloadLog) Path() string {
	if p == nil {
		return ""
	}
	return p.path
}

// Close closes the file.
func (p *PayloadLog) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.f.Close()
}

// Request logs a request: []byte, json.RawMessage and string are written
// as they are (the JSON body as received); other values as JSON, or in Go
// syntax if they cannot be marshalled (mistral.rs falls back to its Debug form).
func (p *PayloadLog) Request(v any) error { return p.write("Request at ", v) }

// Response logs a response, as Request does.
func (p *PayloadLog) Response(v any) error { return p.write("Response at ", v) }

// Error logs an error response.
func (p *PayloadLog) Error(err string) error { return p.write("Error response at ", err) }

// RequestCtx, ResponseCtx and ErrorCtx log as Request, Response and Error
// and, for a request with a sampled trace (TraceID), add " trace_id=<hex>"
// after the time, so an entry leads to its trace.
func (p *PayloadLog) RequestCtx(ctx context.Context, v any) error {
	return p.writeTraced("Request at ", TraceID(ctx), v)
}

// ResponseCtx logs a response with the request's trace id.
func (p *PayloadLog) ResponseCtx(ctx context.Context, v any) error {
	return p.writeTraced("Response at ", TraceID(ctx), v)
}

// ErrorCtx logs an error response with the request's trace id.
func (p *PayloadLog) ErrorCtx(ctx context.Context, err string) error {
	return p.writeTraced("Error response at ", TraceID(ctx), err)
}

func (p *PayloadLog) write(prefix string, v any) error { return p.writeTraced(prefix, "", v) }

func (p *PayloadLog) writeTraced(prefix, traceID string, v any) error {
	if p == nil {
		return nil
	}
	var payload []byte
	switch x := v.(type) {
	case []byte:
		payload = x
	case json.RawMessage:
		payload = x
	case string:
		payload = []byte(x)
	default:
		var err error
		if payload, err = json.Marshal(v); err != nil {
			payload = fmt.Appendf(nil, "%+v", v)
		}
	}
	b := make([]byte, 0, len(prefix)+48+len(payload))
	b = append(b, prefix...)
	b = appendChronoLocal(b, p.now())
	if traceID != "" {
		b = append(b, " trace_id="...)
		b = append(b, traceID...)
	}
	b = append(b, ": "...)
	b = append(b, payload...)
	b = append(b, "\n\n"...)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.f.Write(b) // one write per entry: O_APPEND keeps entries whole
	return err
}

// appendChronoLocal formats t as chrono's DateTime<Local> Display:
// "2006-01-02 15:04:05[.fff|.ffffff|.fffffffff] +07:00" (the fraction has 3,
// 6 or 9 digits as needed, none when zero; offset seconds only when nonzero).
func appendChronoLocal(b []byte, t time.Time) []byte {
	t = t.Local()
	b = t.AppendFormat(b, "2006-01-02 15:04:05")
	if ns := t.Nanosecond(); ns != 0 {
		switch {
		case ns%1_000_000 == 0:
			b = appendPadded(append(b, '.'), ns/1_000_000, 3)
		case ns%1_000 == 0:
			b = appendPadded(append(b, '.'), ns/1_000, 6)
		default:
			b = appendPadded(append(b, '.'), ns, 9)
		}
	}
	_, off := t.Zone()
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	b = append(b, ' ', sign)
	b = appendPadded(b, off/3600, 2)
	b = append(b, ':')
	b = appendPadded(b, off/60%60, 2)
	if off%60 != 0 {
		b = append(b, ':')
		b = appendPadded(b, off%60, 2)
	}
	return b
}

func appendPadded(b []byte, v, width int) []byte {
	s := strconv.Itoa(v)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}
