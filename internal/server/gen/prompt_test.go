package gen

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"mistralrs/internal/loader"
	"mistralrs/internal/testutil"
)

// TestPrompterMatchesMtmd builds the prompts of the vision fixture's cases
// (../shared/testdata/vision/reference.json) and compares them with the
// chunks llama.cpp's mtmd made: the same text ids around each image and
// the image's positions where mtmd put them.
func TestPrompterMatchesMtmd(t *testing.T) {
	ref := testutil.SharedFile(t, "testdata", "vision", "reference.json")
	m, err := loader.Load(testutil.SharedFile(t, "testdata", "vision", "text-f32.gguf"), loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	data, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases map[string]struct {
			Prompt string `json:"prompt_string"`
			Chunks []struct {
				Text   []int32 `json:"text"`
				Tokens int     `json:"image_tokens"`
			} `json:"prompt_chunks"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for name, c := range doc.Cases {
		if c.Chunks == nil {
			continue
		}
		var parts Images
		text := c.Prompt
		for strings.Contains(text, "<__media__>") {
			text = strings.Replace(text, "<__media__>", parts.Add("x", "").Text, 1)
		}
		set := &imageSet{before: "<start_of_image>", after: "<end_of_image>"}
		for _, p := range parts {
			set.images = append(set.images, &preparedImage{part: p, tokens: 16})
		}
		pr := newPrompter(m, 2048, set)
		got, err := pr.Encode(text, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var want []int32
		var wantPos []int
		for _, ch := range c.Chunks {
			if ch.Tokens > 0 {
				wantPos = append(wantPos, len(want))
				want = append(want, make([]int32, ch.Tokens)...)
				continue
			}
			want = append(want, ch.Text...)
		}
		var pos []int
		for i, s := range pr.spans {
			pos = append(pos, s.pos)
			if s.img != set.images[i] {
				t.Errorf("%s: span %d is not image %d", name, i, i)
			}
		}
		if !slices.Equal(got, want) || !slices.Equal(pos, wantPos) {
			t.Errorf("%s: prompt %v, images at %v\nwant %v, images at %v", name, got, pos, want, wantPos)
		}
	}
}

// TestPrompterMarkers: a marker of no image of the request stays text, a
// prompt whose images do not fit is refused, and a request without images
// tokenizes as before.
func TestPrompterMarkers(t *testing.T) {
	m, err := loader.Load(testutil.SharedFile(t, "testdata", "vision", "text-f32.gguf"), loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var parts Images
	mark := parts.Add("p", "").Text
	var other Images
	stray := other.Add("q", "").Text
	set := &imageSet{images: []*preparedImage{{part: parts[0], tokens: 16}}, before: "<start_of_image>", after: "<end_of_image>"}
	pr := newPrompter(m, 2048, set)
	got, err := pr.Encode(stray+"a"+mark+"b", false)
	if err != nil {
		t.Fatal(err)
	}
	plain := m.Tok.Encode(stray+"a<start_of_image>", false, true)
	if len(pr.spans) != 1 || pr.spans[0].pos != len(plain) || !slices.Equal(got[:len(plain)], plain) {
		t.Errorf("stray marker: %v, spans %+v; want the text %v first", got, pr.spans, plain)
	}
	if _, err := newPrompter(m, 19, set).Encode("a"+mark, false); err == nil || !strings.Contains(err.Error(), "context length of 19") {
		t.Errorf("image over the context: %v", err)
	}
	noImages := newPrompter(m, 2048, nil)
	got, err = noImages.Encode("Once upon a time", true)
	if want := m.Tok.Encode("Once upon a time", true, true); err != nil || !slices.Equal(got, want) {
		t.Errorf("no images: %v, %v; want %v", got, err, want)
	}
}
