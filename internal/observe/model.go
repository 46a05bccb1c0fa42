package observe

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// Model label values that are not model ids (as in mistral.rs's per-route
// model label resolution).
const (
	ModelUnknown = "unknown" // body unreadable or not JSON, or a model we do not serve
	ModelNone    = "none"    // the route does not target a model
	ModelDefault = "default" // the default model when none is configured
)

// ModelResolver is what the server tells the middleware about its models so
// the `model` label stays bounded: only served ids (or aliases) become label
// values, never an arbitrary client string.
type ModelResolver interface {
	// DefaultModel returns the current default model id ("" if none).
	DefaultModel() string
	// KnownModel reports whether name selects a served model, an alias, or a
	// LoRA adapter card; the label is then name as supplied.
	KnownModel(name string) bool
}

// StaticModels is a fixed ModelResolver.
type StaticModels struct {
	Default string
	IDs     []string
}

// DefaultModel implements ModelResolver.
func (s StaticModels) DefaultModel() string { return s.Default }

// KnownModel implements ModelResolver.
func (s StaticModels) KnownModel(name string) bool {
	for _, id := range s.IDs {
		if id == name {
			return true
		}
	}
	return false
}

// ModelSource says where a route names its model, following mistral.rs's
// per-route table.
type ModelSource uint8

const (
	// SourceNone: the route targets no model; label "none".
	SourceNone ModelSource = iota
	// SourceBody: body JSON "model", defaultable, not trimmed.
	SourceBody
	// SourceBodyTrimmed: body JSON "model", trimmed, defaultable (LoRA routes).
	SourceBodyTrimmed
	// SourceQuery: query parameter "model", trimmed, defaultable; body not read.
	SourceQuery
	// SourceModelID: body JSON "model_id", explicit (missing or unknown: "unknown").
	SourceModelID
)

// ReadsBody reports whether the label comes from the body, which BufferBody
// then reads (a JSON document: the label is scanned from it).
func (s ModelSource) ReadsBody() bool {
	return s == SourceBody || s == SourceBodyTrimmed || s == SourceModelID
}

// ModelLabels is the layer that gives each request its `model` label, from
// where its route names the model (RouteFacts.Model of routes; a route not
// among them names none): none, the query, or the body. Labels are bounded:
// only ids res knows become values. For a body route the label waits for
// BufferBody, below the checks that may refuse the request first; a request
// refused before its body is read is labelled ModelUnknown.
func ModelLabels(routes []RouteFacts, res ModelResolver) func(http.Handler) http.Handler {
	return modelLabels(mustRouteTable(routes), res)
}

func modelLabels(t *routeTable, res ModelResolver) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec, w, r, own := enter(w, r)
			src := t.byLabel[rec.Route].Model
			if src.ReadsBody() && rec.model == "" {
				rec.fallback = ModelUnknown
				rec.pending = func(body []byte) string { return modelLabel(src, res, body, "") }
			} else {
				rec.SetModel(modelLabel(src, res, nil, r.URL.RawQuery))
			}
			serveLayer(rec, own, next, w, r)
		})
	}
}

// BufferBody is the layer that reads the body of a request whose model label
// waits for it (ModelLabels), up to limit bytes (0: DefaultBodyLimit), as
// mistral.rs's access log does, and hands the bytes on to the handler
// (ReadBody takes them without a copy). A body over the limit is answered
// with 413, an unreadable one with 400, in the route's envelope
// (RouteFacts.Errors of routes) or OpenAI's; both are labelled ModelUnknown.
// Put it below the checks that refuse requests (API key, content type, body
// limit), so that a refused body is never buffered.
func BufferBody(limit int64, routes []RouteFacts) func(http.Handler) http.Handler {
	return bufferBody(limit, mustRouteTable(routes))
}

func bufferBody(limit int64, t *routeTable) func(http.Handler) http.Handler {
	if limit <= 0 {
		limit = DefaultBodyLimit
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := RecordFrom(r.Context())
			if rec == nil || rec.pending == nil {
				next.ServeHTTP(w, r)
				return
			}
			label := rec.pending
			body, err := readBody(r, limit)
			switch {
			case errors.Is(err, errBodyTooLarge):
				rec.SetModel(ModelUnknown)
				writeLayerError(t, w, r, http.StatusRequestEntityTooLarge, "")
				return
			case err != nil:
				rec.SetModel(ModelUnknown)
				msg := "failed to read request body: " + err.Error()
				rec.errMsg = msg
				writeLayerError(t, w, r, http.StatusBadRequest, msg)
				return
			}
			rec.ContentLength = int64(len(body))
			rec.SetModel(label(body))
			// The handler reads the bytes buffered here.
			bb := &bufferedBody{b: body}
			bb.Reset(body)
			r.Body = bb
			r.ContentLength = int64(len(body))
			next.ServeHTTP(w, r)
		})
	}
}

// writeLayerError answers an error a layer detects itself, in the route's
// envelope (RouteFacts.Errors) or OpenAI's; a 413's message is fixed.
func writeLayerError(t *routeTable, w http.ResponseWriter, r *http.Request, status int, msg string) {
	ew := t.errorWriter(Route(r.Context()))
	switch {
	case ew != nil && status == http.StatusRequestEntityTooLarge:
		ew(w, r, status, bodyTooLargeMessage)
	case ew != nil:
		ew(w, r, status, msg)
	case status == http.StatusRequestEntityTooLarge:
		WriteBodyTooLarge(w, r)
	default:
		WriteErrorMessage(w, r, status, msg)
	}
}

// modelLabel resolves the label of a route from its buffered body or query.
func modelLabel(src ModelSource, res ModelResolver, body []byte, rawQuery string) string {
	switch src {
	case SourceBody, SourceBodyTrimmed, SourceModelID:
		key := "model"
		if src == SourceModelID {
			key = "model_id"
		}
		raw, found, valid := scanTopLevel(body, key)
		if !valid {
			return ModelUnknown
		}
		var name string
		if found {
			name, _ = jsonString(raw) // a non-string model counts as missing
		}
		if src == SourceBodyTrimmed {
			name = strings.TrimSpace(name)
		}
		if src == SourceModelID {
			return explicitModel(res, name)
		}
		return defaultableModel(res, name)
	case SourceQuery:
		return defaultableModel(res, strings.TrimSpace(firstQueryValue(rawQuery, "model")))
	}
	return ModelNone
}

func defaultableModel(res ModelResolver, name string) string {
	if name == "" || name == "default" {
		if res != nil {
			if d := res.DefaultModel(); d != "" {
				return d
			}
		}
		return ModelDefault
	}
	if res != nil && res.KnownModel(name) {
		return name
	}
	return ModelUnknown
}

func explicitModel(res ModelResolver, name string) string {
	if name != "" && res != nil && res.KnownModel(name) {
		return name
	}
	return ModelUnknown
}

// firstQueryValue returns the first non-empty value of key in a
// form-urlencoded query.
func firstQueryValue(raw, key string) string {
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(part, "=")
		if k, err := url.QueryUnescape(k); err != nil || k != key {
			continue
		}
		if v, err := url.QueryUnescape(v); err == nil && v != "" {
			return v
		}
	}
	return ""
}
