package lora

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"mistralrs/internal/gguf"
	"mistralrs/internal/model"
)

// loadGGUF reads a llama.cpp adapter file: general.type "adapter",
// adapter.type "lora", general.architecture the base's, adapter.lora.alpha;
// for each adapted weight N, N.lora_a [n_in, r] and N.lora_b [r, n_out].
// Tensors ending in _norm.weight are ignored (as llama.cpp does); any
// other suffix is refused.
func loadGGUF(path string, base *model.Model, lim Limits) (*Adapter, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("lora adapter: %v", err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lora adapter: %v", err)
	}
	defer f.Close()
	alpha, err := checkHeader(f, base)
	if err != nil {
		return nil, err
	}
	pairs, err := ggufPairs(f)
	if err != nil {
		return nil, err
	}
	for i := range pairs {
		pairs[i].alpha = alpha
	}
	ad := &Adapter{Path: path, Format: "gguf", Alpha: alpha}
	r := resolver{file: path, base: base, lim: lim}
	if err := r.resolve(ad, pairs); err != nil {
		return nil, err
	}
	return ad, nil
}

// checkHeader checks the adapter's metadata against base and returns its
// alpha (0 when absent).
func checkHeader(f *gguf.File, base *model.Model) (float32, error) {
	if t, _ := f.String("general.type"); t != "adapter" {
		return 0, fmt.Errorf("%s: general.type is %q, not \"adapter\": not a LoRA adapter file", f.Path, t)
	}
	if t, _ := f.String("adapter.type"); t != "lora" {
		return 0, fmt.Errorf("%s: adapter.type is %q; only \"lora\" adapters are supported", f.Path, t)
	}
	arch, _ := f.String("general.architecture")
	if arch != base.Config.Arch {
		return 0, fmt.Errorf("%s: the adapter is for architecture %q, the base model is %q", f.Path, arch, base.Config.Arch)
	}
	var alpha float32
	if _, ok := f.Get("adapter.lora.alpha"); ok {
		v, isNum := f.Float("adapter.lora.alpha")
		if !isNum || v != v || v > 1e30 || v < -1e30 {
			return 0, fmt.Errorf("%s: adapter.lora.alpha is not a number", f.Path)
		}
		alpha = float32(v)
	}
	return alpha, nil
}

// ggufPairs pairs the file's .lora_a and .lora_b tensors by name.
func ggufPairs(f *gguf.File) ([]pair, error) {
	byTarget := map[string]*pair{}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		target, half, ok := cutSuffix(ti.Name)
		if !ok {
			if strings.HasSuffix(ti.Name, "_norm.weight") {
				continue
			}
			return nil, fmt.Errorf("%s: tensor %s: not a LoRA tensor (a name ends in .lora_a or .lora_b)", f.Path, ti.Name)
		}
		t, err := ggufTensor(f.Path, ti)
		if err != nil {
			return nil, err
		}
		p := byTarget[target]
		if p == nil {
			p = &pair{target: target}
			byTarget[target] = p
		}
		if half == "a" {
			p.a = t
		} else {
			p.b = t
		}
	}
	targets := make([]string, 0, len(byTarget))
	for n := range byTarget {
		targets = append(targets, n)
	}
	sort.Strings(targets)
	pairs := make([]pair, 0, len(targets))
	for _, n := range targets {
		p := byTarget[n]
		switch {
		case p.a.name == "":
			return nil, fmt.Errorf("%s: tensor %s.lora_b has no %s.lora_a", f.Path, n, n)
		case p.b.name == "":
			return nil, fmt.Errorf("%s: tensor %s.lora_a has no %s.lora_b", f.Path, n, n)
		}
		pairs = append(pairs, *p)
	}
	return pairs, nil
}

// cutSuffix splits "N.lora_a" into N and "a".
func cutSuffix(name string) (target, half string, ok bool) {
	for _, h := range []string{"a", "b"} {
		if t, found := strings.CutSuffix(name, ".lora_"+h); found && t != "" {
			return t, h, true
		}
	}
	return "", "", false
}

// ggufTensor checks that a tensor is a matrix of a type the kernels
// multiply by.
func ggufTensor(path string, ti *gguf.TensorInfo) (tensor, error) {
	dims := ti.Dims
	for len(dims) > 2 && dims[len(dims)-1] == 1 {
		dims = dims[:len(dims)-1]
	}
	if len(dims) != 2 || dims[0] == 0 || dims[1] == 0 || dims[0] > 1<<31 || dims[1] > 1<<31 {
		return tensor{}, fmt.Errorf("%s: tensor %s has dims %v; a LoRA tensor is a matrix", path, ti.Name, ti.Dims)
	}
	if !ti.Type.Supported() {
		return tensor{}, fmt.Errorf("%s: tensor %s has unsupported type %s", path, ti.Name, ti.Type)
	}
	t := tensor{name: ti.Name, typ: ti.Type, dims: [2]int{int(dims[0]), int(dims[1])}, data: ti.Data}
	if err := t.typ.CheckRow(t.dims[0]); err != nil {
		return tensor{}, fmt.Errorf("%s: tensor %s: %v", path, ti.Name, err)
	}
	if want := t.dims[1] * t.typ.RowSize(t.dims[0]); len(ti.Data) != want {
		return tensor{}, fmt.Errorf("%s: tensor %s has %d bytes of data, expected %d", path, ti.Name, len(ti.Data), want)
	}
	return t, nil
}
