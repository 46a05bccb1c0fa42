package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// loadFlags drive `mistralrs bench --url`: a load generator against a
// running server, reporting what vLLM's `bench serve` reports.
type loadFlags struct {
	url         string
	model       string
	concurrency int
	requests    int
	inputWords  int
	maxTokens   int
	seed        uint64
}

// requestStats is what one streamed request measured.
type requestStats struct {
	ttft      time.Duration
	itls      []time.Duration // between consecutive token chunks
	e2e       time.Duration
	prompt    int
	generated int
	err       error
}

// loadReport is the JSON form of a load run (durations in milliseconds).
type loadReport struct {
	Concurrency        int                `json:"concurrency"`
	Completed          int                `json:"completed"`
	Failed             int                `json:"failed"`
	DurationS          float64            `json:"duration_s"`
	TotalInputTokens   int                `json:"total_input_tokens"`
	TotalOutputTokens  int                `json:"total_output_tokens"`
	RequestThroughput  float64            `json:"request_throughput"`
	OutputThroughput   float64            `json:"output_throughput"`
	TotalTokThroughput float64            `json:"total_token_throughput"`
	TTFTMs             map[string]float64 `json:"ttft_ms"`
	ITLMs              map[string]float64 `json:"itl_ms"`
	E2ELMs             map[string]float64 `json:"e2el_ms"`
	FirstError         string             `json:"first_error,omitempty"`
}

func runLoad(ctx context.Context, f *loadFlags, jsonOut bool, out, progress io.Writer) error {
	if f.concurrency < 1 || f.requests < 1 {
		return errors.New("--concurrency and --num-requests must be at least 1")
	}
	endpoint := strings.TrimRight(f.url, "/") + "/v1/chat/completions"
	client := &http.Client{}
	rng := rand.New(rand.NewPCG(f.seed, 1))
	prompts := make([]string, f.requests)
	for i := range prompts {
		prompts[i] = randomPrompt(rng, f.inputWords)
	}

	bar := progressbar.NewOptions(f.requests, progressbar.OptionSetWriter(progress),
		progressbar.OptionSetDescription("requests"), progressbar.OptionClearOnFinish())
	results := make([]requestStats, f.requests)
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < f.concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = streamOne(ctx, client, endpoint, f, prompts[i])
				bar.Add(1)
			}
		}()
	}
	for i := range prompts {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	bar.Finish()
	rep := summarize(results, time.Since(start), f.concurrency)
	if jsonOut {
		return writeJSON(out, rep)
	}
	printLoadReport(out, rep)
	return nil
}

// randomPrompt makes a prompt of n common words, so that requests differ and
// no prefix cache makes them free.
func randomPrompt(rng *rand.Rand, n int) string {
	words := strings.Fields("the a of to and in is it you that he was for on are with as his they be at one have this from or had by hot word but what some we can out other were all there when up use your how said an each she which do their time if will way about many then them write would like so these her long make thing see him two has look more day could go come did number sound no most people my over know water than call first who may down side been now find")
	var b strings.Builder
	b.WriteString("Write a long story about:")
	for i := 0; i < n; i++ {
		b.WriteByte(' ')
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}

// streamOne sends one streaming chat request and times its token chunks.
func streamOne(ctx context.Context, client *http.Client, endpoint string, f *loadFlags, prompt string) (st requestStats) {
	body, _ := json.Marshal(map[string]any{
		"model":          f.model,
		"messages":       []map[string]string{{"role": "user", "content": prompt}},
		"max_tokens":     f.maxTokens,
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
		"ignore_eos":     true,
		"temperature":    0,
	})
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		st.err = err
		return st
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		st.err = err
		return st
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		st.err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		return st
	}
	var last time.Time
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue // keep-alive comments and blank separators
		}
		if string(data) == "[DONE]" {
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			st.err = fmt.Errorf("bad SSE chunk: %v", err)
			return st
		}
		if chunk.Error != nil {
			st.err = errors.New(chunk.Error.Message)
			return st
		}
		if chunk.Usage != nil {
			st.prompt, st.generated = chunk.Usage.Prompt, chunk.Usage.Completion
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			now := time.Now()
			if last.IsZero() {
				st.ttft = now.Sub(start)
			} else {
				st.itls = append(st.itls, now.Sub(last))
			}
			last = now
		}
	}
	if err := sc.Err(); err != nil {
		st.err = err
	}
	st.e2e = time.Since(start)
	return st
}

func summarize(results []requestStats, dur time.Duration, concurrency int) loadReport {
	rep := loadReport{Concurrency: concurrency, DurationS: dur.Seconds()}
	var ttft, itl, e2e []time.Duration
	for _, r := range results {
		if r.err != nil {
			rep.Failed++
			if rep.FirstError == "" {
				rep.FirstError = r.err.Error()
			}
			continue
		}
		rep.Completed++
		rep.TotalInputTokens += r.prompt
		rep.TotalOutputTokens += r.generated
		ttft = append(ttft, r.ttft)
		itl = append(itl, r.itls...)
		e2e = append(e2e, r.e2e)
	}
	secs := dur.Seconds()
	rep.RequestThroughput = float64(rep.Completed) / secs
	rep.OutputThroughput = float64(rep.TotalOutputTokens) / secs
	rep.TotalTokThroughput = float64(rep.TotalInputTokens+rep.TotalOutputTokens) / secs
	rep.TTFTMs, rep.ITLMs, rep.E2ELMs = percentiles(ttft), percentiles(itl), percentiles(e2e)
	return rep
}

// percentiles returns mean, median, p90, p99 in milliseconds.
func percentiles(ds []time.Duration) map[string]float64 {
	res := map[string]float64{"mean": 0, "median": 0, "p90": 0, "p99": 0}
	if len(ds) == 0 {
		return res
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	at := func(p float64) float64 { return ms(ds[min(len(ds)-1, int(p*float64(len(ds))))]) }
	res["mean"] = ms(sum / time.Duration(len(ds)))
	res["median"] = at(0.5)
	res["p90"] = at(0.9)
	res["p99"] = at(0.99)
	return res
}

func printLoadReport(w io.Writer, r loadReport) {
	line := func(name string, v any) { fmt.Fprintf(w, "%-34s %v\n", name+":", v) }
	fmt.Fprintln(w, "============ Serving Benchmark Result ============")
	line("Concurrency", r.Concurrency)
	line("Successful requests", r.Completed)
	line("Failed requests", r.Failed)
	line("Benchmark duration (s)", fmt.Sprintf("%.2f", r.DurationS))
	line("Total input tokens", r.TotalInputTokens)
	line("Total generated tokens", r.TotalOutputTokens)
	line("Request throughput (req/s)", fmt.Sprintf("%.2f", r.RequestThroughput))
	line("Output token throughput (tok/s)", fmt.Sprintf("%.2f", r.OutputThroughput))
	line("Total token throughput (tok/s)", fmt.Sprintf("%.2f", r.TotalTokThroughput))
	for _, m := range []struct {
		title string
		v     map[string]float64
	}{{"Time to First Token", r.TTFTMs}, {"Inter-token Latency", r.ITLMs}, {"End-to-end Latency", r.E2ELMs}} {
		fmt.Fprintf(w, "%s\n", centre(m.title, 50))
		short := map[string]string{"Time to First Token": "TTFT", "Inter-token Latency": "ITL", "End-to-end Latency": "E2EL"}[m.title]
		for _, k := range []string{"mean", "median", "p90", "p99"} {
			label := strings.ToUpper(k[:1]) + k[1:]
			if k[0] == 'p' {
				label = "P" + k[1:]
			}
			line(fmt.Sprintf("%s %s (ms)", label, short), fmt.Sprintf("%.2f", m.v[k]))
		}
	}
	if r.FirstError != "" {
		line("First error", r.FirstError)
	}
	fmt.Fprintln(w, strings.Repeat("=", 50))
}

func centre(s string, width int) string {
	pad := max(0, width-len(s)-2)
	return strings.Repeat("-", pad/2) + " " + s + " " + strings.Repeat("-", pad-pad/2)
}
