package nn

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// Load fills the tagged fields of the struct *v from f's tensors, those of
// its untagged struct fields (sub-layers), and those of each element of a
// slice field tagged `gguf:"blk"` (the blocks) with the prefix "blk.N.". A field's tag is its tensor name
// (",optional": may be absent, left nil; ",tied": see Embeddings) and `dims` its expected shape in
// GGML order by symbolic name (see Dim); `rand` is for WriteRandom. Field types: *kernels.Matrix (a
// matrix viewing the mapped data), []float32 (a vector, dequantized),
// []*kernels.Matrix (a 3-D tensor: one matrix per index of the last
// dimension, as experts are stored). required names optional tensors that
// this architecture needs.
func Load(f *gguf.File, c *Config, v any, required ...string) error {
	l := loader{f: f, cfg: c, required: map[string]bool{}}
	for _, name := range required {
		l.required[name] = true
	}
	if err := l.load(reflect.ValueOf(v).Elem(), ""); err != nil {
		return err
	}
	if e, ok := v.(interface{ tie(*Config) }); ok {
		e.tie(c)
	}
	return nil
}

// Embeddings is the token embedding and the output end of a decoder: the
// final norm and the output matrix, which is the embedding matrix itself
// (tied) when the file has no output.weight. Architectures embed it first
// in their weights, so that tying is declared here only: the loader ties,
// WriteRandom leaves out the tensors tagged ",tied" when
// RandomConfig.Tied.
type Embeddings struct {
	TokEmbd    *kernels.Matrix `gguf:"token_embd.weight,lookup=output.weight" dims:"embd,vocab" rand:"bound=1"`
	OutputNorm []float32       `gguf:"output_norm.weight" dims:"embd"`
	Output     *kernels.Matrix `gguf:"output.weight,tied" dims:"embd,vocab"`
}

func (e *Embeddings) tie(c *Config) {
	if e.Output == nil {
		e.Output = e.TokEmbd
		c.TiedOutput = true
	}
}

type loader struct {
	f        *gguf.File
	cfg      *Config
	required map[string]bool // optional tensors the architecture requires
}

var (
	matrixType   = reflect.TypeOf((*kernels.Matrix)(nil))
	vectorType   = reflect.TypeOf([]float32(nil))
	matricesType = reflect.TypeOf([]*kernels.Matrix(nil))
)

func (l *loader) load(v reflect.Value, prefix string) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		field := t.Field(i)
		tag, ok := field.Tag.Lookup("gguf")
		if !ok {
			if field.Type.Kind() == reflect.Struct && field.IsExported() { // a sub-layer
				if err := l.load(v.Field(i), prefix); err != nil {
					return err
				}
			}
			continue
		}
		if tag == "blk" { // per-layer structs
			layers := reflect.MakeSlice(field.Type, l.cfg.Layers, l.cfg.Layers)
			for n := range l.cfg.Layers {
				if err := l.load(layers.Index(n), "blk."+strconv.Itoa(n)+"."); err != nil {
					return err
				}
			}
			v.Field(i).Set(layers)
			continue
		}
		base, opts, _ := strings.Cut(tag, ",")
		optional := (opts == "optional" || opts == "tied") && !l.required[base]
		name := prefix + base
		ti, ok := l.f.Tensor(name)
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("%s: missing tensor %s (architecture %s)", l.f.Path, name, l.cfg.Arch)
		}
		want, err := tagDims(l.cfg, field.Tag.Get("dims"))
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
		case matrixType:
			newMatrix := kernels.NewMatrix
			// "lookup=T": rows only looked up where the file has tensor T
			// (the embedding table, when the output matrix is its own): no
			// packed copy, which only products would read.
			if o, ok := strings.CutPrefix(opts, "lookup="); ok {
				if _, untied := l.f.Tensor(o); untied {
					newMatrix = kernels.NewLookupMatrix
				}
			}
			mat, err := newMatrix(ti.Type, int(want[1]), int(want[0]), ti.Data)
			if err != nil {
				return fmt.Errorf("%s: tensor %s: %v", l.f.Path, name, err)
			}
			l.packed(name, mat)
			v.Field(i).Set(reflect.ValueOf(mat))
		case matricesType:
			if len(want) != 3 {
				panic("nn: a []*kernels.Matrix field needs three dims: " + base) // programming error in the tags
			}
			in, out, n := int(want[0]), int(want[1]), int(want[2])
			if err := ti.Type.CheckRow(in); err != nil {
				return fmt.Errorf("%s: tensor %s: %v", l.f.Path, name, err)
			}
			size := ti.Type.RowSize(in) * out
			if len(ti.Data) != size*n {
				return fmt.Errorf("%s: tensor %s has %d bytes of data, expected %d", l.f.Path, name, len(ti.Data), size*n)
			}
			mats := make([]*kernels.Matrix, n)
			for e := range mats {
				if mats[e], err = kernels.NewMatrix(ti.Type, out, in, ti.Data[e*size:(e+1)*size]); err != nil {
					return fmt.Errorf("%s: tensor %s: %v", l.f.Path, name, err)
				}
			}
			l.packed(name, mats...)
			v.Field(i).Set(reflect.ValueOf(mats))
		case vectorType:
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
			panic("nn: unsupported field type for tensor " + base) // programming error in the tags
		}
	}
	return nil
}

// packed counts the packed copies of tensor name's matrices (made by
// NewMatrix on an instruction path that reads packed weights) and hands
// the tensor's mapped pages back: the products read the copies, so the
// weights are in memory once.
func (l *loader) packed(name string, mats ...*kernels.Matrix) {
	n := 0
	for _, m := range mats {
		n += m.PackedSize()
	}
	if n > 0 {
		l.cfg.PackedBytes += int64(n)
		l.f.Release(name)
	}
}

// tagDims resolves a dims tag such as "embd,q" to sizes.
func tagDims(c *Config, tag string) ([]uint64, error) {
	var out []uint64
	for _, sym := range strings.Split(tag, ",") {
		n, err := Dim(c, sym)
		if err != nil {
			return nil, err
		}
		out = append(out, uint64(n))
	}
	return out, nil
}

// Dim is the size a dims-tag symbol stands for.
func Dim(c *Config, sym string) (int, error) {
	switch sym {
	case "embd":
		return c.Embd, nil
	case "vocab":
		return c.Vocab, nil
	case "ff":
		return c.FF, nil
	case "2ff": // gate and up fused (phi3)
		return 2 * c.FF, nil
	case "q":
		return c.QDim(), nil
	case "k":
		return c.KDim(), nil
	case "v":
		return c.VDim(), nil
	case "qkv": // q, k and v fused (phi3)
		return c.QDim() + c.KDim() + c.VDim(), nil
	case "o":
		return c.ODim(), nil
	case "hd":
		return c.HeadDim, nil
	case "rope/2":
		return c.RopeDim / 2, nil
	case "experts":
		return c.Experts, nil
	case "expff":
		return c.ExpertFF, nil
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

// Matrices returns the matrices of the loaded weights v (a pointer to the
// struct nn.Load filled) by their GGUF tensor names, walking the same
// tags as Load: the fields of type *kernels.Matrix that the file had
// (absent optional ones are nil and left out; a tied output is the
// embedding's matrix under its own name only). 3-D tensors (experts) are
// not matrices of one product and are left out.
func Matrices(v any) map[string]*kernels.Matrix {
	out := map[string]*kernels.Matrix{}
	seen := map[*kernels.Matrix]bool{}
	walkMatrices(reflect.ValueOf(v).Elem(), "", out, seen)
	return out
}

func walkMatrices(v reflect.Value, prefix string, out map[string]*kernels.Matrix, seen map[*kernels.Matrix]bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		field := t.Field(i)
		tag, ok := field.Tag.Lookup("gguf")
		switch {
		case !ok:
			if field.Type.Kind() == reflect.Struct && field.IsExported() {
				walkMatrices(v.Field(i), prefix, out, seen)
			}
		case tag == "blk":
			layers := v.Field(i)
			for n := range layers.Len() {
				walkMatrices(layers.Index(n), "blk."+strconv.Itoa(n)+".", out, seen)
			}
		case field.Type == matrixType:
			m := v.Field(i).Interface().(*kernels.Matrix)
			if m == nil || seen[m] {
				continue
			}
			seen[m] = true
			base, _, _ := strings.Cut(tag, ",")
			out[prefix+base] = m
		}
	}
}
