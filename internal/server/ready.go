package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Probes. Liveness (/livez) says the process answers; it stays 200 until the
// listener closes, so that a shutting-down server is never restarted for
// being slow to drain. Readiness (/health, / and /readyz) says whether a
// load balancer should send new work here: 503 from the first shutdown
// signal on, and, asked about one model (?model=ID), 503 while that model
// cannot answer without a load first.

// Probe bodies: plain text, as /health's "OK" always was.
const (
	probeOK       = "OK"
	probeDraining = "draining: the server is shutting down and takes no new work"
)

// handleLive is GET /livez: 200 for as long as the server answers at all.
func handleLive(w http.ResponseWriter, _ *http.Request) {
	writeProbe(w, http.StatusOK, probeOK)
}

// handleReady is GET /health, / and /readyz. Without a model it is about
// the process: 200, or 503 once draining. With ?model=ID ("" or "default":
// the default model) it is about that model too: 404 for one not served,
// 503 for one that is not loaded and usable now (modelEntry.notReady).
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeProbe(w, http.StatusServiceUnavailable, probeDraining)
		return
	}
	q := r.URL.Query()
	if !q.Has("model") {
		writeProbe(w, http.StatusOK, probeOK)
		return
	}
	name := strings.TrimSpace(q.Get("model"))
	e, ok := s.models.lookup(name)
	if !ok {
		writeProbe(w, http.StatusNotFound, s.models.unknownModelError(name))
		return
	}
	if why := e.notReady(); why != "" {
		writeProbe(w, http.StatusServiceUnavailable, why)
		return
	}
	writeProbe(w, http.StatusOK, probeOK)
}

// notReady says why a request to the model would wait for a load (or fail)
// instead of starting at once, "" when it would not: the model is loading
// (a reload, or the load a request started after an unload), unloaded (the
// next request loads it again), or its engine is broken because its file
// changed on disk (the next request retires it and loads the new file).
func (e *modelEntry) notReady() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := e.spec.ID
	switch {
	case e.loading != nil:
		return fmt.Sprintf("model %s is loading", id)
	case e.cur == nil:
		return fmt.Sprintf("model %s is unloaded: the next request to it loads it again", id)
	case e.cur.Engine.Broken() != nil:
		return fmt.Sprintf("model %s must be loaded again: %v", id, e.cur.Engine.Broken())
	}
	return ""
}

func writeProbe(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// preStop begins the drain: readiness answers 503 from now on, while every
// route still serves for ShutdownDelay (the time load balancers take to
// see it and stop sending), and responses ask clients to close their
// connections, so that a keep-alive client's next request opens a new one
// the balancer sends elsewhere. It returns early with the error that
// stopped serving, if one does (http.Server.Serve never returns nil).
func (s *Server) preStop(served <-chan error) error {
	s.draining.Store(true)
	d := s.opts.ShutdownDelay
	if d <= 0 {
		return nil
	}
	s.log.Info(fmt.Sprintf("Draining: readiness answers 503; still serving for %v before closing the listener (--shutdown-delay-secs)", d))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case err := <-served:
		return err
	}
}

// closeWhileDraining asks the client to close its connection after this
// response once the drain began (see preStop).
func (s *Server) closeWhileDraining(w http.ResponseWriter) {
	if s.draining.Load() {
		w.Header().Set("Connection", "close")
	}
}
