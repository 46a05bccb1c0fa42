package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// imageError is an error body of either envelope: OpenAI's carries the
// param, Anthropic's names it in the message.
type imageError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string  `json:"type"`
		Message string  `json:"message"`
		Param   *string `json:"param"`
	} `json:"error"`
}

type imageCase struct {
	name, path, body string
	status           int
	param, contains  string // param: checked on the OpenAI envelope, and in the message
}

// checkImageCases posts each case and checks the status, the envelope, the
// part named and the message.
func checkImageCases(t *testing.T, ts *testServer, cases []imageCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := ts.post(c.path, c.body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			var e imageError
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("not an error body: %s", body)
			}
			anthropic := strings.HasPrefix(c.path, "/v1/messages")
			if anthropic && (e.Type != "error" || e.Error.Type != "invalid_request_error") {
				t.Errorf("not Anthropic's envelope: %s", body)
			}
			if !anthropic {
				if e.Error.Param == nil || *e.Error.Param != c.param {
					t.Errorf("param %v, want %q: %s", e.Error.Param, c.param, body)
				}
			}
			named := strings.TrimSuffix(c.param, ".type") // "messages[0].content[1]: content part type …"
			if !strings.Contains(e.Error.Message, named) || !strings.Contains(e.Error.Message, c.contains) {
				t.Errorf("message %q, want it to name %q and contain %q", e.Error.Message, named, c.contains)
			}
		})
	}
}

// A 1x1 PNG: the parsing cases below never decode it (the model cannot
// take images), but it is a real image.
const onePixelPNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"

// TestImagePartsParsing checks each dialect's image parts up to the model:
// malformed parts are 400s naming the part, and well-formed images sent to
// a text-only model are 400s naming the first image.
func TestImagePartsParsing(t *testing.T) {
	ts := startServer(t)
	chat := func(parts string) string {
		return `{"messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"text","text":"see"},` + parts + `]}]}`
	}
	resp := func(parts string) string {
		return `{"input":[{"role":"user","content":[{"type":"input_text","text":"see"},` + parts + `]}]}`
	}
	msgs := func(blocks string) string {
		return `{"max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"see"},` + blocks + `]}]}`
	}
	img := `{"type":"image_url","image_url":{"url":"` + onePixelPNG + `"}}`
	cases := []imageCase{
		{"chat text-only model", "/v1/chat/completions", chat(img), 400, "messages[1].content[1].image_url", "cannot take images"},
		{"chat string form", "/v1/chat/completions", chat(`{"type":"image_url","image_url":"` + onePixelPNG + `"}`), 400, "messages[1].content[1].image_url", "cannot take images"},
		{"chat second image named first", "/v1/chat/completions", chat(img + `,` + img), 400, "messages[1].content[1].image_url", "cannot take images"},
		{"chat detail original", "/v1/chat/completions", chat(`{"type":"image_url","image_url":{"url":"` + onePixelPNG + `","detail":"original"}}`), 400, "messages[1].content[1].image_url", "cannot take images"},
		{"chat no image_url", "/v1/chat/completions", chat(`{"type":"image_url"}`), 400, "messages[1].content[1].image_url", "is required"},
		{"chat no url", "/v1/chat/completions", chat(`{"type":"image_url","image_url":{"detail":"low"}}`), 400, "messages[1].content[1].image_url.url", "is required"},
		{"chat bad detail", "/v1/chat/completions", chat(`{"type":"image_url","image_url":{"url":"x","detail":"max"}}`), 400, "messages[1].content[1].image_url.detail", `"max" is not one of`},
		{"chat image_url a number", "/v1/chat/completions", chat(`{"type":"image_url","image_url":5}`), 400, "messages[1].content[1].image_url", "must be an object"},
		{"chat audio", "/v1/chat/completions", chat(`{"type":"input_audio","input_audio":{}}`), 400, "messages[1].content[1].type", "not supported"},
		{"responses text-only model", "/v1/responses", resp(`{"type":"input_image","image_url":"` + onePixelPNG + `"}`), 400, "input[0].content[1].image_url", "cannot take images"},
		{"responses file_id", "/v1/responses", resp(`{"type":"input_image","file_id":"file-1"}`), 400, "input[0].content[1].file_id", "stores no files"},
		{"responses no image_url", "/v1/responses", resp(`{"type":"input_image","detail":"auto"}`), 400, "input[0].content[1].image_url", "is required"},
		{"responses bad detail", "/v1/responses", resp(`{"type":"input_image","image_url":"x","detail":"huge"}`), 400, "input[0].content[1].detail", "not one of"},
		{"responses input_file", "/v1/responses", resp(`{"type":"input_file","file_id":"f"}`), 400, "input[0].content[1].type", "not supported"},
		{"anthropic text-only model", "/v1/messages", msgs(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + onePixelPNG[len("data:image/png;base64,"):] + `"}}`), 400, "messages[0].content[1].source", "cannot take images"},
		{"anthropic url text-only model", "/v1/messages", msgs(`{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}`), 400, "messages[0].content[1].source", "cannot take images"},
		{"anthropic count_tokens text-only model", "/v1/messages/count_tokens", msgs(`{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}`), 400, "messages[0].content[1].source", "cannot take images"},
		{"anthropic image in tool_result", "/v1/messages", `{"max_tokens":4,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}]}]}`, 400, "messages[1].content[0].content[0].source", "cannot take images"},
		{"anthropic media type", "/v1/messages", msgs(`{"type":"image","source":{"type":"base64","media_type":"image/tiff","data":"AAAA"}}`), 400, "messages[0].content[1].source.media_type", "not one of"},
		{"anthropic no data", "/v1/messages", msgs(`{"type":"image","source":{"type":"base64","media_type":"image/png"}}`), 400, "messages[0].content[1].source.data", "is required"},
		{"anthropic no url", "/v1/messages", msgs(`{"type":"image","source":{"type":"url"}}`), 400, "messages[0].content[1].source.url", "is required"},
		{"anthropic file source", "/v1/messages", msgs(`{"type":"image","source":{"type":"file","file_id":"f"}}`), 400, "messages[0].content[1].source.type", "stores no files"},
		{"anthropic no source", "/v1/messages", msgs(`{"type":"image"}`), 400, "messages[0].content[1].source", "is required"},
		{"anthropic document", "/v1/messages", msgs(`{"type":"document","source":{}}`), 400, "messages[0].content[1].type", "documents are not read"},
		{"embeddings image object", "/v1/embeddings", `{"input":[{"image":"` + onePixelPNG + `"}]}`, 400, "input[0]", "cannot be embedded"},
		{"embeddings image part", "/v1/embeddings", `{"input":{"type":"image_url","image_url":{"url":"x"}}}`, 400, "input", "cannot be embedded"},
	}
	checkImageCases(t, ts, cases)
}
