package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
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

// TestSoak runs `mistralrs serve` on the demo model with a KV pool small enough to force
// preemptions, under 16 concurrent clients (chat and completions, streamed and not, some
// disconnecting mid-stream) while another client unloads and reloads the model. Opt-in:
// MISTRALRS_SOAK=<duration> (CI runs it for 60s). All traffic goes to 127.0.0.1, and every loop
// stops at the deadline (the clients also after 1000 requests per second of it).
//
// It asserts:
//   - no 5xx, except 503 answers while the model is unloaded or reloading (counted apart: a
//     request that acquired an engine which unload then closed is told to retry);
//   - RSS flat after warm-up: the server's VmRSS is sampled every second; the warm-up is the first
//     quarter of the run (at least 10 s); the rest is cut in thirds, and the largest sample of the
//     last third must be within 10% of the largest of the first (maxima, so the garbage
//     collector's saw-tooth does not count as growth; a leak raises every later maximum);
//   - goroutines back to the baseline: a second server, started with the same flags and given one
//     request of each kind, is dumped with SIGQUIT (the server has no pprof endpoint and its
//     registry has no Go collector); the soaked server, once idle, is dumped the same way and
//     must not have more goroutines;
//   - KV blocks back to 0 (mistralrs_kv_cache_blocks_used), nothing running or waiting.
func TestSoak(t *testing.T) {
	spec := os.Getenv("MISTRALRS_SOAK")
	if spec == "" {
		t.Skip("soak test: set MISTRALRS_SOAK=60s to run it")
	}
	dur, err := time.ParseDuration(spec)
	if err != nil || dur < 20*time.Second || dur > time.Hour {
		t.Fatalf("MISTRALRS_SOAK=%q: want a duration between 20s and 1h", spec)
	}
	root := repoRoot(t)
	bin := buildBinary(t, root, t.TempDir())

	// The baseline: goroutines of an idle server that has served one request of each kind.
	base := startSoakServer(t, bin)
	soakWarmUp(t, base.url)
	baseG := base.goroutines(t)
	t.Logf("baseline server: %d goroutines when idle", baseG)

	s := startSoakServer(t, bin)
	soakWarmUp(t, s.url)
	st := &soakStats{}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	warm := max(dur/4, 10*time.Second)
	maxRequests := int64(dur/time.Second) * 1000 // a bound on the traffic besides the deadline
	start := time.Now()

	var wg sync.WaitGroup
	// RSS sampler.
	var rss []int64 // kB, one per second
	wg.Go(func() {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				if v, err := procStatus(s.pid, "VmRSS"); err == nil {
					rss = append(rss, v)
				}
			}
		}
	})
	// 16 clients.
	for i := range 16 {
		wg.Go(func() { soakClient(ctx, s.url, uint64(i), maxRequests, st) })
	}
	// Unload and reload of the model, every 2-4 s.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(99, 99))
		for ctx.Err() == nil {
			if !sleepCtx(ctx, time.Duration(2000+rng.IntN(2000))*time.Millisecond) {
				return
			}
			if code := soakPost(s.url+"/v1/models/unload", `{"model_id":"demo"}`); code != 200 {
				st.fail(fmt.Sprintf("unload: status %d", code))
			}
			if !sleepCtx(ctx, time.Duration(200+rng.IntN(800))*time.Millisecond) {
				return
			}
			if code := soakPost(s.url+"/v1/models/reload", `{"model_id":"demo"}`); code != 200 {
				st.fail(fmt.Sprintf("reload: status %d", code))
			}
			st.cycles.Add(1)
		}
	})
	wg.Wait()
	elapsed := time.Since(start)
	soakTransport.CloseIdleConnections()

	// Idle: KV blocks back to 0, nothing running or waiting.
	var m map[string]float64
	deadline := time.Now().Add(20 * time.Second)
	for {
		m = scrapeMetrics(t, s.url)
		if m["mistralrs_kv_cache_blocks_used"] == 0 && m["mistralrs_sequences_running"] == 0 &&
			m["mistralrs_sequences_waiting"] == 0 && m["mistralrs_requests_pending_admission"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("engine not idle 20 s after the soak: blocks used %v, running %v, waiting %v, pending %v",
				m["mistralrs_kv_cache_blocks_used"], m["mistralrs_sequences_running"],
				m["mistralrs_sequences_waiting"], m["mistralrs_requests_pending_admission"])
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	soakTransport.CloseIdleConnections() // the scrapes' keep-alive connection
	time.Sleep(time.Second)              // the server sees the connections close
	endG := s.goroutines(t)

	// Figures.
	n := len(rss)
	w := int(warm / time.Second)
	t.Logf("soak %v: %d requests (%d ok, %d client disconnects mid-stream, %d 503 while unloaded/reloading, %d 4xx, %d stream error events), %d unload/reload cycles",
		elapsed.Round(time.Second), st.requests.Load(), st.ok.Load(), st.disconnects.Load(), st.unavailable.Load(),
		st.client4xx.Load(), st.streamErrors.Load(), st.cycles.Load())
	t.Logf("engine: %v preemptions, %v blocks total, blocks used at end %v; goroutines baseline %d, end %d",
		m["mistralrs_paged_preemptions_total"], m["mistralrs_kv_cache_blocks_total"], m["mistralrs_kv_cache_blocks_used"], baseG, endG)
	if n < w+9 {
		t.Fatalf("only %d RSS samples", n)
	}
	q := (n - w) / 3
	ref := slices.Max(rss[w : w+q])
	last := slices.Max(rss[n-q:])
	t.Logf("RSS (MB): start %.1f, after warm-up (max of s %d-%d) %.1f, end (max of s %d-%d) %.1f, max %.1f, change %+.1f%%",
		mb(rss[0]), w+1, w+q, mb(ref), n-q+1, n, mb(last), mb(slices.Max(rss)), 100*float64(last-ref)/float64(ref))

	if f := st.failures(); len(f) > 0 {
		t.Errorf("%d failures, first ones:\n%s", len(f), strings.Join(f[:min(len(f), 10)], "\n"))
	}
	if st.ok.Load() == 0 || st.disconnects.Load() == 0 || st.cycles.Load() == 0 {
		t.Errorf("the soak did not exercise everything: ok %d, disconnects %d, cycles %d", st.ok.Load(), st.disconnects.Load(), st.cycles.Load())
	}
	if m["mistralrs_paged_preemptions_total"] == 0 {
		t.Errorf("no preemption: the KV pool is not small enough")
	}
	if d := float64(last-ref) / float64(ref); d > 0.10 {
		t.Errorf("RSS not flat: %.1f MB after warm-up, %.1f MB at the end (%+.1f%%)", mb(ref), mb(last), 100*d)
	}
	if endG > baseG {
		t.Errorf("goroutines: %d at the end, baseline %d; dump:\n%s", endG, baseG, s.out.String())
	}
	if m["mistralrs_kv_cache_blocks_used"] != 0 {
		t.Errorf("KV blocks used at the end: %v", m["mistralrs_kv_cache_blocks_used"])
	}
}

// soakTransport is shared by the soak's clients, so keep-alive connections are reused.
var soakTransport = &http.Transport{MaxIdleConnsPerHost: 32}

var soakClientHTTP = &http.Client{Transport: soakTransport, Timeout: 60 * time.Second}

type soakServer struct {
	cmd  *exec.Cmd
	done <-chan error
	out  *lockedBuffer
	url  string
	pid  int
}

// startSoakServer starts the server on the demo model with a 128-token KV pool (4 blocks of 32):
// a handful of concurrent sequences fill it, so the scheduler preempts.
func startSoakServer(t *testing.T, bin string) *soakServer {
	t.Helper()
	port := freePort(t)
	out := &lockedBuffer{}
	cmd := exec.Command(bin, "serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--pa-context-len", "128", "--pa-block-size", "32", "--disable-access-log")
	cmd.Env = append(os.Environ(), "RUST_LOG=warn", "GOTRACEBACK=all")
	done := startProcess(t, cmd, out)
	s := &soakServer{cmd: cmd, done: done, out: out, url: fmt.Sprintf("http://127.0.0.1:%d", port), pid: cmd.Process.Pid}
	waitHTTP(t, s.url+"/health", 30*time.Second, out)
	return s
}

// goroutines stops the server with SIGQUIT (the Go runtime then prints every goroutine) and
// counts the goroutines in the dump.
func (s *soakServer) goroutines(t *testing.T) int {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Fatalf("server did not exit on SIGQUIT")
	}
	// The runtime's own goroutines (GC mark workers, started at the first
	// collection; the cleanup queue; signal handling) come and go with the
	// heap, not with the server: they are not counted.
	n := 0
	for _, g := range regexp.MustCompile(`(?m)^goroutine \d+ `).Split(s.out.String(), -1)[1:] {
		if !regexp.MustCompile(`created by runtime\.`).MatchString(g) {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no goroutine dump after SIGQUIT:\n%.2000s", s.out.String())
	}
	return n
}

// soakWarmUp sends one request of each kind the soak sends.
func soakWarmUp(t *testing.T, base string) {
	t.Helper()
	for _, stream := range []bool{false, true} {
		for _, chat := range []bool{false, true} {
			path, body := soakRequest(chat, stream, 8)
			resp, err := soakClientHTTP.Post(base+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("warm-up %s: status %d", path, resp.StatusCode)
			}
		}
	}
	soakTransport.CloseIdleConnections()
}

func soakRequest(chat, stream bool, maxTokens int) (path, body string) {
	if chat {
		return "/v1/chat/completions", fmt.Sprintf(`{"model":"demo","messages":[{"role":"user","content":"Tell me a story."}],"max_tokens":%d,"stream":%t,"ignore_eos":true}`, maxTokens, stream)
	}
	return "/v1/completions", fmt.Sprintf(`{"model":"demo","prompt":"Once upon a time","max_tokens":%d,"stream":%t,"ignore_eos":true}`, maxTokens, stream)
}

type soakStats struct {
	requests, ok, disconnects, unavailable, client4xx, streamErrors, cycles atomic.Int64

	mu   sync.Mutex
	errs []string
}

func (s *soakStats) fail(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, msg)
}

func (s *soakStats) failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.errs)
}

// soakClient sends requests until ctx ends or maxRequests have been sent: a random kind, a random length; a third of the
// streams are cut after a few events.
func soakClient(ctx context.Context, base string, seed uint64, maxRequests int64, st *soakStats) {
	rng := rand.New(rand.NewPCG(seed, 7))
	for ctx.Err() == nil && st.requests.Load() < maxRequests {
		chat, stream := rng.IntN(2) == 0, rng.IntN(2) == 0
		path, body := soakRequest(chat, stream, 8+rng.IntN(48))
		cut := stream && rng.IntN(3) == 0
		st.requests.Add(1)
		rctx, rcancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(rctx, http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := soakClientHTTP.Do(req)
		if err != nil {
			rcancel()
			if ctx.Err() == nil {
				st.fail(fmt.Sprintf("%s: %v", path, err))
			}
			continue
		}
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable:
			st.unavailable.Add(1)
			_, _ = io.Copy(io.Discard, resp.Body)
		case resp.StatusCode >= 500:
			b, _ := io.ReadAll(resp.Body)
			st.fail(fmt.Sprintf("%s: status %d: %.300s", path, resp.StatusCode, b))
		case resp.StatusCode >= 400:
			st.client4xx.Add(1)
			b, _ := io.ReadAll(resp.Body)
			st.fail(fmt.Sprintf("%s: status %d: %.300s", path, resp.StatusCode, b))
		case cut:
			sc := bufio.NewScanner(resp.Body)
			keep := 1 + rng.IntN(6)
			for events := 0; events < keep && sc.Scan(); {
				if strings.HasPrefix(sc.Text(), "data: ") {
					events++
				}
			}
			rcancel() // the client goes away mid-stream
			st.disconnects.Add(1)
		case stream:
			b, err := io.ReadAll(resp.Body)
			switch {
			case err != nil && ctx.Err() != nil:
			case err != nil:
				st.fail(fmt.Sprintf("%s: reading the stream: %v", path, err))
			case strings.Contains(string(b), `"error"`):
				st.streamErrors.Add(1) // the model was unloaded under the stream
			case !strings.Contains(string(b), "data: [DONE]"):
				st.fail(fmt.Sprintf("%s: stream without [DONE]: %.300s", path, b))
			default:
				st.ok.Add(1)
			}
		default:
			_, _ = io.Copy(io.Discard, resp.Body)
			st.ok.Add(1)
		}
		resp.Body.Close()
		rcancel()
	}
}

func soakPost(url, body string) int {
	resp, err := soakClientHTTP.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return -1
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// procStatus reads a "Key:   123 kB" field of /proc/<pid>/status.
func procStatus(pid int, key string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("%s not in /proc/%d/status", key, pid)
}

// scrapeMetrics reads the unlabelled samples (and the sum over labels) of /metrics.
func scrapeMetrics(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := soakClientHTTP.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
			_, rest, _ = strings.Cut(line, "} ")
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			out[name] += v
		}
	}
	return out
}

func mb(kb int64) float64 { return float64(kb) / 1024 }
