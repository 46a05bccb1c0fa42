package server

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"mistralrs/internal/config"
	"mistralrs/internal/engine"
	"mistralrs/internal/gguf"
	"mistralrs/internal/loader"
	mdl "mistralrs/internal/model"
)

// writeTiny writes a tiny random model to dir/name and returns its path.
func writeTiny(t *testing.T, dir, name string, cfg mdl.RandomConfig) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, modelBytes(t, cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadTOML loads a from-config file with this text, which must load without
// warnings.
func loadTOML(t *testing.T, text string) *config.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, warns, err := config.LoadTOML(p)
	if err != nil || len(warns) > 0 {
		t.Fatalf("%v %v", err, warns)
	}
	return cfg
}

// Each model gets its own speculative settings: [runtime]'s go to the first
// model only, an entry's own keys to that entry; a model with a draft gets
// the loader of the resolved draft file.
func TestOptionsFromConfigSpeculative(t *testing.T) {
	dir := t.TempDir()
	a := writeTiny(t, dir, "a.gguf", tinyConfig)
	b := writeTiny(t, dir, "b.gguf", tinyConfig)
	draftCfg := tinyConfig
	draftCfg.Seed = 11
	draft := writeTiny(t, dir, "draft.gguf", draftCfg)

	type want struct {
		spec  SpecOptions
		draft string
	}
	check := func(name string, cfg *config.Config, wants []want) {
		t.Helper()
		opts, demoModel, err := OptionsFromConfig(cfg)
		if err != nil || demoModel != cfg.DemoModel() {
			t.Fatalf("%s: demo %v, %v", name, demoModel, err)
		}
		if len(opts.Models) != len(wants) {
			t.Fatalf("%s: %d models, want %d", name, len(opts.Models), len(wants))
		}
		// The engine options keep the [runtime] values (the first model's).
		if opts.Engine.SpecTokens != cfg.Runtime.MTPNPredict || opts.Engine.SpecNgram != cfg.Runtime.SpecNgram || opts.Engine.Draft != nil {
			t.Errorf("%s: engine options SpecTokens %d, SpecNgram %d, Draft %v", name, opts.Engine.SpecTokens, opts.Engine.SpecNgram, opts.Engine.Draft)
		}
		for i, w := range wants {
			s := opts.Models[i]
			if s.Spec == nil || *s.Spec != w.spec {
				t.Errorf("%s: model %d (%s): Spec %+v, want %+v", name, i, s.ID, s.Spec, w.spec)
			}
			if (s.LoadDraft != nil) != (w.draft != "") || s.DraftPath != w.draft {
				t.Errorf("%s: model %d (%s): draft %q (loader %v), want %q", name, i, s.ID, s.DraftPath, s.LoadDraft != nil, w.draft)
			}
			if s.LoadDraft == nil {
				continue
			}
			m, err := s.LoadDraft()
			if err != nil {
				t.Errorf("%s: model %d: loading the draft: %v", name, i, err)
				continue
			}
			if m.Path != w.draft {
				t.Errorf("%s: model %d: draft loaded from %s, want %s", name, i, m.Path, w.draft)
			}
			m.Close()
		}
	}

	// [runtime] prompt lookup for the first model; the second has its own draft.
	check("runtime ngram, second model's draft", loadTOML(t, fmt.Sprintf(`
[runtime]
spec_ngram = 3
mtp_n_predict = 6
[[models]]
model_id = %q
[[models]]
model_id = %q
mtp_model = %q
mtp_n_predict = 2
`, a, b, draft)), []want{{SpecOptions{Tokens: 6, Ngram: 3}, ""}, {SpecOptions{Tokens: 2}, draft}})

	// A [runtime] draft is the first model's; the second has none and the
	// default draft length.
	check("runtime draft", loadTOML(t, fmt.Sprintf(`
[runtime]
mtp_model = %q
mtp_n_predict = 8
[[models]]
model_id = %q
[[models]]
model_id = %q
`, draft, a, b)), []want{{SpecOptions{Tokens: 8}, draft}, {SpecOptions{Tokens: 4}, ""}})

	// The first entry's own keys win over [runtime]; a directory draft resolves
	// to its one GGUF.
	draftDir := filepath.Join(dir, "drafts")
	if err := os.Mkdir(draftDir, 0o755); err != nil {
		t.Fatal(err)
	}
	inDir := writeTiny(t, draftDir, "small.gguf", draftCfg)
	check("entry overrides", loadTOML(t, fmt.Sprintf(`
[runtime]
spec_ngram = 3
[[models]]
model_id = %q
spec_ngram = 0
mtp_model = %q
[[models]]
model_id = %q
spec_ngram = 5
`, a, draftDir, b)), []want{{SpecOptions{Tokens: 4}, inDir}, {SpecOptions{Tokens: 4, Ngram: 5}, ""}})

	// The demo model takes the [runtime] (flag) values.
	cfg := config.Default()
	cfg.Runtime.SpecNgram = 2
	check("demo", cfg, []want{{SpecOptions{Tokens: 4, Ngram: 2}, ""}})

	// A missing draft fails before anything loads, naming the setting and the file.
	missing := filepath.Join(dir, "missing.gguf")
	for key, text := range map[string]string{
		"runtime.mtp_model":   fmt.Sprintf("[runtime]\nmtp_model = %q\n[[models]]\nmodel_id = %q\n", missing, a),
		"models[1].mtp_model": fmt.Sprintf("[[models]]\nmodel_id = %q\n[[models]]\nmodel_id = %q\nmtp_model = %q\n", a, b, missing),
	} {
		_, _, err := OptionsFromConfig(loadTOML(t, text))
		if want := fmt.Sprintf("%s: draft model %q: no such file or directory", key, missing); err == nil || err.Error() != want {
			t.Errorf("missing draft: %v, want %q", err, want)
		}
	}
}

// The registry loads a model's draft with it, hands both and the model's
// speculative settings to the engine, loads the draft again on a reload,
// and fails the load with the draft's name when the draft does not load.
func TestDraftLoadedWithModel(t *testing.T) {
	spec := tinySpec(t, "tiny", tinyConfig, loader.Options{})
	var draftLoads atomic.Int32
	data := modelBytes(t, tinyConfig)
	spec.DraftPath = "/models/draft.gguf"
	spec.LoadDraft = func() (*loader.Model, error) {
		draftLoads.Add(1)
		f, err := gguf.Parse("draft", data)
		if err != nil {
			return nil, err
		}
		return loader.FromFile(f, loader.Options{ID: "draft"})
	}
	spec.Spec = &SpecOptions{Tokens: 5, Ngram: 0}

	var gotSpec *ModelSpec
	var gotDraft *loader.Model
	newEng := func(s *ModelSpec, m, draft *loader.Model) (*engine.Engine, *engineStats, error) {
		gotSpec, gotDraft = s, draft
		o := config.DefaultEngineOptions()
		o.Threads = 1
		eng, err := engine.New(m, o)
		if err != nil {
			return nil, nil, err
		}
		return eng, newEngineStats(nil, false), nil
	}
	log := slog.New(slog.DiscardHandler)
	reg, err := newModels([]ModelSpec{spec}, "", log, newEng)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.close()
	e := reg.entries[0]
	if gotSpec == nil || gotSpec.Spec == nil || *gotSpec.Spec != (SpecOptions{Tokens: 5}) || gotDraft == nil ||
		gotDraft.ID != "draft" || e.cur == nil || e.cur.draft != gotDraft || draftLoads.Load() != 1 {
		t.Fatalf("engine got spec %+v, draft %v; loaded %+v; %d draft loads", gotSpec, gotDraft, e.cur, draftLoads.Load())
	}
	if e.unload() != StatusUnloaded || e.cur != nil {
		t.Fatal("not unloaded")
	}
	if st, err := e.load(); err != nil || st != StatusLoaded || draftLoads.Load() != 2 || e.cur.draft == nil {
		t.Fatalf("reload: %s %v, %d draft loads", st, err, draftLoads.Load())
	}
	if line := spec.speculationLine(); line != "Speculative decoding for tiny: draft model /models/draft.gguf, 5 draft tokens per step" {
		t.Errorf("startup line %q", line)
	}

	// A draft that does not load fails the model's load, naming the draft.
	bad := spec
	bad.LoadDraft = func() (*loader.Model, error) { return nil, errors.New("not a GGUF file") }
	_, err = newModels([]ModelSpec{bad}, "", log, newEng)
	if err == nil || err.Error() != "loading model tiny: draft model /models/draft.gguf: not a GGUF file" {
		t.Errorf("bad draft: %v", err)
	}
	bad.LoadDraft = func() (*loader.Model, error) { return nil, errors.New("open /models/draft.gguf: no such file") }
	_, err = newModels([]ModelSpec{bad}, "", log, newEng)
	if err == nil || err.Error() != "loading model tiny: draft model: open /models/draft.gguf: no such file" {
		t.Errorf("bad draft naming itself: %v", err)
	}
}

// A server whose model has a draft (here its own weights) and one with
// prompt lookup, each from its ModelSpec, answer like any other and say so
// at startup.
func TestServeWithPerModelProposers(t *testing.T) {
	draft := tinySpec(t, "draft", tinyConfig, loader.Options{})
	withDraft := tinySpec(t, "with-draft", tinyConfig, loader.Options{})
	withDraft.LoadDraft, withDraft.DraftPath = draft.Load, "draft"
	withDraft.Spec = &SpecOptions{Tokens: 3}
	ngram := tinySpec(t, "ngram", tinyConfig, loader.Options{})
	ngram.Spec = &SpecOptions{Tokens: 4, Ngram: 2}
	ts := startServer(t, func(o *Options) { o.Models = []ModelSpec{withDraft, ngram} })
	drafts := 0.0
	for _, id := range []string{"with-draft", "ngram"} {
		resp, body := ts.post("/v1/completions", map[string]any{"model": id, "prompt": "abcabcabcabcabcabc", "max_tokens": 24,
			"temperature": 0, "ignore_eos": true})
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"model":"`+id+`"`) {
			t.Errorf("%s: %d %s", id, resp.StatusCode, body)
		}
		// Each model's own proposer ran (the draft is the model itself, so
		// its guesses are right).
		d := value(ts.metrics(), "mistralrs_speculative_drafts_total", nil)
		if d <= drafts {
			t.Errorf("%s: speculative drafts %v -> %v: its proposer did not run", id, drafts, d)
		}
		drafts = d
	}
	if got := ts.log.lines("Speculative decoding for with-draft: draft model draft, 3 draft tokens per step"); len(got) != 1 {
		t.Errorf("no startup line for the draft model:\n%s", ts.log.String())
	}
	if got := ts.log.lines("Speculative decoding for ngram: prompt lookup (n-grams of up to 2 tokens), 4 draft tokens per step"); len(got) != 1 {
		t.Errorf("no startup line for prompt lookup:\n%s", ts.log.String())
	}
}
