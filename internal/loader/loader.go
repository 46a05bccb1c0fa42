// Package loader opens a GGUF model (one file or the first shard of a split
// model) and builds what serving it takes: the network over the mapped
// weights, the tokenizer, the chat template, and an identity for the prefix
// cache. The engine runs a loaded Model; the server renders prompts with its
// template. Close releases the file mapping.
package loader

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"runtime/debug"
	"strings"

	"mistralrs/internal/chat"
	"mistralrs/internal/gguf"
	"mistralrs/internal/model"
	"mistralrs/internal/smallfile"
	"mistralrs/internal/tokenizer"
	"mistralrs/internal/vision"
)

// Model is everything needed to run one GGUF model. Net's matrices point
// into File's mapping: Close the Model only when nothing runs it any more.
type Model struct {
	ID       string // the name clients use (file name without .gguf by default)
	Path     string
	File     *gguf.File
	Net      *model.Model
	Tok      *tokenizer.Tokenizer
	Template *chat.Template
	ISQ      *ISQReport // what in-situ quantization did; nil without Options.ISQ
	// Vision is the vision projector (Options.MMProj), whose rows have the
	// text model's width; nil for a text model.
	Vision *vision.Projector
}

// Close unmaps the model's file and its projector's (a no-op for a model
// parsed from memory).
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	var err error
	if m.Vision != nil {
		err = m.Vision.Close()
	}
	if m.File != nil {
		err = errors.Join(err, m.File.Close())
	}
	return err
}

// Identity is a digest of the weights the keys and values come from (path,
// architecture, name, every tensor's name, type, size and first bytes), so
// that cached KV blocks are only ever reused with the model, and revision,
// that computed them. It is cheap: no tensor is read past 64 bytes.
func (m *Model) Identity() []byte {
	h := sha256.New()
	h.Write([]byte(m.Path))
	h.Write([]byte{0})
	h.Write([]byte(m.File.Architecture()))
	if name, ok := m.File.String("general.name"); ok {
		h.Write([]byte(name))
	}
	for i := range m.File.Tensors {
		t := &m.File.Tensors[i]
		h.Write([]byte(t.Name))
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(t.Type)))
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(t.Data))))
		h.Write(t.Data[:min(len(t.Data), 64)])
	}
	return h.Sum(nil)
}

// Options adjust how a model is loaded.
type Options struct {
	ID               string // model id; default derived from the file name
	ChatTemplatePath string // overrides tokenizer.chat_template (.jinja or HF tokenizer_config .json)
	// Progress, when set, is called while the weights are paged in, with the
	// bytes done and the total.
	Progress func(done, total int64)
	// ISQ, when set, quantizes the weights in memory at load (in-situ
	// quantization, --isq): an ISQ type name (see ParseISQ). The file is not
	// changed. ISQStatus, when set, shows the progress and a summary line.
	ISQ       string
	ISQStatus io.Writer
	// MMProj, when set, is the vision projector (a llama.cpp mmproj GGUF)
	// loaded with the model into Model.Vision.
	MMProj string
}

// Load opens a GGUF file (or the first shard of a split model) and builds the
// network, tokenizer and chat template from it.
func Load(path string, opts Options) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := FromFile(f, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// FromFile builds a Model from an opened GGUF file. The Model owns f. A
// file cut short while it is read (the weights are memory-mapped) is an
// error naming it, not a crash.
func FromFile(f *gguf.File, opts Options) (m *Model, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if v := recover(); v != nil {
			if err = gguf.Fault(v); err == nil {
				panic(v)
			}
			m = nil
		}
	}()
	var isq *ISQReport
	if opts.ISQ != "" {
		s, err := ParseISQ(opts.ISQ)
		if err != nil {
			return nil, err
		}
		if isq, err = applyISQ(f, s, opts.ISQStatus); err != nil {
			return nil, err
		}
	}
	net, err := model.Load(f)
	if err != nil {
		return nil, withPath(f.Path, err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, withPath(f.Path, err)
	}
	tmplSrc, _ := f.String("tokenizer.chat_template")
	if opts.ChatTemplatePath != "" {
		tmplSrc, err = readChatTemplate(opts.ChatTemplatePath)
		if err != nil {
			return nil, err
		}
	}
	// NewTemplate also renders a sample conversation, so a template that passes the render
	// limits on every request (unbounded macro recursion, a huge range) fails here, naming the
	// file it came from.
	tmpl, err := newTemplate(tmplSrc, tok)
	if err != nil {
		if opts.ChatTemplatePath != "" {
			return nil, fmt.Errorf("%s: %w", opts.ChatTemplatePath, err)
		}
		return nil, withPath(f.Path, fmt.Errorf("tokenizer.chat_template: %w", err))
	}
	id := opts.ID
	if id == "" {
		id = gguf.ModelName(f.Path)
	}
	var proj *vision.Projector
	if opts.MMProj != "" {
		if proj, err = loadProjector(opts.MMProj, f.Path, net.Config.Embd); err != nil {
			return nil, err
		}
	}
	if opts.Progress != nil {
		prefault(f, opts.Progress)
	}
	return &Model{ID: id, Path: f.Path, File: f, Net: net, Tok: tok, Template: tmpl, ISQ: isq, Vision: proj}, nil
}

// loadProjector loads the vision projector at path for the text model at
// modelPath, whose rows it must match in width.
func loadProjector(path, modelPath string, embd int) (*vision.Projector, error) {
	p, err := vision.Load(path)
	if err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok && pe.Path == path {
			return nil, fmt.Errorf("vision projector %s: %w", path, pe.Err)
		}
		return nil, fmt.Errorf("vision projector %w", err)
	}
	if p.Embd() != embd {
		p.Close()
		return nil, fmt.Errorf("vision projector %s gives rows of width %d, but the text model %s has n_embd %d: a projector of another model?",
			path, p.Embd(), modelPath, embd)
	}
	return p, nil
}

// withPath prefixes err with the model file's path unless the message
// already starts with it: gguf, model and tokenizer name the file in their
// own errors, and a load error should print the path once.
func withPath(path string, err error) error {
	if path == "" || strings.HasPrefix(err.Error(), path+":") {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

func newTemplate(src string, tok *tokenizer.Tokenizer) (*chat.Template, error) {
	bos, eos := "", ""
	if id := tok.BOS(); id >= 0 {
		bos = tok.TokenText(id)
	}
	if id := tok.EOS(); id >= 0 {
		eos = tok.TokenText(id)
	}
	if src == "" {
		src = chat.DefaultSource
	}
	return chat.NewTemplate(src, bos, eos)
}

// readChatTemplate reads a .jinja file as is, or the "chat_template" field of
// a Hugging Face tokenizer_config.json.
func readChatTemplate(path string) (string, error) {
	data, err := smallfile.Read(path, smallfile.ChatTemplateLimit(path))
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	if strings.EqualFold(filepath.Ext(path), ".json") {
		src, err := templateFromTokenizerConfig(data)
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return src, nil
	}
	return string(data), nil
}

// prefault reads one byte per page of every tensor so that the weights are in
// memory before the first request, reporting progress as it goes.
func prefault(f *gguf.File, progress func(done, total int64)) {
	var total int64
	for i := range f.Tensors {
		total += int64(len(f.Tensors[i].Data))
	}
	var done int64
	var sink byte
	const page = 4096
	for i := range f.Tensors {
		data := f.Tensors[i].Data
		if f.Tensors[i].Released { // its products read a packed copy
			data = nil
		}
		for off := 0; off < len(data); off += page {
			sink ^= data[off]
		}
		done += int64(len(data))
		progress(done, total)
	}
	_ = sink
}

// templateFromTokenizerConfig takes the chat template out of a Hugging Face
// tokenizer_config.json: a string, or a list of named templates of which the
// one named "default" is used.
func templateFromTokenizerConfig(data []byte) (string, error) {
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", err
	}
	if len(cfg.ChatTemplate) == 0 {
		return "", errors.New("no chat_template field")
	}
	var src string
	if err := json.Unmarshal(cfg.ChatTemplate, &src); err == nil {
		return src, nil
	}
	var named []struct{ Name, Template string }
	if err := json.Unmarshal(cfg.ChatTemplate, &named); err != nil {
		return "", errors.New("chat_template is neither a string nor a list of named templates")
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", errors.New("chat_template list has no template named \"default\"")
}
