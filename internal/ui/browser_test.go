package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"mistralrs/internal/config"
	"mistralrs/internal/server"
)

// chromium finds a Chromium or Chrome binary; without one the test skips,
// except under CI=true (.ci/run installs Debian's chromium), where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MISTRALRS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium on PATH; .ci/run installs it (apt-get install chromium)")
	}
	t.Skip("no Chromium on PATH (Debian: apt-get install chromium); set MISTRALRS_CHROMIUM to use another browser")
	return ""
}

// startServer runs what `mistralrs serve` runs with no model (the embedded
// demo model, default settings) on a free loopback port, and returns its
// base URL.
func startServer(t *testing.T) string {
	t.Helper()
	cfg := config.Default()
	opts, demoModel, err := server.OptionsFromConfig(cfg)
	if err != nil || !demoModel {
		t.Fatalf("OptionsFromConfig: demo %v, %v", demoModel, err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Logger, opts.EngineLogger, opts.Observe.Logger = quiet, quiet, quiet
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		srv.Close()
	})
	return "http://" + ln.Addr().String()
}

// startProxy serves base under the path prefix /proxy, as a reverse proxy
// that mounts the server there does: nothing outside /proxy/ answers.
func startProxy(t *testing.T, base string) string {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // stream
	mux := http.NewServeMux()
	mux.Handle("/proxy/", http.StripPrefix("/proxy", rp))
	ps := httptest.NewServer(mux)
	t.Cleanup(ps.Close)
	return ps.URL + "/proxy"
}

// canceled reads mistralrs_sequences_completed_total{reason="canceled"}.
func canceled(t *testing.T, base string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^mistralrs_sequences_completed_total\{reason="canceled"\} (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no canceled completions:\n%s", body)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// consoleErrors collects the page's console errors, uncaught exceptions and
// browser log errors (failed loads among them).
type consoleErrors struct {
	mu   sync.Mutex
	msgs []string
}

func (c *consoleErrors) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, s)
}

func (c *consoleErrors) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.msgs...)
}

// transcript is what the page shows: one entry per message.
type message struct {
	Role string `json:"role"`
	Text string `json:"text"`
	Meta string `json:"meta"`
}

const readTranscript = `Array.from(document.querySelectorAll('#transcript article')).map((a) => ({
	role: a.classList.contains('msg-user') ? 'user' : 'assistant',
	text: a.querySelector('.msg-body').textContent,
	meta: a.querySelector('.meta').textContent,
}))`

// scriptAnswer is what the grammar below makes the model write.
const scriptAnswer = `<script>window.pwned=1</script><img src=x onerror=window.pwned=2>`

func TestBrowserChat(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	exe := chromium(t)
	base := startServer(t)
	shots := t.TempDir()
	if dir := os.Getenv("MISTRALRS_UI_SCREENSHOTS"); dir != "" {
		shots = dir // keep them (the temporary directory is removed)
	}

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(alloc)
	defer cancelCtx()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// wait polls a JavaScript condition until it is true.
	wait := func(what, cond string, d time.Duration) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond,
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(d)))
		if err != nil {
			t.Fatalf("waiting until %s (%s): %v", what, cond, err)
		}
	}
	eval := func(expr string, out any) {
		t.Helper()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("evaluate %s: %v (%s)", expr, err, raw)
		}
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		p := filepath.Join(shots, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	// setField sets a settings field as typing does (an input event).
	setField := func(id, value string) {
		t.Helper()
		v, _ := json.Marshal(value)
		do("set #"+id, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
			`(() => { const e = document.getElementById(%q); e.value = %s; e.dispatchEvent(new Event('input')); })()`, id, v)))
	}
	// idle: no answer streaming, the last message complete.
	const idle = `!document.getElementById('send').disabled && document.getElementById('stop').disabled &&
		!Array.from(document.querySelectorAll('#transcript .meta')).some((m) => m.textContent === 'streaming…')`

	// Start the browser on a blank page, then listen to its console.
	do("start the browser", chromedp.Navigate("about:blank"))
	var errs consoleErrors
	listenCtx, stopListening := context.WithCancel(ctx)
	defer stopListening()
	messages := chromedp.Console(listenCtx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				errs.add(fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
			}
		}
	}()

	// Under a path prefix, from a deep link, the page finds its assets and
	// the API relative to where it is.
	proxied := startProxy(t, base)
	do("open a deep link under a prefix", chromedp.Navigate(proxied+"/ui/some/deep/link"), chromedp.WaitVisible(chromedp.ID("prompt")))
	wait("the model list and metrics load through the prefix",
		`document.getElementById('model').value !== '' && document.getElementById('metrics-state').textContent.startsWith('updated')`, 10*time.Second)
	var baseURI string
	eval(`document.baseURI`, &baseURI)
	if baseURI != proxied+"/ui/" {
		t.Errorf("document.baseURI = %q, want %s/ui/", baseURI, proxied)
	}

	// The page, under /ui/, finds the model list.
	do("open /ui/", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("prompt")))
	wait("the model list is loaded", `document.getElementById('model').value !== ''`, 10*time.Second)
	var model string
	eval(`document.getElementById('model').value`, &model)
	if model == "" || model == "default" {
		t.Errorf("model picker chose %q, want the served model", model)
	}

	// The panel's arithmetic, on a crafted scrape, in the page's own code.
	checkMetricsMath(t, eval)

	// 1. A short answer, streamed into the transcript.
	const prompt1 = "Once upon a time"
	setField("max-tokens", "12")
	do("type and send", chromedp.SendKeys(chromedp.ID("prompt"), prompt1), chromedp.Click(chromedp.ID("send")))
	wait("the first answer is complete", idle+` && document.querySelectorAll('#transcript article').length === 2`, 20*time.Second)
	var tr []message
	eval(readTranscript, &tr)
	if len(tr) != 2 || tr[0].Role != "user" || tr[0].Text != prompt1 || tr[1].Role != "assistant" || tr[1].Text == "" {
		t.Fatalf("transcript after the first answer: %+v", tr)
	}
	if !strings.Contains(tr[1].Meta, "token") {
		t.Errorf("first answer's meta %q has no token count", tr[1].Meta)
	}
	var prompt string
	eval(`document.getElementById('prompt').value`, &prompt)
	if prompt != "" {
		t.Errorf("prompt box still holds %q after sending", prompt)
	}

	// 2. A long answer: text appears while it streams; Stop cancels the
	// sequence in the server.
	before := canceled(t, base)
	setField("max-tokens", "100000")
	setField("extra", `{"ignore_eos": true}`)
	do("send a long request", chromedp.SendKeys(chromedp.ID("prompt"), "Tell me a very long story"),
		chromedp.Click(chromedp.ID("send")))
	wait("streamed text shows before the answer ends",
		`(() => { const a = document.querySelectorAll('#transcript article'); const last = a[a.length - 1];
			return a.length === 4 && last.querySelector('.meta').textContent === 'streaming…' &&
				last.querySelector('.msg-body').textContent.length > 0; })()`, 20*time.Second)
	do("press stop", chromedp.Click(chromedp.ID("stop")))
	wait("the answer is marked stopped", idle+` && document.querySelector('#transcript article:last-of-type .meta').textContent.includes('stopped')`, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for canceled(t, base) <= before {
		if time.Now().After(deadline) {
			t.Fatalf(`mistralrs_sequences_completed_total{reason="canceled"} stayed at %v after Stop`, before)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// 3. The metrics panel shows the token rate of the last scrapes.
	wait("the panel shows a non-zero token rate", `parseFloat(document.getElementById('m-tps').textContent) > 0`, 10*time.Second)
	var panel map[string]string
	eval(`Object.fromEntries(Array.from(document.querySelectorAll('#metrics dd')).map((d) => [d.id, d.textContent]))`, &panel)
	for _, id := range []string{"m-running", "m-waiting", "m-kv", "m-completed"} {
		if panel[id] == "" || panel[id] == "–" {
			t.Errorf("metrics panel %s shows %q", id, panel[id])
		}
	}
	if !strings.Contains(panel["m-completed"], "canceled") {
		t.Errorf("metrics panel completions %q do not count the canceled one", panel["m-completed"])
	}

	// 4. Model output that is markup stays text: a grammar makes the model
	// write a script and an image tag.
	grammar, _ := json.Marshal(map[string]any{"grammar": map[string]string{
		"type": "regex", "value": regexp.QuoteMeta(scriptAnswer)}})
	setField("extra", string(grammar))
	setField("max-tokens", "200")
	do("send the markup request", chromedp.SendKeys(chromedp.ID("prompt"), "Write some HTML"),
		chromedp.Click(chromedp.ID("send")))
	wait("the markup answer is complete", idle+` && document.querySelectorAll('#transcript article').length === 6`, 20*time.Second)
	checkText := func(when string) {
		t.Helper()
		var got struct {
			Last    string `json:"last"`
			Nodes   int    `json:"nodes"`
			Pwned   bool   `json:"pwned"`
			Scripts int    `json:"scripts"`
		}
		eval(`({last: document.querySelector('#transcript article:last-of-type .msg-body').textContent,
			nodes: document.querySelectorAll('#transcript script, #transcript img').length,
			pwned: window.pwned !== undefined,
			scripts: document.scripts.length})`, &got)
		if got.Last != scriptAnswer || got.Nodes != 0 || got.Pwned || got.Scripts != 2 {
			t.Errorf("%s: markup in model output was not kept as text: %+v", when, got)
		}
	}
	checkText("streamed")

	// Regenerate replaces the last answer.
	do("regenerate", chromedp.Click(chromedp.CSS("#transcript article:last-of-type button.regenerate")))
	wait("the regenerated answer is complete", idle+` && document.querySelectorAll('#transcript article').length === 6 &&
		document.querySelector('#transcript article:last-of-type .msg-body').textContent !== ''`, 20*time.Second)
	checkText("regenerated")

	shot("chat.png")
	eval(readTranscript, &tr)

	// 5. A reload keeps the conversation, and stored markup is still text.
	do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("prompt")))
	wait("the conversation is back", `document.querySelectorAll('#transcript article').length === 6`, 10*time.Second)
	var again []message
	eval(readTranscript, &again)
	if fmt.Sprint(again) != fmt.Sprint(tr) {
		t.Errorf("after a reload the transcript is\n%+v\nwant\n%+v", again, tr)
	}
	if len(again) == 6 && !strings.Contains(again[3].Meta, "stopped") {
		t.Errorf("the stopped answer lost its mark: %+v", again[3])
	}
	checkText("reloaded")
	var settings []string
	eval(`['max-tokens', 'extra'].map((id) => document.getElementById(id).value)`, &settings)
	if len(settings) != 2 || settings[0] != "200" || settings[1] != string(grammar) {
		t.Errorf("settings after a reload: %q", settings)
	}
	shot("reloaded.png")

	// Copy reports success (the clipboard API, or the fallback without it).
	do("copy", chromedp.Click(chromedp.CSS("#transcript article:last-of-type button.copy")))
	wait("the copy button reports", `document.querySelector('#transcript article:last-of-type button.copy').textContent !== 'Copy'`, 5*time.Second)
	var copied string
	eval(`document.querySelector('#transcript article:last-of-type button.copy').textContent`, &copied)
	if copied != "Copied" {
		t.Errorf("copy button says %q, want Copied", copied)
	}

	// New chat empties the transcript and the stored conversation.
	do("new chat", chromedp.Click(chromedp.ID("new-chat")))
	var left struct {
		Articles int  `json:"articles"`
		Stored   int  `json:"stored"`
		Empty    bool `json:"empty"`
	}
	eval(`({articles: document.querySelectorAll('#transcript article').length,
		stored: JSON.parse(localStorage.getItem('mistralrs.ui.v1')).messages.length,
		empty: !document.getElementById('empty').hidden})`, &left)
	if left.Articles != 0 || left.Stored != 0 || !left.Empty {
		t.Errorf("after New chat: %+v", left)
	}

	stopListening()
	for _, e := range errs.list() {
		t.Errorf("browser console: %s", e)
	}
}

// metricsScrapes are two scrapes two seconds apart: the TTFT histogram has
// two label sets (they add up), the second scrape adds observations.
const metricsScrapes = `[
"# HELP mistralrs_sequences_running Sequences currently running.\n" +
"# TYPE mistralrs_sequences_running gauge\n" +
"mistralrs_sequences_running 3\n" +
"mistralrs_sequences_waiting 1\n" +
"mistralrs_kv_cache_blocks_used 25\n" +
"mistralrs_kv_cache_blocks_total 100\n" +
"mistralrs_tokens_processed_total 1000\n" +
"mistralrs_prefix_cache_lookups_total 10\n" +
"mistralrs_prefix_cache_hits_total 5\n" +
"mistralrs_speculative_draft_tokens_proposed_total 0\n" +
"mistralrs_speculative_draft_tokens_accepted_total 0\n" +
"mistralrs_sequences_completed_total{reason=\"stop\"} 4\n" +
"mistralrs_sequences_completed_total{reason=\"canceled\"} 1\n" +
"mistralrs_time_to_first_token_seconds_bucket{method=\"POST\",path=\"/v1/chat/completions\",model=\"a\",status=\"200\",le=\"0.1\"} 2\n" +
"mistralrs_time_to_first_token_seconds_bucket{method=\"POST\",path=\"/v1/chat/completions\",model=\"a\",status=\"200\",le=\"0.5\"} 2\n" +
"mistralrs_time_to_first_token_seconds_bucket{method=\"POST\",path=\"/v1/chat/completions\",model=\"a\",status=\"200\",le=\"+Inf\"} 2\n" +
"mistralrs_time_to_first_token_seconds_count{method=\"POST\",path=\"/v1/chat/completions\",model=\"a\",status=\"200\"} 2\n",
"mistralrs_sequences_running 0\n" +
"mistralrs_sequences_waiting 0\n" +
"mistralrs_kv_cache_blocks_used 0\n" +
"mistralrs_kv_cache_blocks_total 100\n" +
"mistralrs_tokens_processed_total 1500 1700000000000\n" +
"mistralrs_prefix_cache_lookups_total 14\n" +
"mistralrs_prefix_cache_hits_total 8\n" +
"mistralrs_speculative_draft_tokens_proposed_total 40\n" +
"mistralrs_speculative_draft_tokens_accepted_total 30\n" +
"mistralrs_sequences_completed_total{reason=\"stop\"} 6\n" +
"mistralrs_sequences_completed_total{reason=\"canceled\"} 1\n" +
"mistralrs_sequences_completed_total{reason=\"with \\\"quote\\\" and \\\\ {brace}\"} 2\n" +
"mistralrs_time_to_first_token_seconds_bucket{method=\"POST\",path=\"/v1/chat/completions\",model=\"a\",status=\"200\",le=\"0.1\"} 2\n" +
"mistralrs_time_to_first_token_seconds_bucket{method=\"POST\",path=\"/v1/chat/completions\",model=\"a\",status=\"200\",le=\"0.5\"} 6\n" +
"mistralrs_time_to_first_token_seconds_bucket{method=\"POST\",path=\"/v1/chat/completions\",model=\"a\",status=\"200\",le=\"+Inf\"} 8\n" +
"mistralrs_time_to_first_token_seconds_bucket{method=\"POST\",path=\"/v1/completions\",model=\"b\",status=\"200\",le=\"0.1\"} 0\n" +
"mistralrs_time_to_first_token_seconds_bucket{method=\"POST\",path=\"/v1/completions\",model=\"b\",status=\"200\",le=\"0.5\"} 2\n" +
"mistralrs_time_to_first_token_seconds_bucket{method=\"POST\",path=\"/v1/completions\",model=\"b\",status=\"200\",le=\"+Inf\"} 2\n" +
"mistralrs_inter_token_latency_seconds_bucket{le=\"0.01\"} 90\n" +
"mistralrs_inter_token_latency_seconds_bucket{le=\"0.025\"} 100\n" +
"mistralrs_inter_token_latency_seconds_bucket{le=\"+Inf\"} 100\n" +
"garbage line {\n"
]`

// checkMetricsMath runs the page's parser and panel arithmetic
// (window.MistralrsMetrics) on metricsScrapes; the expected values are
// Prometheus's: histogram_quantile over bucket deltas, increase ratios.
func checkMetricsMath(t *testing.T, eval func(string, any)) {
	t.Helper()
	var got struct {
		Samples int                `json:"samples"`
		Reasons map[string]float64 `json:"reasons"`
		Whole50 float64            `json:"whole50"`
		Whole95 float64            `json:"whole95"`
		First   map[string]any     `json:"first"`
		Second  map[string]any     `json:"second"`
		Empty   bool               `json:"empty"`
		InfOnly float64            `json:"infOnly"`
		Restart [][2]float64       `json:"restart"`
	}
	eval(`(() => {
		const M = window.MistralrsMetrics;
		const scrapes = `+metricsScrapes+`;
		const a = M.snapshot(M.parse(scrapes[0]));
		const b = M.snapshot(M.parse(scrapes[1]));
		const w = new M.Window(60000);
		const first = w.add(0, a);
		const second = w.add(2000, b);
		return {
			samples: M.parse(scrapes[1]).length,
			reasons: b.completed,
			whole50: M.quantile(0.5, b.ttft),
			whole95: M.quantile(0.95, b.ttft),
			first: first, second: second,
			empty: Number.isNaN(M.quantile(0.5, [[0.1, 0], [Infinity, 0]])),
			infOnly: M.quantile(0.99, [[0.1, 1], [0.5, 1], [Infinity, 3]]),
			restart: M.histogramDelta(b.ttft, a.ttft).map(([le, c]) => [Number.isFinite(le) ? le : -1, c]),
		};
	})()`, &got)
	near := func(what string, v any, want float64) {
		t.Helper()
		f, ok := v.(float64)
		if !ok || f < want-1e-9 || f > want+1e-9 {
			t.Errorf("metrics math: %s = %v, want %v", what, v, want)
		}
	}
	if got.Samples != 21 {
		t.Errorf("metrics math: parsed %d samples of the second scrape, want 21 (the garbage line skipped)", got.Samples)
	}
	if got.Reasons["stop"] != 6 || got.Reasons["canceled"] != 1 || got.Reasons[`with "quote" and \ {brace}`] != 2 {
		t.Errorf("metrics math: completions by reason %v", got.Reasons)
	}
	// Summed buckets: 0.1 → 2, 0.5 → 8, +Inf → 10.
	near("p50 of the whole histogram", got.Whole50, 0.1+0.4*3.0/6.0)
	near("p95 of the whole histogram (rank in +Inf)", got.Whole95, 0.5)
	if !got.Empty {
		t.Error("metrics math: the quantile of an empty histogram is not NaN")
	}
	near("p99 with the rank in +Inf", got.InfOnly, 0.5)
	if fmt.Sprint(got.Restart) != "[[0.1 2] [0.5 2] [-1 2]]" {
		t.Errorf("metrics math: a histogram that went down (restart) gives delta %v, want the newer one whole", got.Restart)
	}
	// The first scrape alone: gauges, no rate.
	near("running", got.First["running"], 3)
	near("KV fraction", got.First["kvFraction"], 0.25)
	if got.First["tokensPerSec"] != nil || got.First["specPresent"] != false {
		t.Errorf("metrics math: first scrape %v", got.First)
	}
	// The second against the first: the delta histogram is 0.1 → 0,
	// 0.5 → 6, +Inf → 8; rates over 2 s.
	near("tokens/s", got.Second["tokensPerSec"], 250)
	near("TTFT p50 of the window", got.Second["ttftP50"], 0.1+0.4*4.0/6.0)
	near("TTFT p95 of the window", got.Second["ttftP95"], 0.5)
	near("ITL p50 (no earlier ITL: all of it)", got.Second["itlP50"], 0.01*50.0/90.0) // rank 50 of the 90 in (0, 0.01]
	near("ITL p95", got.Second["itlP95"], 0.01+0.015*5.0/10.0)
	near("prefix hit rate of the window", got.Second["prefixHitRate"], 3.0/4.0)
	near("speculative acceptance", got.Second["specAcceptance"], 30.0/40.0)
	if got.Second["specPresent"] != true {
		t.Errorf("metrics math: speculative decoding not shown once drafts were proposed: %v", got.Second)
	}
	// The encoder cache's hit rate: hidden until an image was looked up,
	// then hits over lookups in the window.
	var enc struct{ None, First, Second map[string]any }
	eval(`(() => {
		const M = window.MistralrsMetrics;
		const s = (h, m) => M.snapshot(M.parse('mistralrs_encoder_cache_hits_total ' + h + '\nmistralrs_encoder_cache_misses_total ' + m + '\n'));
		const w = new M.Window(60000);
		return {none: new M.Window(60000).add(0, s(0, 0)), first: w.add(0, s(1, 3)), second: w.add(2000, s(4, 4))};
	})()`, &enc)
	if enc.None["encoderPresent"] != false || enc.First["encoderPresent"] != true {
		t.Errorf("metrics math: encoder cache shown %v before any image, %v after", enc.None["encoderPresent"], enc.First["encoderPresent"])
	}
	near("encoder hit rate, first scrape", enc.First["encoderHitRate"], 1.0/4.0)
	near("encoder hit rate of the window", enc.Second["encoderHitRate"], 3.0/4.0)
}
