package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"mistralrs/internal/config"
	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
)

type benchFlags struct {
	file     string
	isq      string // in-situ quantization type; "": none
	mmproj   string // vision projector of the image-encode row; "": the one found beside the model, if any
	image    string // image of the image-encode row; "": a generated one of the projector's size
	hub      hubModelFlags
	prompts  []int
	gens     []int
	depths   []int
	threads  []int
	kvType   string
	kvTypeK  string // "": kvType
	kvTypeV  string // "": kvType
	noRotate bool
	reps     int
	jsonOut  bool
	noWarmup bool
	// interleave runs the tests' repetitions round-robin: on a shared
	// machine one process's decode at depth 8000 moved by 30 % from one
	// minute to the next (memory traffic of others), more than the gap
	// between the KV types being compared.
	interleave bool
	cpuProf    string
	load       loadFlags
	spec       specFlags
}

// benchResult carries llama-bench's JSON keys, so scripts read both tools.
type benchResult struct {
	ModelFilename string `json:"model_filename"`
	ModelType     string `json:"model_type"`
	ModelSize     int64  `json:"model_size"`
	ModelNParams  int64  `json:"model_n_params"`
	Backends      string `json:"backends"`
	NThreads      int    `json:"n_threads"`
	NPrompt       int    `json:"n_prompt"`
	NGen          int    `json:"n_gen"`
	NDepth        int    `json:"n_depth"`
	TypeK         string `json:"type_k"`
	TypeV         string `json:"type_v"`
	TestTime      string `json:"test_time"`
	// The image-encode test's (ours): the projector, the image, the rows it
	// encodes into; avg_ns is one encode, avg_ts image rows per second.
	MMProjFilename string    `json:"mmproj_filename,omitempty"`
	MMProjType     string    `json:"mmproj_type,omitempty"`
	Image          string    `json:"image,omitempty"`
	NImageTokens   int       `json:"n_image_tokens,omitempty"`
	AvgNs          int64     `json:"avg_ns"`
	StddevNs       int64     `json:"stddev_ns"`
	AvgTs          float64   `json:"avg_ts"`
	StddevTs       float64   `json:"stddev_ts"`
	SamplesNs      []int64   `json:"samples_ns"`
	SamplesTs      []float64 `json:"samples_ts"`
}

func newBenchCmd(g *config.GlobalConfig) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench -f model.gguf [-p 512] [-n 128] [-t THREADS] [-r 5] | bench --url URL --concurrency N",
		Short: "Measure prefill (pp) and decode (tg) tokens/s, like llama-bench",
		Long: "Measures prompt processing (ppN: N prompt tokens in one forward pass) and text\n" +
			"generation (tgN: N tokens one at a time) throughput, as mean ± sd over repetitions.\n" +
			"Lists (-p 64,512) run every combination. -d N runs each test after N tokens already in\n" +
			"the cache (\"pp512 @ d2048\"), as llama-bench -d. --json prints llama-bench compatible JSON.\n\n" +
			"With --mtp-model FILE or --spec-ngram[=N] it measures speculative decoding instead: tgN\n" +
			"through the engine (greedy) with the proposer and without it, interleaved, with the\n" +
			"acceptance rate and the mean accepted length (tokens per verification step); the speedup\n" +
			"column is the best run with over the best run without. The prompt is -p random tokens or\n" +
			"--prompt TEXT: n-gram acceptance depends on how much the output repeats it. --verify-cost\n" +
			"times a forward pass of k+1 tokens (a verification of k guesses) against a 1-token decode.\n\n" +
			"A vision projector (--mmproj, or the one *mmproj*.gguf beside the model) adds an image-encode\n" +
			"row per thread count: one image (--image FILE, else a generated one of the projector's input\n" +
			"size) preprocessed once, then encoded whole; ms/image excludes the preprocessing, as\n" +
			"llama.cpp's \"image slice encoded in N ms\" does. -p 0 -n 0 leaves that row alone.\n\n" +
			"With --url it load-tests a running server instead, like vLLM's bench serve: --concurrency\n" +
			"streamed chat requests at a time, reporting TTFT, inter-token and end-to-end latency\n" +
			"percentiles and token throughput.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.load.url != "" {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
				defer stop()
				return runLoad(ctx, &f.load, f.jsonOut, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if err := f.hub.apply(cmd, &f.file, &f.mmproj, g.TokenSource); err != nil {
				return err
			}
			return runBench(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "GGUF model file (default: the embedded demo model)")
	addHubModelFlags(fl, &f.hub)
	fl.StringVar(&f.isq, "isq", "", "in-situ quantization of the model at load: q4_0, q4_1, q5_0, q5_1, q8_0, q4k, q5k or q6k")
	fl.StringVar(&f.mmproj, "mmproj", "", "vision projector (llama.cpp mmproj GGUF): adds an image-encode row; default: the one *mmproj*.gguf beside the model, if any")
	fl.StringVar(&f.image, "image", "", "image of the image-encode row (PNG, JPEG, WebP, GIF; default: a generated one of the projector's input size)")
	fl.IntSliceVarP(&f.prompts, "n-prompt", "p", []int{512}, "prompt lengths to test (0 skips pp)")
	fl.IntSliceVarP(&f.gens, "n-gen", "n", []int{128}, "generation lengths to test (0 skips tg)")
	fl.IntSliceVarP(&f.depths, "n-depth", "d", []int{0}, "tokens already in the cache before each test (its context depth)")
	fl.IntSliceVarP(&f.threads, "threads", "t", []int{0}, "thread counts to test (0: one per core)")
	fl.StringVar(&f.kvType, "cache-type", "auto", "KV cache storage of keys and values (as --pa-cache-type; a list compares several): "+kvcache.TypeNames())
	fl.StringVar(&f.kvTypeK, "cache-type-k", "", "KV cache storage of the keys (as llama-bench's -ctk, a list too; default: --cache-type)")
	fl.StringVar(&f.kvTypeV, "cache-type-v", "", "KV cache storage of the values (as llama-bench's -ctv, a list too; default: --cache-type)")
	fl.BoolVar(&f.noRotate, "no-cache-rotation", false, "store q8_0/q4_0 keys and values unrotated (as serve --no-cache-rotation)")
	fl.IntVarP(&f.reps, "repetitions", "r", 5, "repetitions of each test")
	fl.BoolVar(&f.jsonOut, "json", false, "print a JSON array (llama-bench keys) instead of a table")
	fl.BoolVar(&f.noWarmup, "no-warmup", false, "skip the warm-up run of each test")
	fl.BoolVar(&f.interleave, "interleave", false, "fill and warm up every test first, then run the repetitions round-robin, so that tests compared with each other (--cache-type f16,q8_0) share the machine's moments; one --cpuprofile of all")
	fl.StringVar(&f.cpuProf, "cpuprofile", "", "write a CPU profile of each test's timed runs (no load, depth fill or warm-up) to this file, the second test's to FILE.2 and so on (go tool pprof)")
	fl.StringVar(&f.load.url, "url", "", "load-test a running server at this URL instead (streamed chat completions)")
	fl.StringVar(&f.load.model, "model", "default", "with --url: the model to ask for")
	fl.IntVar(&f.load.concurrency, "concurrency", 1, "with --url: requests in flight at once")
	fl.IntVar(&f.load.requests, "num-requests", 16, "with --url: requests to send in all")
	fl.IntVar(&f.load.inputWords, "input-words", 64, "with --url: random words in each prompt")
	fl.IntVar(&f.load.maxTokens, "max-tokens", 64, "with --url: tokens to generate per request (EOS ignored)")
	fl.Uint64Var(&f.load.seed, "prompt-seed", 1, "with --url: seed of the random prompts")
	addSpecFlags(fl, &f.spec)
	return cmd
}

func runBench(cmd *cobra.Command, f *benchFlags) error {
	if f.reps < 1 {
		return fmt.Errorf("--repetitions must be at least 1")
	}
	if f.spec.verifyCost && f.spec.speculative() {
		return fmt.Errorf("--verify-cost and a speculative proposer both given: run them one at a time")
	}
	kvts, err := parseBenchKV(f)
	if err != nil {
		return err
	}
	m, err := loadModelWith(f.file, loader.Options{ISQ: f.isq, MMProj: f.mmproj}, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer m.Close()
	prof := &benchProfile{path: f.cpuProf}
	defer prof.stop()
	size, params, mainType := modelStats(m)
	name := "demo"
	if f.file != "" {
		name = filepath.Base(f.file)
	}
	typeName := fmt.Sprintf("%s %s %s", m.Net.Config.Arch, humanCount(params), mainType)
	if f.spec.verifyCost || f.spec.speculative() {
		if len(kvts) > 1 {
			return fmt.Errorf("--verify-cost and speculative benchmarks take one KV cache type, got %d combinations", len(kvts))
		}
		kvt := kvts[0]
		b := &benchModel{m: m, name: name, typeName: typeName, size: size, params: params, kv: kvt,
			out: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), jsonOut: f.jsonOut, noWarm: f.noWarmup, reps: f.reps,
			threads: f.threads, depths: f.depths, depthSet: cmd.Flags().Changed("n-depth"),
			prompts: f.prompts, gens: f.gens, specOpts: &f.spec}
		if err := prof.start(); err != nil { // the whole run
			return err
		}
		if f.spec.verifyCost {
			return runVerifyCost(b)
		}
		return runSpecBench(b)
	}

	type test struct {
		pp, tg, depth int
		kv            benchKV
	}
	var tests []test
	for _, kv := range kvts {
		for _, d := range f.depths {
			if d < 0 {
				return fmt.Errorf("--n-depth must not be negative, got %d", d)
			}
			for _, p := range f.prompts {
				if p > 0 {
					tests = append(tests, test{pp: p, depth: d, kv: kv})
				}
			}
			for _, n := range f.gens {
				if n > 0 {
					tests = append(tests, test{tg: n, depth: d, kv: kv})
				}
			}
		}
	}
	img, err := imageTest(m, f.image)
	if err != nil {
		return err
	}
	for _, t := range tests {
		if need := t.depth + max(t.pp, t.tg); need > m.Net.Config.ContextLen {
			return fmt.Errorf("test of %d tokens at depth %d needs %d positions; the model's context is %d", max(t.pp, t.tg), t.depth, need, m.Net.Config.ContextLen)
		}
	}
	var results, imageRows []benchResult
	out := cmd.OutOrStdout()
	tbl := benchTable{w: out, types: len(kvts) > 1}
	if !f.jsonOut && len(tests) > 0 {
		tbl.header()
	}
	for _, threads := range f.threads {
		pool := kernels.NewPool(threads)
		nThreads := pool.Threads()
		// Each test's run: its cache filled to its depth, warmed up; with
		// --interleave all of them before the first repetition, else one
		// test after another (llama-bench's order).
		setup := func(t test) (*benchRun, *benchResult, error) {
			b, err := newBenchRun(m, pool, t.depth, t.pp, t.tg, t.kv)
			if err != nil {
				return nil, nil, err
			}
			if !f.noWarmup {
				if _, err := b.once(); err != nil {
					return nil, nil, err
				}
			}
			return b, &benchResult{
				ModelFilename: name, ModelType: typeName, ModelSize: size, ModelNParams: params,
				Backends: kernels.Backend(), NThreads: nThreads, NPrompt: t.pp, NGen: t.tg, NDepth: t.depth, TypeK: t.kv.k.String(), TypeV: t.kv.v.String(),
				TestTime: time.Now().UTC().Format(time.RFC3339),
			}, nil
		}
		rep := func(b *benchRun, r *benchResult) error {
			if benchRepHook != nil {
				benchRepHook(r)
			}
			d, err := b.once()
			if err != nil {
				return err
			}
			r.SamplesNs = append(r.SamplesNs, d.Nanoseconds())
			r.SamplesTs = append(r.SamplesTs, float64(b.pp+b.tg)/d.Seconds())
			return nil
		}
		finish := func(r *benchResult) {
			r.AvgNs, r.StddevNs = meanSD64(r.SamplesNs)
			r.AvgTs, r.StddevTs = meanSD(r.SamplesTs)
			results = append(results, *r)
			if !f.jsonOut {
				tbl.row(r)
			}
		}
		// timed runs the repetitions of the tests set up, round-robin,
		// under the profile, and reports them.
		timed := func(runs []*benchRun, rs []*benchResult) error {
			if err := prof.start(); err != nil {
				return err
			}
			for range f.reps {
				for i, b := range runs {
					if err := rep(b, rs[i]); err != nil {
						return err
					}
				}
			}
			if err := prof.stop(); err != nil {
				return err
			}
			for _, r := range rs {
				finish(r)
			}
			return nil
		}
		err := func() error {
			var runs []*benchRun
			var rs []*benchResult
			for _, t := range tests {
				b, r, err := setup(t)
				if err != nil {
					return err
				}
				runs, rs = append(runs, b), append(rs, r)
				if !f.interleave {
					if err := timed(runs, rs); err != nil {
						return err
					}
					runs, rs = runs[:0], rs[:0]
				}
			}
			if len(runs) > 0 {
				return timed(runs, rs)
			}
			return nil
		}()
		if err == nil && img != nil {
			var r benchResult
			if r, err = img.run(pool, f.reps, f.noWarmup); err == nil {
				r.ModelFilename, r.ModelType, r.ModelSize, r.ModelNParams = name, typeName, size, params
				imageRows = append(imageRows, r)
			}
		}
		pool.Close()
		if err != nil {
			return err
		}
	}
	if f.jsonOut {
		return writeJSON(out, append(results, imageRows...))
	}
	if len(imageRows) > 0 {
		writeImageTable(out, imageRows)
	}
	return nil
}

// benchProfile writes --cpuprofile: a CPU profile of each test's timed
// repetitions, without the model's load, the depth fill or the warm-up
// (at depth 8000 the fill is most of a run's time, and a profile of both
// hid where a decoded token's time goes); the first test's to path, the
// n-th's to path.n (go tool pprof merges the files it is given). The
// speculative benchmarks, and --interleave, write one profile of all
// their runs. Without a path it does nothing.
type benchProfile struct {
	path string
	n    int
	f    *os.File
}

func (p *benchProfile) start() error {
	if p.path == "" {
		return nil
	}
	p.n++
	name := p.path
	if p.n > 1 {
		name += "." + strconv.Itoa(p.n)
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	p.f = f
	return nil
}

func (p *benchProfile) stop() error {
	if p.f == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.f.Close()
	p.f = nil
	return err
}

// benchRepHook, when set (by tests), is called before each timed
// repetition with the result it adds to.
var benchRepHook func(*benchResult)

// benchTable prints the llama-bench style table, with the key and value
// types when the run compares several.
type benchTable struct {
	w     io.Writer
	types bool
}

func (t benchTable) header() {
	kv, sep := "", ""
	if t.types {
		kv, sep = fmt.Sprintf(" %-6s | %-6s |", "type_k", "type_v"), " ------ | ------ |"
	}
	fmt.Fprintf(t.w, "| %-30s | %10s | %9s | %-10s | %7s |%s %16s | %20s |\n", "model", "size", "params", "backend", "threads", kv, "test", "t/s")
	fmt.Fprintf(t.w, "| %s | %s: | %s: | %s | %s: |%s %s: | %s: |\n", strings.Repeat("-", 30), strings.Repeat("-", 9), strings.Repeat("-", 8), strings.Repeat("-", 10), strings.Repeat("-", 6), sep, strings.Repeat("-", 15), strings.Repeat("-", 19))
}

func (t benchTable) row(r *benchResult) {
	label := "pp" + strconv.Itoa(r.NPrompt)
	if r.NGen > 0 {
		label = "tg" + strconv.Itoa(r.NGen)
	}
	if r.NDepth > 0 {
		label += " @ d" + strconv.Itoa(r.NDepth)
	}
	kv := ""
	if t.types {
		kv = fmt.Sprintf(" %-6s | %-6s |", r.TypeK, r.TypeV)
	}
	fmt.Fprintf(t.w, "| %-30s | %6.2f MiB | %9s | %-10s | %7d |%s %16s | %20s |\n",
		truncate(r.ModelType, 30), float64(r.ModelSize)/(1<<20), humanCount(r.ModelNParams), r.Backends, r.NThreads, kv, label,
		fmt.Sprintf("%.2f ± %.2f", r.AvgTs, r.StddevTs))
}

// imageTest is the image-encode test of a model with a vision projector;
// nil without one (an --image then is an error).
func imageTest(m *loader.Model, file string) (*imageBench, error) {
	if m.Vision == nil {
		if file != "" {
			return nil, fmt.Errorf("--image needs a vision projector: --mmproj FILE, or one *mmproj*.gguf beside the model")
		}
		return nil, nil
	}
	return newImageBench(m.Vision, file)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// benchRun is one test: pp tokens in one forward pass, or tg tokens one
// forward pass each (llama-bench's definitions), after depth tokens that
// are put in the cache once and kept for every repetition.
type benchRun struct {
	net               *model.Model
	pool              *kernels.Pool
	cache             model.KVCache
	logits            []float32
	depth, pp, tg     int
	promptTok, genTok []int32
	fillTok           []int32 // the depth's tokens
}

func newBenchRun(m *loader.Model, pool *kernels.Pool, depth, pp, tg int, kvt benchKV) (*benchRun, error) {
	net := m.Net
	vocab := net.Config.Vocab
	rng := rand.New(rand.NewPCG(uint64(pp), uint64(tg)))
	randToks := func(n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = int32(rng.IntN(vocab))
		}
		return t
	}
	b := &benchRun{net: net, pool: pool, logits: make([]float32, vocab), depth: depth, pp: pp, tg: tg,
		promptTok: randToks(pp), genTok: randToks(tg)}
	var err error
	if b.cache, err = benchCache(net.Config.KVShape(), depth+max(pp, tg+1), kvt); err != nil {
		return nil, err
	}
	b.fillTok = randToks(depth)
	for pos := 0; pos < depth; pos += benchFillChunk {
		in := &model.SeqInput{Tokens: b.fillTok[pos:min(depth, pos+benchFillChunk)], Pos: pos, Cache: b.cache}
		if err := net.Forward(pool, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// benchFillChunk is the tokens of one forward pass of the depth fill, as
// llama-bench's default micro-batch: one pass of 8000 tokens would hold
// ~1.3 GB of activations for the 1.2B shape and make peak RSS measure the
// fill instead of the test (a server prefills in chunks of
// --max-num-batched-tokens too).
const benchFillChunk = 512

// once times the test; Forward truncates the cache back to the depth.
func (b *benchRun) once() (time.Duration, error) {
	start := time.Now()
	if b.pp > 0 {
		in := &model.SeqInput{Tokens: b.promptTok, Pos: b.depth, Cache: b.cache, Logits: b.logits}
		if err := b.net.Forward(b.pool, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
			return 0, err
		}
	}
	for i := range b.tg {
		in := &model.SeqInput{Tokens: b.genTok[i : i+1], Pos: b.depth + i, Cache: b.cache, Logits: b.logits}
		if err := b.net.Forward(b.pool, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// modelStats returns the bytes and parameters of the weights and the most
// common tensor type by bytes.
func modelStats(m *loader.Model) (size, params int64, mainType string) {
	byType := map[kernels.Type]int64{}
	for _, t := range m.File.Tensors {
		size += int64(len(t.Data))
		params += int64(t.Elements())
		byType[t.Type] += int64(len(t.Data))
	}
	var best int64 = -1
	for t, b := range byType {
		if b > best {
			best, mainType = b, t.String()
		}
	}
	return size, params, mainType
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	default:
		return fmt.Sprintf("%.2fK", float64(n)/1e3)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) > 1 {
		for _, x := range xs {
			sd += (x - mean) * (x - mean)
		}
		sd = math.Sqrt(sd / float64(len(xs)-1))
	}
	return mean, sd
}

func meanSD64(xs []int64) (mean, sd int64) {
	fs := make([]float64, len(xs))
	for i, x := range xs {
		fs[i] = float64(x)
	}
	m, s := meanSD(fs)
	return int64(m), int64(s)
}

// benchKV is how the bench's caches store keys and values.
type benchKV struct {
	k, v   kvcache.Type
	rotate bool // q8_0/q4_0 rows rotated (kvcache.Pool.SetRotation)
}

// parseBenchKV reads --cache-type, --cache-type-k/-v (each a list, as
// llama-bench's -ctk/-ctv: every key type with every value type; a
// --cache-type list alone gives keys and values of each of its types) and
// --no-cache-rotation.
func parseBenchKV(f *benchFlags) ([]benchKV, error) {
	var lists [2][]kvcache.Type
	for i, t := range []struct{ flag, val string }{{"--cache-type-k", f.kvTypeK}, {"--cache-type-v", f.kvTypeV}} {
		name, val := t.flag, t.val
		if val == "" {
			name, val = "--cache-type", f.kvType
		}
		for _, v := range strings.Split(val, ",") {
			typ, err := kvcache.ParseType(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			lists[i] = append(lists[i], typ)
		}
	}
	var kvs []benchKV
	if f.kvTypeK == "" && f.kvTypeV == "" { // --cache-type alone: keys and values of each type
		for _, t := range lists[0] {
			kvs = append(kvs, benchKV{k: t, v: t, rotate: !f.noRotate})
		}
		return kvs, nil
	}
	for _, k := range lists[0] {
		for _, v := range lists[1] {
			kvs = append(kvs, benchKV{k: k, v: v, rotate: !f.noRotate})
		}
	}
	return kvs, nil
}

// benchCache is a cache of n positions storing kv: one sequence of a
// paged pool of the server's default block size, the cache serve runs
// (--paged-attn auto), so that every type is measured on the path a
// server takes. (Before 2026-12-03 f32 and f16 used the contiguous cache
// of --paged-attn off.)
func benchCache(sh kvcache.Shape, n int, kv benchKV) (kvcache.Cache, error) {
	if err := errors.Join(kv.k.CheckRow(sh.KDim), kv.v.CheckRow(sh.VDim)); err != nil {
		return nil, err
	}
	bs := config.DefaultEngineOptions().BlockSize
	p := kvcache.NewTypedPool(sh, bs, (n+bs-1)/bs, kv.k, kv.v)
	p.SetRotation(kv.rotate)
	return p.NewSeq(), nil
}
