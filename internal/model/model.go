package model

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// Model is a loaded decoder-only transformer. Its matrices point into the
// GGUF mmap, so the gguf.File must stay open while the Model is used.
//
// Fields are tagged with their GGUF tensor names (per-layer ones get a
// "blk.N." prefix) and the expected dimensions, in GGML order, by symbolic
// name (see dimSize). ",optional" tensors may be absent (nil).
type Model struct {
	Config Config

	TokEmbd    *kernels.Matrix `gguf:"token_embd.weight" dims:"embd,vocab"`
	OutputNorm []float32       `gguf:"output_norm.weight" dims:"embd"`
	Output     *kernels.Matrix `gguf:"output.weight,optional" dims:"embd,vocab"` // TokEmbd when tied
	RopeFreqs  []float32       `gguf:"rope_freqs.weight,optional" dims:"rope/2"` // llama3-style frequency divisors
	Layers     []Layer

	rope rope

	mu sync.Mutex // Forward uses the scratch state below
	st *state
}

// Layer is one transformer block.
type Layer struct {
	AttnNorm []float32       `gguf:"attn_norm.weight" dims:"embd"`
	Q        *kernels.Matrix `gguf:"attn_q.weight" dims:"embd,q"`
	K        *kernels.Matrix `gguf:"attn_k.weight" dims:"embd,k"`
	V        *kernels.Matrix `gguf:"attn_v.weight" dims:"embd,v"`
	O        *kernels.Matrix `gguf:"attn_output.weight" dims:"o,embd"`
	QBias    []float32       `gguf:"attn_q.bias,optional" dims:"q"` // qwen2
	KBias    []float32       `gguf:"attn_k.bias,optional" dims:"k"`
	VBias    []float32       `gguf:"attn_v.bias,optional" dims:"v"`
	OBias    []float32       `gguf:"attn_output.bias,optional" dims:"embd"`
	QNorm    []float32       `gguf:"attn_q_norm.weight,optional" dims:"hd"` // qwen3: RMSNorm per query head
	KNorm    []float32       `gguf:"attn_k_norm.weight,optional" dims:"hd"`

	FFNNorm []float32       `gguf:"ffn_norm.weight" dims:"embd"`
	Gate    *kernels.Matrix `gguf:"ffn_gate.weight" dims:"embd,ff"`
	Up      *kernels.Matrix `gguf:"ffn_up.weight" dims:"embd,ff"`
	Down    *kernels.Matrix `gguf:"ffn_down.weight" dims:"ff,embd"`
}

// Load builds the model described by f's metadata over f's tensors.
func Load(f *gguf.File) (*Model, error) {
	cfg, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, fmt.Errorf("%s: missing tensor token_embd.weight", f.Path)
	}
	if len(emb.Dims) < 2 || emb.Dims[1] == 0 || emb.Dims[1] > 1<<31 {
		return nil, fmt.Errorf("%s: tensor token_embd.weight has dims %v, expected [%d, vocab]", f.Path, emb.Dims, cfg.Embd)
	}
	cfg.Vocab = int(emb.Dims[1])

	m := &Model{Config: cfg}
	l := loader{f: f, cfg: &m.Config, required: map[string]bool{}}
	for _, name := range archs[cfg.Arch].required {
		l.required[name] = true
	}
	if err := l.load(reflect.ValueOf(m).Elem(), ""); err != nil {
		return nil, err
	}
	m.Layers = make([]Layer, cfg.Layers)
	for i := range m.Layers {
		if err := l.load(reflect.ValueOf(&m.Layers[i]).Elem(), "blk."+strconv.Itoa(i)+"."); err != nil {
			return nil, err
		}
		ly := &m.Layers[i]
		if (ly.QNorm == nil) != (ly.KNorm == nil) {
			return nil, fmt.Errorf("%s: blk.%d has only one of attn_q_norm.weight and attn_k_norm.weight", f.Path, i)
		}
	}
	if m.Output == nil {
		m.Output = m.TokEmbd
		m.Config.TiedOutput = true
	}
	m.rope = newRope(&m.Config, m.RopeFreqs)
	return m, nil
}

// loader fills tagged struct fields from the file's tensors.
type loader struct {
	f        *gguf.File
	cfg      *Config
	required map[string]bool // optional tensors the architecture requires
}

func (l *loader) load(v reflect.Value, prefix string) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		field := t.Field(i)
		tag, ok := field.Tag.Lookup("gguf")
		if !ok {
			continue
		}
		base, opts, _ := strings.Cut(tag, ",")
		optional := opts == "optional" && !l.required[base]
		name := prefix + base
		ti, ok := l.f.Tensor(name)
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("%s: missing tensor %s (architecture %s)", l.f.Path, name, l.cfg.Arch)
		}
		want, err := l.dims(field.Tag.Get("dims"))
		if err != nil {
			return fmt.Errorf("%s: tensor %s: %v", l.f.Path, name, err)
		}
		if !sameDims(ti.Dims, want) {
			return fmt.Errorf("%s: tensor %s has shape %v, expected %v", l.f.Path, name, ti.Dims, want)
		}
		if !ti.Type.Supported() {
			return fmt.Errorf("%s: tensor %s has unsupported type %s (supported: %s)", l.f.Path, name, ti.Type, supportedTypes())
		}
		switch field.Type {
		case reflect.TypeOf((*kernels.Matrix)(nil)):
			mat, err := kernels.NewMatrix(ti.Type, int(want[1]), int(want[0]), ti.Data)
			if err != nil {
				return fmt.Errorf("%s: tensor %s: %v", l.f.Path, name, err)
			}
			v.Field(i).Set(reflect.ValueOf(mat))
		case reflect.TypeOf([]float32(nil)):
			n := int(want[0])
			if err := ti.Type.CheckRow(n); err != nil {
				return fmt.Errorf("%s: tensor %s: %v", l.f.Path, name, err)
			}
			if len(ti.Data) != ti.Type.RowSize(n) {
				return fmt.Errorf("%s: tensor %s has %d bytes of data, expected %d", l.f.Path, name, len(ti.Data), ti.Type.RowSize(n))
			}
			vec := make([]float32, n)
			kernels.Dequantize(ti.Type, ti.Data, vec)
			v.Field(i).Set(reflect.ValueOf(vec))
		default:
			panic("model: unsupported field type for tensor " + base) // programming error in the tags
		}
	}
	return nil
}

// dims resolves a dims tag such as "embd,q" to sizes.
func (l *loader) dims(tag string) ([]uint64, error) {
	var out []uint64
	for _, sym := range strings.Split(tag, ",") {
		n, err := dimSize(l.cfg, sym)
		if err != nil {
			return nil, err
		}
		out = append(out, uint64(n))
	}
	return out, nil
}

func dimSize(c *Config, sym string) (int, error) {
	switch sym {
	case "embd":
		return c.Embd, nil
	case "vocab":
		return c.Vocab, nil
	case "ff":
		return c.FF, nil
	case "q":
		return c.QDim(), nil
	case "k":
		return c.KDim(), nil
	case "v":
		return c.VDim(), nil
	case "o":
		return c.ODim(), nil
	case "hd":
		return c.HeadDim, nil
	case "rope/2":
		return c.RopeDim / 2, nil
	}
	return 0, fmt.Errorf("unknown dimension %q", sym)
}

// sameDims compares GGML dims, ignoring trailing 1s (a vector may be stored as [n, 1]).
func sameDims(got, want []uint64) bool {
	trim := func(d []uint64) []uint64 {
		for len(d) > 0 && d[len(d)-1] == 1 {
			d = d[:len(d)-1]
		}
		return d
	}
	g, w := trim(got), trim(want)
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		if g[i] != w[i] {
			return false
		}
	}
	return true
}

func supportedTypes() string {
	var names []string
	for t := kernels.Type(0); t < 64; t++ {
		if t.Known() && t.Supported() {
			names = append(names, t.String())
		}
	}
	return strings.Join(names, ", ")
}
