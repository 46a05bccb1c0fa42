package tokenizer

import (
	"strings"
	"testing"
)

// A tokenizer key holding the wrong GGUF type is named with the type found
// and the type expected, on one line, instead of being reported missing.
func TestMetadataWrongArrayType(t *testing.T) {
	cases := []struct {
		name string
		md   func() MapMetadata
		want string
	}{
		{"tokens as ints", func() MapMetadata {
			md := spmMeta(nil)
			md["tokenizer.ggml.tokens"] = make([]int32, 300)
			return md
		}, "tokenizer.ggml.tokens is an array of int32, expected an array of strings"},
		{"tokens as a string", func() MapMetadata {
			md := spmMeta(nil)
			md["tokenizer.ggml.tokens"] = "abc"
			return md
		}, "tokenizer.ggml.tokens is a string, expected an array of strings"},
		{"tokens missing", func() MapMetadata {
			md := spmMeta(nil)
			delete(md, "tokenizer.ggml.tokens")
			return md
		}, "tokenizer.ggml.tokens missing"},
		{"tokens empty", func() MapMetadata {
			md := spmMeta(nil)
			md["tokenizer.ggml.tokens"] = []string{}
			return md
		}, "tokenizer.ggml.tokens is an empty array"},
		{"merges as arrays", func() MapMetadata {
			md := bpeMeta("default", nil)
			md["tokenizer.ggml.merges"] = []any{[]string{"a"}}
			return md
		}, "tokenizer.ggml.merges is an array of arrays, expected an array of strings"},
		{"scores as strings", func() MapMetadata {
			md := spmMeta(nil)
			md["tokenizer.ggml.scores"] = []string{"x"}
			return md
		}, "tokenizer.ggml.scores is an array of strings, expected an array of float32"},
		{"scores too short", func() MapMetadata {
			md := spmMeta(nil)
			md["tokenizer.ggml.scores"] = []float32{1}
			return md
		}, "tokenizer.ggml.scores has 1 entries, expected one per token (259)"},
		{"token types as floats", func() MapMetadata {
			md := spmMeta(nil)
			md["tokenizer.ggml.token_type"] = []float32{1}
			return md
		}, "tokenizer.ggml.token_type is an array of float32, expected an array of int32"},
	}
	for _, c := range cases {
		_, err := FromMetadata(c.md())
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q, want one line containing %q", c.name, msg, c.want)
		}
	}
}
