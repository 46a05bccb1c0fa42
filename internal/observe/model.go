package observe

import (
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

// DefaultModelSources is mistral.rs's route table, keyed by path pattern.
func DefaultModelSources() map[string]ModelSource {
	return map[string]ModelSource{
		"/v1/chat/completions":      SourceBody,
		"/v1/completions":           SourceBody,
		"/v1/responses":             SourceBody,
		"/v1/messages":              SourceBody,
		"/v1/messages/count_tokens": SourceBody,
		"/v1/embeddings":            SourceBody,
		"/v1/images/generations":    SourceBody,
		"/v1/audio/speech":          SourceBody,
		"/v1/load_lora_adapter":     SourceBodyTrimmed,
		"/v1/unload_lora_adapter":   SourceBodyTrimmed,
		"/v1/lora_adapters":         SourceQuery,
		"/v1/models/unload":         SourceModelID,
		"/v1/models/reload":         SourceModelID,
		"/v1/models/status":         SourceModelID,
		"/v1/models/tune":           SourceModelID,
	}
}

// readsBody reports whether the middleware buffers the body for the label.
func (s ModelSource) readsBody() bool {
	return s == SourceBody || s == SourceBodyTrimmed || s == SourceModelID
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
