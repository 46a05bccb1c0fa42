package responses

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"sync"

	"mistralrs/internal/chat"
)

// Limits of the stored Responses (POST /v1/responses with store, the
// default): the server keeps at most this many responses, and at most
// this many bytes of them (each response's JSON plus the conversation that
// previous_response_id continues), evicting the least recently used
// (created, read or continued) first. An evicted id answers 404, like one
// never seen. Options.ResponsesMaxStored and ResponsesMaxBytes change them.
// The store is in memory: a restart loses every response.
const (
	DefaultMaxStored       = 1000
	DefaultMaxBytes  int64 = 64 << 20
)

// storedOverhead is what one stored response costs beyond its text, for
// the byte limit (map and list entries, slice headers, the object's fields).
const storedOverhead = 512

// errStoreClosed refuses a background response once the server shuts down.
var errStoreClosed = errors.New("the server is shutting down")

// responseStore keeps the Responses API objects: the finished responses
// that were stored, and the background responses while they run (which
// are never evicted until they end). One mutex guards everything; the
// objects are replaced, never changed, once published.
type responseStore struct {
	mu       sync.Mutex
	maxCount int
	maxBytes int64
	bytes    int64
	lru      *list.List // of *storedResponse; front: most recently used
	byID     map[string]*list.Element

	closed bool
	runs   sync.WaitGroup // background responses running
}

// storedResponse is one entry of the store.
type storedResponse struct {
	id   string
	elem *list.Element // nil once removed or evicted

	obj  *responseObject
	msgs []chat.Message // the conversation including this response's output (for previous_response_id)
	size int64

	background bool
	running    bool               // a background response not yet finished
	cancel     context.CancelFunc // ends a running background response
	done       chan struct{}      // closed when a background response ends
}

func newResponseStore(maxCount int, maxBytes int64) *responseStore {
	if maxCount <= 0 {
		maxCount = DefaultMaxStored
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &responseStore{maxCount: maxCount, maxBytes: maxBytes, lru: list.New(), byID: map[string]*list.Element{}}
}

// entrySize is the byte cost of an object and its conversation.
func entrySize(obj *responseObject, msgs []chat.Message) int64 {
	n := int64(storedOverhead)
	if b, err := json.Marshal(obj); err == nil {
		n += int64(len(b))
	}
	for _, m := range msgs {
		n += int64(64 + len(m.Role) + len(m.Content) + len(m.Name) + len(m.ToolCallID) + len(m.ReasoningContent))
		for _, p := range m.Parts {
			n += int64(32 + len(p.Type) + len(p.Text))
		}
		for _, c := range m.ToolCalls {
			n += int64(64 + len(c.ID) + len(c.Type) + len(c.Function.Name) + len(c.Function.Arguments))
		}
	}
	return n
}

// add stores e as the most recently used entry, then evicts what is over
// the limits (e itself too, if it alone is over the byte limit and done).
func (rs *responseStore) add(e *storedResponse) {
	size := entrySize(e.obj, e.msgs)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if old, ok := rs.byID[e.id]; ok {
		rs.unlink(old.Value.(*storedResponse))
	}
	e.size = size
	e.elem = rs.lru.PushFront(e)
	rs.byID[e.id] = e.elem
	rs.bytes += size
	rs.evict()
}

// evict drops least recently used entries until the store is within its
// limits; running background responses are skipped. rs.mu is held.
func (rs *responseStore) evict() {
	for el := rs.lru.Back(); el != nil && (rs.lru.Len() > rs.maxCount || rs.bytes > rs.maxBytes); {
		prev := el.Prev()
		if e := el.Value.(*storedResponse); !e.running {
			rs.unlink(e)
		}
		el = prev
	}
}

// unlink removes e; rs.mu is held.
func (rs *responseStore) unlink(e *storedResponse) {
	if e.elem == nil {
		return
	}
	rs.lru.Remove(e.elem)
	delete(rs.byID, e.id)
	rs.bytes -= e.size
	e.elem = nil
}

// get finds an entry and marks it used.
func (rs *responseStore) get(id string) (*storedResponse, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	el, ok := rs.byID[id]
	if !ok {
		return nil, false
	}
	rs.lru.MoveToFront(el)
	return el.Value.(*storedResponse), true
}

// state returns an entry's current object, conversation and whether it runs.
func (rs *responseStore) state(e *storedResponse) (*responseObject, []chat.Message, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return e.obj, e.msgs, e.running
}

// set publishes a new object (and conversation) for e; running false ends
// a background response. An entry removed meanwhile stays removed.
func (rs *responseStore) set(e *storedResponse, obj *responseObject, msgs []chat.Message, running bool) {
	size := entrySize(obj, msgs)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	e.obj, e.msgs, e.running = obj, msgs, running
	if e.elem == nil {
		return
	}
	rs.bytes += size - e.size
	e.size = size
	rs.evict()
}

// remove deletes an entry; it reports what it removed.
func (rs *responseStore) remove(id string) (*storedResponse, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	el, ok := rs.byID[id]
	if !ok {
		return nil, false
	}
	e := el.Value.(*storedResponse)
	rs.unlink(e)
	return e, true
}

// startRun counts a background response about to run, unless the server
// is shutting down.
func (rs *responseStore) startRun() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return errStoreClosed
	}
	rs.runs.Add(1)
	return nil
}

// close cancels the running background responses and waits until they
// have ended (their sequences leave the engine at its next step).
func (rs *responseStore) close() {
	rs.mu.Lock()
	rs.closed = true
	var cancels []context.CancelFunc
	for el := rs.lru.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*storedResponse); e.running && e.cancel != nil {
			cancels = append(cancels, e.cancel)
		}
	}
	rs.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	rs.runs.Wait()
}

// usage reports the entries and bytes held (for tests).
func (rs *responseStore) usage() (int, int64) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.lru.Len(), rs.bytes
}
