package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"mistralrs/internal/config"
	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
	"mistralrs/internal/server/gen"
)

// Model status values of GET /v1/models and the model-management routes.
const (
	StatusLoaded        = "loaded"
	StatusUnloaded      = "unloaded"
	StatusReloading     = "reloading"
	StatusNotFound      = "not_found"
	StatusInternalError = "internal_error"
)

// ModelSpec is one model the server serves: its id and how to load it (again,
// after an unload), with its draft model for speculative decoding.
type ModelSpec struct {
	ID   string
	Path string // where it comes from, for logs ("" for the embedded demo model)
	Load func() (*loader.Model, error)

	// LoadDraft loads the model's draft model (--mtp-model), loaded with the
	// model and freed with it; nil: none. DraftPath names it in logs and errors.
	LoadDraft func() (*loader.Model, error)
	DraftPath string
	// Spec, when set, replaces Options.Engine's SpecTokens and SpecNgram for
	// this model. OptionsFromConfig sets it on every model, since the
	// [runtime] proposer is the first model's only; nil: Options.Engine's.
	Spec *SpecOptions
	// Kind is what the model is served for: KindEmbedding refuses every
	// generation request; anything else ("", KindText, KindMultimodal,
	// "auto") generates and embeds.
	Kind string
	// MMProj is the vision projector Load loads with the model (a
	// reload loads it again), for logs; "" for a text model. Images bounds
	// what one request to it may carry (config's [models.multimodal]).
	MMProj string
	Images config.ImageLimits
	// LoRA is the model's dynamic LoRA runtime (config.LoRAFor): the
	// adapters to load at startup, with local paths, and the registry's
	// limits; nil: none (GET /v1/lora_adapters answers 409).
	LoRA *config.LoRARuntime
}

// Model kinds (ModelSpec.Kind), named as config's models.kind and the
// serve subcommands name them.
const (
	// KindText generates (chat, completions, messages, responses) and also
	// embeds, pooling its own final hidden states. "" and "auto" mean it too.
	KindText = "text"
	// KindEmbedding serves /v1/embeddings only.
	KindEmbedding = "embedding"
	// KindMultimodal is KindText that also takes images, through the
	// loaded model's vision projector (loader.Model.Vision).
	KindMultimodal = "multimodal"
)

// SpecOptions is one model's speculative decoding (config.Speculative).
type SpecOptions struct {
	Tokens int // draft tokens proposed and verified per step
	Ngram  int // prompt-lookup n-gram size; 0: off
}

// models is the registry of served models. Each model has its own engine;
// an unloaded model frees its engine and weights and is loaded again by
// /v1/models/reload or by the next request that names it (as mistral.rs
// reloads on access).
type models struct {
	entries []*modelEntry
	byID    map[string]*modelEntry
	def     *modelEntry
	newEng  newEngineFunc
	log     *slog.Logger
	// loraLoad reads adapter files (loadLoRAFile unless a test replaces it).
	loraLoad loraLoadFunc
}

// newEngineFunc builds the engine of a served model on its loaded model and
// draft (nil when it has none).
type newEngineFunc func(spec *ModelSpec, m, draft *loader.Model) (*engine.Engine, *engineStats, error)

type modelEntry struct {
	spec ModelSpec
	reg  *models
	lora *loraRuntime // nil: no LoRA runtime

	mu      sync.Mutex
	cur     *loadedModel  // nil unless loaded
	loading chan struct{} // non-nil while a (re)load runs; closed when it ends
	stats   *engineStats  // of the current or last engine (throughput line)
	loads   int           // successful loads so far (the first one's adapters must all load)
}

// loadedModel is one engine on one loaded model. Requests hold a reference
// while they generate, so an unload frees it only when the last one ends.
type loadedModel struct {
	gen.Loaded
	draft   *loader.Model // nil: no draft model
	lora    *adapterSet   // nil: no LoRA runtime
	refs    int           // guarded by the entry's mu
	retired bool          // unloaded: freed when refs drops to 0
}

func (l *loadedModel) free() {
	l.Engine.Close()
	_ = l.Model.Close()
	_ = l.draft.Close()
}

// DefaultModel implements observe.ModelResolver.
func (r *models) DefaultModel() string {
	if r.def == nil {
		return ""
	}
	return r.def.spec.ID
}

// KnownModel implements observe.ModelResolver: any configured model, loaded or not.
func (r *models) KnownModel(name string) bool {
	_, ok := r.byID[name]
	if !ok {
		_, ok = r.card(name)
	}
	return ok
}

// lookup resolves a request's model field: "" and "default" select the default model.
func (r *models) lookup(name string) (*modelEntry, bool) {
	if name == "" || name == "default" {
		return r.def, r.def != nil
	}
	e, ok := r.byID[name]
	return e, ok
}

// ids lists the served ids, sorted, for error messages.
func (r *models) ids() []string {
	out := make([]string, 0, len(r.entries))
	for _, e := range r.entries {
		out = append(out, e.spec.ID)
	}
	sort.Strings(out)
	return out
}

// unknownModelError is the message of the 404 for a model we do not serve.
func (r *models) unknownModelError(name string) string {
	return fmt.Sprintf("Requested model '%s' is not available. Available models: %s. Use 'default' to use the default model.",
		name, strings.Join(r.ids(), ", "))
}

// generative reports whether the model answers generation requests (chat,
// completions, messages, responses): every model but one served with kind
// embedding.
func (e *modelEntry) generative() bool { return e.spec.Kind != KindEmbedding }

// RefuseGeneration is the error a generation request to the model gets: nil
// for a generative model; for an embedding-only one a 400 that names the
// model and its kind. gen.Base.Prepare calls it, so every route that generates through
// a job refuses such a model.
func (e *modelEntry) RefuseGeneration() error {
	if e.generative() {
		return nil
	}
	return &gen.Error{Status: http.StatusBadRequest, Param: "model", Msg: fmt.Sprintf(
		"Model '%s' is served for embeddings only (kind %s): it answers POST /v1/embeddings, not text generation.",
		e.spec.ID, e.spec.Kind)}
}

// The registry as the dialects see it (gen.Models, gen.Model).

// Lookup finds a request's model: a 404 naming the served ones when it is
// not served.
func (r *models) Lookup(name string) (gen.Model, error) {
	if e, ok := r.lookup(name); ok {
		return e, nil
	}
	if c, ok := r.card(name); ok {
		return &cardModel{modelEntry: c.entry, requested: name, alias: c.alias}, nil
	}
	return nil, &gen.Error{Status: http.StatusNotFound, Param: "model", Msg: r.unknownModelError(name)}
}

// ID is the model's id.
func (e *modelEntry) ID() string { return e.spec.ID }

// Acquire is acquire for the dialects.
func (e *modelEntry) Acquire(ctx context.Context) (*gen.Loaded, func(), error) {
	l, release, err := e.acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	return &l.Loaded, release, nil
}

func (e *modelEntry) status() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.statusLocked()
}

func (e *modelEntry) statusLocked() string {
	switch {
	case e.loading != nil:
		return StatusReloading
	case e.cur != nil:
		return StatusLoaded
	}
	return StatusUnloaded
}

// acquire returns the model's engine for one request, loading the model if
// it was unloaded; release must be called when the request is done with it.
func (e *modelEntry) acquire(ctx context.Context) (l *loadedModel, release func(), err error) {
	for {
		e.mu.Lock()
		if e.cur != nil {
			l := e.cur
			l.refs++
			e.mu.Unlock()
			return l, func() { e.release(l) }, nil
		}
		ch := e.loading
		e.mu.Unlock()
		if ch == nil {
			// An unloaded model reloaded on demand: a load span under the
			// request's that waited for it.
			if _, err := tracedModelOp(ctx, "load", e.spec.ID, e.load); err != nil {
				return nil, nil, err
			}
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

func (e *modelEntry) release(l *loadedModel) {
	e.mu.Lock()
	l.refs--
	broken := e.cur == l && l.Engine.Broken() != nil
	if broken {
		// Its file changed on disk under the memory map: the next request
		// loads the model again (from the file now at the path).
		e.cur, l.retired = nil, true
	}
	free := l.retired && l.refs == 0
	e.mu.Unlock()
	if broken {
		e.reg.log.Warn("Model " + e.spec.ID + " retired: " + l.Engine.Broken().Error() + "; the next request loads it again")
	}
	if free {
		l.free()
	}
}

// load loads the model unless it is loaded or loading; it reports the status
// it found or reached: loaded (now or already), or reloading (another load
// is running).
func (e *modelEntry) load() (string, error) {
	e.mu.Lock()
	if e.cur != nil {
		e.mu.Unlock()
		return StatusLoaded, nil
	}
	if e.loading != nil {
		e.mu.Unlock()
		return StatusReloading, nil
	}
	ch := make(chan struct{})
	e.loading = ch
	e.mu.Unlock()

	start := time.Now()
	m, err := e.spec.Load()
	var draft *loader.Model
	if err == nil && e.spec.LoadDraft != nil {
		if draft, err = e.spec.LoadDraft(); err != nil {
			_ = m.Close()
			err = draftError(e.spec.DraftPath, err)
		}
	}
	var l *loadedModel
	var stats *engineStats
	if err == nil {
		var eng *engine.Engine
		eng, stats, err = e.reg.newEng(&e.spec, m, draft)
		if err == nil {
			l = &loadedModel{Loaded: gen.Loaded{Model: m, Engine: eng, Images: imageLimits(e.spec.Images)}, draft: draft}
			if err = e.loadAdapters(l); err != nil {
				l.free()
				l = nil
			}
		} else {
			_ = m.Close()
			_ = draft.Close()
		}
	}

	e.mu.Lock()
	e.loading = nil
	if l != nil {
		e.cur = l
		e.stats = stats
		e.loads++
	}
	close(ch)
	e.mu.Unlock()
	if err != nil {
		return StatusInternalError, fmt.Errorf("loading model %s: %w", e.spec.ID, err)
	}
	e.reg.log.Info(fmt.Sprintf("Model %s loaded in %.2fs%s", e.spec.ID, time.Since(start).Seconds(), packedNote(l.Model)))
	if kv := l.Engine.KVSummary(); kv != "" {
		// How many tokens the pool holds follows the cache type (f32, f16,
		// q8_0, ...): the line says it, as llama.cpp's startup does.
		e.reg.log.Info("Model " + e.spec.ID + ": " + kv)
	}
	if w := l.Engine.KVWarning(); w != "" {
		e.reg.log.Warn("Model " + e.spec.ID + ": " + w)
	}
	return StatusLoaded, nil
}

// packedNote describes the weights a model copied into the kernels'
// packed layout at load (the memory that costs), "" when none.
func packedNote(m *loader.Model) string {
	n, path := m.Packed()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%.1f MiB of weights repacked for the %s kernels; their file pages released)", float64(n)/(1<<20), path)
}

// draftError names the draft file in a failed draft load, unless the error
// already does.
func draftError(path string, err error) error {
	if path != "" && !strings.Contains(err.Error(), path) {
		return fmt.Errorf("draft model %s: %w", path, err)
	}
	return fmt.Errorf("draft model: %w", err)
}

// unload frees the model's engine (at once, or when its last request ends).
// A load in progress is waited for first.
func (e *modelEntry) unload() string {
	for {
		e.mu.Lock()
		if ch := e.loading; ch != nil {
			e.mu.Unlock()
			<-ch
			continue
		}
		l := e.cur
		e.cur = nil
		free := false
		if l != nil {
			l.retired = true
			free = l.refs == 0
		}
		e.mu.Unlock()
		if free {
			l.free()
		}
		if l != nil {
			e.reg.log.Info("Model " + e.spec.ID + " unloaded")
		}
		return StatusUnloaded
	}
}

// close unloads every model (server shutdown).
func (r *models) close() {
	for _, e := range r.entries {
		e.unload()
	}
}

// newModels builds the registry and loads every model, in order.
func newModels(specs []ModelSpec, defaultID string, log *slog.Logger, newEng newEngineFunc) (*models, error) {
	return newModelsWith(specs, defaultID, log, newEng, loadLoRAFile)
}

// newModelsWith is newModels reading LoRA adapter files with loraLoad.
func newModelsWith(specs []ModelSpec, defaultID string, log *slog.Logger, newEng newEngineFunc, loraLoad loraLoadFunc) (*models, error) {
	if len(specs) == 0 {
		return nil, errors.New("no models to serve")
	}
	r := &models{byID: map[string]*modelEntry{}, newEng: newEng, log: log, loraLoad: loraLoad}
	for _, s := range specs {
		if s.ID == "" || s.Load == nil {
			return nil, fmt.Errorf("model spec %q: id and loader are required", s.ID)
		}
		if _, dup := r.byID[s.ID]; dup {
			return nil, fmt.Errorf("model id %q is used twice", s.ID)
		}
		rt, err := newLoRARuntime(s.LoRA, loraLoad)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", s.ID, err)
		}
		e := &modelEntry{spec: s, reg: r, lora: rt}
		r.entries = append(r.entries, e)
		r.byID[s.ID] = e
	}
	r.def = r.entries[0]
	if defaultID != "" {
		d, ok := r.byID[defaultID]
		if !ok {
			return nil, fmt.Errorf("default model %q is not among the models (%s)", defaultID, strings.Join(r.ids(), ", "))
		}
		r.def = d
	}
	for _, e := range r.entries {
		if e.spec.Path != "" {
			log.Info(fmt.Sprintf("Loading model %s from %s", e.spec.ID, e.spec.Path))
		}
		if line := e.spec.speculationLine(); line != "" {
			log.Info(line)
		}
		if e.spec.MMProj != "" {
			log.Info(fmt.Sprintf("Model %s takes images: vision projector %s, up to %d images per request", e.spec.ID, e.spec.MMProj, e.spec.Images.MaxImages))
		}
		if !e.generative() {
			log.Info(fmt.Sprintf("Model %s is served for embeddings only: chat and completion requests to it are refused", e.spec.ID))
		}
		if _, err := e.load(); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

// speculationLine says how the model decodes speculatively, for the startup
// log; "" when it does not (or Options.Engine decides).
func (s *ModelSpec) speculationLine() string {
	switch {
	case s.LoadDraft != nil && s.Spec != nil:
		return fmt.Sprintf("Speculative decoding for %s: draft model %s, %d draft tokens per step", s.ID, s.DraftPath, s.Spec.Tokens)
	case s.LoadDraft != nil:
		return fmt.Sprintf("Speculative decoding for %s: draft model %s", s.ID, s.DraftPath)
	case s.Spec != nil && s.Spec.Ngram > 0:
		return fmt.Sprintf("Speculative decoding for %s: prompt lookup (n-grams of up to %d tokens), %d draft tokens per step", s.ID, s.Spec.Ngram, s.Spec.Tokens)
	}
	return ""
}

// imageLimits are config's [models.multimodal] bounds as gen takes them,
// the table's defaults for those a spec leaves at 0.
func imageLimits(l config.ImageLimits) gen.ImageLimits {
	def := (&config.ModelConfig{}).ImageLimits()
	if l.MaxImages <= 0 {
		l.MaxImages = def.MaxImages
	}
	if l.MaxPixels <= 0 {
		l.MaxPixels = def.MaxPixels
	}
	return gen.ImageLimits{MaxImages: l.MaxImages, MaxEdge: l.MaxEdge, MaxPixels: l.MaxPixels}
}
