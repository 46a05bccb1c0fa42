package chat

import "strings"

// Family is a well-known chat format, recognised from a template's text.
type Family string

// The families Detect recognises.
const (
	FamilyUnknown Family = ""
	FamilyChatML  Family = "chatml"  // <|im_start|>role ... <|im_end|> (Qwen, SmolLM, Hermes, default)
	FamilyLlama3  Family = "llama3"  // <|start_header_id|>role<|end_header_id|> ... <|eot_id|>
	FamilyMistral Family = "mistral" // [INST] ... [/INST]
	FamilyZephyr  Family = "zephyr"  // <|user|> ... </s> (TinyLlama, Zephyr)
	FamilyGemma   Family = "gemma"   // <start_of_turn>role ... <end_of_turn>
)

// Detect names the chat format a template produces, by the marker texts it contains (as
// llama.cpp's llm_chat_detect_template does). It is a hint (stop strings, logging), not a
// substitute for rendering the template.
func Detect(src string) Family {
	switch {
	case strings.Contains(src, "<|start_header_id|>") && strings.Contains(src, "<|eot_id|>"):
		return FamilyLlama3
	case strings.Contains(src, "<|im_start|>"):
		return FamilyChatML
	case strings.Contains(src, "<start_of_turn>"):
		return FamilyGemma
	case strings.Contains(src, "[INST]"):
		return FamilyMistral
	case strings.Contains(src, "<|user|>") && strings.Contains(src, "<|assistant|>"):
		return FamilyZephyr
	}
	return FamilyUnknown
}

// Family returns Detect of the template's source.
func (t *Template) Family() Family { return Detect(t.src) }
