package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"mistralrs/internal/config"
	"mistralrs/internal/observe"
)

const testKey = "sk-guard-test-9f3c2a7e51"

func withKey(metrics bool) testOpt {
	return func(o *Options) { o.APIKey, o.APIKeyMetrics = testKey, metrics }
}

// The SDKs send the key their own way (Authorization: Bearer, x-api-key):
// with the server's key they work, with another they get a 401 in their
// API's error shape, counted in the metrics; the key is never logged.
func TestAPIKeyWithSDKs(t *testing.T) {
	plPath := filepath.Join(t.TempDir(), "payload.log")
	pl, err := observe.OpenPayloadLog(plPath)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, withKey(false), func(o *Options) { o.PayloadLog = pl })
	ctx := context.Background()

	good := openai.NewClient(option.WithBaseURL(ts.url+"/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
	if _, err := good.Chat.Completions.New(ctx, chatParams(4)); err != nil {
		t.Fatalf("openai-go with the key: %v", err)
	}
	_, err = ts.client.Chat.Completions.New(ctx, chatParams(4)) // key "unused"
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("openai-go with a wrong key: %v, want a 401", err)
	}
	if oerr.Code != "invalid_api_key" || oerr.Type != "invalid_request_error" {
		t.Errorf("openai error code %q type %q", oerr.Code, oerr.Type)
	}

	agood := anthropic.NewClient(aoption.WithBaseURL(ts.url), aoption.WithAPIKey(testKey), aoption.WithMaxRetries(0))
	if _, err := agood.Messages.New(ctx, anthropicParams(4)); err != nil {
		t.Fatalf("anthropic-sdk-go with the key: %v", err)
	}
	abad := ts.anthropicClient()
	_, err = abad.Messages.New(ctx, anthropicParams(4))
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anthropic-sdk-go with a wrong key: %v, want a 401", err)
	}
	if !strings.Contains(aerr.RawJSON(), `"authentication_error"`) {
		t.Errorf("anthropic 401 body %s", aerr.RawJSON())
	}

	// Raw: no key at all, a Bearer key on the Anthropic route, x-api-key on OpenAI's.
	resp, body := ts.post("/v1/chat/completions", chatParams(2))
	if resp.StatusCode != 401 || !strings.Contains(string(body), `"code":"invalid_api_key"`) || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("no key: %d %s", resp.StatusCode, body)
	}
	if resp, body := ts.post("/v1/completions", map[string]any{"model": "tiny", "prompt": "a", "max_tokens": 1}, "x-api-key", testKey); resp.StatusCode != 200 {
		t.Errorf("x-api-key on /v1/completions: %d %s", resp.StatusCode, body)
	}
	if resp, body := ts.post("/v1/messages/count_tokens", anthropicParams(1), "Authorization", "bearer "+testKey); resp.StatusCode != 200 {
		t.Errorf("Bearer on count_tokens: %d %s", resp.StatusCode, body)
	}
	if resp, body := ts.post("/v1/models/unload", map[string]any{"model_id": "tiny"}, "Authorization", "Bearer "+testKey+"x"); resp.StatusCode != 401 {
		t.Errorf("longer key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := ts.get("/v1/models"); resp.StatusCode != 401 {
		t.Errorf("GET /v1/models without the key: %d", resp.StatusCode)
	}
	if resp, _ := ts.get("/no/such/route"); resp.StatusCode != 401 {
		t.Errorf("unmatched route without the key: %d (the key hides which routes exist)", resp.StatusCode)
	}

	// Housekeeping stays open; so does /metrics by default, and preflights.
	for _, p := range []string{"/health", "/", "/readyz", "/livez", "/docs", "/api-doc/openapi.json", "/metrics"} {
		if resp, _ := ts.get(p); resp.StatusCode != 200 {
			t.Errorf("GET %s without the key: %d", p, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("OPTIONS", ts.url+"/v1/chat/completions", nil)
	req.Header.Set("Origin", "https://web.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	if resp, _ := ts.do(req); resp.StatusCode != 200 {
		t.Errorf("preflight without the key: %d", resp.StatusCode)
	}

	fams := ts.metrics()
	if v := value(fams, "http_requests_total", map[string]string{"path": "/v1/chat/completions", "status": "401"}); v != 2 {
		t.Errorf("http_requests_total{chat,401} = %v, want 2", v)
	}
	if v := value(fams, "http_requests_total", map[string]string{"path": "/v1/messages", "status": "401"}); v != 1 {
		t.Errorf("http_requests_total{messages,401} = %v, want 1", v)
	}
	if n := len(ts.log.lines("status=401")); n < 4 {
		t.Errorf("%d access lines with status=401, want at least 4:\n%s", n, ts.log.String())
	}

	ts.cancel()
	<-ts.served
	ts.served <- nil
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	plData, err := os.ReadFile(plPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(plData) == 0 {
		t.Error("the payload log is empty")
	}
	for name, text := range map[string]string{"logs": ts.log.String(), "payload log": string(plData)} {
		if strings.Contains(text, testKey) || strings.Contains(text, testKey[:12]) {
			t.Errorf("the API key appears in the %s", name)
		}
	}
}

func TestAPIKeyProtectsMetrics(t *testing.T) {
	ts := startServer(t, withKey(true))
	if resp, body := ts.get("/metrics"); resp.StatusCode != 401 || !strings.Contains(string(body), "invalid_api_key") {
		t.Errorf("/metrics without the key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := ts.get("/metrics", "Authorization", "Bearer "+testKey); resp.StatusCode != 200 {
		t.Errorf("/metrics with the key: %d", resp.StatusCode)
	}
	if resp, _ := ts.get("/health"); resp.StatusCode != 200 {
		t.Errorf("/health: %d", resp.StatusCode)
	}
	// The startup lines say a key is required, never which.
	lines := strings.Join(ts.srv.StartupLines("127.0.0.1", 1234, "text"), "\n")
	if !strings.Contains(lines, "API key: required") || strings.Contains(lines, testKey[:8]) {
		t.Errorf("startup lines:\n%s", lines)
	}
}

// Bodies a web page can send without a CORS preflight (text/plain, form
// data, no type) are refused with 415 on the JSON routes.
func TestJSONContentType(t *testing.T) {
	ts := startServer(t)
	chat := map[string]any{"model": "tiny", "messages": []map[string]any{{"role": "user", "content": "hi"}}, "max_tokens": 1}
	for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "json"} {
		resp, body := ts.post("/v1/chat/completions", chat, "Content-Type", ct)
		if resp.StatusCode != 415 || !strings.Contains(string(body), `"code":"unsupported_media_type"`) {
			t.Errorf("Content-Type %q: %d %s", ct, resp.StatusCode, body)
		}
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.api+json"} {
		if resp, body := ts.post("/v1/chat/completions", chat, "Content-Type", ct); resp.StatusCode != 200 {
			t.Errorf("Content-Type %q: %d %s", ct, resp.StatusCode, body)
		}
	}
	// No Content-Type at all.
	data, _ := json.Marshal(chat)
	req, _ := http.NewRequest("POST", ts.url+"/v1/completions", strings.NewReader(string(data)))
	if resp, body := ts.do(req); resp.StatusCode != 415 {
		t.Errorf("no Content-Type: %d %s", resp.StatusCode, body)
	}
	// Model management: a form post cannot unload the model.
	if resp, body := ts.post("/v1/models/unload", "model_id=tiny", "Content-Type", "application/x-www-form-urlencoded"); resp.StatusCode != 415 {
		t.Errorf("form unload: %d %s", resp.StatusCode, body)
	}
	if resp, body := ts.post("/v1/models/unload", `{"model_id":"tiny"}`, "Content-Type", "text/plain"); resp.StatusCode != 415 {
		t.Errorf("text/plain unload: %d %s", resp.StatusCode, body)
	}
	if _, body := ts.post("/v1/models/status", map[string]any{"model_id": "tiny"}); !strings.Contains(string(body), `"loaded"`) {
		t.Errorf("model status after refused unloads: %s", body)
	}
	// The Anthropic routes answer in their envelope.
	resp, body := ts.post("/v1/messages", anthropicParams(1), "Content-Type", "text/plain")
	if resp.StatusCode != 415 || !strings.HasPrefix(string(body), `{"type":"error"`) {
		t.Errorf("/v1/messages text/plain: %d %s", resp.StatusCode, body)
	}
	for _, p := range []string{"/v1/embeddings", "/v1/responses", "/v1/messages/count_tokens", "/v1/models/reload"} {
		if resp, body := ts.post(p, `{}`, "Content-Type", "text/plain"); resp.StatusCode != 415 {
			t.Errorf("%s text/plain: %d %s", p, resp.StatusCode, body)
		}
	}
	fams := ts.metrics()
	if v := value(fams, "http_requests_total", map[string]string{"path": "/v1/chat/completions", "status": "415"}); v != 6 {
		t.Errorf("http_requests_total{chat,415} = %v, want 6", v)
	}
	// The form body names no model it can read: two series.
	n := 0.0
	for _, m := range fams["http_requests_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["path"] == "/v1/models/unload" && l["status"] == "415" {
			n += m.GetCounter().GetValue()
		}
	}
	if n != 2 {
		t.Errorf("http_requests_total{unload,415} = %v, want 2", n)
	}
}

// With allowed origins, CORS answers only those (exact match).
func TestAllowedOrigins(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.Observe.AllowedOrigins = []string{"https://app.example"} })
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", ts.url+"/v1/chat/completions", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type,authorization")
		resp, _ := ts.do(req)
		return resp
	}
	if got := preflight("https://app.example").Header.Get("Access-Control-Allow-Origin"); got != "https://app.example" {
		t.Errorf("preflight from the allowed origin: Access-Control-Allow-Origin %q", got)
	}
	for _, o := range []string{"https://evil.example", "https://app.example.evil", "http://app.example"} {
		if got := preflight(o).Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("preflight from %s: Access-Control-Allow-Origin %q", o, got)
		}
	}
	if resp, _ := ts.get("/v1/models", "Origin", "https://app.example"); resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("simple request from the allowed origin: %q", resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if resp, _ := ts.get("/v1/models", "Origin", "https://evil.example"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("simple request from a refused origin: %q", resp.Header.Get("Access-Control-Allow-Origin"))
	}
	// The default stays "*".
	def := startServer(t)
	if resp, _ := def.get("/v1/models", "Origin", "https://any.example"); resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("default CORS: %q", resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

func TestGuardOptionsFromConfig(t *testing.T) {
	cfg := config.Default()
	cfg.Server.AllowedOrigins = config.OriginList{"https://a.example", "https://b.example"}
	cfg.Server.APIKey = testKey
	cfg.Server.APIKeyMetrics = true
	opts, _, err := OptionsFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := opts.Observe.AllowedOrigins; len(got) != 2 || got[1] != "https://b.example" {
		t.Errorf("AllowedOrigins %q", got)
	}
	if opts.APIKey != testKey || !opts.APIKeyMetrics {
		t.Errorf("APIKey set: %v, APIKeyMetrics %v", opts.APIKey == testKey, opts.APIKeyMetrics)
	}
	if opts, _, _ := OptionsFromConfig(config.Default()); opts.Observe.AllowedOrigins != nil || opts.APIKey != "" {
		t.Errorf("defaults: origins %q, key set %v", opts.Observe.AllowedOrigins, opts.APIKey != "")
	}
}
