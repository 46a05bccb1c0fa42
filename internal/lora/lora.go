// Package lora reads LoRA adapters — llama.cpp's GGUF adapter files and
// Hugging Face PEFT folders — and resolves them against a loaded base
// model into an nn.Adapter: the low-rank pairs keyed by the base model's
// matrices, which the forward pass applies per sequence (nn.Step.MatMul).
// An adapter is never merged into the weights, so sequences with different
// adapters, and none, share the base model and a batch.
package lora

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
	"mistralrs/internal/model/nn"
)

// Limits bounds what Load accepts.
type Limits struct {
	MaxRank  int   // 0: no limit
	MaxBytes int64 // 0: no limit (the adapter's own tensors, as loaded)
}

// Adapter is a loaded adapter, resolved against one base model.
type Adapter struct {
	Net     *nn.Adapter // the pairs, keyed by the base model's matrices
	Path    string      // the file or folder it was read from
	Format  string      // "gguf" or "peft"
	Rank    int         // the largest rank of its pairs
	Alpha   float32     // 0: none given
	Bytes   int64       // memory its tensors take (with the transposed copies of B the decode steps read)
	Targets []string    // GGUF names of the adapted weights, sorted
}

// Load reads source — a llama.cpp GGUF adapter file, a folder holding one,
// or a PEFT folder (adapter_config.json + adapter_model.safetensors, or
// one of these two files) — and
// resolves it against base. Errors are one line naming the file (and the
// tensor): another architecture, a tensor the base lacks, shapes that
// differ, a rank or size over the limits, a corrupt file.
func Load(source string, base *model.Model, lim Limits) (*Adapter, error) {
	if base == nil {
		return nil, fmt.Errorf("%s: no base model to resolve the adapter against", source)
	}
	st, err := os.Stat(source)
	if err != nil {
		return nil, fmt.Errorf("lora adapter: %v", err)
	}
	if !st.IsDir() {
		if name := filepath.Base(source); name == peftConfig || strings.HasSuffix(name, ".safetensors") {
			return loadPEFT(filepath.Dir(source), base, lim) // a file of a PEFT folder: the folder
		}
		return loadGGUF(source, base, lim)
	}
	if _, err := os.Stat(filepath.Join(source, peftConfig)); err == nil {
		return loadPEFT(source, base, lim)
	}
	ggufs, _ := filepath.Glob(filepath.Join(source, "*.gguf"))
	switch len(ggufs) {
	case 1:
		return loadGGUF(ggufs[0], base, lim)
	case 0:
		return nil, fmt.Errorf("%s: no LoRA adapter in the folder (neither %s nor a .gguf file)", source, peftConfig)
	}
	return nil, fmt.Errorf("%s: %d .gguf files in the folder; name the adapter file", source, len(ggufs))
}

// tensor is one adapter tensor as read from its file: its type, its GGML
// dims (dims[0] the row width) and its bytes (not yet copied).
type tensor struct {
	name string
	typ  kernels.Type
	dims [2]int
	data []byte                 // nil: read by read when the tensor is copied
	read func() ([]byte, error) // reads the tensor's bytes (safetensors)
	// heads > 0: the rows are permuted as llama.cpp's converter permutes a
	// llama q or k weight for its rotary pairing, in heads heads.
	heads int
}

// pair is an adapter's pair for one base weight, by its GGUF name, and
// the alpha that scales it (0: none).
type pair struct {
	target string
	a, b   tensor
	alpha  float32
	rslora bool // PEFT's use_rslora: alpha / sqrt(rank)
	rank   int  // the rank PEFT's config gives (0: none)
}

// resolver turns the pairs read from file into an Adapter against base,
// checking shapes and limits before any tensor is copied.
type resolver struct {
	file string // the file the errors name
	base *model.Model
	lim  Limits
}

func (r *resolver) errorf(t string, format string, args ...any) error {
	return fmt.Errorf("%s: tensor %s: %s", r.file, t, fmt.Sprintf(format, args...))
}

// resolve checks every pair against the base's weight of its name (lora_a
// [n_in, r], lora_b [r, n_out]) and the limits, then copies the tensors.
func (r *resolver) resolve(ad *Adapter, pairs []pair) error {
	if len(pairs) == 0 {
		return fmt.Errorf("%s: the adapter has no LoRA tensors", r.file)
	}
	type checked struct {
		p pair
		w *kernels.Matrix
	}
	var ok []checked
	var bytes int64
	for _, p := range pairs {
		w, found := r.base.Weight(p.target)
		if !found {
			return r.errorf(p.a.name, "the base model (%s) has no weight %s that an adapter can adapt", r.base.Config.Arch, p.target)
		}
		nIn, nOut := w.Cols, w.Rows
		if p.a.dims[0] != nIn || p.b.dims[1] != nOut {
			return r.errorf(p.a.name, "shape lora_a %v / lora_b %v does not fit the base weight %s [%d, %d] (hint: maybe the adapter is not transposed)",
				p.a.dims, p.b.dims, p.target, nIn, nOut)
		}
		if p.a.dims[1] != p.b.dims[0] {
			return r.errorf(p.a.name, "lora_a has rank %d but lora_b %d (lora_a is not transposed?)", p.a.dims[1], p.b.dims[0])
		}
		rank := p.b.dims[0]
		if r.lim.MaxRank > 0 && rank > r.lim.MaxRank {
			return r.errorf(p.b.name, "rank %d is over the limit of %d", rank, r.lim.MaxRank)
		}
		bytes += loadedBytes(p.a) + loadedBytes(p.b) + transposedBytes(p.b)
		if r.lim.MaxBytes > 0 && bytes > r.lim.MaxBytes {
			return fmt.Errorf("%s: the adapter's tensors take more than the limit of %d bytes (at tensor %s)", r.file, r.lim.MaxBytes, p.b.name)
		}
		ok = append(ok, checked{p, w})
	}
	ad.Net = &nn.Adapter{Deltas: make(map[*kernels.Matrix]nn.LowRank, len(ok))}
	for _, c := range ok {
		if _, dup := ad.Net.Deltas[c.w]; dup {
			return r.errorf(c.p.a.name, "a second pair for %s", c.p.target)
		}
		a, err := r.matrix(c.p.a)
		if err != nil {
			return err
		}
		b, err := r.matrix(c.p.b)
		if err != nil {
			return err
		}
		rank := c.p.b.dims[0]
		bt := transposed(b)
		ad.Net.Deltas[c.w] = nn.LowRank{A: a, B: b, Rank: rank, Scale: pairScale(c.p.alpha, rank, c.p.rslora), BT: bt}
		ad.Rank = max(ad.Rank, rank)
		ad.Bytes += int64(len(a.Data)+len(b.Data)+4*len(bt)) + int64(a.PackedSize()+b.PackedSize())
		ad.Targets = append(ad.Targets, c.p.target)
	}
	if r.lim.MaxBytes > 0 && ad.Bytes > r.lim.MaxBytes { // the packed copies some instruction paths make count too
		return fmt.Errorf("%s: the adapter's tensors take %d bytes in memory, over the limit of %d bytes", r.file, ad.Bytes, r.lim.MaxBytes)
	}
	slices.Sort(ad.Targets)
	return nil
}

// pairScale is alpha / rank (alpha / sqrt(rank) for rsLoRA), or 1 when the
// adapter gives no alpha, as llama.cpp and PEFT scale a pair.
func pairScale(alpha float32, rank int, rslora bool) float32 {
	switch {
	case alpha == 0:
		return 1
	case rslora:
		return alpha / float32(math.Sqrt(float64(rank)))
	}
	return alpha / float32(rank)
}

// transposedBytes is what the float32 copy of a pair's B transposed
// takes (nn.LowRank.BT; none for a quantized B).
func transposedBytes(b tensor) int64 {
	if b.typ != kernels.F32 && b.typ != kernels.F16 && b.typ != kernels.BF16 {
		return 0
	}
	return 4 * int64(b.dims[0]) * int64(b.dims[1])
}

// loadedBytes is what a tensor takes once loaded (BF16 becomes F32).
func loadedBytes(t tensor) int64 {
	typ := t.typ
	if typ == kernels.BF16 {
		typ = kernels.F32
	}
	return int64(t.dims[1]) * int64(typ.RowSize(t.dims[0]))
}

// matrix copies t into a matrix of its own memory (dims[1] rows of
// dims[0] values; BF16 widened to F32), so that the file can be closed.
func (r *resolver) matrix(t tensor) (*kernels.Matrix, error) {
	rows, cols := t.dims[1], t.dims[0]
	if t.data == nil {
		var err error
		if t.data, err = t.read(); err != nil {
			return nil, r.errorf(t.name, "%v", err)
		}
	}
	if t.heads > 0 {
		var err error
		if t.data, err = permuteRows(t.data, rows, t.heads); err != nil {
			return nil, r.errorf(t.name, "%v", err)
		}
	}
	var data []byte
	if t.typ == kernels.BF16 {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = kernels.BF16ToFP32(uint16(t.data[2*i]) | uint16(t.data[2*i+1])<<8)
		}
		data = f32Bytes(v)
		t.typ = kernels.F32
	} else {
		// 8-byte aligned memory, as the kernels' typed views of a row expect.
		words := make([]uint64, (len(t.data)+7)/8)
		data = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)[:len(t.data)]
		copy(data, t.data)
	}
	m, err := kernels.NewMatrix(t.typ, rows, cols, data)
	if err != nil {
		return nil, r.errorf(t.name, "%v", strings.TrimPrefix(err.Error(), "kernels: "))
	}
	return m, nil
}

// transposed is B's values in float32, Rank rows of its outputs (see
// nn.LowRank.BT); nil for a quantized B, which the products read as it is.
func transposed(b *kernels.Matrix) []float32 {
	if b.Type != kernels.F32 && b.Type != kernels.F16 {
		return nil
	}
	out, rank := b.Rows, b.Cols
	row := make([]float32, rank)
	bt := make([]float32, rank*out)
	for o := range out {
		b.Row(o, row)
		for k, v := range row {
			bt[k*out+o] = v
		}
	}
	return bt
}

func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}
