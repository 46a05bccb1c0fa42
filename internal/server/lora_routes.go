package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"mistralrs/internal/config"
	"mistralrs/internal/observe"
	"mistralrs/internal/server/gen"
)

// The LoRA routes: GET /v1/lora_adapters (always served), and POST
// /v1/load_lora_adapter and /v1/unload_lora_adapter, served only when
// runtime updates are allowed (LoRAAPI). Their errors use the LoRA
// envelope, {"error":{"message","type","code"}}.

// LoRAAPI configures the LoRA mutation routes, which mistral.rs configures
// from the environment (LoRAAPIFromEnv).
type LoRAAPI struct {
	// AllowUpdates serves the load and unload routes
	// (MISTRALRS_ALLOW_RUNTIME_LORA_UPDATING is 1, true, yes or on).
	AllowUpdates bool
	// Root, when set, is the folder every path the load route reads must
	// lie in once its symbolic links are resolved
	// (MISTRALRS_LORA_ADAPTER_ROOT); "": any path the server can read.
	Root string
}

// LoRAAPIFromEnv reads the LoRA routes' settings from the environment.
func LoRAAPIFromEnv(getenv func(string) string) LoRAAPI {
	switch strings.ToLower(strings.TrimSpace(getenv("MISTRALRS_ALLOW_RUNTIME_LORA_UPDATING"))) {
	case "1", "true", "yes", "on":
		return LoRAAPI{AllowUpdates: true, Root: strings.TrimSpace(getenv("MISTRALRS_LORA_ADAPTER_ROOT"))}
	}
	return LoRAAPI{Root: strings.TrimSpace(getenv("MISTRALRS_LORA_ADAPTER_ROOT"))}
}

// loraRoutes holds the settings of the LoRA routes, checked at startup.
type loraRoutes struct {
	s     *Server
	allow bool
	root  string // resolved (absolute, no symbolic links); "" : none
}

// newLoRARoutes checks api: a root must be an existing folder.
func newLoRARoutes(s *Server, api LoRAAPI) (*loraRoutes, error) {
	lr := &loraRoutes{s: s, allow: api.AllowUpdates}
	if api.Root != "" {
		abs, err := filepath.Abs(api.Root)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		var fi os.FileInfo
		if err == nil {
			fi, err = os.Stat(abs)
		}
		if err == nil && !fi.IsDir() {
			err = errors.New("not a directory")
		}
		if err != nil {
			return nil, fmt.Errorf("MISTRALRS_LORA_ADAPTER_ROOT %s: %v", api.Root, err)
		}
		lr.root = abs
	}
	if lr.allow {
		if lr.root == "" {
			s.log.Warn("Runtime LoRA updates are enabled (MISTRALRS_ALLOW_RUNTIME_LORA_UPDATING) without MISTRALRS_LORA_ADAPTER_ROOT: POST /v1/load_lora_adapter reads any path the server can read; set a root and keep the route behind --api-key")
		} else {
			s.log.Warn("Runtime LoRA updates are enabled (MISTRALRS_ALLOW_RUNTIME_LORA_UPDATING): adapters load only from " + lr.root)
		}
	}
	return lr, nil
}

// LoRA error codes (the envelope's code).
const (
	codeLoRAUnavailable = "lora_runtime_unavailable"
	codeLoRABusy        = "lora_update_in_progress"
	codeLoRANotFound    = "lora_adapter_not_found"
	codeLoRAExists      = "lora_adapter_exists"
	codeLoRAGeneration  = "lora_generation_mismatch"
	codeLoRAPath        = "lora_path_forbidden"
	codeLoRALoad        = "lora_load_failed"
	codeModelNotFound   = "model_not_found"
	codeInvalidRequest  = "invalid_request"
)

// loraEnvelope is the LoRA routes' error body.
type loraEnvelope struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func writeLoRAEnvelope(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	var env loraEnvelope
	env.Error.Message, env.Error.Type, env.Error.Code = msg, observe.ErrorType(status), code
	if r != nil {
		observe.SetError(r.Context(), msg)
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	gen.WriteJSON(w, status, env)
}

// loraLayerError is the LoRA rows' observe.ErrorWriter: the refusals of the
// guard and the layers (401, 405, 413, 415, …) in the LoRA envelope, the
// 413 with mistral.rs's message and code.
func loraLayerError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	code := codeInvalidRequest
	switch status {
	case http.StatusRequestEntityTooLarge:
		code, msg = "request_body_too_large", "request body exceeds the configured limit"
	case http.StatusUnauthorized:
		code = "invalid_api_key"
	case http.StatusMethodNotAllowed:
		code = "method_not_allowed"
	case http.StatusUnsupportedMediaType:
		code = "unsupported_media_type"
	}
	writeLoRAEnvelope(w, r, status, code, msg)
}

// fail answers err in the LoRA envelope and logs it in the payload log.
func (lr *loraRoutes) fail(w http.ResponseWriter, r *http.Request, err error) {
	var le *loraError
	var ge *gen.Error
	switch {
	case errors.As(err, &le):
	case errors.As(err, &ge):
		code := ge.Code
		if code == "" {
			code = codeInvalidRequest
		}
		le = &loraError{status: ge.Status, code: code, msg: ge.Msg}
	default:
		le = &loraError{status: http.StatusInternalServerError, code: "internal_error", msg: err.Error()}
	}
	_ = lr.s.opts.PayloadLog.ErrorCtx(r.Context(), le.msg)
	writeLoRAEnvelope(w, r, le.status, le.code, le.msg)
}

// entry finds the model a LoRA route names (trimmed; "" and "default": the
// default model) and its runtime.
func (lr *loraRoutes) entry(name string) (*modelEntry, error) {
	e, ok := lr.s.models.lookup(strings.TrimSpace(name))
	if !ok {
		return nil, loraErr(http.StatusNotFound, codeModelNotFound, "%s", lr.s.models.unknownModelError(strings.TrimSpace(name)))
	}
	if e.lora == nil {
		return nil, loraErr(http.StatusConflict, codeLoRAUnavailable,
			"model %s has no LoRA runtime (serve it with --enable-lora or --lora to load adapters)", e.spec.ID)
	}
	return e, nil
}

// loraListJSON is the body of GET /v1/lora_adapters.
type loraListJSON struct {
	Object              string               `json:"object"`
	Model               string               `json:"model"`
	Data                []loraAdapterInfo    `json:"data"`
	Generations         []loraGenerationInfo `json:"generations"`
	ResidentGenerations int                  `json:"resident_generations"`
	RetiredGenerations  int                  `json:"retired_generations"`
	ResidentBytes       int64                `json:"resident_bytes"`
	MaxAdapters         int                  `json:"max_adapters"`
	MaxRank             int                  `json:"max_rank"`
	MaxBytes            int64                `json:"max_bytes"`
}

// list is GET /v1/lora_adapters?model=: the model's adapters. It does not
// load an unloaded model: its catalog is listed then, without generations.
func (lr *loraRoutes) list(w http.ResponseWriter, r *http.Request) {
	e, err := lr.entry(firstQueryModel(r.URL.RawQuery))
	if err != nil {
		lr.fail(w, r, err)
		return
	}
	out := loraListJSON{Object: "list", Model: e.spec.ID, MaxAdapters: e.lora.spec.MaxAdapters,
		MaxRank: e.lora.spec.MaxRank, MaxBytes: e.lora.spec.MaxBytes}
	if set := e.adapters(); set != nil {
		out.Data, out.Generations, out.ResidentBytes = set.snapshot()
	} else {
		for _, m := range e.lora.modules() {
			out.Data = append(out.Data, loraAdapterInfo{ID: m.Alias, Object: "lora_adapter", Source: m.Source, Revision: m.Revision})
		}
	}
	if out.Data == nil {
		out.Data = []loraAdapterInfo{}
	}
	if out.Generations == nil {
		out.Generations = []loraGenerationInfo{}
	}
	for _, g := range out.Generations {
		if g.Status == "retired" {
			out.RetiredGenerations++
		} else {
			out.ResidentGenerations++
		}
	}
	gen.WriteJSON(w, http.StatusOK, out)
}

// firstQueryModel is the first non-empty model= of a query.
func firstQueryModel(rawQuery string) string {
	for _, kv := range strings.Split(rawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if k != "model" {
			continue
		}
		if v, err := url.QueryUnescape(v); err == nil && strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// adapters is the loaded model's adapter set; nil when it is not loaded.
func (e *modelEntry) adapters() *adapterSet {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil {
		return nil
	}
	return e.cur.lora
}

// modules is the catalog.
func (rt *loraRuntime) modules() []config.LoRAModule {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]config.LoRAModule(nil), rt.catalog...)
}

// decodeStrict decodes a LoRA route's body, refusing unknown fields (as
// mistral.rs's deny_unknown_fields does) and trailing data.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return gen.BadRequest("", "request body is empty; expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return gen.BadRequest("", "invalid request body: %s", gen.JSONProblem(err))
	}
	if dec.More() {
		return gen.BadRequest("", "invalid request body: data after the JSON object")
	}
	return nil
}

// loadLoRARequest is the body of POST /v1/load_lora_adapter.
type loadLoRARequest struct {
	LoRAName    *string `json:"lora_name"`
	LoRAPath    *string `json:"lora_path"`
	LoadInplace *bool   `json:"load_inplace"`
	Replace     *bool   `json:"replace"` // load_inplace's alias
	// ExpectedGeneration, when set, must be the alias's resident
	// generation ("" : the alias has none): a compare-and-set.
	ExpectedGeneration *string `json:"expected_generation"`
	Model              string  `json:"model"`
}

// loraLoadJSON answers a load or an unload.
type loraLoadJSON struct {
	Object             string `json:"object"`
	ID                 string `json:"id"`
	Model              string `json:"model"`
	Generation         string `json:"generation,omitempty"`
	Rank               int    `json:"rank,omitempty"`
	Bytes              int64  `json:"bytes,omitempty"`
	Source             string `json:"source,omitempty"`
	ReplacedGeneration string `json:"replaced_generation,omitempty"`
	// Unloaded (unload only): the generation is retired; InUse requests
	// still hold it, and it is freed when the last one ends.
	Unloaded bool `json:"unloaded,omitempty"`
	InUse    int  `json:"in_use,omitempty"`
}

// load is POST /v1/load_lora_adapter: it loads lora_path under lora_name
// (replacing the alias's adapter with load_inplace), as a new generation.
func (lr *loraRoutes) load(w http.ResponseWriter, r *http.Request) {
	body, ok := lr.s.base.ReadBody(w, r, loraGenEnvelope)
	if !ok {
		return
	}
	var req loadLoRARequest
	if err := decodeStrict(body, &req); err != nil {
		lr.fail(w, r, err)
		return
	}
	out, err := lr.loadAdapter(r.Context(), &req)
	if err != nil {
		lr.fail(w, r, err)
		return
	}
	lr.s.base.Respond(w, out)
}

func (lr *loraRoutes) loadAdapter(ctx context.Context, req *loadLoRARequest) (*loraLoadJSON, error) {
	if req.LoRAName == nil || req.LoRAPath == nil {
		return nil, gen.BadRequest("", "lora_name and lora_path are required")
	}
	alias := strings.TrimSpace(*req.LoRAName)
	if err := checkAlias(alias); err != nil {
		return nil, gen.BadRequest("lora_name", "%s", err.Error())
	}
	inplace := req.LoadInplace != nil && *req.LoadInplace || req.Replace != nil && *req.Replace
	e, err := lr.entry(req.Model)
	if err != nil {
		return nil, err
	}
	path, err := lr.confine(*req.LoRAPath)
	if err != nil {
		return nil, err
	}
	l, release, err := e.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading model %s for the adapter: %w", e.spec.ID, err)
	}
	defer release()
	if !e.lora.busy.TryLock() {
		return nil, loraErr(http.StatusTooManyRequests, codeLoRABusy, "another LoRA adapter update of model %s is running; retry", e.spec.ID)
	}
	defer e.lora.busy.Unlock()
	set := l.lora
	old := set.current(alias)
	if err := checkExpected(alias, req.ExpectedGeneration, old); err != nil {
		return nil, err
	}
	if old != nil && !inplace {
		return nil, loraErr(http.StatusConflict, codeLoRAExists,
			"LoRA adapter %s is already loaded (generation %s); set load_inplace to replace it", alias, old.id)
	}
	mod := config.LoRAModule{Alias: alias, Path: path, Source: *req.LoRAPath}
	if err := set.admitCount(alias, old != nil); err != nil {
		return nil, err
	}
	g, err := e.lora.loadGeneration(mod, l.Model)
	if err != nil {
		return nil, loraErr(http.StatusBadRequest, codeLoRALoad, "LoRA adapter %s: %v", alias, err)
	}
	if err := set.add(g); err != nil {
		return nil, err
	}
	e.lora.setModule(mod)
	out := &loraLoadJSON{Object: "lora_adapter", ID: alias, Model: e.spec.ID, Generation: g.id, Rank: g.w.Rank, Bytes: g.w.Bytes, Source: mod.Source}
	msg := fmt.Sprintf("Model %s: LoRA adapter %s loaded from %s (generation %s)", e.spec.ID, alias, path, g.id)
	if old != nil {
		out.ReplacedGeneration = old.id
		msg += ", replacing generation " + old.id
	}
	lr.s.log.Info(msg)
	return out, nil
}

// checkExpected is the compare-and-set of expected_generation: it must be
// the alias's resident generation ("" : none).
func checkExpected(alias string, expected *string, cur *loraGeneration) error {
	if expected == nil {
		return nil
	}
	have := ""
	if cur != nil {
		have = cur.id
	}
	if *expected == have {
		return nil
	}
	if have == "" {
		return loraErr(http.StatusConflict, codeLoRAGeneration, "expected_generation %q: LoRA adapter %s has no resident generation", *expected, alias)
	}
	return loraErr(http.StatusConflict, codeLoRAGeneration, "expected_generation %q: LoRA adapter %s is at generation %s", *expected, alias, have)
}

// admitCount checks the adapter count before a file is read.
func (s *adapterSet) admitCount(alias string, replacing bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lim := s.limits.MaxAdapters; lim > 0 && !replacing && len(s.resident) >= lim {
		return loraErr(http.StatusConflict, "lora_max_adapters",
			"cannot load LoRA adapter %s: %d adapters are loaded, the limit (--lora-max-adapters); unload one first", alias, len(s.resident))
	}
	return nil
}

// add admits and installs g.
func (s *adapterSet) add(g *loraGeneration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.admit(g, s.resident[g.mod.Alias] != nil); err != nil {
		return err
	}
	s.install(g)
	return nil
}

// confine resolves a load path: no ".." element, and with a root, relative
// to it and, once symbolic links are resolved, inside it. It returns the
// resolved path, which is what is read.
func (lr *loraRoutes) confine(p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", gen.BadRequest("lora_path", "lora_path must not be empty")
	}
	for _, el := range strings.FieldsFunc(p, func(c rune) bool { return c == '/' || c == filepath.Separator }) {
		if el == ".." {
			return "", loraErr(http.StatusBadRequest, codeLoRAPath, "lora_path %q: \"..\" is not allowed", p)
		}
	}
	full := p
	if lr.root != "" && !filepath.IsAbs(p) {
		full = filepath.Join(lr.root, p)
	}
	full, err := filepath.Abs(full)
	if err == nil {
		full, err = filepath.EvalSymlinks(full)
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", loraErr(http.StatusBadRequest, codeLoRALoad, "lora_path %q: no such file or directory", p)
		}
		return "", loraErr(http.StatusBadRequest, codeLoRALoad, "lora_path %q: %v", p, err)
	}
	if lr.root == "" {
		return full, nil
	}
	if !lr.inRoot(full) {
		return "", loraErr(http.StatusForbidden, codeLoRAPath, "lora_path %q is outside the adapter root (MISTRALRS_LORA_ADAPTER_ROOT)", p)
	}
	// The reader opens a folder's files (a PEFT folder's config and
	// tensors, or its one GGUF), also when a PEFT file names the folder:
	// none may lead out of the root either. A GGUF file is read alone.
	dir := full
	if fi, err := os.Stat(full); err == nil && !fi.IsDir() {
		if strings.EqualFold(filepath.Ext(full), ".gguf") {
			return full, nil
		}
		dir = filepath.Dir(full)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", loraErr(http.StatusBadRequest, codeLoRALoad, "lora_path %q: %v", p, err)
	}
	for _, e := range entries {
		if e.Type()&os.ModeSymlink == 0 {
			continue
		}
		target, err := filepath.EvalSymlinks(filepath.Join(dir, e.Name()))
		if err == nil && !lr.inRoot(target) {
			return "", loraErr(http.StatusForbidden, codeLoRAPath, "lora_path %q: %s links outside the adapter root (MISTRALRS_LORA_ADAPTER_ROOT)", p, e.Name())
		}
	}
	return full, nil
}

// inRoot reports whether the resolved path p lies in the root.
func (lr *loraRoutes) inRoot(p string) bool {
	rel, err := filepath.Rel(lr.root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// unloadLoRARequest is the body of POST /v1/unload_lora_adapter.
type unloadLoRARequest struct {
	LoRAName           *string         `json:"lora_name"`
	ExpectedGeneration *string         `json:"expected_generation"`
	LoRAIntID          json.RawMessage `json:"lora_int_id"` // vLLM's; accepted and unused
	Model              string          `json:"model"`
}

// unload is POST /v1/unload_lora_adapter: the alias leaves the catalog;
// its generation retires (requests running with it finish with it).
func (lr *loraRoutes) unload(w http.ResponseWriter, r *http.Request) {
	body, ok := lr.s.base.ReadBody(w, r, loraGenEnvelope)
	if !ok {
		return
	}
	var req unloadLoRARequest
	if err := decodeStrict(body, &req); err != nil {
		lr.fail(w, r, err)
		return
	}
	out, err := lr.unloadAdapter(&req)
	if err != nil {
		lr.fail(w, r, err)
		return
	}
	lr.s.base.Respond(w, out)
}

func (lr *loraRoutes) unloadAdapter(req *unloadLoRARequest) (*loraLoadJSON, error) {
	if req.LoRAName == nil {
		return nil, gen.BadRequest("lora_name", "lora_name is required")
	}
	alias := strings.TrimSpace(*req.LoRAName)
	e, err := lr.entry(req.Model)
	if err != nil {
		return nil, err
	}
	if !e.lora.busy.TryLock() {
		return nil, loraErr(http.StatusTooManyRequests, codeLoRABusy, "another LoRA adapter update of model %s is running; retry", e.spec.ID)
	}
	defer e.lora.busy.Unlock()
	set := e.adapters()
	cur := set.current(alias)
	if err := checkExpected(alias, req.ExpectedGeneration, cur); err != nil {
		return nil, err
	}
	if !e.lora.dropModule(alias) {
		return nil, loraErr(http.StatusNotFound, codeLoRANotFound, "LoRA adapter %s is not loaded on model %s", alias, e.spec.ID)
	}
	out := &loraLoadJSON{Object: "lora_adapter", ID: alias, Model: e.spec.ID, Unloaded: true}
	if set != nil {
		if g := set.unload(alias); g != nil {
			out.Generation = g.id
			set.mu.Lock()
			out.InUse = g.refs
			set.mu.Unlock()
		}
	}
	lr.s.log.Info(fmt.Sprintf("Model %s: LoRA adapter %s unloaded (generation %s, held by %d requests)", e.spec.ID, alias, out.Generation, out.InUse))
	return out, nil
}

// loraGenEnvelope is the LoRA envelope as gen writes errors (ReadBody's
// 413 and 400s).
var loraGenEnvelope = gen.Envelope{
	Write: func(w http.ResponseWriter, r *http.Request, status int, err *gen.Error) {
		code := err.Code
		if code == "" {
			code = codeInvalidRequest
		}
		writeLoRAEnvelope(w, r, status, code, err.Msg)
	},
	TooLarge: func(w http.ResponseWriter, r *http.Request) {
		loraLayerError(w, r, http.StatusRequestEntityTooLarge, "")
	},
}
