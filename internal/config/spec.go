package config

import (
	"fmt"
	"strings"

	"mistralrs/internal/engine"
)

// MaxSpecNgram is the largest n-gram the prompt-lookup proposer
// (runtime.spec_ngram, --spec-ngram) may match.
const MaxSpecNgram = 8

// Speculative is one model's speculative decoding, as SpeculativeFor
// resolves it: at most one proposer (a draft model or prompt lookup) and the
// draft tokens per step.
type Speculative struct {
	DraftModel string // mtp_model: a .gguf file, a directory or an HF id; "" when none
	Tokens     int    // mtp_n_predict: draft tokens proposed and verified per step
	Ngram      int    // spec_ngram: prompt-lookup n-gram size; 0: off

	draftKey, ngramKey string // the settings the proposer came from, for messages
}

// SpeculativeFor returns model i's speculative decoding. The [runtime]
// values (mtp_model, mtp_n_predict, spec_ngram; on the command line
// --mtp-model, --mtp-n-predict, --spec-ngram) are the first model's, as in
// mistral.rs; a [[models]] entry's own keys override them for that entry,
// and are the only way to give a later model a proposer (mistral.rs cannot).
// A later model without its own keys gets the table's defaults: no proposer.
func (c *Config) SpeculativeFor(i int) Speculative {
	var m ModelConfig
	if i >= 0 && i < len(c.Models) {
		m = c.Models[i]
	}
	s := Speculative{
		Tokens: OptionByKey("runtime.mtp_n_predict").Default.(int),
		Ngram:  OptionByKey("runtime.spec_ngram").Default.(int),
	}
	if i == 0 {
		r := &c.Runtime
		s.DraftModel, s.draftKey = r.MTPModel, c.settingName("runtime.mtp_model")
		s.Tokens = r.MTPNPredict
		s.Ngram, s.ngramKey = r.SpecNgram, c.settingName("runtime.spec_ngram")
	}
	key := func(name string) string { return fmt.Sprintf("models[%d].%s", i, name) }
	if m.MTPModel != "" {
		s.DraftModel, s.draftKey = m.MTPModel, key("mtp_model")
	}
	if m.MTPNPredict != nil {
		s.Tokens = *m.MTPNPredict
	}
	if m.SpecNgram != nil {
		s.Ngram, s.ngramKey = *m.SpecNgram, key("spec_ngram")
	}
	return s
}

// ResolveDraft finds the files of model i's draft model, like ResolveModel
// does for a model_id (a .gguf file, a directory holding one GGUF model, or
// a Hugging Face id in the model's hub cache). It returns nil when the model
// has no draft; an error names the setting and the draft.
func (c *Config) ResolveDraft(i int) (*ModelSource, error) {
	s := c.SpeculativeFor(i)
	if s.DraftModel == "" {
		return nil, nil
	}
	mc := ModelConfig{Kind: KindText, ModelID: s.DraftModel} // a draft takes no images: no projector is looked for
	if i >= 0 && i < len(c.Models) {
		mc.Device.HFCache = c.Models[i].Device.HFCache
	}
	src, err := ResolveModel(mc, nil)
	if err != nil {
		if strings.HasPrefix(err.Error(), "model ") { // `model "x": no such file or directory`
			return nil, fmt.Errorf("%s: draft %w", s.draftKey, err)
		}
		return nil, fmt.Errorf("%s: draft model %q: %w", s.draftKey, s.DraftModel, err)
	}
	return src, nil
}

// settingName is how messages name a setting: its flag when the
// configuration came from the command line and the setting has one, else its
// TOML key.
func (c *Config) settingName(key string) string {
	if c.origin == originFlags {
		if o := OptionByKey(key); o != nil && o.Flag != "" {
			return "--" + o.Flag
		}
	}
	return key
}

// checkSpeculative is Validate's check of the [runtime] speculative
// settings: the built-in MTP head is refused (no supported architecture
// carries MTP layers), the draft length and n-gram size must be in range, and
// one proposer at most.
func (c *Config) checkSpeculative(bad badFunc) error {
	r := &c.Runtime
	if r.MTP {
		if r.MTPModel != "" {
			if c.origin == originFlags {
				return fmt.Errorf("the argument '--mtp' cannot be used with '--mtp-model'")
			}
			return fmt.Errorf("runtime.mtp and runtime.mtp_model are both set; remove runtime.mtp " +
				"(mistral.rs would use the built-in MTP head, which this server does not support)")
		}
		return bad("runtime.mtp", nil, "the built-in MTP head is not supported: no supported architecture "+
			"(llama, mistral, qwen2, qwen3 GGUFs) carries MTP layers; use %s (a draft model) or %s (prompt lookup)",
			c.settingName("runtime.mtp_model"), c.settingName("runtime.spec_ngram"))
	}
	if err := checkSpecRange(bad, "runtime.mtp_n_predict", r.MTPNPredict, "runtime.spec_ngram", r.SpecNgram); err != nil {
		return err
	}
	if r.MTPModel != "" && r.SpecNgram > 0 {
		if c.origin == originFlags {
			return fmt.Errorf("the argument '--mtp-model' cannot be used with '--spec-ngram' (choose one proposer)")
		}
		return fmt.Errorf("runtime.mtp_model and runtime.spec_ngram are both set; choose one proposer")
	}
	return nil
}

// checkModelSpeculative checks the speculative keys of [[models]] entry i and
// the proposer the entry ends up with (its own keys, and for the first model
// the [runtime] ones).
func (c *Config) checkModelSpeculative(bad badFunc, i int) error {
	m := &c.Models[i]
	k := func(name string) string { return fmt.Sprintf("models[%d].%s", i, name) }
	tokens, ngram := 1, 0
	if m.MTPNPredict != nil {
		tokens = *m.MTPNPredict
	}
	if m.SpecNgram != nil {
		ngram = *m.SpecNgram
	}
	if err := checkSpecRange(bad, k("mtp_n_predict"), tokens, k("spec_ngram"), ngram); err != nil {
		return err
	}
	if s := c.SpeculativeFor(i); s.DraftModel != "" && s.Ngram > 0 {
		return fmt.Errorf("models[%d]: %s and %s are both set; choose one proposer", i, s.draftKey, s.ngramKey)
	}
	return nil
}

// checkEmbeddingModel refuses a proposer on an embedding model: it
// generates no tokens to speculate on.
func (c *Config) checkEmbeddingModel(i int) error {
	if c.Models[i].Kind != KindEmbedding {
		return nil
	}
	s := c.SpeculativeFor(i)
	key := s.draftKey
	if s.DraftModel == "" {
		if s.Ngram == 0 {
			return nil
		}
		key = s.ngramKey
	}
	if c.origin == originFlags {
		return fmt.Errorf("%s cannot be used with `serve embedding`: an embedding model generates no tokens to speculate on", key)
	}
	return fmt.Errorf("models[%d].kind = %q: %s does not apply, an embedding model generates no tokens to speculate on", i, KindEmbedding, key)
}

func checkSpecRange(bad badFunc, tokensKey string, tokens int, ngramKey string, ngram int) error {
	if tokens < 1 || tokens > engine.MaxSpecTokens {
		return bad(tokensKey, tokens, "must be between 1 and %d", engine.MaxSpecTokens)
	}
	if ngram < 0 || ngram > MaxSpecNgram {
		return bad(ngramKey, ngram, "must be between 0 (off) and %d", MaxSpecNgram)
	}
	return nil
}
