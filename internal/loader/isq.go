package loader

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// In-situ quantization (ISQ, --isq) and the recipes of `mistralrs quantize`.
//
// Which type each tensor gets follows llama.cpp's llama-quantize (its
// defaults, without --pure, --imatrix or type overrides):
//
//   - only weights are converted: tensors of two or more dimensions whose name
//     ends in "weight", but not norms ("_norm.weight"), MoE routers
//     ("ffn_gate_inp.weight") and a few small tensors llama.cpp also keeps;
//     vectors (norm gains, biases) are never touched;
//   - output.weight (or, with tied embeddings, token_embd.weight, which then
//     is the output matrix) gets Q6_K, or Q8_0 when the target is Q8_0 or its
//     rows do not fit the target's blocks;
//   - token_embd.weight otherwise gets the target type;
//   - the mixtures add llama.cpp's per-layer rules: Q4_K_M and Q5_K_M give
//     attn_v and ffn_down Q6_K in the layers its use_more_bits rule picks
//     (the first and last eighth, and every third layer between), Q4_K_S
//     gives Q5_K to the first four attn_v and the first eighth of ffn_down;
//     models with 8 experts get Q8_0 attn_v and attn_k (and Q5_K attn_output
//     for Q4_K_S/M), 80-layer GQA llamas (70B) Q5_K attn_v for Q4_K;
//   - a row that does not fit a type's blocks falls back as llama.cpp does:
//     Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, anything else to F16.
//
// An ISQ type is a plain scheme: the rules above without the mixtures (q4_0,
// q4_1, q5_0, q5_1, q8_0 and q6k are exactly llama-quantize's Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0 and Q6_K; q5k is its Q5_K_S; q4k is Q4_K_S without the
// first-layer bumps).

// Scheme is a quantization recipe: a base type and, for llama.cpp's
// mixtures, its per-tensor rules.
type Scheme struct {
	Name     string       // as given in llama.cpp's or mistral.rs's spelling: "Q4_K_M", "Q4K"
	Type     kernels.Type // the base type
	FileType uint32       // general.file_type as llama.cpp numbers it (llama_ftype)
	mix      string       // "", or the mixture: "Q4_K_S", "Q4_K_M", "Q5_K_M"
}

// FileSchemes are the types `mistralrs quantize --type` knows, with their
// llama_ftype numbers.
var FileSchemes = []Scheme{
	{"F32", kernels.F32, 0, ""},
	{"F16", kernels.F16, 1, ""},
	{"BF16", kernels.BF16, 32, ""},
	{"Q4_0", kernels.Q4_0, 2, ""},
	{"Q4_1", kernels.Q4_1, 3, ""},
	{"Q5_0", kernels.Q5_0, 8, ""},
	{"Q5_1", kernels.Q5_1, 9, ""},
	{"Q8_0", kernels.Q8_0, 7, ""},
	{"Q4_K_S", kernels.Q4_K, 14, "Q4_K_S"},
	{"Q4_K_M", kernels.Q4_K, 15, "Q4_K_M"},
	{"Q5_K_S", kernels.Q5_K, 16, ""},
	{"Q5_K_M", kernels.Q5_K, 17, "Q5_K_M"},
	{"Q6_K", kernels.Q6_K, 18, ""},
}

// ParseScheme returns the scheme of a llama-quantize type name
// (case-insensitive; Q4_K and Q5_K are its aliases of Q4_K_M and Q5_K_M) or
// llama_ftype number.
func ParseScheme(name string) (Scheme, error) {
	up := strings.ToUpper(strings.TrimSpace(name))
	switch up {
	case "Q4_K":
		up = "Q4_K_M"
	case "Q5_K":
		up = "Q5_K_M"
	}
	n, numErr := strconv.ParseUint(up, 10, 32)
	for _, s := range FileSchemes {
		if s.Name == up || (numErr == nil && uint64(s.FileType) == n) {
			return s, nil
		}
	}
	names := make([]string, len(FileSchemes))
	for i, s := range FileSchemes {
		names[i] = s.Name
	}
	return Scheme{}, fmt.Errorf("unknown quantization type %q (choose one of %s)", name, strings.Join(names, ", "))
}

// isqTypes are mistral.rs's ISQ names that this engine computes with.
var isqTypes = []struct {
	name string
	t    kernels.Type
}{
	{"q4_0", kernels.Q4_0}, {"q4_1", kernels.Q4_1}, {"q5_0", kernels.Q5_0}, {"q5_1", kernels.Q5_1},
	{"q8_0", kernels.Q8_0}, {"q4k", kernels.Q4_K}, {"q5k", kernels.Q5_K}, {"q6k", kernels.Q6_K},
}

// ISQNames lists the ISQ types accepted, in mistral.rs's spelling.
func ISQNames() []string {
	names := make([]string, len(isqTypes))
	for i, it := range isqTypes {
		names[i] = it.name
	}
	return names
}

// ParseISQ returns the scheme of an ISQ type: mistral.rs's names (q4_0,
// q4_1, q5_0, q5_1, q8_0, q4k, q5k, q6k), case-insensitive, also spelt as
// GGML types (Q4_K), or mistral.rs's CPU levels 4, 5, 6 and 8 (Q4K, Q5K,
// Q6K, Q8_0).
func ParseISQ(name string) (Scheme, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	switch key {
	case "4":
		key = "q4k"
	case "5":
		key = "q5k"
	case "6":
		key = "q6k"
	case "8":
		key = "q8_0"
	case "q4_k", "q5_k", "q6_k":
		key = strings.ReplaceAll(key, "_", "")
	}
	for _, it := range isqTypes {
		if it.name == key {
			return Scheme{Name: strings.ToUpper(it.name), Type: it.t}, nil
		}
	}
	switch key {
	case "2", "3", "q2k", "q3k", "q8k", "q8_1", "q2_k", "q3_k", "q8_k", "hqq4", "hqq8", "fp8", "afq2", "afq3", "afq4", "afq6", "afq8":
		return Scheme{}, fmt.Errorf("ISQ type %q is not supported by this engine (choose one of %s)", name, strings.Join(ISQNames(), ", "))
	}
	return Scheme{}, fmt.Errorf("unknown ISQ type %q (choose one of %s)", name, strings.Join(ISQNames(), ", "))
}

// tensor categories, as llama.cpp tells them apart by name.
const (
	catOther = iota
	catOutput
	catTokenEmbd
	catAttnV // attn_v, and the fused attn_qkv / attn_kv_b, which llama.cpp treats alike
	catAttnK
	catAttnOutput
	catFFNDown
)

func category(name string) int {
	switch {
	case name == "output.weight":
		return catOutput
	case name == "token_embd.weight" || name == "per_layer_token_embd.weight":
		return catTokenEmbd
	case strings.Contains(name, "attn_qkv.weight"), strings.Contains(name, "attn_kv_b.weight"), strings.Contains(name, "attn_v.weight"):
		return catAttnV
	case strings.Contains(name, "attn_k.weight"):
		return catAttnK
	case strings.Contains(name, "attn_output.weight"):
		return catAttnOutput
	case strings.Contains(name, "ffn_down"):
		return catFFNDown
	}
	return catOther
}

// keptWeights are parts of names of weights llama.cpp never quantizes.
var keptWeights = []string{
	"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
	"per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
	"indexer.q_proj.weight", "time_mix_", "attn_rel_b.weight", ".position_embd", ".rel_pos",
	".patch_embd", ".patch_merger", "sam.",
}

// quantizable reports whether llama.cpp would convert the tensor: a weight
// of at least two dimensions (trailing dimensions of 1 do not count).
func quantizable(t *gguf.TensorInfo) bool {
	dims := len(t.Dims)
	for dims > 1 && t.Dims[dims-1] == 1 {
		dims--
	}
	if dims < 2 || !strings.HasSuffix(t.Name, "weight") {
		return false
	}
	if t.Name == "position_embd.weight" || t.Name == "token_types.weight" {
		return false
	}
	for _, k := range keptWeights {
		if strings.Contains(t.Name, k) {
			return false
		}
	}
	return true
}

// moreBits is llama.cpp's use_more_bits: the first and last eighth of the
// layers, and every third layer between.
func moreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// layerOf returns the layer number of a "blk.N." tensor, -1 for others.
func layerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	num, _, ok := strings.Cut(rest, ".")
	n, err := strconv.Atoi(num)
	if !ok || err != nil {
		return -1
	}
	return n
}

// Plan returns the type every tensor of f gets under s, in f's order; a
// tensor that is kept has its own type.
func (s Scheme) Plan(f *gguf.File) []kernels.Type {
	types := make([]kernels.Type, len(f.Tensors))
	for i := range f.Tensors {
		types[i] = f.Tensors[i].Type
	}
	arch := f.Architecture()
	u := func(key string) int {
		v, _ := f.Uint(arch + "." + key)
		return int(v)
	}
	nLayer, nExpert := u("block_count"), u("expert_count")
	heads, kvHeads := u("attention.head_count"), u("attention.head_count_kv")
	is70B := arch == "llama" && nLayer == 80 && kvHeads > 0 && heads != kvHeads

	// llama.cpp walks the tensors by layer, then by name, and counts the
	// attn_v and ffn_down tensors as it goes.
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		na, nb := f.Tensors[order[a]].Name, f.Tensors[order[b]].Name
		if la, lb := layerOf(na), layerOf(nb); la != lb {
			return la < lb
		}
		return na < nb
	})
	tied := true
	nAttnV := 0
	for i := range f.Tensors {
		switch category(f.Tensors[i].Name) {
		case catOutput:
			tied = false
		case catAttnV:
			nAttnV++
		}
	}
	quantized := s.Type.BlockSize() > 1
	iAttnV, iFFNDown := 0, 0
	for _, i := range order {
		t := &f.Tensors[i]
		if !quantizable(t) {
			continue
		}
		nt := s.Type
		if !quantized {
			types[i] = nt
			continue
		}
		nx := int(t.Dims[0])
		switch cat := category(t.Name); {
		case cat == catOutput || (tied && cat == catTokenEmbd):
			if nx%s.Type.BlockSize() != 0 {
				nt = kernels.Q8_0
			} else if s.Type != kernels.Q8_0 {
				nt = kernels.Q6_K
			}
		case cat == catTokenEmbd:
		case cat == catAttnV:
			if (s.mix == "Q4_K_M" || s.mix == "Q5_K_M") && moreBits(iAttnV, nAttnV) {
				nt = kernels.Q6_K
			} else if s.mix == "Q4_K_S" && iAttnV < 4 {
				nt = kernels.Q5_K
			}
			if is70B && nt == kernels.Q4_K {
				nt = kernels.Q5_K
			}
			if nExpert == 8 {
				nt = kernels.Q8_0
			}
			iAttnV++
		case cat == catAttnK:
			if nExpert == 8 {
				nt = kernels.Q8_0
			}
		case cat == catAttnOutput:
			if nExpert == 8 && (s.mix == "Q4_K_S" || s.mix == "Q4_K_M") {
				nt = kernels.Q5_K
			}
		case cat == catFFNDown:
			layer := iFFNDown
			if l := layerOf(t.Name); nExpert > 1 && l >= 0 {
				layer = l
			}
			switch {
			case (s.mix == "Q4_K_M" || s.mix == "Q5_K_M") && moreBits(layer, nLayer):
				nt = kernels.Q6_K
			case s.mix == "Q4_K_S" && layer < nLayer/8:
				nt = kernels.Q5_K
			}
			iFFNDown++
		}
		types[i] = nt.FitRow(nx)
	}
	return types
}

// bitsPerWeight is the storage cost of t.
func bitsPerWeight(t kernels.Type) float64 {
	return float64(t.TypeSize()*8) / float64(t.BlockSize())
}

// isFloat reports whether t is one of the unquantized types.
func isFloat(t kernels.Type) bool {
	return t == kernels.F32 || t == kernels.F16 || t == kernels.BF16
}

// Conversion is one tensor to convert: index into the file's Tensors and
// the new type.
type Conversion struct {
	Index int
	To    kernels.Type
}

// ISQReport says what in-situ quantization did.
type ISQReport struct {
	Scheme    string
	Converted int            // tensors quantized
	Kept      int            // weights left as they were (already as small, or not convertible)
	Types     map[string]int // tensors converted, by type
	FileBytes int64          // mapped bytes of the converted tensors
	HeapBytes int64          // heap bytes of their quantized data
	Workers   int
	Elapsed   time.Duration
}

// String is the one-line summary printed after loading.
func (r *ISQReport) String() string {
	var types []string
	for t, n := range r.Types {
		types = append(types, fmt.Sprintf("%d %s", n, t))
	}
	sort.Strings(types)
	detail := ""
	if len(types) > 0 {
		detail = " (" + strings.Join(types, ", ") + ")"
	}
	return fmt.Sprintf("isq %s: %d tensors quantized%s, %d kept, in %.2fs with %d workers: %s mapped -> %s in memory",
		r.Scheme, r.Converted, detail, r.Kept, r.Elapsed.Seconds(), r.Workers, mib(r.FileBytes), mib(r.HeapBytes))
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// applyISQ quantizes f's weights in memory: the tensor list of f then
// describes the quantized weights, held on the heap, while the file and its
// mapping stay as they are. A weight whose type is already as small as the
// target (or that the kernels cannot decode) is kept.
func applyISQ(f *gguf.File, s Scheme, status io.Writer) (*ISQReport, error) {
	start := time.Now()
	plan := s.Plan(f)
	rep := &ISQReport{Scheme: s.Name, Types: map[string]int{}}
	var convs []Conversion
	for i, to := range plan {
		t := &f.Tensors[i]
		if to == t.Type {
			continue
		}
		if !t.Type.Supported() || (!isFloat(t.Type) && bitsPerWeight(t.Type) <= bitsPerWeight(to)) {
			rep.Kept++
			continue
		}
		convs = append(convs, Conversion{i, to})
		rep.FileBytes += int64(len(t.Data))
	}
	rep.Workers = runtime.GOMAXPROCS(0)
	progress := NewProgress(status, "isq "+s.Name)
	data, err := ConvertTensors(f, convs, rep.Workers, progress.Update)
	progress.Finish()
	if err != nil {
		return nil, err
	}
	for k, c := range convs {
		t := &f.Tensors[c.Index]
		releasePages(t.Data)
		t.Type, t.Data = c.To, data[k]
		rep.Converted++
		rep.Types[c.To.String()]++
		rep.HeapBytes += int64(len(data[k]))
	}
	rep.Elapsed = time.Since(start)
	if status != nil {
		fmt.Fprintln(status, rep.String())
	}
	return rep, nil
}

// releasePages tells the kernel that the process no longer needs the mapped
// pages wholly inside b (the original weights once they are quantized), so
// that they leave its resident memory; the file is not changed, and a later
// read would fault them in again.
func releasePages(b []byte) {
	page := uintptr(os.Getpagesize())
	if len(b) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (start + page - 1) &^ (page - 1)
	hi := (start + uintptr(len(b))) &^ (page - 1)
	if hi > lo {
		_ = unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED)
	}
}

// ConvertTensors encodes the tensors of convs in their new types, each from
// its values decoded to float32, with the project's quantizers, on workers
// goroutines sharing chunks of rows of every tensor. It returns the new
// bytes of each conversion. progress, when set, gets the source bytes done
// and the total. A fault while reading the mapped file (a file cut short) is
// an error.
func ConvertTensors(f *gguf.File, convs []Conversion, workers int, progress func(done, total int64)) ([][]byte, error) {
	type chunk struct {
		conv       int
		row0, rows int
	}
	const chunkElems = 1 << 16
	out := make([][]byte, len(convs))
	var chunks []chunk
	var total int64
	for k, c := range convs {
		t := &f.Tensors[c.Index]
		n := int(t.Dims[0])
		if err := c.To.CheckRow(n); err != nil || !c.To.Supported() {
			return nil, fmt.Errorf("tensor %s: cannot convert to %s: %v", t.Name, c.To, err)
		}
		if !t.Type.Supported() {
			return nil, fmt.Errorf("tensor %s: cannot decode type %s", t.Name, t.Type)
		}
		rows := int(t.Elements()) / n
		out[k] = make([]byte, c.To.RowSize(n)*rows)
		step := max(1, chunkElems/n)
		for r := 0; r < rows; r += step {
			chunks = append(chunks, chunk{k, r, min(step, rows-r)})
		}
		total += int64(len(t.Data))
	}
	workers = max(1, min(workers, len(chunks)))
	var next atomic.Int64
	var mu sync.Mutex
	var done int64
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if v := recover(); v != nil {
					err := gguf.Fault(v)
					if err == nil {
						err = fmt.Errorf("quantization failed: %v", v)
					}
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					next.Store(int64(len(chunks))) // stop the others
				}
			}()
			var vals []float32
			for {
				i := int(next.Add(1) - 1)
				if i >= len(chunks) {
					return
				}
				ch := chunks[i]
				c := convs[ch.conv]
				t := &f.Tensors[c.Index]
				n := int(t.Dims[0])
				srcRow, dstRow := t.Type.RowSize(n), c.To.RowSize(n)
				if cap(vals) < n {
					vals = make([]float32, n)
				}
				vals = vals[:n]
				for r := ch.row0; r < ch.row0+ch.rows; r++ {
					kernels.Dequantize(t.Type, t.Data[r*srcRow:(r+1)*srcRow], vals)
					kernels.Quantize(c.To, vals, out[ch.conv][r*dstRow:(r+1)*dstRow])
				}
				if progress != nil {
					mu.Lock()
					done += int64(srcRow * ch.rows)
					progress(done, total)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, withPath(f.Path, firstErr)
	}
	return out, nil
}

// Progress draws the progress of a long step on w: a bar when w is a
// terminal, else a plain line at every tenth. A nil w shows nothing.
type Progress struct {
	w       io.Writer
	label   string
	bar     *progressbar.ProgressBar
	lastPct int64
}

// NewProgress returns a progress display for w (nil: silent).
func NewProgress(w io.Writer, label string) *Progress {
	return &Progress{w: w, label: label, lastPct: -1}
}

// Update reports done of total bytes.
func (p *Progress) Update(done, total int64) {
	if p == nil || p.w == nil || total <= 0 {
		return
	}
	if fd, ok := p.w.(*os.File); ok && term.IsTerminal(int(fd.Fd())) {
		if p.bar == nil {
			p.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription(p.label), progressbar.OptionShowBytes(true),
				progressbar.OptionClearOnFinish())
		}
		p.bar.Set64(done)
		return
	}
	pct := done * 100 / total
	if p.lastPct < 0 || pct/10 > p.lastPct/10 {
		p.lastPct = pct
		fmt.Fprintf(p.w, "%s: %3d%% (%s of %s)\n", p.label, pct, mib(done), mib(total))
	}
}

// Finish clears the bar, if one is drawn.
func (p *Progress) Finish() {
	if p != nil && p.bar != nil {
		p.bar.Finish()
	}
}
