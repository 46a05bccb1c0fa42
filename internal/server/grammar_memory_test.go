package server

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"mistralrs/internal/config"
)

// enumChat is a chat request answering with one token of a string enum of
// n values, distinct per seed.
func enumChat(n, seed int) []byte {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("value-%d-%d", seed, i)
	}
	body, _ := json.Marshal(map[string]any{"model": "tiny", "max_tokens": 1,
		"messages": []map[string]any{{"role": "user", "content": "pick"}},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "e",
			"schema": map[string]any{"type": "string", "enum": vals}}}})
	return body
}

// heapAfterGC is the live heap, in bytes.
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// rssBytes is the process's resident memory once the freed heap is given
// back to the system, or 0 where /proc is not there.
func rssBytes() int64 {
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// grammarFlood sends n chat requests, each with its own enum of size
// values, to a server whose grammar cache has budget bytes, and returns
// the live heap and RSS before and after.
func grammarFlood(tb testing.TB, budget int64, n, size int) (heap0, heap1, rss0, rss1 int64) {
	ts := startServer(tb, func(o *Options) { o.GrammarCacheBytes = budget })
	// The first constrained request builds the vocabulary: before the
	// baseline.
	if resp, body := ts.post("/v1/chat/completions", enumChat(10, -1)); resp.StatusCode != 200 {
		tb.Fatalf("%d %s", resp.StatusCode, body)
	}
	heap0, rss0 = heapAfterGC(), rssBytes()
	start := time.Now()
	for i := range n {
		if resp, body := ts.post("/v1/chat/completions", enumChat(size, i)); resp.StatusCode != 200 {
			tb.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	heap1, rss1 = heapAfterGC(), rssBytes()
	tb.Logf("%d enums of %d values, budget %d MiB, %v (%v a request): heap %d → %d MiB, RSS %d → %d MiB",
		n, size, budget>>20, time.Since(start).Round(time.Millisecond), (time.Since(start) / time.Duration(n)).Round(time.Millisecond),
		heap0>>20, heap1>>20, rss0>>20, rss1>>20)
	return heap0, heap1, rss0, rss1
}

// Distinct enum schemas, each compiled grammar megabytes, leave no more
// live heap than the grammar cache's budget (the flood of 9,000-
// value enums, scaled down: each grammar here about 2.5 MiB prepared,
// 60 of them 150 MiB if all were kept).
func TestGrammarCacheMemoryBounded(t *testing.T) {
	const budget = 8 << 20
	heap0, heap1, _, _ := grammarFlood(t, budget, 60, 2000)
	if grown := heap1 - heap0; grown > budget+16<<20 {
		t.Errorf("the live heap grew by %d MiB over 60 enums, budget %d MiB", grown>>20, budget>>20)
	}
}

// BenchmarkGrammarCacheMemory is the case at full size: 300
// distinct 9,000-value enums with max_tokens 1 under the default budget;
// the live heap and RSS may grow by at most the budget plus 100 MB.
func BenchmarkGrammarCacheMemory(b *testing.B) {
	const budget = 256 << 20
	for b.Loop() {
		heap0, heap1, rss0, rss1 := grammarFlood(b, budget, 300, 9000)
		if heap1-heap0 > budget+100e6 || rss1-rss0 > budget+100e6 {
			b.Errorf("heap %d → %d MiB, RSS %d → %d MiB: over the budget of %d MiB + 100 MB",
				heap0>>20, heap1>>20, rss0>>20, rss1>>20, budget>>20)
		}
		b.ReportMetric(float64(heap1-heap0)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(rss1-rss0)/(1<<20), "rss-MiB")
	}
}

// server.grammar_cache_mb reaches the grammar cache: a grammar over it is
// a 400 naming the parameter; and a grammar past the matcher's limits is
// a 400 naming the grammar and the limit.
func TestGrammarCacheSetting(t *testing.T) {
	cfg := config.Default()
	if opts, _, err := OptionsFromConfig(cfg); err != nil || opts.GrammarCacheBytes != 256<<20 {
		t.Errorf("default: %d bytes, %v", opts.GrammarCacheBytes, err)
	}
	cfg.Server.GrammarCacheMB = 1
	opts, _, err := OptionsFromConfig(cfg)
	if err != nil || opts.GrammarCacheBytes != 1<<20 {
		t.Fatalf("1 MiB: %d bytes, %v", opts.GrammarCacheBytes, err)
	}
	ts := startServer(t, func(o *Options) { o.GrammarCacheBytes = opts.GrammarCacheBytes })
	type apiError struct {
		Error struct {
			Message string  `json:"message"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	check := func(what string, body []byte, param, inMsg string) {
		t.Helper()
		resp, out := ts.post("/v1/chat/completions", body)
		var e apiError
		if resp.StatusCode != 400 || json.Unmarshal(out, &e) != nil || e.Error.Param == nil || *e.Error.Param != param ||
			!strings.Contains(e.Error.Message, inMsg) {
			t.Errorf("%s: %d %s, want a 400 naming %s and %q", what, resp.StatusCode, out, param, inMsg)
		}
	}
	check("an enum over 1 MiB", enumChat(2000, 0), "response_format", "--grammar-cache-mb")
	alts := make([]string, 20_000)
	for i := range alts {
		alts[i] = fmt.Sprintf(`"a%d"`, i)
	}
	lark, _ := json.Marshal(map[string]any{"model": "tiny", "max_tokens": 1,
		"messages": []map[string]any{{"role": "user", "content": "pick"}},
		"grammar":  map[string]any{"type": "lark", "value": "start: " + strings.Join(alts, " | ")}})
	check("20,000 Lark alternatives", lark, "grammar.value", "MaxStacks")
	if resp, out := ts.post("/v1/chat/completions", enumChat(20, 0)); resp.StatusCode != 200 {
		t.Errorf("a small enum: %d %s", resp.StatusCode, out)
	}
}
