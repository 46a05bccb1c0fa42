package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// warnEvery is the least time between two WARN lines of one kind from the
// listener (accept errors, connection limit reached): a listener failing in
// a loop must not flood the log.
const warnEvery = time.Second

// rateLimitedWarn logs at WARN at most once per warnEvery, saying how many
// lines were left out since the last one.
type rateLimitedWarn struct {
	log        *slog.Logger
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (r *rateLimitedWarn) warn(msg string) {
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < warnEvery {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	r.mu.Unlock()
	if n > 0 {
		msg = fmt.Sprintf("%s (%d more like it not logged)", msg, n)
	}
	r.log.Warn(msg)
}

// connListener wraps the server's listener: it holds at most max
// connections open at once (0: no cap; further clients wait in the kernel's
// accept queue until one closes, as x/net/netutil.LimitListener does) and
// logs failed accepts at WARN (http.Server would log them at DEBUG only, so
// running out of file descriptors went unnoticed).
type connListener struct {
	net.Listener
	sem       chan struct{} // nil: no cap
	done      chan struct{}
	closeOnce sync.Once
	acceptErr rateLimitedWarn
	atLimit   rateLimitedWarn
	open      atomic.Int64
}

func newConnListener(ln net.Listener, max int, log *slog.Logger) *connListener {
	l := &connListener{Listener: ln, done: make(chan struct{}),
		acceptErr: rateLimitedWarn{log: log}, atLimit: rateLimitedWarn{log: log}}
	if max > 0 {
		l.sem = make(chan struct{}, max)
	}
	return l
}

func (l *connListener) Accept() (net.Conn, error) {
	if l.sem != nil {
		select {
		case l.sem <- struct{}{}:
		default:
			l.atLimit.warn(fmt.Sprintf("Connection limit reached: %d connections open (server.max_connections); new connections wait until one closes", cap(l.sem)))
			select {
			case l.sem <- struct{}{}:
			case <-l.done:
				return nil, net.ErrClosed
			}
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		if l.sem != nil {
			<-l.sem
		}
		var ne net.Error
		if !errors.Is(err, net.ErrClosed) && errors.As(err, &ne) {
			// http.Server retries these (EMFILE, ENFILE, ECONNABORTED…) after
			// a short sleep; they mean clients are being turned away.
			l.acceptErr.warn(fmt.Sprintf("Accept error: %v (%d connections open)", err, l.open.Load()))
		}
		return nil, err
	}
	l.open.Add(1)
	return &limitedConn{Conn: c, l: l}, nil
}

func (l *connListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot back once, on the first Close.
type limitedConn struct {
	net.Conn
	l    *connListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		if c.l.sem != nil {
			<-c.l.sem
		}
	})
	return err
}

// bodyDeadline bounds the time to read a request body: the connection's
// read deadline is set to now+d when a request with a body arrives and
// cleared as soon as the whole body has been read, so a client trickling
// its body is cut off (the read fails, the request is answered 400 and the
// connection closed) while a long streamed answer, which reads nothing more,
// never is. A body the handler leaves unread keeps the deadline, which then
// also bounds http.Server's discarding of it. It must wrap the handler given
// to http.Server directly (http.ResponseController reaches the connection
// through w). d <= 0: no deadline.
func bodyDeadline(d time.Duration, next http.Handler) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(d)) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, w: w, left: r.ContentLength, d: d}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody clears the read deadline once the body has been read (at
// io.EOF or after ContentLength bytes) and names the deadline in a timeout.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	w       http.ResponseWriter
	left    int64 // bytes still expected; -1: unknown (chunked)
	d       time.Duration
	cleared bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	if !b.cleared && (err == io.EOF || (err == nil && b.left == 0)) {
		// http.Server clears it too when it starts its background read at
		// EOF; clearing here covers a body read to its length without
		// the EOF read, so nothing later can hit the old deadline.
		b.cleared = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		// The rest of the body may still trickle in: close the connection
		// after the answer rather than read it as the next request.
		b.w.Header().Set("Connection", "close")
		err = fmt.Errorf("request body not received within %v (server.body_timeout_secs): %w", b.d, err)
	}
	return n, err
}
