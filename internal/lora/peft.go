package lora

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
	"mistralrs/internal/smallfile"
)

// The files of a PEFT adapter folder.
const (
	peftConfig  = "adapter_config.json"
	peftWeights = "adapter_model.safetensors"
)

// peftDefault is PEFT's default r and lora_alpha, for a config without them.
const peftDefault = 8

// maxHeader bounds a safetensors JSON header (the format's own readers cap
// it at 100 MB); a real adapter's is a few hundred bytes per tensor.
const maxHeader = 100 << 20

// peftSettings is what Load reads of adapter_config.json.
type peftSettings struct {
	PeftType      string             `json:"peft_type"`
	R             *int               `json:"r"`              // absent: PEFT's default, 8
	Alpha         *float64           `json:"lora_alpha"`     // absent: PEFT's default, 8; 0: scale 1, as llama.cpp reads a converted adapter
	TargetModules json.RawMessage    `json:"target_modules"` // a list or a regular expression; the tensors say what is adapted
	RankPattern   map[string]int     `json:"rank_pattern"`
	AlphaPattern  map[string]float64 `json:"alpha_pattern"`
	// FanInFanOut is about how the base weight is stored (GPT-2's Conv1D):
	// lora_A and lora_B are [r, in] and [out, r] either way, and applied
	// as B·(A·x); it changes only how PEFT merges them.
	FanInFanOut   bool            `json:"fan_in_fan_out"`
	UseRSLoRA     bool            `json:"use_rslora"`
	UseDoRA       bool            `json:"use_dora"`
	ModulesToSave json.RawMessage `json:"modules_to_save"`
}

// loadPEFT reads a PEFT folder: adapter_config.json and
// adapter_model.safetensors, whose module names map onto GGUF names.
func loadPEFT(dir string, base *model.Model, lim Limits) (*Adapter, error) {
	cfgPath := filepath.Join(dir, peftConfig)
	cfg, err := readPEFTConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	wPath := filepath.Join(dir, peftWeights)
	f, err := openRegular(wPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tensors, err := readSafetensors(f, wPath)
	if err != nil {
		return nil, err
	}
	pairs, err := peftPairs(wPath, cfgPath, tensors, cfg, base)
	if err != nil {
		return nil, err
	}
	ad := &Adapter{Path: dir, Format: "peft", Alpha: float32(*cfg.Alpha)}
	r := resolver{file: wPath, base: base, lim: lim}
	if err := r.resolve(ad, pairs); err != nil {
		return nil, err
	}
	return ad, nil
}

func readPEFTConfig(path string) (*peftSettings, error) {
	data, err := smallfile.Read(path, smallfile.Config)
	if err != nil {
		return nil, fmt.Errorf("lora adapter: %v", err)
	}
	var cfg peftSettings
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if cfg.R == nil {
		cfg.R = new(int)
		*cfg.R = peftDefault
	}
	if cfg.Alpha == nil {
		cfg.Alpha = new(float64)
		*cfg.Alpha = peftDefault
	}
	switch {
	case cfg.PeftType != "" && cfg.PeftType != "LORA":
		return nil, fmt.Errorf("%s: peft_type %q; only LORA adapters are supported", path, cfg.PeftType)
	case *cfg.R <= 0:
		return nil, fmt.Errorf("%s: r is %d; a LoRA rank is positive", path, *cfg.R)
	case math.IsNaN(*cfg.Alpha) || math.IsInf(*cfg.Alpha, 0) || math.Abs(*cfg.Alpha) > 1e30:
		return nil, fmt.Errorf("%s: lora_alpha %v is not a usable number", path, *cfg.Alpha)
	case cfg.UseDoRA:
		return nil, fmt.Errorf("%s: use_dora: DoRA adapters are not supported", path)
	case len(cfg.ModulesToSave) > 0 && string(cfg.ModulesToSave) != "null" && string(cfg.ModulesToSave) != "[]":
		return nil, fmt.Errorf("%s: modules_to_save %s: adapters that replace whole modules are not supported", path, cfg.ModulesToSave)
	}
	for k := range cfg.RankPattern {
		if _, err := patternRE(k); err != nil {
			return nil, fmt.Errorf("%s: rank_pattern key %q: %v", path, k, err)
		}
	}
	for k := range cfg.AlphaPattern {
		if _, err := patternRE(k); err != nil {
			return nil, fmt.Errorf("%s: alpha_pattern key %q: %v", path, k, err)
		}
	}
	return &cfg, nil
}

// openRegular opens a regular file (a named pipe or a device would block
// or never end).
func openRegular(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("lora adapter: %v", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lora adapter: %v", err)
	}
	return f, nil
}

// stEntry is one tensor of a safetensors header.
type stEntry struct {
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// readSafetensors reads the header of a safetensors file — an 8-byte
// little-endian length, a JSON object of tensors {dtype, shape,
// data_offsets} (offsets from the end of the header) — and checks each
// tensor against the file's size; the data is read when a tensor is
// copied. Only F32, F16 and BF16 matrices are taken.
func readSafetensors(f *os.File, path string) (map[string]tensor, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("lora adapter: %v", err)
	}
	size := st.Size()
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		return nil, fmt.Errorf("%s: truncated safetensors file (no header length)", path)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n < 2 || n > maxHeader || int64(n) > size-8 {
		return nil, fmt.Errorf("%s: safetensors header length %d does not fit the file of %d bytes (truncated or not safetensors)", path, n, size)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, fmt.Errorf("%s: truncated safetensors header: %v", path, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("%s: safetensors header: %v", path, err)
	}
	dataStart, dataLen := 8+int64(n), size-8-int64(n)
	out := make(map[string]tensor, len(raw))
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		var e stEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %v", path, name, err)
		}
		t, err := stTensor(name, e, dataLen)
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %v", path, name, err)
		}
		off, nb := dataStart+e.Offsets[0], e.Offsets[1]-e.Offsets[0]
		t.read = func() ([]byte, error) {
			b := make([]byte, nb)
			if _, err := f.ReadAt(b, off); err != nil {
				return nil, fmt.Errorf("reading %d bytes at %d: %v", nb, off, err)
			}
			return b, nil
		}
		out[name] = t
	}
	return out, nil
}

// stTensor checks one header entry: a 2-D tensor whose bytes lie inside
// the data section and match its shape.
func stTensor(name string, e stEntry, dataLen int64) (tensor, error) {
	var typ kernels.Type
	switch e.DType {
	case "F32":
		typ = kernels.F32
	case "F16":
		typ = kernels.F16
	case "BF16":
		typ = kernels.BF16
	default:
		return tensor{}, fmt.Errorf("dtype %q; LoRA tensors must be F32, F16 or BF16", e.DType)
	}
	if len(e.Shape) != 2 || e.Shape[0] <= 0 || e.Shape[1] <= 0 || e.Shape[0] > 1<<31 || e.Shape[1] > 1<<31 {
		return tensor{}, fmt.Errorf("shape %v; a LoRA tensor is a matrix", e.Shape)
	}
	if len(e.Offsets) != 2 || e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] || e.Offsets[1] > dataLen {
		return tensor{}, fmt.Errorf("data_offsets %v outside the %d bytes of data (truncated file?)", e.Offsets, dataLen)
	}
	rows, cols := int(e.Shape[0]), int(e.Shape[1])
	if want := int64(rows) * int64(typ.RowSize(cols)); e.Offsets[1]-e.Offsets[0] != want {
		return tensor{}, fmt.Errorf("%d bytes of data for shape %v %s, expected %d", e.Offsets[1]-e.Offsets[0], e.Shape, e.DType, want)
	}
	// torch's [rows, cols] is GGML's [cols, rows]
	return tensor{name: name, typ: typ, dims: [2]int{cols, rows}}, nil
}

// peftPairs maps the tensors' module names onto GGUF names and pairs
// lora_A with lora_B; for a llama base, lora_B of q and k gets the row
// permutation llama.cpp's converter gives the q and k weights.
func peftPairs(wPath, cfgPath string, tensors map[string]tensor, cfg *peftSettings, base *model.Model) ([]pair, error) {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	byTarget := map[string]*pair{}
	var order []string
	for _, name := range names {
		module, half, ok := peftSplit(name)
		if !ok {
			return nil, fmt.Errorf("%s: tensor %s: not a LoRA tensor (a name ends in .lora_A.weight or .lora_B.weight)", wPath, name)
		}
		target, ok := ggufName(module)
		if !ok {
			return nil, fmt.Errorf("%s: tensor %s: module %s has no GGUF weight this loader knows", wPath, name, module)
		}
		t := tensors[name]
		p := byTarget[target]
		if p == nil {
			alpha, rank, err := modulePatterns(cfgPath, cfg, module)
			if err != nil {
				return nil, err
			}
			p = &pair{target: target, alpha: float32(alpha), rslora: cfg.UseRSLoRA, rank: rank}
			byTarget[target] = p
			order = append(order, target)
		}
		if half == "A" {
			p.a = t
			if t.dims[1] != p.rank {
				return nil, fmt.Errorf("%s: tensor %s has rank %d but %s gives %d", wPath, name, t.dims[1], cfgPath, p.rank)
			}
		} else {
			t.heads = permuteHeads(base, target)
			p.b = t
		}
	}
	pairs := make([]pair, 0, len(order))
	for _, n := range order {
		p := byTarget[n]
		switch {
		case p.a.name == "":
			return nil, fmt.Errorf("%s: tensor %s has no lora_A", wPath, p.b.name)
		case p.b.name == "":
			return nil, fmt.Errorf("%s: tensor %s has no lora_B", wPath, p.a.name)
		}
		pairs = append(pairs, *p)
	}
	return pairs, nil
}

// peftSplit splits "base_model.model.M.lora_A.weight" (or
// "...lora_A.<adapter name>.weight") into the module M and "A" or "B".
func peftSplit(name string) (module, half string, ok bool) {
	s := strings.TrimPrefix(name, "base_model.model.")
	s, ok = strings.CutSuffix(s, ".weight")
	if !ok {
		return "", "", false
	}
	for _, h := range []string{"A", "B"} {
		if i := strings.LastIndex(s, ".lora_"+h); i > 0 {
			rest := s[i+len(".lora_"+h):]
			if rest == "" || (rest[0] == '.' && !strings.Contains(rest[1:], ".")) {
				return s[:i], h, true
			}
		}
	}
	return "", "", false
}

// hfModules maps a decoder layer's module (after "layers.N.") onto the
// GGUF tensor of its weight, as llama.cpp's converter names them.
var hfModules = map[string]string{
	"self_attn.q_proj":            "attn_q",
	"self_attn.k_proj":            "attn_k",
	"self_attn.v_proj":            "attn_v",
	"self_attn.o_proj":            "attn_output",
	"self_attn.qkv_proj":          "attn_qkv", // phi3
	"mlp.gate_proj":               "ffn_gate",
	"mlp.up_proj":                 "ffn_up",
	"mlp.down_proj":               "ffn_down",
	"mlp.gate_up_proj":            "ffn_up", // phi3's fused gate and up
	"mlp.gate":                    "ffn_gate_inp",
	"block_sparse_moe.gate":       "ffn_gate_inp", // mixtral's router
	"mlp.shared_expert.gate_proj": "ffn_gate_shexp",
	"mlp.shared_expert.up_proj":   "ffn_up_shexp",
	"mlp.shared_expert.down_proj": "ffn_down_shexp",
}

// ggufName maps a Hugging Face module name onto a GGUF weight name.
func ggufName(module string) (string, bool) {
	if module == "lm_head" || strings.HasSuffix(module, ".lm_head") {
		return "output.weight", true
	}
	for _, prefix := range []string{"model.layers.", "model.language_model.layers.", "language_model.model.layers."} {
		rest, ok := strings.CutPrefix(module, prefix)
		if !ok {
			continue
		}
		num, sub, ok := strings.Cut(rest, ".")
		if !ok {
			return "", false
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || strconv.Itoa(n) != num {
			return "", false
		}
		g, ok := hfModules[sub]
		if !ok {
			return "", false
		}
		return "blk." + num + "." + g + ".weight", true
	}
	return "", false
}

// modulePatterns returns a module's alpha and rank: alpha_pattern's and
// rank_pattern's first matching key (PEFT matches a key against the end
// of the module's name, on a dot), else lora_alpha and r.
func modulePatterns(cfgPath string, cfg *peftSettings, module string) (alpha float64, rank int, err error) {
	alpha, rank = *cfg.Alpha, *cfg.R
	match := func(key string) bool {
		re, _ := patternRE(key) // the keys were checked by readPEFTConfig
		return re.MatchString(module)
	}
	for _, k := range sortedKeys(cfg.AlphaPattern) {
		if match(k) {
			alpha = cfg.AlphaPattern[k]
			break
		}
	}
	for _, k := range sortedKeys(cfg.RankPattern) {
		if match(k) {
			rank = cfg.RankPattern[k]
			break
		}
	}
	if rank <= 0 {
		return 0, 0, fmt.Errorf("%s: rank %d for module %s; a LoRA rank is positive", cfgPath, rank, module)
	}
	return alpha, rank, nil
}

// patternRE is how PEFT matches a rank_pattern or alpha_pattern key: a
// regular expression for the end of the module's name, after a dot.
func patternRE(key string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:.*\.)?(?:` + key + `)$`)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// permuteHeads is the number of heads whose rows llama.cpp's converter
// permutes in a weight of base: a llama model's q (head_count) and k
// (head_count_kv) projections; 0 for the others.
func permuteHeads(base *model.Model, target string) int {
	if a := base.Config.Arch; a != "llama" && a != "mistral3" {
		return 0
	}
	switch {
	case strings.HasSuffix(target, ".attn_q.weight"):
		return base.Config.Heads
	case strings.HasSuffix(target, ".attn_k.weight"):
		return base.Config.KVHeads
	}
	return 0
}

// permuteRows reorders rows rows of data as llama.cpp's converter
// reorders a llama q or k weight: within each of heads heads of hd rows,
// the rows of the two halves are interleaved (GGUF row 2i+j of a head is
// Hugging Face row j·hd/2+i), so that rotary pairs are adjacent.
func permuteRows(data []byte, rows, heads int) ([]byte, error) {
	if heads <= 0 || rows%heads != 0 || (rows/heads)%2 != 0 {
		return nil, fmt.Errorf("%d rows do not split into %d heads of an even size", rows, heads)
	}
	rb := len(data) / rows
	hd := rows / heads
	out := make([]byte, len(data))
	for h := range heads {
		for i := range hd / 2 {
			for j := range 2 {
				dst, src := h*hd+2*i+j, h*hd+j*hd/2+i
				copy(out[dst*rb:(dst+1)*rb], data[src*rb:(src+1)*rb])
			}
		}
	}
	return out, nil
}
