package k8stest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	eppmetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/backend/metrics"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/datalayer"
)

// pickerSetup is what the picker test takes from the manifests: the metric flags of the
// endpoint picker's Deployment and the InferencePool.
type pickerSetup struct {
	Queue, KV, LoRA string // --total-queued-requests-metric, --kv-cache-usage-percentage-metric, --lora-info-metric
	Pool            *infv1.InferencePool
}

func loadPickerSetup(t *testing.T, root string) pickerSetup {
	t.Helper()
	tr, err := loadTree(filepath.Join(root, manifestsDir))
	if err != nil {
		t.Fatal(err)
	}
	d := one[*appsv1.Deployment](tr, eppName)
	pool := one[*infv1.InferencePool](tr, serverName)
	if d == nil || pool == nil {
		t.Fatalf("no Deployment %s or InferencePool %s", eppName, serverName)
	}
	args, err := eppArgs(d)
	if err != nil {
		t.Fatal(err)
	}
	return pickerSetup{Queue: args[eppMetricFlags[0]], KV: args[eppMetricFlags[1]], LoRA: args[eppMetricFlags[2]], Pool: pool}
}

// needServer builds cmd/mistralrs, or skips (fails under CI=true, where it must build).
func needServer(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mistralrs")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mistralrs")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("go build ./cmd/mistralrs: %v\n%s", err, out)
		}
		t.Skipf("cannot build the server (go build ./cmd/mistralrs in %s: %v): %s", root, err, firstLine(out))
	}
	return bin
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return line
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// lockedBuffer collects the server's output for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServer runs `mistralrs serve` on a free port and waits for /v1/models to list a model;
// it returns the port and the first model id. The process ends with the test.
func startServer(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	port := freePort(t)
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, append([]string{"serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port)}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		var models struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/models", port))
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&models)
			resp.Body.Close()
			if err == nil && len(models.Data) > 0 {
				return port, models.Data[0].ID
			}
		}
		select {
		case err := <-done:
			t.Fatalf("mistralrs serve %v exited: %v\n%s", args, err, logs)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mistralrs serve %v did not list a model within 60 s\n%s", args, logs)
		}
	}
}

// stream sends one streaming completion of maxTokens tokens (EOS ignored) and reads it to the end.
func stream(ctx context.Context, port int, body map[string]any) error {
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/v1/completions", port), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "data: [DONE]" {
			return nil
		}
	}
	return fmt.Errorf("stream ended without [DONE]: %v", sc.Err())
}

// recorder is an http.RoundTripper that keeps the last body it read, so a test can compare
// the picker's reading of a scrape with the very bytes it read.
type recorder struct {
	mu   sync.Mutex
	last []byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.last = body
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func (r *recorder) body() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// exposition is our own reading of a /metrics body: the samples of one family by label set.
type sample struct {
	Labels map[string]string
	Value  float64
}

func samples(body []byte, family string) []sample {
	var out []sample
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, family) || (len(line) > len(family) && line[len(family)] != ' ' && line[len(family)] != '{') {
			continue
		}
		rest := line[len(family):]
		s := sample{Labels: map[string]string{}}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndex(rest, "}")
			for _, pair := range splitLabels(rest[1:end]) {
				k, v, _ := strings.Cut(pair, "=")
				s.Labels[k], _ = strconv.Unquote(v)
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		s.Value, _ = strconv.ParseFloat(fields[0], 64)
		out = append(out, s)
	}
	return out
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\':
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == ',' && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// poolInfo is the picker's view of its pool (datalayer.PoolInfo): the manifests' InferencePool
// with the port of this test's server.
type poolInfo struct{ pool *infv1.InferencePool }

func (p poolInfo) PoolGet() (*infv1.InferencePool, error)                     { return p.pool, nil }
func (p poolInfo) PodList(func(datalayer.Endpoint) bool) []datalayer.Endpoint { return nil }

// observation is one scrape: the picker's state and our own reading of the same bytes.
type observation struct {
	State *eppmetrics.MetricsState
	Body  []byte
}

// watchPicker runs the picker's scraper against the live server until stop is closed: its own
// refresh loop (PodMetricsFactory, as the picker runs it for each pod of the pool) and, beside
// it, FetchMetrics calls through a recorder so that each reading can be checked against the
// bytes it came from. It returns the recorded scrapes and the refresh loop's last state. It runs
// on its own goroutine, so it returns its error rather than failing the test.
func watchPicker(setup pickerSetup, port int, stop <-chan struct{}) ([]observation, *eppmetrics.MetricsState, error) {
	mapping, err := eppmetrics.NewMetricMapping(setup.Queue, setup.KV, setup.LoRA)
	if err != nil {
		return nil, nil, fmt.Errorf("the picker refuses the manifests' metric flags: %v", err)
	}
	pool := setup.Pool.DeepCopy()
	pool.Spec.TargetPorts = []infv1.Port{{Number: infv1.PortNumber(port)}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mistralrs-0", Namespace: "default", Labels: map[string]string{}},
		Status:     corev1.PodStatus{PodIP: "127.0.0.1"},
	}
	for k, v := range pool.Spec.Selector.MatchLabels {
		pod.Labels[string(k)] = string(v)
	}
	newClient := func(rt http.RoundTripper) *eppmetrics.PodMetricsClientImpl {
		return &eppmetrics.PodMetricsClientImpl{MetricMapping: mapping, ModelServerMetricsPath: "/metrics",
			ModelServerMetricsScheme: "http", Client: &http.Client{Transport: rt, Timeout: 5 * time.Second}}
	}
	ctx, cancel := context.WithCancel(ctrllog.IntoContext(context.Background(), logr.Discard()))
	defer cancel()
	factory := eppmetrics.NewPodMetricsFactory(newClient(http.DefaultTransport), 20*time.Millisecond)
	endpoint := factory.NewEndpoint(ctx, pod, poolInfo{pool})
	defer factory.ReleaseEndpoint(endpoint)

	rec := &recorder{}
	client := newClient(rec)
	state := eppmetrics.NewMetricsState()
	var obs []observation
	for {
		select {
		case <-stop:
			return obs, endpoint.GetMetrics(), nil
		case <-time.After(10 * time.Millisecond):
		}
		next, err := client.FetchMetrics(ctx, endpoint.GetPod(), state, int32(port))
		if next == nil {
			return nil, nil, fmt.Errorf("FetchMetrics: %v", err)
		}
		// An error with a state is a family the server does not export (yet): the reading of the
		// others is still checked; which ones are missing is checked by the caller.
		state = next
		obs = append(obs, observation{State: next, Body: rec.body()})
	}
}

// checkObservation compares the picker's state with our reading of the same /metrics body.
func checkObservation(t *testing.T, setup pickerSetup, o observation, haveKV, haveLoRA bool) {
	t.Helper()
	queue := samples(o.Body, setup.Queue)
	if len(queue) != 1 {
		t.Fatalf("%s: %d samples in the scrape, want 1", setup.Queue, len(queue))
	}
	if o.State.WaitingQueueSize != int(queue[0].Value) {
		t.Errorf("picker's queue %d, the scrape says %s %v", o.State.WaitingQueueSize, setup.Queue, queue[0].Value)
	}
	if haveKV {
		kv := samples(o.Body, setup.KV)
		if len(kv) != 1 || o.State.KVCacheUsagePercent != kv[0].Value {
			t.Errorf("picker's KV utilization %v, the scrape says %v", o.State.KVCacheUsagePercent, kv)
		}
		if u := o.State.KVCacheUsagePercent; u < 0 || u > 1 {
			t.Errorf("KV utilization %v is no fraction", u)
		}
	}
	if haveLoRA {
		checkLoRAObservation(t, setup, o)
	}
}

// blocksRatio is used/total of the KV block gauges in a scrape (ok: both there, some in use).
func blocksRatio(body []byte) (float64, bool) {
	used, total := samples(body, "mistralrs_kv_cache_blocks_used"), samples(body, "mistralrs_kv_cache_blocks_total")
	if len(used) != 1 || len(total) != 1 || total[0].Value <= 0 || used[0].Value <= 0 {
		return 0, false
	}
	return used[0].Value / total[0].Value, true
}

// checkLoRAObservation: the adapters the picker holds as running and waiting, and its
// max_lora, are those of the newest series with adapters in the same scrape.
func checkLoRAObservation(t *testing.T, setup pickerSetup, o observation) {
	t.Helper()
	var latest *sample
	for _, s := range samples(o.Body, setup.LoRA) {
		if s.Labels["running_lora_adapters"] == "" && s.Labels["waiting_lora_adapters"] == "" {
			continue
		}
		if latest == nil || s.Value > latest.Value {
			latest = &s
		}
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		l := strings.Split(s, ",")
		sort.Strings(l)
		return l
	}
	keys := func(m map[string]int) []string {
		var l []string
		for k := range m {
			l = append(l, k)
		}
		sort.Strings(l)
		return l
	}
	if latest == nil {
		return // no adapter in the scrape: the picker keeps what it had
	}
	if !slices.Equal(keys(o.State.ActiveModels), split(latest.Labels["running_lora_adapters"])) ||
		!slices.Equal(keys(o.State.WaitingModels), split(latest.Labels["waiting_lora_adapters"])) {
		t.Errorf("picker's adapters running %v waiting %v; the scrape says %v", keys(o.State.ActiveModels), keys(o.State.WaitingModels), latest.Labels)
	}
	if strconv.Itoa(o.State.MaxActiveModels) != latest.Labels["max_lora"] {
		t.Errorf("picker's max adapters %d; the scrape says max_lora=%q", o.State.MaxActiveModels, latest.Labels["max_lora"])
	}
}

// load sends n streaming completions at once and waits for them; each error fails the test.
func load(t *testing.T, port int, n int, body func(i int) map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := stream(ctx, port, body(i)); err != nil {
				errs <- fmt.Errorf("request %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPickerReadsLiveServer runs the inference extension's own metrics scraper (v1.0.0,
// pkg/epp/backend/metrics), configured with the endpoint picker's metric flags from the
// manifests, against a live `mistralrs serve` of the embedded demo model while streams queue
// up behind --max-seqs 1: the picker's queue depth and KV utilization equal the server's gauges
// in each scrape, and it saw a queue and a used KV cache while the requests ran.
func TestPickerReadsLiveServer(t *testing.T) {
	root := repoRoot(t)
	setup := loadPickerSetup(t, root)
	f := loadFacts(t, root)
	bin := needServer(t, root)
	port, model := startServer(t, bin, "--max-seqs", "1", "--pa-memory-mb", "2")
	obs, refreshed := runWithPicker(t, setup, port, func() {
		load(t, port, 6, func(int) map[string]any {
			return map[string]any{"model": model, "prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": true, "stream": true}
		})
	})
	haveKV := f.documents(familyOf(setup.KV))
	if !haveKV {
		t.Logf("KV utilization not checked: docs/observability.md does not list %s (the DRAIN part adds the gauge)", setup.KV)
	}
	maxQueue, maxKV, asBlocks := 0, 0.0, 0
	for _, o := range obs {
		checkObservation(t, setup, o, haveKV, false)
		maxQueue = max(maxQueue, o.State.WaitingQueueSize)
		maxKV = max(maxKV, o.State.KVCacheUsagePercent)
		// The ratio is the block gauges' quotient, but each is set on its own: a scrape between
		// the updates may see them differ, so one agreeing scrape in use shows what it measures.
		if r, ok := blocksRatio(o.Body); ok && r == o.State.KVCacheUsagePercent {
			asBlocks++
		}
	}
	if haveKV && asBlocks == 0 {
		t.Error("in no scrape with KV blocks in use did the picker's KV utilization equal blocks used / total")
	}
	t.Logf("%d scrapes; the picker saw a queue of up to %d and KV utilization up to %.3f (%d scrapes equal to blocks used / total)", len(obs), maxQueue, maxKV, asBlocks)
	if maxQueue == 0 {
		t.Error("the picker never saw a waiting sequence, with 6 streams over --max-seqs 1")
	}
	if haveKV && maxKV == 0 {
		t.Error("the picker never saw the KV cache in use while streams ran")
	}
	last := obs[len(obs)-1].State
	if last.WaitingQueueSize != 0 || (haveKV && last.KVCacheUsagePercent != 0) {
		t.Errorf("after the requests: queue %d, KV %v; want 0 and 0", last.WaitingQueueSize, last.KVCacheUsagePercent)
	}
	if refreshed.UpdateTime.IsZero() || refreshed.WaitingQueueSize != 0 {
		t.Errorf("the picker's own refresh loop: %+v; want a fresh reading of an empty queue", refreshed)
	}
}

func familyOf(spec string) string {
	family, _, _ := strings.Cut(spec, "{")
	return family
}

// runWithPicker runs the picker's scrapers while work runs, then a moment longer so that the
// last scrapes see the server idle.
func runWithPicker(t *testing.T, setup pickerSetup, port int, work func()) ([]observation, *eppmetrics.MetricsState) {
	t.Helper()
	stop := make(chan struct{})
	var obs []observation
	var refreshed *eppmetrics.MetricsState
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		obs, refreshed, err = watchPicker(setup, port, stop)
	}()
	halt := sync.OnceFunc(func() { close(stop); <-done })
	defer halt() // also when work or idleScrapes fail the test
	work()
	idleScrapes(t, port, setup.Queue)
	halt()
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) == 0 {
		t.Fatal("no scrape")
	}
	return obs, refreshed
}

// idleScrapes waits until the server's queue gauge reads 0 and its running gauge 0, then lets the
// picker's loops scrape once more.
func idleScrapes(t *testing.T, port int, queue string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		q, r := samples(body, queue), samples(body, "mistralrs_sequences_running")
		if len(q) == 1 && q[0].Value == 0 && len(r) == 1 && r[0].Value == 0 {
			time.Sleep(100 * time.Millisecond) // a few more scrapes of each loop (10 and 20 ms)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the server did not go idle within 30 s of the last response")
}

// TestPickerReadsLoRAAdapters serves the tiny llama model of ../shared with two LoRA adapters
// and checks that the picker's LoRA reading (running and waiting adapters, max adapters) is the
// server's mistralrs_lora_requests_info while streams with each adapter run and queue.
func TestPickerReadsLoRAAdapters(t *testing.T) {
	root := repoRoot(t)
	setup := loadPickerSetup(t, root)
	f := loadFacts(t, root)
	if !f.documents(familyOf(setup.LoRA)) {
		t.Skipf("docs/observability.md does not list %s: the server has no LoRA info gauge yet (the LSERVER part adds it)", setup.LoRA)
	}
	shared := filepath.Join(root, "..", "shared", "testdata")
	model := filepath.Join(shared, "reference", "tiny-f32.gguf")
	adapters := map[string]string{"A": filepath.Join(shared, "lora", "lora-attn-r8.gguf"), "B": filepath.Join(shared, "lora", "lora-ffn-r4.gguf")}
	for _, p := range []string{model, adapters["A"], adapters["B"]} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("test data absent (%v): ../shared holds the tiny llama model and its LoRA adapters", err)
		}
	}
	bin := needServer(t, root)
	port, id := startServer(t, bin, "-m", filepath.Dir(model), "-f", filepath.Base(model),
		"--lora", "A="+adapters["A"], "--lora", "B="+adapters["B"], "--lora-max-adapters", "3",
		"--max-seqs", "1", "--pa-memory-mb", "4")
	obs, _ := runWithPicker(t, setup, port, func() {
		load(t, port, 6, func(i int) map[string]any {
			return map[string]any{"model": id, "prompt": "hello", "max_tokens": 64, "ignore_eos": true, "stream": true,
				"adapter": []string{"A", "B"}[i%2]}
		})
	})
	seenRunning, seenWaiting := map[string]bool{}, map[string]bool{}
	for _, o := range obs {
		checkObservation(t, setup, o, f.documents(familyOf(setup.KV)), true)
		for a := range o.State.ActiveModels {
			seenRunning[a] = true
		}
		for a := range o.State.WaitingModels {
			seenWaiting[a] = true
		}
		if o.State.MaxActiveModels != 0 && o.State.MaxActiveModels != 3 {
			t.Errorf("picker's max adapters %d, want --lora-max-adapters 3", o.State.MaxActiveModels)
		}
	}
	t.Logf("%d scrapes; running adapters seen %v, waiting %v", len(obs), seenRunning, seenWaiting)
	for _, a := range []string{"A", "B"} {
		if !seenRunning[a] || !seenWaiting[a] {
			t.Errorf("the picker never saw adapter %s both running and waiting (running %v, waiting %v)", a, seenRunning, seenWaiting)
		}
	}
}
