package server

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"mistralrs/internal/config"
	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
	"mistralrs/internal/model/nn"
	"mistralrs/internal/server/gen"
)

// The per-model LoRA adapter registry.
//
// A served model with a LoRA runtime (ModelSpec.LoRA, config.LoRARuntime:
// its preloaded adapters with local paths, and the limits; 0 is no limit)
// keeps a catalog of
// adapters by alias (loraRuntime: the preloaded ones, then those the routes
// load), which outlives the model's unloads. Each time the model is loaded,
// the catalog's files are loaded against its weights into an adapterSet,
// one generation per alias: a generation is one load of one file, named by
// an opaque id unique over the process. A request holds its generation from
// Prepare to the end of Run. Replacing an alias (load_inplace) or unloading
// it retires its generation: requests running with it finish with it, new
// ones cannot select it, and it is freed when the last holder lets go. An
// unloaded model frees its adapters with its weights; loading it again loads
// the catalog's files again, with new generations (a file that fails then is
// dropped from the catalog with a warning; at startup it fails the server).

// MaxLoRAAliasBytes bounds an alias (the routes' lora_name).
const MaxLoRAAliasBytes = 256

// loraWeights is an adapter file loaded against one model's weights.
type loraWeights struct {
	Net    *nn.Adapter
	Format string
	Rank   int
	Bytes  int64
}

// loraLoadFunc loads the adapter at path against m, refusing one over the
// rank and byte limits (0: none) with a one-line error naming the file.
type loraLoadFunc func(path string, m *loader.Model, maxRank int, maxBytes int64) (*loraWeights, error)

// loraRuntime is a served model's adapter catalog and limits.
type loraRuntime struct {
	spec config.LoRARuntime
	load loraLoadFunc
	// busy serialises the mutations of the catalog (the load and unload
	// routes, and building a model's set from the catalog): a route that
	// finds it taken answers 429.
	busy sync.Mutex

	mu      sync.Mutex
	catalog []config.LoRAModule
}

// loraGenerationSeq numbers generations over the process.
var loraGenerationSeq atomic.Uint64

func newLoRARuntime(spec *config.LoRARuntime, load loraLoadFunc) (*loraRuntime, error) {
	if spec == nil {
		return nil, nil
	}
	seen := map[string]bool{}
	for _, m := range spec.Preload {
		if err := checkAlias(m.Alias); err != nil {
			return nil, err
		}
		if seen[m.Alias] {
			return nil, fmt.Errorf("LoRA adapter alias %q is used twice", m.Alias)
		}
		seen[m.Alias] = true
	}
	if spec.MaxAdapters > 0 && len(spec.Preload) > spec.MaxAdapters {
		return nil, fmt.Errorf("%d LoRA adapters are preloaded, more than the limit of %d (--lora-max-adapters)", len(spec.Preload), spec.MaxAdapters)
	}
	return &loraRuntime{spec: *spec, load: load, catalog: append([]config.LoRAModule(nil), spec.Preload...)}, nil
}

func checkAlias(alias string) error {
	switch {
	case alias == "":
		return errors.New("a LoRA adapter alias must not be empty")
	case len(alias) > MaxLoRAAliasBytes:
		return fmt.Errorf("LoRA adapter alias %.32q… is longer than %d bytes", alias, MaxLoRAAliasBytes)
	}
	return nil
}

// aliases lists the catalog's aliases in load order.
func (rt *loraRuntime) aliases() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]string, len(rt.catalog))
	for i, m := range rt.catalog {
		out[i] = m.Alias
	}
	return out
}

// setModule adds m to the catalog, or replaces the module of its alias.
func (rt *loraRuntime) setModule(m config.LoRAModule) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for i := range rt.catalog {
		if rt.catalog[i].Alias == m.Alias {
			rt.catalog[i] = m
			return
		}
	}
	rt.catalog = append(rt.catalog, m)
}

// dropModule removes alias from the catalog; false when it is not there.
func (rt *loraRuntime) dropModule(alias string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for i := range rt.catalog {
		if rt.catalog[i].Alias == alias {
			rt.catalog = append(rt.catalog[:i], rt.catalog[i+1:]...)
			return true
		}
	}
	return false
}

// build loads the catalog against a newly loaded model. strict (the
// startup load) fails on the first adapter that does not load; otherwise
// such an adapter is dropped from the catalog and reported in dropped.
func (rt *loraRuntime) build(m *loader.Model, strict bool) (set *adapterSet, dropped []error, err error) {
	rt.busy.Lock()
	defer rt.busy.Unlock()
	rt.mu.Lock()
	mods := append([]config.LoRAModule(nil), rt.catalog...)
	rt.mu.Unlock()
	set = &adapterSet{limits: rt.spec, resident: map[string]*loraGeneration{}, live: map[string]*loraGeneration{}}
	for _, mod := range mods {
		g, err := rt.loadGeneration(mod, m)
		if err == nil {
			err = set.admit(g, false)
		}
		if err == nil {
			set.install(g)
			continue
		}
		if strict {
			return nil, nil, fmt.Errorf("LoRA adapter %s: %w", mod.Alias, err)
		}
		rt.dropModule(mod.Alias)
		dropped = append(dropped, fmt.Errorf("LoRA adapter %s dropped: %w", mod.Alias, err))
	}
	return set, dropped, nil
}

// loadGeneration reads mod's file against m into a new generation.
func (rt *loraRuntime) loadGeneration(mod config.LoRAModule, m *loader.Model) (*loraGeneration, error) {
	w, err := rt.load(mod.Path, m, rt.spec.MaxRank, rt.spec.MaxBytes)
	if err != nil {
		return nil, err
	}
	id := "lora-" + strconv.FormatUint(loraGenerationSeq.Add(1), 10)
	g := &loraGeneration{id: id, mod: mod, w: w}
	g.lora = &engine.LoRA{Name: mod.Alias, Key: id, Active: []nn.Active{{Adapter: w.Net, Scale: 1}}}
	return g, nil
}

// loraGeneration is one load of one adapter file against one loaded model.
type loraGeneration struct {
	id   string
	mod  config.LoRAModule
	w    *loraWeights
	lora *engine.LoRA // what the requests that select it hand the engine

	refs    int  // requests holding it; guarded by the set's mu
	retired bool // replaced or unloaded: freed when refs drops to 0
}

// adapterSet is the generations of one loaded model.
type adapterSet struct {
	limits config.LoRARuntime

	mu       sync.Mutex
	resident map[string]*loraGeneration // by alias
	order    []string                   // the resident aliases in load order
	live     map[string]*loraGeneration // resident and retired not yet freed, by id
	bytes    int64                      // of the live generations
}

// loraError is an error of the LoRA routes and adapter selection, with its
// status and its code in the LoRA envelope.
type loraError struct {
	status int
	code   string
	msg    string
}

func (e *loraError) Error() string { return e.msg }

func loraErr(status int, code, format string, args ...any) *loraError {
	return &loraError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// admit checks that g fits the limits: a new alias within the adapter
// count, its bytes within the budget (replacing keeps the old generation's
// bytes while requests hold it). Call it with mu held or before the set is
// shared.
func (s *adapterSet) admit(g *loraGeneration, replacing bool) error {
	if lim := s.limits.MaxAdapters; lim > 0 && !replacing && len(s.resident) >= lim {
		return loraErr(http.StatusConflict, "lora_max_adapters",
			"cannot load LoRA adapter %s: %d adapters are loaded, the limit (--lora-max-adapters); unload one first", g.mod.Alias, len(s.resident))
	}
	held := s.bytes
	if old := s.resident[g.mod.Alias]; replacing && old != nil && old.refs == 0 {
		held -= old.w.Bytes // freed by the replacement at once
	}
	if lim := s.limits.MaxBytes; lim > 0 && held+g.w.Bytes > lim {
		return loraErr(http.StatusConflict, "lora_max_bytes",
			"cannot load LoRA adapter %s (%d bytes): the adapters held take %d of the %d bytes allowed (--lora-max-bytes)", g.mod.Alias, g.w.Bytes, held, lim)
	}
	return nil
}

// install makes g the resident generation of its alias, retiring the one
// it replaces (freed now if no request holds it). Call it with mu held or
// before the set is shared.
func (s *adapterSet) install(g *loraGeneration) (replaced *loraGeneration) {
	alias := g.mod.Alias
	if old := s.resident[alias]; old != nil {
		// Retired in place: the alias keeps its position in the order.
		old.retired = true
		if old.refs == 0 {
			s.free(old)
		}
		replaced = old
	} else {
		s.order = append(s.order, alias)
	}
	s.resident[alias] = g
	s.live[g.id] = g
	s.bytes += g.w.Bytes
	return replaced
}

// retire takes g out of selection; it is freed once no request holds it.
func (s *adapterSet) retire(g *loraGeneration) {
	g.retired = true
	if s.resident[g.mod.Alias] == g {
		delete(s.resident, g.mod.Alias)
		for i, a := range s.order {
			if a == g.mod.Alias {
				s.order = append(s.order[:i], s.order[i+1:]...)
				break
			}
		}
	}
	if g.refs == 0 {
		s.free(g)
	}
}

// free forgets g: its tensors go with the last reference to them.
func (s *adapterSet) free(g *loraGeneration) {
	if s.live[g.id] == g {
		delete(s.live, g.id)
		s.bytes -= g.w.Bytes
	}
}

// unload retires alias's generation; nil when the alias is not resident.
func (s *adapterSet) unload(alias string) *loraGeneration {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.resident[alias]
	if g != nil {
		s.retire(g)
	}
	return g
}

// current is alias's resident generation, nil when none.
func (s *adapterSet) current(alias string) *loraGeneration {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resident[alias]
}

// Hold implements gen.Adapters: it selects a resident generation by alias
// or id and holds it until release.
func (s *adapterSet) Hold(sel gen.Adapter) (*engine.LoRA, string, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var g *loraGeneration
	if sel.Generation != "" {
		g = s.live[sel.Generation]
		if g == nil || g.retired {
			return nil, "", nil, &gen.Error{Status: http.StatusUnprocessableEntity, Param: "adapter",
				Msg: fmt.Sprintf("LoRA adapter generation %q is not loaded (GET /v1/lora_adapters lists the resident ones)", sel.Generation)}
		}
	} else if g = s.resident[sel.Alias]; g == nil {
		return nil, "", nil, &gen.Error{Status: http.StatusUnprocessableEntity, Param: "adapter",
			Msg: fmt.Sprintf("unknown LoRA adapter %q; loaded: %s", sel.Alias, quotedList(s.order))}
	}
	g.refs++
	var once sync.Once
	return g.lora, g.id, func() { once.Do(func() { s.release(g) }) }, nil
}

func (s *adapterSet) release(g *loraGeneration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g.refs--
	if g.retired && g.refs == 0 {
		s.free(g)
	}
}

// loraGenerationInfo is one live generation in GET /v1/lora_adapters.
type loraGenerationInfo struct {
	Generation string `json:"generation"`
	ID         string `json:"id"` // the alias
	Status     string `json:"status"`
	InUse      int    `json:"in_use"`
	Rank       int    `json:"rank"`
	Bytes      int64  `json:"bytes"`
}

// loraAdapterInfo is one resident adapter in GET /v1/lora_adapters.
type loraAdapterInfo struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	Source     string `json:"source,omitempty"`
	Revision   string `json:"revision,omitempty"`
	Generation string `json:"generation"`
	Rank       int    `json:"rank"`
	Bytes      int64  `json:"bytes"`
	Format     string `json:"format,omitempty"`
}

func (g *loraGeneration) info() loraAdapterInfo {
	return loraAdapterInfo{ID: g.mod.Alias, Object: "lora_adapter", Source: g.mod.Source, Revision: g.mod.Revision,
		Generation: g.id, Rank: g.w.Rank, Bytes: g.w.Bytes, Format: g.w.Format}
}

// snapshot is the set as GET /v1/lora_adapters shows it: the resident
// adapters in load order, every live generation (retired ones last).
func (s *adapterSet) snapshot() (resident []loraAdapterInfo, gens []loraGenerationInfo, residentBytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resident = make([]loraAdapterInfo, 0, len(s.order))
	for _, a := range s.order {
		g := s.resident[a]
		resident = append(resident, g.info())
		residentBytes += g.w.Bytes
	}
	gens = make([]loraGenerationInfo, 0, len(s.live))
	for _, g := range s.live {
		st := "resident"
		if g.retired {
			st = "retired"
		}
		gens = append(gens, loraGenerationInfo{Generation: g.id, ID: g.mod.Alias, Status: st, InUse: g.refs, Rank: g.w.Rank, Bytes: g.w.Bytes})
	}
	sort.Slice(gens, func(i, j int) bool {
		if gens[i].Status != gens[j].Status {
			return gens[i].Status == "resident"
		}
		return generationOrder(gens[i].Generation) < generationOrder(gens[j].Generation)
	})
	return resident, gens, residentBytes
}

// generationOrder is the sequence number of a generation id.
func generationOrder(id string) uint64 {
	n, _ := strconv.ParseUint(id[len("lora-"):], 10, 64)
	return n
}

func quotedList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += strconv.Quote(n)
	}
	return out
}

// loadAdapters loads the catalog's adapters against the newly loaded l:
// all of them at the model's first load, else those that still load (a
// file that fails is dropped from the catalog, with a warning).
func (e *modelEntry) loadAdapters(l *loadedModel) error {
	if e.lora == nil {
		return nil
	}
	e.mu.Lock()
	first := e.loads == 0
	e.mu.Unlock()
	set, dropped, err := e.lora.build(l.Model, first)
	if err != nil {
		return err
	}
	for _, d := range dropped {
		e.reg.log.Warn("Model " + e.spec.ID + ": " + d.Error())
	}
	l.lora = set
	l.Adapters = set
	if n := len(set.order); n > 0 {
		e.reg.log.Info(fmt.Sprintf("Model %s: %d LoRA adapters loaded (%s)", e.spec.ID, n, quotedList(set.order)))
	}
	return nil
}

// cardModel is a served model named by one of its adapter cards: the model
// with that adapter selected, under the id the request used.
type cardModel struct {
	*modelEntry
	requested string
	alias     string
}

// ID is the model string as requested, which answers echo.
func (c *cardModel) ID() string { return c.requested }

// CardAdapter implements gen.AdapterCard.
func (c *cardModel) CardAdapter() string { return c.alias }

// adapterCard is one adapter of one served model as /v1/models lists it.
type adapterCard struct {
	id    string
	entry *modelEntry
	alias string
}

// cards are the adapter cards of every served model with a LoRA runtime,
// in model then catalog order: id "<model>::<alias>", each part escaped
// (% as %25, : as %3A, # as %23) and "#N" (N from 2) appended to an id
// already taken by a model or an earlier card.
func (r *models) cards() []adapterCard {
	var out []adapterCard
	taken := map[string]bool{}
	for _, e := range r.entries {
		taken[e.spec.ID] = true
	}
	for _, e := range r.entries {
		if e.lora == nil {
			continue
		}
		for _, alias := range e.lora.aliases() {
			id := cardEscape(e.spec.ID) + "::" + cardEscape(alias)
			if taken[id] {
				n := 2
				for taken[id+"#"+strconv.Itoa(n)] {
					n++
				}
				id += "#" + strconv.Itoa(n)
			}
			taken[id] = true
			out = append(out, adapterCard{id: id, entry: e, alias: alias})
		}
	}
	return out
}

var cardEscaper = strings.NewReplacer("%", "%25", ":", "%3A", "#", "%23")

func cardEscape(s string) string { return cardEscaper.Replace(s) }

// card resolves a model string that names an adapter card: its exact id,
// or a short alias that exactly one card has.
func (r *models) card(name string) (adapterCard, bool) {
	var short []adapterCard
	for _, c := range r.cards() {
		if c.id == name {
			return c, true
		}
		if c.alias == name {
			short = append(short, c)
		}
	}
	if len(short) == 1 {
		return short[0], true
	}
	return adapterCard{}, false
}
