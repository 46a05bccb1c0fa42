package vision

import (
	"fmt"
	"unsafe"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// reader reads an mmproj file's metadata and tensors, keeping the first
// error (one line naming the file) so that a loader reads as a list.
type reader struct {
	f   *gguf.File
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: "+format, append([]any{r.f.Path}, args...)...)
	}
}

// uint reads a required positive integer key.
func (r *reader) uint(key string) int {
	v, ok := r.f.Uint(key)
	if !ok {
		r.fail("missing %s", key)
		return 0
	}
	if v == 0 || v > 1<<24 {
		r.fail("%s is %d", key, v)
		return 0
	}
	return int(v)
}

// float reads a float key, def when absent.
func (r *reader) float(key string, def float32) float32 {
	if v, ok := r.f.Float(key); ok {
		return float32(v)
	}
	return def
}

// triple reads a key holding three floats (image mean or std).
func (r *reader) triple(key string) [3]float32 {
	v, ok := r.f.Float32s(key)
	if !ok || len(v) != 3 {
		r.fail("%s must hold 3 values", key)
		return [3]float32{1, 1, 1}
	}
	return [3]float32(v)
}

// tensor looks up a tensor of the given GGUF dims (innermost first) and a
// type the kernels support; nil when optional and absent.
func (r *reader) tensor(name string, optional bool, dims ...int) *gguf.TensorInfo {
	if r.err != nil {
		return nil
	}
	t, ok := r.f.Tensor(name)
	if !ok {
		if !optional {
			r.fail("missing tensor %s", name)
		}
		return nil
	}
	same := len(t.Dims) == len(dims)
	for i := 0; same && i < len(dims); i++ {
		same = t.Dims[i] == uint64(dims[i])
	}
	if !same {
		r.fail("tensor %s has shape %v, expected %v", name, t.Dims, dims)
		return nil
	}
	if !t.Type.Supported() {
		r.fail("tensor %s has unsupported type %s", name, t.Type)
		return nil
	}
	if err := t.Type.CheckRow(dims[0]); err != nil {
		r.fail("tensor %s: %v", name, err)
		return nil
	}
	return t
}

// floats reads a tensor of the given dims as float32 values.
func (r *reader) floats(name string, optional bool, dims ...int) []float32 {
	t := r.tensor(name, optional, dims...)
	if t == nil {
		return nil
	}
	out := make([]float32, t.Elements())
	kernels.Dequantize(t.Type, t.Data, out)
	return out
}

// vec reads a required vector of n values.
func (r *reader) vec(name string, n int) []float32 { return r.floats(name, false, n) }

// bias reads an optional vector of n values.
func (r *reader) bias(name string, n int) []float32 { return r.floats(name, true, n) }

// matrix reads a weight of GGUF dims [in, out]: out rows of in values,
// multiplied in the file's type.
func (r *reader) matrix(name string, in, out int) *kernels.Matrix {
	t := r.tensor(name, false, in, out)
	if t == nil {
		return nil
	}
	m, err := kernels.NewMatrix(t.Type, out, in, t.Data)
	if err != nil {
		r.fail("tensor %s: %v", name, err)
		return nil
	}
	if m.PackedSize() > 0 {
		r.f.Release(name) // the products read the packed copy
	}
	return m
}

// f16Matrix makes an F16 matrix from float32 rows (rounded to half).
func f16Matrix(v []float32, rows, cols int) (*kernels.Matrix, error) {
	h := make([]uint16, len(v))
	kernels.F32ToF16s(h, v)
	return kernels.NewMatrix(kernels.F16, rows, cols, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h))), 2*len(h)))
}

// transposed reads a float weight stored with GGUF dims [out, in] (row k of
// the file holds the out values input k contributes to) as a matrix of out
// rows of in values, in the file's type (F32, F16 or BF16).
func (r *reader) transposed(name string, out, in int) *kernels.Matrix {
	t := r.tensor(name, false, out, in)
	if t == nil {
		return nil
	}
	size := t.Type.TypeSize()
	if t.Type.BlockSize() != 1 {
		r.fail("tensor %s has type %s; a transposed weight must be F32, F16 or BF16", name, t.Type)
		return nil
	}
	data := make([]byte, len(t.Data))
	for k := range in {
		for o := range out {
			copy(data[(o*in+k)*size:(o*in+k+1)*size], t.Data[(k*out+o)*size:])
		}
	}
	m, err := kernels.NewMatrix(t.Type, out, in, data)
	if err != nil {
		r.fail("tensor %s: %v", name, err)
		return nil
	}
	return m
}
