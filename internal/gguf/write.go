package gguf

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"mistralrs/internal/kernels"
)

// Writer builds a GGUF v3 file. Tensor data is aligned to 32 bytes, or to
// general.alignment when it is set as a uint32.
type Writer struct {
	kv      []KV
	tensors []wtensor
	names   map[string]bool
}

type wtensor struct {
	name string
	typ  kernels.Type
	dims []uint64
	data []byte
}

// NewWriter returns an empty writer.
func NewWriter() *Writer { return &Writer{names: map[string]bool{}} }

// AddKV sets a metadata value (see KV for the Go types allowed). Keys keep
// the order of their first addition; setting a key again replaces its value.
// A value of another type is reported by WriteTo.
func (w *Writer) AddKV(key string, value any) {
	for i := range w.kv {
		if w.kv[i].Key == key {
			w.kv[i].Value = value
			return
		}
	}
	w.kv = append(w.kv, KV{key, value})
}

// AddTensor adds a tensor whose encoded bytes are data. The data is not
// copied; it must stay unchanged until the file is written.
func (w *Writer) AddTensor(name string, t kernels.Type, dims []uint64, data []byte) error {
	size, err := tensorSize(t, dims)
	if err != nil {
		return fmt.Errorf("tensor %s: %v", printable(name), err)
	}
	if uint64(len(data)) != size {
		return fmt.Errorf("tensor %s: %d bytes of data, %s %v needs %d", printable(name), len(data), t, dims, size)
	}
	if w.names[name] {
		return fmt.Errorf("duplicate tensor name %s", printable(name))
	}
	w.names[name] = true
	w.tensors = append(w.tensors, wtensor{name, t, append([]uint64(nil), dims...), data})
	return nil
}

// AddTensorF32 encodes values, in GGML order (Dims[0] varies fastest), as
// type t with kernels.Quantize and adds the result.
func (w *Writer) AddTensorF32(name string, t kernels.Type, dims []uint64, values []float32) error {
	size, err := tensorSize(t, dims)
	if err != nil {
		return fmt.Errorf("tensor %s: %v", printable(name), err)
	}
	if n := (&TensorInfo{Dims: dims}).Elements(); uint64(len(values)) != n {
		return fmt.Errorf("tensor %s: %d values, dims %v need %d", printable(name), len(values), dims, n)
	}
	if !t.Supported() {
		return fmt.Errorf("tensor %s: cannot encode type %s", printable(name), t)
	}
	data := make([]byte, size)
	kernels.Quantize(t, values, data)
	return w.AddTensor(name, t, dims, data)
}

// WriteTo writes the file.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	return write(out, w.kv, w.tensors)
}

// WriteFile writes the file at path.
func (w *Writer) WriteFile(path string) error {
	return writeFile(path, w.kv, w.tensors)
}

// WriteShards splits the tensors, in order, over n files named
// prefix-00001-of-0000n.gguf and so on, as llama.cpp's gguf-split does: the
// first file holds all metadata, and every file holds split.no, split.count
// and split.tensors.count. It returns the paths written.
func (w *Writer) WriteShards(prefix string, n int) ([]string, error) {
	if n < 1 || n > 99999 || n > max(1, len(w.tensors)) {
		return nil, fmt.Errorf("%s: cannot split %d tensors into %d shards", prefix, len(w.tensors), n)
	}
	var paths []string
	for i := range n {
		split := []KV{
			{"split.no", uint16(i)},
			{"split.count", uint16(n)},
			{"split.tensors.count", int32(len(w.tensors))},
		}
		var kv []KV
		if i == 0 {
			for _, e := range w.kv {
				if !strings.HasPrefix(e.Key, "split.") {
					kv = append(kv, e)
				}
			}
		} else if a, ok := (&File{KV: w.kv}).Get("general.alignment"); ok {
			kv = append(kv, KV{"general.alignment", a}) // every shard's data uses it
		}
		path := shardPath(prefix, i+1, n)
		lo, hi := i*len(w.tensors)/n, (i+1)*len(w.tensors)/n
		if err := writeFile(path, append(kv, split...), w.tensors[lo:hi]); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func writeFile(path string, kv []KV, tensors []wtensor) error {
	fd, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = write(fd, kv, tensors)
	if cerr := fd.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}

func write(out io.Writer, kv []KV, tensors []wtensor) (int64, error) {
	align := uint64(defaultAlignment)
	if v, ok := (&File{KV: kv}).Get("general.alignment"); ok {
		a, ok := v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return 0, fmt.Errorf("general.alignment %v (%T) is not a power of two as uint32", v, v)
		}
		align = uint64(a)
	}
	padding := func(n uint64) uint64 { return (align - n%align) % align }

	h := []byte("GGUF")
	h = le.AppendUint32(h, 3)
	h = le.AppendUint64(h, uint64(len(tensors)))
	h = le.AppendUint64(h, uint64(len(kv)))
	for _, e := range kv {
		h = appendString(h, e.Key)
		pos := len(h)
		h = le.AppendUint32(h, 0) // the value type, known once the value is encoded
		var typ uint32
		var err error
		if h, typ, err = appendValue(h, e.Value); err != nil {
			return 0, fmt.Errorf("key %s: %v", printable(e.Key), err)
		}
		le.PutUint32(h[pos:], typ)
	}
	var off uint64
	for _, t := range tensors {
		h = appendString(h, t.name)
		h = le.AppendUint32(h, uint32(len(t.dims)))
		for _, d := range t.dims {
			h = le.AppendUint64(h, d)
		}
		h = le.AppendUint32(h, uint32(t.typ))
		h = le.AppendUint64(h, off)
		off += uint64(len(t.data)) + padding(uint64(len(t.data)))
	}
	hpad := uint64(0)
	if len(tensors) > 0 { // like gguf-py, which leaves vocab-only files unpadded
		hpad = padding(uint64(len(h)))
	}

	cw := &countWriter{w: out}
	cw.Write(h)
	cw.zeros(hpad)
	for _, t := range tensors {
		cw.Write(t.data)
		cw.zeros(padding(uint64(len(t.data))))
	}
	return cw.n, cw.err
}

// countWriter counts bytes written and keeps the first error, after which
// it writes nothing.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

var zeroBlock [4096]byte

// zeros writes n zero bytes without allocating them: alignments may be large.
func (c *countWriter) zeros(n uint64) {
	for n > 0 && c.err == nil {
		k := min(n, uint64(len(zeroBlock)))
		c.Write(zeroBlock[:k])
		n -= k
	}
}

func appendString(b []byte, s string) []byte {
	return append(le.AppendUint64(b, uint64(len(s))), s...)
}

// appendValue appends the encoding of v, without its type, and returns the
// type.
func appendValue(b []byte, v any) ([]byte, uint32, error) {
	switch x := v.(type) {
	case uint8:
		return append(b, x), typeUint8, nil
	case int8:
		return append(b, byte(x)), typeInt8, nil
	case bool:
		if x {
			return append(b, 1), typeBool, nil
		}
		return append(b, 0), typeBool, nil
	case uint16:
		return le.AppendUint16(b, x), typeUint16, nil
	case int16:
		return le.AppendUint16(b, uint16(x)), typeInt16, nil
	case uint32:
		return le.AppendUint32(b, x), typeUint32, nil
	case int32:
		return le.AppendUint32(b, uint32(x)), typeInt32, nil
	case float32:
		return le.AppendUint32(b, math.Float32bits(x)), typeFloat32, nil
	case uint64:
		return le.AppendUint64(b, x), typeUint64, nil
	case int64:
		return le.AppendUint64(b, uint64(x)), typeInt64, nil
	case float64:
		return le.AppendUint64(b, math.Float64bits(x)), typeFloat64, nil
	case string:
		return appendString(b, x), typeString, nil
	case []uint8:
		return appendArray(b, typeUint8, x)
	case []int8:
		return appendArray(b, typeInt8, x)
	case []bool:
		return appendArray(b, typeBool, x)
	case []uint16:
		return appendArray(b, typeUint16, x)
	case []int16:
		return appendArray(b, typeInt16, x)
	case []uint32:
		return appendArray(b, typeUint32, x)
	case []int32:
		return appendArray(b, typeInt32, x)
	case []float32:
		return appendArray(b, typeFloat32, x)
	case []uint64:
		return appendArray(b, typeUint64, x)
	case []int64:
		return appendArray(b, typeInt64, x)
	case []float64:
		return appendArray(b, typeFloat64, x)
	case []string:
		return appendArray(b, typeString, x)
	case []any:
		b, _, err := appendArray(b, typeArray, x)
		return b, typeArray, err
	}
	return b, 0, fmt.Errorf("unsupported value type %T", v)
}

// appendArray appends an array of elements of type et.
func appendArray[T any](b []byte, et uint32, s []T) ([]byte, uint32, error) {
	b = le.AppendUint32(b, et)
	b = le.AppendUint64(b, uint64(len(s)))
	for _, e := range s {
		var typ uint32
		var err error
		if b, typ, err = appendValue(b, e); err != nil {
			return b, 0, err
		}
		if typ != et {
			return b, 0, errors.New("an array of arrays holds a value that is not an array")
		}
	}
	return b, typeArray, nil
}
