package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPrometheusIntegration starts `mistralrs serve` on the embedded demo model and a real
// Prometheus that scrapes it every second with deploy/prometheus's rules loaded, sends streaming
// and non-streaming traffic, then checks through Prometheus's HTTP API that every PromQL
// expression of the seed, every recording and alerting rule and every Grafana panel query returns
// what it should. It also lints a scrape with `promtool check metrics`, checks the request-id
// exemplars reached Prometheus, and runs the Kubernetes readiness probe against the server.
//
// Skipped when prometheus is not installed (Debian: apt-get install prometheus); under CI=true
// that is a failure instead.
func TestPrometheusIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test (about 20 s)")
	}
	promBin := needTool(t, "prometheus")
	promtool := needTool(t, "promtool")
	root := repoRoot(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The server, on the demo model, with default flags and prompt-lookup speculative decoding
	// (so that the speculative queries see live data).
	bin := buildBinary(t, root, dir)
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	srvOut := &lockedBuffer{}
	srv := exec.Command(bin, "serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--spec-ngram")
	srv.Env = append(os.Environ(), "RUST_LOG=") // the default filter, whatever the caller's shell says
	srvDone := startProcess(t, srv, srvOut)
	waitHTTP(t, "http://"+addr+"/health", 30*time.Second, srvOut)
	checkStartupLines(t, srvOut.String(), addr)

	// Prometheus: 1 s scrapes and rule evaluations, exemplar storage for the request-id exemplars.
	promPort := freePort(t)
	promAddr := fmt.Sprintf("127.0.0.1:%d", promPort)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: mistralrs
    metrics_path: /metrics
    static_configs:
      - targets: [%q]
`, filepath.Join(root, rulesPath), addr)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promOut := &lockedBuffer{}
	prom := exec.CommandContext(ctx, promBin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr,
		"--enable-feature=exemplar-storage",
		"--log.level=warn")
	promDone := startProcess(t, prom, promOut)
	defer func() {
		_ = stopProcess(prom, promDone, 10*time.Second)
		if t.Failed() {
			t.Logf("prometheus output:\n%s", promOut.String())
		}
	}()
	waitHTTP(t, "http://"+promAddr+"/-/ready", 30*time.Second, promOut)
	pc := promClient{base: "http://" + promAddr}

	// Traffic. HTTP series are created at their first request, so a series' first samples carry
	// increments that rate() cannot see: a first wave creates every series, and the later waves,
	// after Prometheus has scraped them, are what the rates measure.
	tr := &traffic{t: t, base: "http://" + addr}
	tr.wave(ctx, 0)
	waitQuery(t, ctx, pc, `mistralrs_time_to_first_token_seconds_count{path="/v1/completions"}`, 20*time.Second)
	for i := 1; i <= 3; i++ {
		time.Sleep(1100 * time.Millisecond)
		tr.wave(ctx, i)
	}
	// Long streams until Prometheus has seen the engine busy: KV blocks in use, sequences running.
	tr.untilBusySeen(ctx, pc)
	tr.wait()
	// Let two more scrapes and rule evaluations see the final counts.
	waitQuery(t, ctx, pc, `mistralrs_sequences_running == 0 and mistralrs_kv_cache_blocks_used == 0`, 20*time.Second)
	time.Sleep(2100 * time.Millisecond)

	t.Run("target", func(t *testing.T) { checkTarget(t, ctx, pc, addr) })
	t.Run("seed", func(t *testing.T) {
		for i, q := range seedQueries {
			checkQuery(t, ctx, pc, fmt.Sprintf("seed %d (%s)", i+1, q.Comment), q.Expr, q.Want)
		}
	})
	t.Run("engine-moved", func(t *testing.T) { checkEngineMoved(t, ctx, pc, tr) })
	t.Run("rules", func(t *testing.T) { checkRules(t, ctx, pc, root) })
	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, ctx, pc, root) })
	t.Run("exemplars", func(t *testing.T) { checkExemplars(t, ctx, pc, tr) })
	t.Run("promtool-check-metrics", func(t *testing.T) { checkExposition(t, ctx, promtool, addr) })
	t.Run("readiness-probe", func(t *testing.T) { checkReadinessProbe(t, root, addr) })

	if err := stopProcess(srv, srvDone, 15*time.Second); err != nil {
		t.Errorf("mistralrs serve did not stop cleanly on SIGTERM: %v", err)
	}
	if t.Failed() {
		t.Logf("server output:\n%s", srvOut.String())
	}
}

// checkStartupLines: the startup log says where the metrics are and which access-log format is on.
func checkStartupLines(t *testing.T, out, addr string) {
	for _, want := range []string{
		"Prometheus metrics: http://" + addr + "/metrics",
		"Access log: text format",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("startup output lacks %q:\n%s", want, out)
		}
	}
}

// traffic drives the server with raw HTTP, each request with its own x-request-id.
type traffic struct {
	t    *testing.T
	base string
	wg   sync.WaitGroup
	n    atomic.Int64

	mu     sync.Mutex
	ids    []string // request ids of streamed requests that succeeded
	errors []string
}

func (tr *traffic) nextID(kind string) string {
	return fmt.Sprintf("e2e-%s-%d", kind, tr.n.Add(1))
}

func (tr *traffic) fail(format string, args ...any) {
	tr.mu.Lock()
	tr.errors = append(tr.errors, fmt.Sprintf(format, args...))
	tr.mu.Unlock()
}

// do sends one request and checks its status; for streams it reads to `data: [DONE]`.
func (tr *traffic) do(ctx context.Context, method, path, body string, wantStatus int, stream bool) {
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		id := tr.nextID(strings.ToLower(method))
		req, err := http.NewRequestWithContext(ctx, method, tr.base+path, strings.NewReader(body))
		if err != nil {
			tr.fail("%s %s: %v", method, path, err)
			return
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("X-Request-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			tr.fail("%s %s: %v", method, path, err)
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			tr.fail("%s %s: reading the body: %v", method, path, err)
			return
		}
		if resp.StatusCode != wantStatus {
			tr.fail("%s %s %s: status %d, want %d: %s", method, path, body, resp.StatusCode, wantStatus, data)
			return
		}
		if got := resp.Header.Get("X-Request-Id"); got != id {
			tr.fail("%s %s: x-request-id %q, sent %q", method, path, got, id)
		}
		if stream {
			if !strings.Contains(resp.Header.Get("Content-Type"), "text/event-stream") ||
				!strings.HasSuffix(strings.TrimSpace(string(data)), "data: [DONE]") {
				tr.fail("%s %s: not a complete SSE stream: %.300s", method, path, data)
				return
			}
			tr.mu.Lock()
			tr.ids = append(tr.ids, id)
			tr.mu.Unlock()
		}
	}()
}

func chatBody(maxTokens int, stream bool, extra string) string {
	return fmt.Sprintf(`{"messages":[{"role":"user","content":"Say something about Prometheus."}],"max_tokens":%d,"stream":%t%s}`,
		maxTokens, stream, extra)
}

// wave sends one round of every kind of request the dashboards look at.
func (tr *traffic) wave(ctx context.Context, i int) {
	for range 2 {
		tr.do(ctx, "POST", "/v1/chat/completions", chatBody(8, false, ""), 200, false)
	}
	for range 3 {
		tr.do(ctx, "POST", "/v1/chat/completions", chatBody(24, true, `,"ignore_eos":true`), 200, true)
	}
	tr.do(ctx, "POST", "/v1/completions", `{"prompt":"Once upon a time","max_tokens":8}`, 200, false)
	tr.do(ctx, "POST", "/v1/completions", `{"prompt":"Once upon a time","max_tokens":16,"stream":true,"ignore_eos":true}`, 200, true)
	// Greedy: prompt lookup finds guesses in the demo model's repetitive output, some accepted
	// and some not, the same in every run (the speculative panels' data).
	tr.do(ctx, "POST", "/v1/completions", `{"prompt":"Once upon a time","max_tokens":40,"temperature":0,"ignore_eos":true}`, 200, false)
	tr.do(ctx, "GET", "/v1/models", "", 200, false)
	// Client errors for the error panels: unknown model, malformed JSON, unknown route.
	tr.do(ctx, "POST", "/v1/chat/completions", `{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}`, 404, false)
	tr.do(ctx, "POST", "/v1/chat/completions", `{"messages":`, 400, false)
	tr.do(ctx, "GET", "/v1/no-such-route", "", 404, false)
	tr.wait()
}

func (tr *traffic) wait() {
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, e := range tr.errors {
		tr.t.Error(e)
	}
	tr.errors = nil
	if tr.t.Failed() {
		tr.t.FailNow()
	}
}

// untilBusySeen keeps several long streams running until Prometheus has scraped the engine with
// sequences running and KV blocks in use (the gauges are only non-zero while work runs, so each
// burst of streams must outlast a scrape interval even when the engine is fast).
func (tr *traffic) untilBusySeen(ctx context.Context, pc promClient) {
	deadline := time.Now().Add(20 * time.Second)
	const seen = `max_over_time(mistralrs_sequences_running[30s]) > 0 and max_over_time(mistralrs_kv_cache_blocks_used[30s]) > 0`
	for {
		for range 4 {
			tr.do(ctx, "POST", "/v1/chat/completions", chatBody(1000, true, `,"ignore_eos":true`), 200, true)
		}
		for range 12 {
			time.Sleep(250 * time.Millisecond)
			if s, err := pc.query(ctx, seen); err == nil && len(s) > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			tr.wait()
			tr.t.Fatalf("Prometheus never scraped the engine busy: %s returned nothing", seen)
		}
	}
}

// waitQuery polls until expr returns at least one sample.
func waitQuery(t *testing.T, ctx context.Context, pc promClient, expr string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s, err := pc.query(ctx, expr)
		if err == nil && len(s) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no result within %v (last error %v)", expr, d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func formatSamples(s []promSample) string {
	var parts []string
	for _, x := range s {
		var labels []string
		for k, v := range x.Metric {
			if k != "__name__" && k != "job" && k != "instance" {
				labels = append(labels, k+"="+strconv.Quote(v))
			}
		}
		sort.Strings(labels)
		parts = append(parts, fmt.Sprintf("{%s} %g", strings.Join(labels, ","), x.Value))
	}
	if len(parts) == 0 {
		return "(empty)"
	}
	return strings.Join(parts, "; ")
}

// checkSamples applies w to a query's result and returns what is wrong ("" when fine).
func checkSamples(s []promSample, w want) string {
	if len(s) == 0 {
		return "empty result"
	}
	switch w {
	case wantOpenRatio, wantAboveOne:
		inside := 0
		for _, x := range s {
			switch {
			case math.IsNaN(x.Value):
				continue
			case w == wantOpenRatio && (x.Value < 0 || x.Value > 1), w == wantAboveOne && x.Value < 1:
				return fmt.Sprintf("value %g is not %s", x.Value, w)
			case w == wantOpenRatio && x.Value > 0 && x.Value < 1, w == wantAboveOne && x.Value > 1:
				inside++
			}
		}
		if inside == 0 {
			return fmt.Sprintf("no value is %s: %s", w, formatSamples(s))
		}
	case wantRatio, wantFinite:
		finite := 0
		for _, x := range s {
			if math.IsNaN(x.Value) {
				continue // a series idle over the window (0/0); another must carry data
			}
			if math.IsInf(x.Value, 0) || x.Value < 0 || (w == wantRatio && x.Value > 1) {
				return fmt.Sprintf("value %g is not %s", x.Value, w)
			}
			finite++
		}
		if finite == 0 {
			return "every value is NaN"
		}
	}
	return ""
}

// checkQuery runs expr, retrying for a few seconds (rules and scrapes run every second), and
// checks the result against w.
func checkQuery(t *testing.T, ctx context.Context, pc promClient, what, expr string, w want) []promSample {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := pc.query(ctx, expr)
		problem := ""
		if err != nil {
			problem = err.Error()
		} else {
			problem = checkSamples(s, w)
		}
		if problem == "" {
			t.Logf("%s = %s", what, formatSamples(s))
			return s
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %s\n  query: %s\n  result: %s", what, problem, expr, formatSamples(s))
			return s
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func checkTarget(t *testing.T, ctx context.Context, pc promClient, addr string) {
	var res struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL string `json:"scrapeUrl"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := pc.get(ctx, "/api/v1/targets", &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Data.ActiveTargets) != 1 {
		t.Fatalf("%d active targets, want 1", len(res.Data.ActiveTargets))
	}
	tg := res.Data.ActiveTargets[0]
	if tg.ScrapeURL != "http://"+addr+"/metrics" || tg.Health != "up" || tg.LastError != "" {
		t.Errorf("target %s: health %q, last error %q", tg.ScrapeURL, tg.Health, tg.LastError)
	}
	checkQuery(t, ctx, pc, "up", `up{job="mistralrs"} == 1`, wantFinite)
}

// checkEngineMoved: the gauges and counters behind the dashboards moved under the traffic.
func checkEngineMoved(t *testing.T, ctx context.Context, pc promClient, tr *traffic) {
	for _, c := range []struct{ what, expr string }{
		{"KV cache pressure seen above 0", `max_over_time((mistralrs_kv_cache_blocks_used / mistralrs_kv_cache_blocks_total)[2m:1s]) > 0`},
		{"sequences seen running", `max_over_time(mistralrs_sequences_running[2m]) > 0`},
		{"capacity is --max-seqs' default", `mistralrs_sequences_capacity == 32`},
		{"tokens processed", `rate(mistralrs_tokens_processed_total[1m]) > 0`},
		{"prefix cache lookups", `rate(mistralrs_prefix_cache_lookups_total[1m]) > 0`},
		{"sequences finished by length", `increase(mistralrs_sequences_completed_total{reason="length"}[2m]) > 0`},
		{"streamed chat requests counted", `increase(http_requests_total{path="/v1/chat/completions",status="200",model="demo"}[2m]) > 0`},
		{"unknown model labelled unknown", `http_requests_total{path="/v1/chat/completions",status="404",model="unknown"} > 0`},
		{"malformed JSON labelled unknown", `http_requests_total{path="/v1/chat/completions",status="400",model="unknown"} > 0`},
		{"unknown route labelled <unmatched>", `http_requests_total{path="<unmatched>",status="404",model="none"} > 0`},
		{"no 5xx", `absent(http_requests_total{status=~"5.."})`},
		{"housekeeping not counted", `absent(http_requests_total{path=~"/metrics|/health"})`},
		{"TTFT samples from both streaming routes", `count(count by (path) (mistralrs_time_to_first_token_seconds_count)) == 2`},
	} {
		checkQuery(t, ctx, pc, c.what, c.expr, wantFinite)
	}
	// Every streamed request made exactly one TTFT sample.
	s := checkQuery(t, ctx, pc, "TTFT sample count", `sum(mistralrs_time_to_first_token_seconds_count)`, wantFinite)
	tr.mu.Lock()
	streams := len(tr.ids)
	tr.mu.Unlock()
	if len(s) == 1 && int(s[0].Value) != streams {
		t.Errorf("TTFT samples %g, streamed requests %d", s[0].Value, streams)
	}
}

// signalParts splits an alert expression into the expressions it compares with thresholds:
// "A > 0.95 and B > 0" gives A and B. Each must return data for the alert to be able to fire.
func signalParts(expr string) []string {
	expr = strings.Join(strings.Fields(expr), " ")
	cmp := regexp.MustCompile(`^(.*?)\s*(>=|<=|==|!=|>|<)\s*[-+]?[0-9.]+(e[-+]?[0-9]+)?$`)
	var out []string
	for _, part := range strings.Split(expr, " and ") {
		if m := cmp.FindStringSubmatch(strings.TrimSpace(part)); m != nil {
			part = m[1]
		}
		out = append(out, strings.TrimSpace(part))
	}
	return out
}

// ruleWant is what each recorded series holds after the test's traffic.
var ruleWant = map[string]want{
	"mistralrs:mtp_accept_rate:rate5m":          wantOpenRatio,
	"mistralrs:mtp_mean_accepted_tokens:rate5m": wantAboveOne,
	"mistralrs:kv_cache_pressure:ratio":         wantRatio,
	"mistralrs:http_error_ratio:rate5m":         wantRatio,
	"mistralrs:prefix_cache_hit_ratio:rate5m":   wantRatio,
	"mistralrs:sequences_utilisation:ratio":     wantRatio,
}

func checkRules(t *testing.T, ctx context.Context, pc promClient, root string) {
	// Prometheus loaded every rule of the file, and each evaluates without error.
	var res struct {
		Data struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name      string `json:"name"`
					Type      string `json:"type"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
					State     string `json:"state"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := pc.get(ctx, "/api/v1/rules", &res); err != nil {
		t.Fatal(err)
	}
	loaded := map[string]bool{}
	for _, g := range res.Data.Groups {
		for _, r := range g.Rules {
			loaded[r.Name] = true
			if r.Health != "ok" || r.LastError != "" {
				t.Errorf("rule %s: health %q, error %q", r.Name, r.Health, r.LastError)
			}
			if r.Type == "alerting" && r.State != "inactive" {
				t.Errorf("alert %s is %s on a healthy, lightly loaded server", r.Name, r.State)
			}
		}
	}
	for _, q := range ruleQueries(t, root) {
		if !loaded[q.Name] {
			t.Errorf("rule %s not loaded by Prometheus", q.Name)
		}
		if strings.Contains(q.Name, ":") {
			// A recording rule: its recorded series, as Prometheus evaluated it.
			checkQuery(t, ctx, pc, "recorded "+q.Name, q.Name, ruleWant[q.Name])
			continue
		}
		// An alert: what it compares against its thresholds returns data.
		for i, part := range signalParts(q.Expr) {
			w := wantFinite
			if rw, ok := ruleWant[part]; ok {
				w = rw
			}
			checkQuery(t, ctx, pc, fmt.Sprintf("alert %s signal %d", q.Name, i+1), part, w)
		}
	}
}

// panelWant is what each dashboard panel shows after the test's traffic (default wantFinite).
var panelWant = map[string]want{
	"Draft acceptance rate":             wantOpenRatio,
	"Mean tokens per verification step": wantAboveOne,
	"Server error ratio (5xx)":          wantRatio,
	"Capacity utilisation":              wantRatio,
	"KV cache pressure":                 wantRatio,
	"Prefix cache hit ratio":            wantRatio,
}

func checkDashboard(t *testing.T, ctx context.Context, pc promClient, root string) {
	for _, q := range dashboardQueries(t, root) {
		checkQuery(t, ctx, pc, q.Source, q.Expr, panelWant[q.Name])
	}
	// The template variables' label_values() queries find the job, instance and model.
	for _, v := range dashboardVariableQueries(t, root) {
		var res struct {
			Data []string `json:"data"`
		}
		path := fmt.Sprintf("/api/v1/label/%s/values?match[]=%s", v[0], urlEscape(v[1]))
		if err := pc.get(ctx, path, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Data) == 0 {
			t.Errorf("dashboard variable label_values(%s, %s) is empty", v[1], v[0])
		}
		t.Logf("label_values(%s, %s) = %v", v[1], v[0], res.Data)
	}
}

// checkExemplars: Prometheus scraped OpenMetrics and stored the request ids the TTFT and duration
// histograms attach as exemplars; each is one of the test's own ids.
func checkExemplars(t *testing.T, ctx context.Context, pc promClient, tr *traffic) {
	tr.mu.Lock()
	ids := map[string]bool{}
	for _, id := range tr.ids {
		ids[id] = true
	}
	tr.mu.Unlock()
	now := time.Now()
	for _, metric := range []string{"mistralrs_time_to_first_token_seconds_bucket", "http_request_duration_seconds_bucket"} {
		var res struct {
			Status string `json:"status"`
			Data   []struct {
				SeriesLabels map[string]string `json:"seriesLabels"`
				Exemplars    []struct {
					Labels map[string]string `json:"labels"`
				} `json:"exemplars"`
			} `json:"data"`
		}
		path := fmt.Sprintf("/api/v1/query_exemplars?query=%s&start=%d&end=%d", metric, now.Add(-5*time.Minute).Unix(), now.Unix()+1)
		if err := pc.get(ctx, path, &res); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range res.Data {
			for _, e := range s.Exemplars {
				id := e.Labels["request_id"]
				if !strings.HasPrefix(id, "e2e-") {
					t.Errorf("%s exemplar request_id %q is not one of the test's ids", metric, id)
				}
				if metric == "mistralrs_time_to_first_token_seconds_bucket" && !ids[id] {
					t.Errorf("TTFT exemplar %q is not a streamed request of the test", id)
				}
				n++
			}
		}
		if n == 0 {
			t.Errorf("no exemplars stored for %s", metric)
		}
		t.Logf("%s: %d exemplars with request ids", metric, n)
	}
}

// knownLint is what `promtool check metrics` says about our exposition: the seed names a gauge
// mistralrs_kv_cache_blocks_total, and promtool's naming lint wants _total on counters only. The
// name is part of the contract (dashboards and the seed's PromQL use it), so it stays.
var knownLint = map[string]bool{
	`mistralrs_kv_cache_blocks_total non-counter metrics should not have "_total" suffix`: true,
}

// checkExposition pipes a text-format scrape into `promtool check metrics`: no problems except
// the one the metric contract imposes.
func checkExposition(t *testing.T, ctx context.Context, promtool, addr string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(body))
	out, err := cmd.CombinedOutput()
	var unexpected []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !knownLint[line] {
			unexpected = append(unexpected, line)
		}
	}
	if len(unexpected) > 0 {
		t.Errorf("promtool check metrics (%v):\n%s", err, strings.Join(unexpected, "\n"))
	}
	if err != nil && len(unexpected) == 0 {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 { // 3: lint findings only
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}
	t.Logf("promtool check metrics on a %d-byte scrape: only the known finding(s):\n%s", len(body), out)
}
