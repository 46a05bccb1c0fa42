package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unsafe"

	"golang.org/x/sys/unix"

	"mistralrs/internal/kernels"
)

// Metadata value types, numbered as in the GGUF specification.
const (
	typeUint8   = 0
	typeInt8    = 1
	typeUint16  = 2
	typeInt16   = 3
	typeUint32  = 4
	typeInt32   = 5
	typeFloat32 = 6
	typeBool    = 7
	typeString  = 8
	typeArray   = 9
	typeUint64  = 10
	typeInt64   = 11
	typeFloat64 = 12
)

const (
	defaultAlignment = 32
	maxDims          = 4 // GGML_MAX_DIMS
	maxElements      = 1 << 40
	maxNesting       = 8 // arrays of arrays; real files nest at most once
	// Smallest encodings, used to reject counts that cannot fit in what is
	// left of the file before anything is allocated for them.
	minKVSize     = 8 + 4 + 1     // key length, value type, one byte of value
	minTensorSize = 8 + 4 + 4 + 8 // name length, n_dims, type, offset
)

var le = binary.LittleEndian

// fixedSize is the encoded size of each fixed-size value type.
var fixedSize = map[uint32]uint64{
	typeUint8: 1, typeInt8: 1, typeBool: 1, typeUint16: 2, typeInt16: 2,
	typeUint32: 4, typeInt32: 4, typeFloat32: 4, typeUint64: 8, typeInt64: 8, typeFloat64: 8,
}

// decoder reads little-endian values from b with bounds checks. The first
// failure is kept in err; later reads return zero values.
type decoder struct {
	b   []byte
	off uint64
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) remaining() uint64 { return uint64(len(d.b)) - d.off }

func (d *decoder) take(n uint64, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > d.remaining() {
		d.fail("file truncated reading %s at offset %d", what, d.off)
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u32(what string) uint32 {
	if p := d.take(4, what); p != nil {
		return le.Uint32(p)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if p := d.take(8, what); p != nil {
		return le.Uint64(p)
	}
	return 0
}

func (d *decoder) str(what string) string {
	n := d.u64(what)
	if d.err == nil && n > d.remaining() {
		d.fail("%s has length %d, past the end of the file", what, n)
	}
	return string(d.take(n, what))
}

// count reads an element count and checks that n elements of at least
// minSize bytes each fit in the rest of the file.
func (d *decoder) count(minSize uint64, what string) uint64 {
	n := d.u64(what)
	if d.err == nil && n > d.remaining()/minSize {
		d.fail("%s %d cannot fit in the %d bytes left in the file", what, n, d.remaining())
		return 0
	}
	return n
}

// value reads one metadata value of type typ.
func (d *decoder) value(typ uint32, key string) any {
	if typ == typeArray {
		return d.array(key, 0)
	}
	if typ == typeString {
		return d.str("string value of key " + printable(key))
	}
	size, ok := fixedSize[typ]
	if !ok {
		d.fail("key %s has unknown value type %d", printable(key), typ)
		return nil
	}
	p := d.take(size, "value of key "+printable(key))
	if p == nil {
		return nil
	}
	switch typ {
	case typeUint8:
		return p[0]
	case typeInt8:
		return int8(p[0])
	case typeBool:
		return p[0] != 0
	case typeUint16:
		return le.Uint16(p)
	case typeInt16:
		return int16(le.Uint16(p))
	case typeUint32:
		return le.Uint32(p)
	case typeInt32:
		return int32(le.Uint32(p))
	case typeFloat32:
		return math.Float32frombits(le.Uint32(p))
	case typeUint64:
		return le.Uint64(p)
	case typeInt64:
		return int64(le.Uint64(p))
	default: // typeFloat64
		return math.Float64frombits(le.Uint64(p))
	}
}

// array reads an array's element type, count and elements.
func (d *decoder) array(key string, depth int) any {
	what := "array length of key " + printable(key)
	et := d.u32(what)
	if depth >= maxNesting {
		d.fail("key %s nests arrays more than %d deep", printable(key), maxNesting)
	}
	if d.err != nil {
		return nil
	}
	switch et {
	case typeString:
		n := d.count(8, what)
		out := make([]string, n)
		elem := "string in key " + printable(key) // once: vocabularies hold 100k strings
		for i := range out {
			out[i] = d.str(elem)
		}
		return out
	case typeArray:
		n := d.count(12, what)
		out := make([]any, n)
		for i := range out {
			out[i] = d.array(key, depth+1)
		}
		return out
	}
	size, ok := fixedSize[et]
	if !ok {
		d.fail("key %s has arrays of unknown value type %d", printable(key), et)
		return nil
	}
	n := d.count(size, what)
	p := d.take(n*size, what)
	switch et {
	case typeUint8:
		return fill(p, 1, func(p []byte) uint8 { return p[0] })
	case typeInt8:
		return fill(p, 1, func(p []byte) int8 { return int8(p[0]) })
	case typeBool:
		return fill(p, 1, func(p []byte) bool { return p[0] != 0 })
	case typeUint16:
		return fill(p, 2, le.Uint16)
	case typeInt16:
		return fill(p, 2, func(p []byte) int16 { return int16(le.Uint16(p)) })
	case typeUint32:
		return fill(p, 4, le.Uint32)
	case typeInt32:
		return fill(p, 4, func(p []byte) int32 { return int32(le.Uint32(p)) })
	case typeFloat32:
		return fill(p, 4, func(p []byte) float32 { return math.Float32frombits(le.Uint32(p)) })
	case typeUint64:
		return fill(p, 8, le.Uint64)
	case typeInt64:
		return fill(p, 8, func(p []byte) int64 { return int64(le.Uint64(p)) })
	default: // typeFloat64
		return fill(p, 8, func(p []byte) float64 { return math.Float64frombits(le.Uint64(p)) })
	}
}

// fill decodes consecutive size-byte values of p.
func fill[T any](p []byte, size int, dec func([]byte) T) []T {
	out := make([]T, len(p)/size)
	for i := range out {
		out[i] = dec(p[i*size:])
	}
	return out
}

// tensorSize checks a tensor's type and shape and returns its size in bytes.
func tensorSize(t kernels.Type, dims []uint64) (uint64, error) {
	if !t.Known() {
		return 0, fmt.Errorf("unknown type %d", uint32(t))
	}
	if len(dims) > maxDims {
		return 0, fmt.Errorf("has %d dims (at most %d)", len(dims), maxDims)
	}
	n, row := uint64(1), uint64(1)
	for i, d := range dims {
		if d > maxElements || (d != 0 && n > maxElements/d) {
			return 0, fmt.Errorf("has dims %v, more than 2^40 elements", dims)
		}
		n *= d
		if i == 0 {
			row = d
		}
	}
	bs, ts := uint64(t.BlockSize()), uint64(t.TypeSize())
	if row%bs != 0 {
		return 0, fmt.Errorf("row of %d elements is not a multiple of the %s block size %d", row, t, bs)
	}
	if row == 0 {
		return 0, nil
	}
	return row / bs * ts * (n / row), nil
}

// parse decodes a whole GGUF file held in b; name is used in errors. The
// tensors' Data alias b; metadata values are copies.
func parse(name string, b []byte) (*File, error) {
	f, err := parseData(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	f.Path = name
	return f, nil
}

func parseData(b []byte) (*File, error) {
	d := &decoder{b: b}
	if magic := d.take(4, "magic"); magic != nil && string(magic) != "GGUF" {
		return nil, fmt.Errorf("not a GGUF file (magic %q)", magic)
	}
	version := d.u32("version")
	if d.err == nil && version != 2 && version != 3 {
		switch {
		case version == 1:
			return nil, errors.New("unsupported version 1 (GGUF v1 is obsolete; convert the model again)")
		case bits.ReverseBytes32(version) == 2 || bits.ReverseBytes32(version) == 3:
			return nil, errors.New("big-endian GGUF files are not supported")
		default:
			return nil, fmt.Errorf("unsupported version %d", version)
		}
	}
	nTensors := d.count(minTensorSize, "tensor count")
	nKV := d.count(minKVSize, "metadata count")
	f := &File{Version: version, KV: make([]KV, 0, nKV)}
	seen := make(map[string]bool, nKV)
	for i := uint64(0); i < nKV && d.err == nil; i++ {
		key := d.str("metadata key")
		v := d.value(d.u32("value type of key "+printable(key)), key)
		if d.err == nil && seen[key] {
			return nil, fmt.Errorf("duplicate metadata key %s", printable(key))
		}
		seen[key] = true
		f.KV = append(f.KV, KV{key, v})
	}
	if d.err != nil {
		return nil, d.err
	}
	align := uint64(defaultAlignment)
	if v, ok := f.Get("general.alignment"); ok {
		a, ok := v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("general.alignment %v (%T) is not a power of two as uint32", v, v)
		}
		align = uint64(a)
	}

	f.Tensors = make([]TensorInfo, nTensors)
	f.tensorIndex = make(map[string]int, nTensors)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		t.Name = d.str("tensor name")
		what := "tensor " + printable(t.Name)
		nd := d.u32(what)
		if d.err == nil && nd > maxDims {
			return nil, fmt.Errorf("%s has %d dims (at most %d)", what, nd, maxDims)
		}
		t.Dims = make([]uint64, nd)
		for j := range t.Dims {
			t.Dims[j] = d.u64(what)
		}
		t.Type = kernels.Type(d.u32(what))
		t.Offset = d.u64(what)
		if d.err != nil {
			return nil, d.err
		}
		if _, dup := f.tensorIndex[t.Name]; dup {
			return nil, fmt.Errorf("duplicate tensor name %s", printable(t.Name))
		}
		f.tensorIndex[t.Name] = i
	}

	// The data section starts at the next multiple of the alignment.
	start := (d.off + align - 1) / align * align
	if nTensors > 0 && start > uint64(len(b)) {
		return nil, fmt.Errorf("data section starts at %d, past the end of the file (%d bytes)", start, len(b))
	}
	data := b[min(start, uint64(len(b))):]
	for i := range f.Tensors {
		t := &f.Tensors[i]
		size, err := tensorSize(t.Type, t.Dims)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %v", printable(t.Name), err)
		}
		if t.Offset%align != 0 {
			return nil, fmt.Errorf("tensor %s offset %d is not a multiple of the alignment %d", printable(t.Name), t.Offset, align)
		}
		if t.Offset > uint64(len(data)) || size > uint64(len(data))-t.Offset {
			return nil, fmt.Errorf("tensor %s data ends past end of file", printable(t.Name))
		}
		end := t.Offset + size
		t.Data = data[t.Offset:end:end] // capped: appends must never write into the map
	}
	return f, nil
}

// printable returns s, quoted when it is empty or holds characters that
// would break a one-line error message.
func printable(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || r == ' ' }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// Open memory-maps a GGUF file read-only and parses its header. A name
// ending in -NNNNN-of-MMMMM.gguf opens all MMMMM shards as one File.
func Open(path string) (*File, error) {
	if m := shardName.FindStringSubmatch(path); m != nil {
		no, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		if no < 1 || no > n {
			return nil, fmt.Errorf("%s: shard number %d is not between 1 and %d", path, no, n)
		}
		if n > 1 {
			return openShards(m[1], n)
		}
	}
	f, err := openOne(path)
	if err != nil {
		return nil, err
	}
	if n, ok := f.Uint("split.count"); ok && n > 1 {
		f.Close()
		return nil, fmt.Errorf("%s: file is shard of a %d-way split but its name does not end in -00001-of-%05d.gguf", path, n, n)
	}
	return f, nil
}

var shardName = regexp.MustCompile(`^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

func shardPath(prefix string, no, n int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, no, n)
}

// openShards opens prefix-00001-of-n.gguf ... and merges their tensors.
// Each tensor's Data points into its own shard's map.
func openShards(prefix string, n int) (*File, error) {
	var all *File
	fail := func(err error) (*File, error) {
		if all != nil {
			all.Close()
		}
		return nil, err
	}
	for no := 1; no <= n; no++ {
		path := shardPath(prefix, no, n)
		f, err := openOne(path)
		if errors.Is(err, fs.ErrNotExist) {
			return fail(fmt.Errorf("%s: shard %d of %d is missing", path, no, n))
		}
		if err != nil {
			return fail(err)
		}
		if all == nil {
			all = f
		} else {
			all.maps = append(all.maps, f.maps...)
			all.mapped = append(all.mapped, f.mapped...)
		}
		if v, ok := f.Uint("split.no"); ok && v != uint64(no-1) {
			return fail(fmt.Errorf("%s: split.no is %d, expected %d", path, v, no-1))
		}
		if v, ok := f.Uint("split.count"); ok && v != uint64(n) {
			return fail(fmt.Errorf("%s: split.count is %d, expected %d", path, v, n))
		}
		if f == all {
			continue
		}
		for _, t := range f.Tensors {
			if _, dup := all.tensorIndex[t.Name]; dup {
				return fail(fmt.Errorf("%s: tensor %s is also in an earlier shard", path, printable(t.Name)))
			}
			all.tensorIndex[t.Name] = len(all.Tensors)
			all.Tensors = append(all.Tensors, t)
		}
	}
	if v, ok := all.Uint("split.tensors.count"); ok && v != uint64(len(all.Tensors)) {
		return fail(fmt.Errorf("%s: split.tensors.count is %d but the shards hold %d tensors", all.Path, v, len(all.Tensors)))
	}
	return all, nil
}

// openOne maps one file and parses it.
func openOne(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory", path)
	}
	size := st.Size()
	if size == 0 {
		return parse(path, nil) // mmap rejects empty files; parse reports the truncation
	}
	if size != int64(int(size)) {
		return nil, fmt.Errorf("%s: file too large to map (%d bytes)", path, size)
	}
	m, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %v", path, err)
	}
	f, err := parse(path, m)
	if err != nil {
		munmap(m)
		return nil, err
	}
	f.maps = [][]byte{m}
	f.mapped = []*mapping{track(path, st, m)}
	return f, nil
}

func munmap(m []byte) error { return unix.Munmap(m) }

// Release hands the whole pages of tensor name's mapped bytes back to the
// kernel (madvise MADV_DONTNEED), for a tensor whose products read a copy
// (packed weights): they leave the process's resident memory and are read
// from the file again only if the tensor is touched later (an embedding
// lookup reads a row). Tensors that are not inside a mapping (a file
// parsed from memory, tensors replaced in memory) are left alone.
func (f *File) Release(name string) {
	t, ok := f.Tensor(name)
	if !ok || len(t.Data) == 0 {
		return
	}
	page := uintptr(unix.Getpagesize())
	start := uintptr(unsafe.Pointer(&t.Data[0]))
	end := start + uintptr(len(t.Data))
	for _, m := range f.maps {
		if len(m) == 0 {
			continue
		}
		m0 := uintptr(unsafe.Pointer(&m[0]))
		if start < m0 || end > m0+uintptr(len(m)) {
			continue
		}
		lo, hi := (start-m0+page-1)/page*page, (end-m0)/page*page
		if lo < hi {
			_ = unix.Madvise(m[lo:hi], unix.MADV_DONTNEED) // advice: on failure the pages just stay
		}
		t.Released = true
		return
	}
}

// splitSuffix matches a split file's name in any letter case, for naming.
var splitSuffix = regexp.MustCompile(`(?i)^(.*)-\d{5}-of-\d{5}\.gguf$`)

// ModelName names a model after its file: "dir/Qwen3-0.6B-Q8_0.gguf" →
// "Qwen3-0.6B-Q8_0"; a split model drops its "-00001-of-00003" suffix.
func ModelName(path string) string {
	base := filepath.Base(path)
	if sm := splitSuffix.FindStringSubmatch(base); sm != nil {
		return sm[1]
	}
	return strings.TrimSuffix(base, filepath.Ext(base))
}
