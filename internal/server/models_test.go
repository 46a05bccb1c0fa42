package server

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"mistralrs/internal/loader"
)

func listModels(t *testing.T, ts *testServer) []modelJSON {
	t.Helper()
	resp, body := ts.get("/v1/models")
	var out struct {
		Object string      `json:"object"`
		Data   []modelJSON `json:"data"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil || out.Object != "list" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	return out.Data
}

func manage(t *testing.T, ts *testServer, op, id string) modelStatusJSON {
	t.Helper()
	resp, body := ts.post("/v1/models/"+op, map[string]string{"model_id": id})
	var out modelStatusJSON
	if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil {
		t.Fatalf("%s %s: %d %s", op, id, resp.StatusCode, body)
	}
	return out
}

func TestMultiModelManagement(t *testing.T) {
	other := tinyConfig
	other.Seed = 99
	ts := startServer(t, func(o *Options) {
		o.Models = []ModelSpec{tinySpec(t, "alpha", tinyConfig, loader.Options{}), tinySpec(t, "beta", other, loader.Options{})}
		o.DefaultModel = "beta"
	})

	// The official client lists the synthetic default first, then each model.
	page, err := ts.client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if len(ids) != 3 || ids[0] != "default" || ids[1] != "alpha" || ids[2] != "beta" {
		t.Fatalf("ids %q", ids)
	}
	for _, m := range listModels(t, ts)[1:] {
		if m.Status != StatusLoaded || m.OwnedBy != "local" || m.Object != "model" {
			t.Errorf("%+v", m)
		}
	}

	// Each model answers under its own id; "default" is beta.
	answer := func(model string) (string, int) {
		resp, body := ts.post("/v1/completions", map[string]any{"model": model, "prompt": "abc", "max_tokens": 8, "temperature": 0, "ignore_eos": true})
		var out completionJSON
		if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil {
			return string(body), resp.StatusCode
		}
		if out.Model == "" {
			t.Errorf("no model in %s", body)
		}
		return out.Model + ":" + out.Choices[0].Text, resp.StatusCode
	}
	a, _ := answer("alpha")
	b, _ := answer("beta")
	d, _ := answer("default")
	if a == b || d != b {
		t.Errorf("alpha %q, beta %q, default %q", a, b, d)
	}

	// Unload, status, reload, auto-reload on use.
	if s := manage(t, ts, "status", "alpha"); s.Status != StatusLoaded {
		t.Errorf("status %+v", s)
	}
	if s := manage(t, ts, "unload", "alpha"); s.Status != StatusUnloaded || s.ModelID != "alpha" {
		t.Errorf("unload %+v", s)
	}
	if s := manage(t, ts, "unload", "alpha"); s.Status != StatusUnloaded {
		t.Errorf("second unload %+v", s)
	}
	if s := manage(t, ts, "status", "alpha"); s.Status != StatusUnloaded {
		t.Errorf("status after unload %+v", s)
	}
	if got := listModels(t, ts); got[1].Status != StatusUnloaded || got[2].Status != StatusLoaded {
		t.Errorf("list after unload %+v", got)
	}
	if s := manage(t, ts, "reload", "alpha"); s.Status != StatusLoaded {
		t.Errorf("reload %+v", s)
	}
	if s := manage(t, ts, "reload", "alpha"); s.Status != StatusLoaded {
		t.Errorf("reload of a loaded model %+v", s)
	}
	if a2, _ := answer("alpha"); a2 != a {
		t.Errorf("after reload %q, before %q", a2, a)
	}
	manage(t, ts, "unload", "beta")
	if d2, code := answer(""); d2 != b || code != 200 {
		t.Errorf("unloaded default answered %d %q", code, d2)
	}
	if s := manage(t, ts, "status", "beta"); s.Status != StatusLoaded {
		t.Errorf("a request did not load the model again: %+v", s)
	}
	for _, op := range []string{"status", "unload", "reload"} {
		if s := manage(t, ts, op, "gamma"); s.Status != StatusNotFound {
			t.Errorf("%s of an unknown model: %+v", op, s)
		}
	}

	// Model labels of the management routes: explicit ids only.
	fams := ts.metrics()
	if v := value(fams, "http_requests_total", map[string]string{"path": "/v1/models/unload", "model": "alpha", "status": "200"}); v != 2 {
		t.Errorf("unload{alpha} = %v", v)
	}
	if v := value(fams, "http_requests_total", map[string]string{"path": "/v1/models/status", "model": "unknown"}); v != 1 {
		t.Errorf("status{unknown} = %v", v)
	}
	if v := value(fams, "http_requests_total", map[string]string{"path": "/v1/completions", "model": "beta"}); v != 3 {
		t.Errorf("completions{beta} = %v (default requests are labelled with the default id)", v)
	}
}

// A model that fails to load again reports internal_error; requests for it get a 500.
func TestReloadFailure(t *testing.T) {
	spec := tinySpec(t, "flaky", tinyConfig, loader.Options{})
	var fail atomic.Bool
	load := spec.Load
	spec.Load = func() (*loader.Model, error) {
		if fail.Load() {
			return nil, errors.New("disk on fire")
		}
		return load()
	}
	ts := startServer(t, func(o *Options) { o.Models = []ModelSpec{spec} })
	manage(t, ts, "unload", "flaky")
	fail.Store(true)
	s := manage(t, ts, "reload", "flaky")
	if s.Status != StatusInternalError || s.Error == "" {
		t.Errorf("reload %+v", s)
	}
	resp, body := ts.post("/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1})
	var e apiError
	if resp.StatusCode != 500 || json.Unmarshal(body, &e) != nil || e.Error.Type != "server_error" {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
	if s := manage(t, ts, "status", "flaky"); s.Status != StatusUnloaded {
		t.Errorf("status %+v", s)
	}
}
