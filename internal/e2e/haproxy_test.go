package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestHAProxyRollingRestart runs three `mistralrs serve` replicas of the demo model behind HAProxy
// with deploy/haproxy/haproxy.cfg itself (its addresses come from environment variables), under
// 32 concurrent streaming clients. Opt-in: MISTRALRS_HAPROXY=<duration> is the length of the
// rolling-restart phase (.ci/run: 40s). All traffic stays on 127.0.0.1.
//
//   - Affinity: requests with the same x-session-id reach one replica (through the affinity
//     backend), requests without it the leastconn backend; read from HAProxy's log line of each.
//   - Rolling restart: every replica in turn gets SIGTERM; HAProxy must mark it DOWN within its
//     pre-stop delay (it answers 503 on /health while it keeps serving), it must exit 0, and a
//     new one starts on its port; the next waits until HAProxy reports it UP. 0 failed requests
//     and 0 truncated streams (each must end with its final chunk, finish_reason "length", and
//     [DONE]); every request in HAProxy's log once.
//   - Crash: under the same load one replica is killed with SIGKILL. Only requests HAProxy's log
//     puts on that replica may fail, each with an error at the client (a transport error or a
//     5xx from HAProxy) well before the clients' 60 s hang limit; everything else succeeds.
//
// It reports requests and TTFT percentiles (send to the first SSE chunk, seen at the client,
// through HAProxy) for both phases.
func TestHAProxyRollingRestart(t *testing.T) {
	spec := os.Getenv("MISTRALRS_HAPROXY")
	if spec == "" {
		t.Skip("load-balancer test: set MISTRALRS_HAPROXY=60s to run it (needs Debian's haproxy)")
	}
	dur, err := time.ParseDuration(spec)
	if err != nil || dur < 40*time.Second || dur > time.Hour {
		t.Fatalf("MISTRALRS_HAPROXY=%q: want a duration between 40s (three restarts with a 5 s pre-stop delay each) and 1h", spec)
	}
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		if inCI() {
			t.Fatal("haproxy is not on PATH; .ci/run installs it (apt-get install haproxy)")
		}
		t.Skip("haproxy is not on PATH (Debian: apt-get install haproxy)")
	}
	root := repoRoot(t)
	c := startCluster(t, root, haproxy, buildBinary(t, root, t.TempDir()))

	checkAffinity(t, c)

	t.Logf("rolling restart: %v, %d clients, SIGTERM and restart of each of %d replicas in turn", dur, lbClients, len(c.replicas))
	var restarts []string
	roll := c.underLoad("roll", dur, func(ctx context.Context) error {
		for _, r := range c.replicas {
			if !sleepCtx(ctx, 2*time.Second) {
				return fmt.Errorf("the run ended after %d of %d restarts: make MISTRALRS_HAPROXY longer", len(restarts), len(c.replicas))
			}
			msg, err := c.restart(r)
			if err != nil {
				return fmt.Errorf("restart of %s: %w", r.name, err)
			}
			restarts = append(restarts, msg)
		}
		return nil
	})
	for _, m := range restarts {
		t.Logf("  %s", m)
	}
	roll.report(t, "rolling restart")
	t.Logf("rolling restart: %d requests resent by the client (no byte back on a reused keep-alive connection)", checkOnce(t, c, roll, "rolling restart"))
	if roll.phaseErr != nil {
		t.Error(roll.phaseErr)
	}
	if f := roll.failures(); len(f) > 0 {
		t.Errorf("rolling restart: %d failed or truncated requests, first ones:\n%s", len(f), joinFailures(c, f, 10))
	}
	if roll.ok.Load() == 0 {
		t.Fatal("rolling restart: no request completed")
	}

	crashDur := max(15*time.Second, dur/3)
	victim := c.replicas[1]
	t.Logf("crash: %v, %d clients, SIGKILL of %s a third of the way in", crashDur, lbClients, victim.name)
	crash := c.underLoad("crash", crashDur, func(ctx context.Context) error {
		if !sleepCtx(ctx, crashDur/3) {
			return errors.New("the run ended before the kill")
		}
		return c.kill(victim)
	})
	crash.report(t, "crash")
	t.Logf("crash: %d requests resent by the client (no byte back on a reused keep-alive connection)", checkOnce(t, c, crash, "crash"))
	if crash.phaseErr != nil {
		t.Error(crash.phaseErr)
	}
	checkCrashFailures(t, c, crash, victim.name)
}

// lbClients is the number of concurrent streaming clients.
const lbClients = 32

// lbDrainDelay is the replicas' pre-stop delay (--shutdown-delay-secs, its default): HAProxy's
// checks must mark a replica DOWN within it.
const lbDrainDelay = 5 * time.Second

// lbHangLimit bounds one request: a request still open after it counts as a hang, which is a
// failure in both phases (a crash must surface as an error, not as a stream that never ends).
const lbHangLimit = 60 * time.Second

var lbTransport = &http.Transport{MaxIdleConnsPerHost: 2 * lbClients, DisableCompression: true}

var lbHTTP = &http.Client{Transport: lbTransport}

type replica struct {
	name string // the server's name in haproxy.cfg
	port int
	cmd  *exec.Cmd
	done <-chan error
	out  *lockedBuffer
}

type cluster struct {
	t        *testing.T
	bin      string
	url      string // HAProxy's frontend
	stats    string // HAProxy's stats page, CSV
	replicas []*replica
	hlog     string // HAProxy's output, a file: one log line per request

	killedAt      time.Time     // the crash phase's SIGKILL
	downAfterKill time.Duration // until HAProxy reported the killed replica DOWN
}

// startCluster starts three replicas and HAProxy with deploy/haproxy/haproxy.cfg, the addresses
// given through the environment variables the file reads, and waits until HAProxy sees all UP.
func startCluster(t *testing.T, root, haproxy, bin string) *cluster {
	t.Helper()
	lbPort, statsPort := freePort(t), freePort(t)
	c := &cluster{
		t:     t,
		bin:   bin,
		url:   fmt.Sprintf("http://127.0.0.1:%d", lbPort),
		stats: fmt.Sprintf("http://127.0.0.1:%d/stats;csv", statsPort),
		hlog:  filepath.Join(t.TempDir(), "haproxy.log"),
	}
	env := append(os.Environ(),
		fmt.Sprintf("MISTRALRS_LB_BIND=127.0.0.1:%d", lbPort),
		fmt.Sprintf("MISTRALRS_LB_STATS=127.0.0.1:%d", statsPort))
	for i := range 3 {
		r := &replica{name: fmt.Sprintf("r%d", i+1), port: freePort(t)}
		if err := c.start(r); err != nil {
			t.Fatal(err)
		}
		c.replicas = append(c.replicas, r)
		env = append(env, fmt.Sprintf("MISTRALRS_REPLICA_%d=127.0.0.1:%d", i+1, r.port))
	}
	cfg := filepath.Join(root, "deploy/haproxy/haproxy.cfg")
	check := exec.Command(haproxy, "-c", "-f", cfg)
	check.Env = env
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c -f %s: %v\n%s", cfg, err, out)
	}
	cmd := exec.Command(haproxy, "-db", "-f", cfg) // -db: foreground, logs on stdout
	cmd.Env = env
	// A file, not a pipe: HAProxy drops a log line rather than wait for a full pipe, and the test
	// looks up every request's line.
	logFile, err := os.Create(c.hlog)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for _, r := range c.replicas {
		if err := c.waitStatus(r.name, "UP", 30*time.Second); err != nil {
			t.Fatalf("%v\nhaproxy:\n%s", err, c.log())
		}
	}
	return c
}

// start runs a replica on its port and waits until it answers /health itself.
func (c *cluster) start(r *replica) error {
	r.out = &lockedBuffer{}
	r.cmd = exec.Command(c.bin, "serve", "--host", "127.0.0.1", "--port", strconv.Itoa(r.port),
		"--threads", "1", "--disable-access-log", "--shutdown-delay-secs", strconv.Itoa(int(lbDrainDelay/time.Second)))
	r.cmd.Env = append(os.Environ(), "RUST_LOG=warn")
	r.done = startProcess(c.t, r.cmd, r.out)
	url := fmt.Sprintf("http://127.0.0.1:%d/health", r.port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-r.done:
			return fmt.Errorf("%s exited at startup (%v):\n%s", r.name, err, r.out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no 200 from %s within 30 s (last error %v):\n%s", r.name, url, err, r.out)
		}
	}
}

// restart stops a replica with SIGTERM, waits for its exit, starts a new one on the same port and
// waits until HAProxy reports it UP. It says what it saw, with the times from the signal.
func (c *cluster) restart(r *replica) (string, error) {
	t0 := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return "", err
	}
	// Watch HAProxy while the replica drains: did it take the replica out before it exited?
	var downAt time.Duration
	var exitErr error
wait:
	for {
		select {
		case exitErr = <-r.done:
			break wait
		case <-time.After(100 * time.Millisecond):
		}
		if downAt == 0 {
			if st, _, err := c.status(r.name); err == nil && strings.HasPrefix(st, "DOWN") {
				downAt = time.Since(t0)
			}
		}
		if time.Since(t0) > lbHangLimit {
			_ = r.cmd.Process.Kill()
			<-r.done
			return "", fmt.Errorf("did not exit within %v of SIGTERM:\n%s", lbHangLimit, r.out)
		}
	}
	exited := time.Since(t0)
	if exitErr != nil {
		return "", fmt.Errorf("exit after SIGTERM: %v:\n%s", exitErr, r.out)
	}
	if err := c.start(r); err != nil {
		return "", err
	}
	if err := c.waitStatus(r.name, "UP", 30*time.Second); err != nil {
		return "", err
	}
	if downAt == 0 || downAt > lbDrainDelay {
		return "", fmt.Errorf("HAProxy did not mark it DOWN within its pre-stop delay of %v (DOWN at %v, exit at %v)", lbDrainDelay, downAt, exited)
	}
	return fmt.Sprintf("%s: HAProxy marked it DOWN %v after SIGTERM, it exited 0 at %v, UP again at %v",
		r.name, downAt.Round(10*time.Millisecond), exited.Round(10*time.Millisecond), time.Since(t0).Round(10*time.Millisecond)), nil
}

// kill sends SIGKILL to a replica once it has requests in flight, and waits until HAProxy marks
// it DOWN.
func (c *cluster) kill(r *replica) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, cur, err := c.status(r.name)
		if err == nil && cur > 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s had no request in flight for 10 s (%v)", r.name, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.killedAt = time.Now()
	if err := r.cmd.Process.Kill(); err != nil {
		return err
	}
	<-r.done
	if err := c.waitStatus(r.name, "DOWN", 10*time.Second); err != nil {
		return err
	}
	c.downAfterKill = time.Since(c.killedAt)
	return nil
}

// status reads a server's state in the leastconn backend (the affinity backend's servers track
// it) and its current connections in both backends from HAProxy's stats CSV.
func (c *cluster) status(server string) (state string, cur int, err error) {
	resp, err := http.Get(c.stats)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	col := map[string]int{}
	found := false
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if h, ok := strings.CutPrefix(f[0], "# "); ok {
			f[0] = h
			for i, name := range f {
				col[name] = i
			}
			continue
		}
		if len(col) == 0 || len(f) <= max(col["status"], col["scur"]) || f[col["svname"]] != server {
			continue
		}
		n, _ := strconv.Atoi(f[col["scur"]])
		cur += n
		if f[col["pxname"]] == "mistralrs" {
			state, found = f[col["status"]], true
		}
	}
	if !found {
		return "", 0, fmt.Errorf("server %s not in HAProxy's stats (%v)", server, sc.Err())
	}
	return state, cur, nil
}

// waitStatus polls HAProxy's stats until the server's state is want ("UP", "DOWN").
func (c *cluster) waitStatus(server, want string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		st, _, err := c.status(server)
		if err == nil && st == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("HAProxy did not report %s %s within %v (last: %q, %v)", server, want, d, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// log returns HAProxy's output so far.
func (c *cluster) log() string {
	b, _ := os.ReadFile(c.hlog)
	return string(b)
}

// rawLogLine returns HAProxy's log line of a request, for failure messages.
func (c *cluster) rawLogLine(id string) string {
	for line := range strings.Lines(c.log()) {
		if strings.Contains(line, "{"+id+"}") {
			return strings.TrimSpace(line)
		}
	}
	return "(no HAProxy log line)"
}

// logLine finds HAProxy's log line of a request by the x-request-id it captured and returns the
// backend and server that took it and its termination state.
func (c *cluster) logLine(id string) (backend, server, term string, ok bool) {
	for line := range strings.Lines(c.log()) {
		if !strings.Contains(line, "{"+id+"}") {
			continue
		}
		m := haproxyLogLine.FindStringSubmatch(line)
		if m == nil {
			return "", "", "", false
		}
		return m[1], m[2], m[3], true
	}
	return "", "", "", false
}

// haproxyLogLine picks backend/server and the termination state out of an `option httplog` line:
// client [date] frontend backend/server Tq/Tw/Tc/Tr/Ta status bytes cookie cookie state ...
var haproxyLogLine = regexp.MustCompile(`^\S+ \[[^\]]+\] \S+ ([^/\s]+)/(\S+) \S+ \S+ \S+ \S+ \S+ (\S+) `)

// checkAffinity sends requests with two session ids and without one, and reads from HAProxy's log
// where each went: one replica per session, through the affinity backend; the rest by leastconn.
func checkAffinity(t *testing.T, c *cluster) {
	t.Helper()
	seen := map[string]map[string]bool{} // session → backend/server
	for i := range 12 {
		session := []string{"conversation-a", "conversation-b", ""}[i%3]
		id := fmt.Sprintf("affinity-%d", i)
		res := c.request(context.Background(), id, session, 8)
		if res.err != nil {
			t.Fatalf("affinity request %s: %v", id, res.err)
		}
		backend, server, _, ok := c.logLine(id)
		for try := 0; !ok && try < 40; try++ { // the log line follows the response
			time.Sleep(25 * time.Millisecond)
			backend, server, _, ok = c.logLine(id)
		}
		if !ok {
			t.Fatalf("request %s not in HAProxy's log:\n%s", id, c.log())
		}
		wantBackend := "mistralrs_affinity"
		if session == "" {
			wantBackend = "mistralrs"
		}
		if backend != wantBackend {
			t.Errorf("request %s (session %q) went to backend %s, want %s", id, session, backend, wantBackend)
		}
		if seen[session] == nil {
			seen[session] = map[string]bool{}
		}
		seen[session][server] = true
	}
	for _, s := range []string{"conversation-a", "conversation-b"} {
		if len(seen[s]) != 1 {
			t.Errorf("session %s reached %d replicas (%v), want one", s, len(seen[s]), seen[s])
		}
	}
	t.Logf("affinity: conversation-a on %v, conversation-b on %v, no session on %v", keys(seen["conversation-a"]), keys(seen["conversation-b"]), keys(seen[""]))
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// lbOutcome is one request's end as the client saw it.
type lbOutcome struct {
	id         string
	ttft       time.Duration
	err        error // nil: a complete stream
	transport  bool  // err is a transport error or a 5xx from HAProxy: a clean failure
	attempts   int   // connections the request was sent on: more than one is a resend
	start, end time.Time
}

// request sends one streaming chat completion through HAProxy and reads it to the end. A
// complete stream has chunks, a last one with finish_reason "length" and usage, then [DONE].
func (c *cluster) request(parent context.Context, id, session string, maxTokens int) (o lbOutcome) {
	o = lbOutcome{id: id, start: time.Now()}
	defer func() { o.end = time.Now() }()
	ctx, cancel := context.WithTimeout(parent, lbHangLimit)
	defer cancel()
	body := fmt.Sprintf(`{"model":"demo","messages":[{"role":"user","content":"Tell me a story."}],"max_tokens":%d,"stream":true,"ignore_eos":true}`, maxTokens)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-request-id", id)
	if session != "" {
		req.Header.Set("x-session-id", session)
	}
	// A keep-alive connection to HAProxy can close just as a request goes out on it (HAProxy ends
	// the client connection after a response whose replica closed its side, as a draining one
	// does). Go's transport, like the OpenAI SDKs, resends a request that got no byte back on a
	// reused connection, once it is marked replayable; checkOnce shows from HAProxy's log that no
	// resent request had reached HAProxy before.
	req.Header.Set("Idempotency-Key", id)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { o.attempts++ },
	}))
	resp, err := lbHTTP.Do(req)
	if err != nil {
		o.err, o.transport = err, ctx.Err() == nil
		return o
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		o.err = fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
		o.transport = resp.StatusCode >= 500 && resp.Header.Get("x-request-id") == "" // HAProxy's own answer
		return o
	}
	o.ttft, o.err = readStream(resp.Body, o.start)
	o.transport = o.err != nil && ctx.Err() == nil && !errors.Is(o.err, errTruncated)
	return o
}

var errTruncated = errors.New("truncated stream")

// readStream reads an SSE chat stream and checks its ending; it returns the time to its first
// chunk.
func readStream(r io.Reader, start time.Time) (time.Duration, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	var ttft time.Duration
	var chunks int
	var last string
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if done {
			return ttft, fmt.Errorf("%w: data after [DONE]: %.200s", errTruncated, data)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		if chunks == 0 {
			ttft = time.Since(start)
		}
		chunks++
		last = data
	}
	if err := sc.Err(); err != nil {
		return ttft, fmt.Errorf("after %d chunks: %w", chunks, err)
	}
	switch {
	case !done:
		return ttft, fmt.Errorf("%w: no [DONE] after %d chunks, last %.200s", errTruncated, chunks, last)
	case !strings.Contains(last, `"finish_reason":"length"`) || !strings.Contains(last, `"usage"`):
		return ttft, fmt.Errorf("%w: final chunk %.300s", errTruncated, last)
	}
	return ttft, nil
}

// lbRun is what one phase's clients saw.
type lbRun struct {
	elapsed  time.Duration
	ok       atomic.Int64
	phaseErr error // from the phase's action (restarts, kill)

	mu       sync.Mutex
	outcomes []lbOutcome
}

func (r *lbRun) add(o lbOutcome) {
	if o.err == nil {
		r.ok.Add(1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, o)
}

func (r *lbRun) failures() []lbOutcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []lbOutcome
	for _, o := range r.outcomes {
		if o.err != nil {
			out = append(out, o)
		}
	}
	return out
}

// report logs the phase's requests and TTFT percentiles of the complete streams.
func (r *lbRun) report(t *testing.T, phase string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ttft []time.Duration
	for _, o := range r.outcomes {
		if o.err == nil {
			ttft = append(ttft, o.ttft)
		}
	}
	slices.Sort(ttft)
	pct := func(p float64) time.Duration {
		if len(ttft) == 0 {
			return 0
		}
		return ttft[min(len(ttft)-1, int(p*float64(len(ttft))))].Round(100 * time.Microsecond)
	}
	t.Logf("%s: %v, %d requests (%.0f/s), %d complete, %d failed; TTFT p50 %v, p99 %v, max %v",
		phase, r.elapsed.Round(time.Second), len(r.outcomes), float64(len(r.outcomes))/r.elapsed.Seconds(),
		len(ttft), len(r.outcomes)-len(ttft), pct(0.50), pct(0.99), pct(1))
}

// underLoad runs lbClients streaming clients for d while action runs; clients start no request
// after d, and the requests under way then are read to their end.
func (c *cluster) underLoad(phase string, d time.Duration, action func(ctx context.Context) error) *lbRun {
	run := &lbRun{}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range lbClients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 25))
			for n := 0; ctx.Err() == nil; n++ {
				session := ""
				if n%3 == 0 { // a third of the traffic carries a conversation through the affinity backend
					session = fmt.Sprintf("client-%d", i)
				}
				id := fmt.Sprintf("%s-c%d-%d", phase, i, n) // unique in HAProxy's log
				run.add(c.request(context.Background(), id, session, 32+rng.IntN(96)))
			}
		})
	}
	run.phaseErr = action(ctx)
	wg.Wait()
	run.elapsed = time.Since(start)
	lbTransport.CloseIdleConnections()
	return run
}

// checkCrashFailures checks that every failed request of the crash phase was on the killed
// replica, by HAProxy's log, and failed cleanly at the client.
func checkCrashFailures(t *testing.T, c *cluster, run *lbRun, victim string) {
	t.Helper()
	fails := run.failures()
	time.Sleep(200 * time.Millisecond) // HAProxy writes a request's log line as it ends it
	byTerm := map[string]int{}
	var lastErr time.Duration // the latest failure, from the kill
	for _, o := range fails {
		lastErr = max(lastErr, o.end.Sub(c.killedAt))
		backend, server, term, ok := c.logLine(o.id)
		switch {
		case !o.transport:
			t.Errorf("request %s: not a clean failure at the client after %v: %v", o.id, o.end.Sub(o.start).Round(time.Millisecond), o.err)
		case !ok:
			t.Errorf("request %s failed (%v) but is not in HAProxy's log", o.id, o.err)
		case server != victim:
			t.Errorf("request %s failed on %s/%s, not on the killed replica %s: %v\n    HAProxy: %s", o.id, backend, server, victim, o.err, c.rawLogLine(o.id))
		default:
			byTerm[term]++
		}
	}
	if run.ok.Load() == 0 {
		t.Fatal("crash: no request completed")
	}
	t.Logf("crash: %d requests failed, all on %s with a clean error at the client, the last %v after the kill (HAProxy termination states %v); HAProxy reported it DOWN %v after the kill; every other request completed",
		len(fails), victim, lastErr.Round(time.Millisecond), byTerm, c.downAfterKill.Round(10*time.Millisecond))
	if len(fails) > 0 {
		t.Logf("  e.g. %s: %v", fails[0].id, fails[0].err)
	}
}

// checkOnce reads HAProxy's log: every request of the phase must be in it at most once (a resent
// request was not seen by HAProxy the first time), and every complete one exactly once. It
// returns how many requests the client resent.
func checkOnce(t *testing.T, c *cluster, run *lbRun, phase string) int {
	t.Helper()
	time.Sleep(200 * time.Millisecond) // HAProxy writes a request's log line as it ends it
	seen := map[string]int{}
	for line := range strings.Lines(c.log()) {
		if m := haproxyLogID.FindStringSubmatch(line); m != nil {
			seen[m[1]]++
		}
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	resent, bad := 0, 0
	for _, o := range run.outcomes {
		if o.attempts > 1 {
			resent++
		}
		n := seen[o.id]
		if n > 1 || (o.err == nil && n != 1) {
			if bad++; bad <= 10 {
				t.Errorf("%s: request %s (sent %d times, error %v) has %d HAProxy log lines, want %s",
					phase, o.id, o.attempts, o.err, n, map[bool]string{true: "1", false: "at most 1"}[o.err == nil])
			}
		}
	}
	return resent
}

// haproxyLogID is the x-request-id HAProxy captured into a log line.
var haproxyLogID = regexp.MustCompile(`\{([^}]*)\} "`)

func joinFailures(c *cluster, f []lbOutcome, n int) string {
	var b strings.Builder
	for _, o := range f[:min(len(f), n)] {
		fmt.Fprintf(&b, "%s after %v: %v\n    HAProxy: %s\n", o.id, o.end.Sub(o.start).Round(time.Millisecond), o.err, c.rawLogLine(o.id))
	}
	return b.String()
}
