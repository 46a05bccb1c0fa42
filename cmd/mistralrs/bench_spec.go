package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"mistralrs/internal/config"
	"mistralrs/internal/engine"
	"mistralrs/internal/kernels"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
	"mistralrs/internal/sampler"
)

// Speculative decoding benchmarks (issue 10): tg through the engine with and
// without a proposer, and the cost of a verification forward pass.

// specFlags are bench's speculative settings. The proposer flags are serve's
// own (the same names, defaults, usage and bare value), bound to cfg.
type specFlags struct {
	cfg        *config.Config
	prompt     string
	verifyCost bool
	verifyMaxK int
}

// verifyDepth is the cache depth --verify-cost measures at unless -d says.
const verifyDepth = 256

// addSpecFlags defines --mtp-model, --mtp-n-predict and --spec-ngram as
// serve defines them, and bench's own --prompt and --verify-cost.
func addSpecFlags(fl *pflag.FlagSet, s *specFlags) {
	s.cfg = config.Default()
	serve := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.BindServeFlags(serve, s.cfg)
	for _, name := range []string{"mtp-model", "mtp-n-predict", "spec-ngram"} {
		f := *serve.Lookup(name)
		f.Usage = "speculative tg (with and without): " + f.Usage
		if name == "mtp-model" {
			f.Usage = "speculative tg (with and without) with this draft model, a GGUF file sharing the model's vocabulary"
		}
		fl.AddFlag(&f)
	}
	fl.StringVar(&s.prompt, "prompt", "", "with --mtp-model or --spec-ngram: this text (tokenized) as the prompt instead of -p random tokens")
	fl.BoolVar(&s.verifyCost, "verify-cost", false, "time one forward pass of k+1 tokens (a speculative verification of k guesses) against a 1-token decode, k = 1..8, at depth -d (default "+strconv.Itoa(verifyDepth)+")")
	fl.IntVar(&s.verifyMaxK, "verify-max-k", 8, "with --verify-cost: the largest k")
}

// speculative reports whether a proposer flag was given.
func (s *specFlags) speculative() bool {
	return s.cfg.Runtime.MTPModel != "" || s.cfg.Runtime.SpecNgram != 0
}

// benchModel is the loaded model and the bench settings the speculative
// tests use.
type benchModel struct {
	m              *loader.Model
	name, typeName string // as the pp/tg table names them
	size, params   int64
	kv             benchKV
	out, stderr    io.Writer
	jsonOut        bool
	noWarm         bool
	reps           int
	threads        []int
	depths         []int
	depthSet       bool // -d was given
	prompts, gens  []int
	specOpts       *specFlags

	// Set by runSpecBench.
	draft            *loader.Model
	draftName        string
	specType         string
	nPredict, ngramN int
}

// specResult is one speculative tg test: llama-bench's keys for the run with
// speculation, and the run without it and the proposer's counts beside them.
type specResult struct {
	benchResult
	SpecType        string    `json:"spec_type"` // "draft" or "ngram"
	SpecDraft       string    `json:"spec_draft,omitempty"`
	SpecNgram       int       `json:"spec_ngram,omitempty"`
	SpecNPredict    int       `json:"spec_n_predict"`
	AvgTsNospec     float64   `json:"t/s_nospec"`
	StddevTsNospec  float64   `json:"stddev_ts_nospec"`
	SamplesTsNospec []float64 `json:"samples_ts_nospec"`
	Speedup         float64   `json:"speedup"`      // avg_ts / t/s_nospec
	SpeedupBest     float64   `json:"speedup_best"` // best run with / best run without
	Drafts          int64     `json:"drafts"`       // verification steps (per sequence)
	Proposed        int64     `json:"proposed"`
	Accepted        int64     `json:"accepted"`
	StagedDrops     int64     `json:"staged_drops"`
	AcceptRate      float64   `json:"accept_rate"` // accepted / proposed
	MeanLen         float64   `json:"mean_len"`    // tokens per verification step: 1 + accepted / drafts
	SameOutput      bool      `json:"same_output"` // greedy: the same tokens with and without
}

// specCounter keeps the speculative counts the engine reports in the
// speculative runs.
type specCounter struct {
	mu                                  sync.Mutex
	drafts, proposed, accepted, dropped int64
}

func (c *specCounter) record(st engine.Stats) {
	c.mu.Lock()
	c.drafts += int64(st.SpecDrafts)
	c.proposed += int64(st.SpecProposed)
	c.accepted += int64(st.SpecAccepted)
	c.dropped += int64(st.SpecStagedDrops)
	c.mu.Unlock()
}

func (c *specCounter) reset() {
	c.mu.Lock()
	c.drafts, c.proposed, c.accepted, c.dropped = 0, 0, 0, 0
	c.mu.Unlock()
}

func (c *specCounter) counts() (drafts, proposed, accepted, dropped int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drafts, c.proposed, c.accepted, c.dropped
}

// runSpecBench runs, for every thread count, prompt and generation length,
// greedy tg through two engines (one with the proposer, one without),
// interleaved: with, without, with, without. The table shows the t/s as
// mean ± sd and the speedup of the best run with over the best without (a
// noisy machine only ever slows a run down); the JSON has both.
func runSpecBench(b *benchModel) error {
	s := b.specOpts
	rt := &s.cfg.Runtime
	switch {
	case rt.MTPModel != "" && rt.SpecNgram != 0:
		return fmt.Errorf("--mtp-model and --spec-ngram both given: bench one proposer at a time")
	case rt.MTPNPredict < 1 || rt.MTPNPredict > engine.MaxSpecTokens:
		return fmt.Errorf("--mtp-n-predict %d: want 1..%d", rt.MTPNPredict, engine.MaxSpecTokens)
	case rt.SpecNgram < 0 || rt.SpecNgram > config.MaxSpecNgram:
		return fmt.Errorf("--spec-ngram %d: want 1..%d", rt.SpecNgram, config.MaxSpecNgram)
	}
	for _, d := range b.depths {
		if d != 0 {
			return fmt.Errorf("--n-depth does not apply to speculative tg (the prompt is the context)")
		}
	}
	b.nPredict, b.specType = rt.MTPNPredict, "ngram"
	b.ngramN = rt.SpecNgram
	if rt.MTPModel != "" {
		d, err := loadModel(rt.MTPModel, "", b.stderr)
		if err != nil {
			return fmt.Errorf("--mtp-model: %w", err)
		}
		defer d.Close()
		b.draft, b.draftName, b.specType, b.ngramN = d, filepath.Base(rt.MTPModel), "draft", 0
	}

	var tests []specTest
	if s.prompt != "" {
		p := b.m.Tok.Encode(s.prompt, true, false)
		if len(p) == 0 {
			return fmt.Errorf("--prompt %q has no tokens", s.prompt)
		}
		for _, n := range b.gens {
			if n > 0 {
				tests = append(tests, specTest{prompt: p, label: fmt.Sprintf("tg%d (text pp%d)", n, len(p)), n: n})
			}
		}
	} else {
		for _, pp := range b.prompts {
			pp = max(pp, 1)
			rng := rand.New(rand.NewPCG(uint64(pp), 0x5eed))
			p := make([]int32, pp)
			for i := range p {
				p[i] = int32(rng.IntN(b.m.Net.Config.Vocab))
			}
			for _, n := range b.gens {
				if n > 0 {
					tests = append(tests, specTest{prompt: p, label: fmt.Sprintf("tg%d @ pp%d", n, pp), n: n})
				}
			}
		}
	}
	if len(tests) == 0 {
		return fmt.Errorf("speculative bench: no tg test (give -n N > 0)")
	}
	for _, t := range tests {
		if need := len(t.prompt) + t.n; need > b.m.Net.Config.ContextLen {
			return fmt.Errorf("prompt of %d tokens and %d generated need %d positions; the model's context is %d", len(t.prompt), t.n, need, b.m.Net.Config.ContextLen)
		}
	}

	proposer := fmt.Sprintf("ngram%d", b.ngramN)
	if b.draft != nil {
		proposer = "draft"
	}
	out := b.out
	if !b.jsonOut {
		if b.draft != nil {
			fmt.Fprintf(out, "draft: %s\n", b.draftName)
		}
		fmt.Fprintf(out, "| %-30s | %-10s | %7s | %-32s | %17s | %17s | %7s | %6s | %8s |\n",
			"model", "backend", "threads", "test", "t/s", "t/s nospec", "speedup", "accept", "mean len")
		fmt.Fprintf(out, "| %s | %s | %s: | %s | %s: | %s: | %s: | %s: | %s: |\n", strings.Repeat("-", 30), strings.Repeat("-", 10),
			strings.Repeat("-", 6), strings.Repeat("-", 32), strings.Repeat("-", 16), strings.Repeat("-", 16), strings.Repeat("-", 6), strings.Repeat("-", 5), strings.Repeat("-", 7))
	}
	var results []specResult
	for _, threads := range b.threads {
		rs, err := specBenchThreads(b, threads, tests)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if !r.SameOutput {
				fmt.Fprintf(b.stderr, "warning: %s: greedy tokens differ with and without speculation\n", r.label)
			}
			if !b.jsonOut {
				fmt.Fprintf(out, "| %-30s | %-10s | %7d | %-32s | %17s | %17s | %6.2fx | %5.1f%% | %8.2f |\n",
					truncate(b.typeName, 30), r.Backends, r.NThreads, truncate(r.label+" "+proposer+" k"+strconv.Itoa(b.nPredict), 32),
					fmt.Sprintf("%.2f ± %.2f", r.AvgTs, r.StddevTs), fmt.Sprintf("%.2f ± %.2f", r.AvgTsNospec, r.StddevTsNospec),
					r.SpeedupBest, 100*r.AcceptRate, r.MeanLen)
			}
			results = append(results, r.specResult)
		}
	}
	if b.jsonOut {
		return writeJSON(out, results)
	}
	return nil
}

// specTest is one prompt and generation length.
type specTest struct {
	prompt []int32
	label  string
	n      int
}

type labelledResult struct {
	specResult
	label string
}

// specBenchThreads runs the tests on two engines of threads workers each.
func specBenchThreads(b *benchModel, threads int, tests []specTest) ([]labelledResult, error) {
	o := config.DefaultEngineOptions()
	o.Threads = threads
	o.CacheTypeK, o.CacheTypeV, o.NoCacheRotation = b.kv.k.String(), b.kv.v.String(), !b.kv.rotate
	plain, err := engine.New(b.m, o)
	if err != nil {
		return nil, err
	}
	defer plain.Close()
	o.SpecTokens, o.SpecNgram, o.Draft = b.nPredict, b.ngramN, b.draft
	spec, err := engine.New(b.m, o)
	if err != nil {
		return nil, err
	}
	defer spec.Close()
	obs := &specCounter{}
	spec.SetStatsSink(obs.record)
	nThreads := spec.Workers().Threads()

	var results []labelledResult
	for _, t := range tests {
		seed := uint64(1)
		req := &engine.Request{Prompt: t.prompt, MaxTokens: t.n, IgnoreEOS: true, Continuation: true,
			Sampling: sampler.Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1, Seed: &seed}}
		// gen runs req once: the decode time of its tokens after the first
		// (the prompt's step samples the first).
		gen := func(e *engine.Engine) (time.Duration, []int32, error) {
			res, err := e.Generate(context.Background(), req, nil)
			if err != nil {
				return 0, nil, err
			}
			if res.CompletionTokens != t.n {
				return 0, nil, fmt.Errorf("%s: generated %d tokens, want %d", t.label, res.CompletionTokens, t.n)
			}
			return res.DecodeTime, res.Tokens, nil
		}
		var withToks, withoutToks []int32
		if !b.noWarm {
			if _, withToks, err = gen(spec); err != nil {
				return nil, err
			}
			if _, withoutToks, err = gen(plain); err != nil {
				return nil, err
			}
		}
		obs.reset()
		r := labelledResult{label: t.label, specResult: specResult{
			benchResult: benchResult{
				ModelFilename: b.name, ModelType: b.typeName, ModelSize: b.size, ModelNParams: b.params,
				Backends: kernels.Backend(), NThreads: nThreads, NPrompt: len(t.prompt), NGen: t.n, TypeK: b.kv.k.String(), TypeV: b.kv.v.String(),
				TestTime: time.Now().UTC().Format(time.RFC3339),
			},
			SpecType: b.specType, SpecDraft: b.draftName, SpecNgram: b.ngramN, SpecNPredict: b.nPredict,
			SameOutput: true,
		}}
		tokS := func(d time.Duration) float64 { return float64(t.n-1) / d.Seconds() }
		for i := 0; i < b.reps; i++ {
			d, toks, err := gen(spec)
			if err != nil {
				return nil, err
			}
			r.SamplesNs = append(r.SamplesNs, d.Nanoseconds())
			r.SamplesTs = append(r.SamplesTs, tokS(d))
			if withToks == nil {
				withToks = toks
			}
			d, toks, err = gen(plain)
			if err != nil {
				return nil, err
			}
			r.SamplesTsNospec = append(r.SamplesTsNospec, tokS(d))
			if withoutToks == nil {
				withoutToks = toks
			}
		}
		r.SameOutput = slices.Equal(withToks, withoutToks)
		r.AvgNs, r.StddevNs = meanSD64(r.SamplesNs)
		r.AvgTs, r.StddevTs = meanSD(r.SamplesTs)
		r.AvgTsNospec, r.StddevTsNospec = meanSD(r.SamplesTsNospec)
		r.Speedup = r.AvgTs / r.AvgTsNospec
		r.SpeedupBest = slices.Max(r.SamplesTs) / slices.Max(r.SamplesTsNospec)
		r.Drafts, r.Proposed, r.Accepted, r.StagedDrops = obs.counts()
		if r.Proposed > 0 {
			r.AcceptRate = float64(r.Accepted) / float64(r.Proposed)
		}
		r.MeanLen = 1
		if r.Drafts > 0 {
			r.MeanLen = 1 + float64(r.Accepted)/float64(r.Drafts)
		}
		results = append(results, r)
	}
	return results, nil
}

// verifyResult is one row of --verify-cost.
type verifyResult struct {
	ModelFilename string    `json:"model_filename"`
	ModelType     string    `json:"model_type"`
	Backends      string    `json:"backends"`
	NThreads      int       `json:"n_threads"`
	NDepth        int       `json:"n_depth"`
	K             int       `json:"k"`         // guesses verified: k+1 tokens in one forward pass
	VerifyMs      float64   `json:"verify_ms"` // best of the repetitions
	DecodeMs      float64   `json:"decode_ms"` // best of the repetitions
	Ratio         float64   `json:"ratio"`     // verify_ms / decode_ms
	SamplesVerify []float64 `json:"samples_verify_ms"`
	SamplesDecode []float64 `json:"samples_decode_ms"`
}

// runVerifyCost times, at each depth, a forward pass of k+1 tokens with the
// logits of every one (what the engine runs to verify k guesses) against a
// forward pass of one token with its logits (a decode), interleaved, for
// k = 1..verifyMaxK. Each sample is the mean of enough passes to last at
// least 20 ms; the table shows the best sample of each.
func runVerifyCost(b *benchModel) error {
	s := b.specOpts
	if s.verifyMaxK < 1 || s.verifyMaxK > engine.MaxSpecTokens {
		return fmt.Errorf("--verify-max-k %d: want 1..%d", s.verifyMaxK, engine.MaxSpecTokens)
	}
	depths := b.depths
	if !b.depthSet {
		depths = []int{verifyDepth}
	}
	net := b.m.Net
	cfg := &net.Config
	V := cfg.Vocab
	for _, d := range depths {
		if d < 0 || d+s.verifyMaxK+1 > cfg.ContextLen {
			return fmt.Errorf("--verify-cost at depth %d: needs %d positions; the model's context is %d", d, d+s.verifyMaxK+1, cfg.ContextLen)
		}
	}
	out := b.out
	if !b.jsonOut {
		fmt.Fprintf(out, "| %-30s | %-10s | %7s | %5s | %3s | %11s | %11s | %6s |\n", "model", "backend", "threads", "depth", "k", "ms/verify", "ms/decode", "ratio")
		fmt.Fprintf(out, "| %s | %s | %s: | %s: | %s: | %s: | %s: | %s: |\n", strings.Repeat("-", 30), strings.Repeat("-", 10),
			strings.Repeat("-", 6), strings.Repeat("-", 4), strings.Repeat("-", 2), strings.Repeat("-", 10), strings.Repeat("-", 10), strings.Repeat("-", 5))
	}
	var results []verifyResult
	rng := rand.New(rand.NewPCG(7, 7))
	randToks := func(n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = int32(rng.IntN(V))
		}
		return t
	}
	for _, threads := range b.threads {
		pool := kernels.NewPool(threads)
		for _, d := range depths {
			cache, err := benchCache(cfg.KVShape(), d+s.verifyMaxK+1, b.kv)
			if err != nil {
				pool.Close()
				return err
			}
			if d > 0 {
				in := &model.SeqInput{Tokens: randToks(d), Cache: cache}
				if err := net.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
					pool.Close()
					return err
				}
			}
			toks := randToks(s.verifyMaxK + 1)
			logits := make([]float32, V)
			all := make([]float32, (s.verifyMaxK+1)*V)
			pass := func(k int) error { // k = 0: a decode
				in := &model.SeqInput{Tokens: toks[:k+1], Pos: d, Cache: cache}
				if k == 0 {
					in.Logits = logits
				} else {
					in.AllLogits = all[:(k+1)*V]
				}
				return net.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{in}})
			}
			// sample is the mean time of n passes.
			sample := func(k, n int) (float64, error) {
				start := time.Now()
				for range n {
					if err := pass(k); err != nil {
						return 0, err
					}
				}
				return float64(time.Since(start).Nanoseconds()) / 1e6 / float64(n), nil
			}
			// Passes per sample: enough for 20 ms of the largest verification.
			one, err := sample(s.verifyMaxK, 1)
			if err != nil {
				pool.Close()
				return err
			}
			if !b.noWarm {
				if one, err = sample(s.verifyMaxK, 1); err != nil {
					pool.Close()
					return err
				}
			}
			n := max(1, int(math.Ceil(20/one)))
			for k := 1; k <= s.verifyMaxK; k++ {
				r := verifyResult{ModelFilename: b.name, ModelType: b.typeName, Backends: kernels.Backend(),
					NThreads: pool.Threads(), NDepth: d, K: k}
				for range b.reps {
					v, err := sample(k, n)
					if err != nil {
						pool.Close()
						return err
					}
					dec, err := sample(0, n)
					if err != nil {
						pool.Close()
						return err
					}
					r.SamplesVerify = append(r.SamplesVerify, v)
					r.SamplesDecode = append(r.SamplesDecode, dec)
				}
				r.VerifyMs, r.DecodeMs = slices.Min(r.SamplesVerify), slices.Min(r.SamplesDecode)
				r.Ratio = r.VerifyMs / r.DecodeMs
				results = append(results, r)
				if !b.jsonOut {
					fmt.Fprintf(out, "| %-30s | %-10s | %7d | %5d | %3d | %11.3f | %11.3f | %6.2f |\n",
						truncate(b.typeName, 30), r.Backends, r.NThreads, d, k, r.VerifyMs, r.DecodeMs, r.Ratio)
				}
			}
		}
		pool.Close()
	}
	if b.jsonOut {
		return writeJSON(out, results)
	}
	return nil
}
