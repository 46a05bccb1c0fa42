package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/loader"
)

type quantizeFlags struct {
	in, out, typ    string
	allowRequantize bool
}

// newQuantizeCmd writes a quantized copy of a GGUF model, as llama.cpp's
// llama-quantize does (same type names, mixtures and file-type numbers).
func newQuantizeCmd() *cobra.Command {
	f := &quantizeFlags{}
	names := make([]string, len(loader.FileSchemes))
	for i, s := range loader.FileSchemes {
		names[i] = s.Name
	}
	cmd := &cobra.Command{
		Use:   "quantize -f IN.gguf -o OUT.gguf --type TYPE",
		Short: "Write a quantized copy of a GGUF model (llama-quantize's types and mixtures)",
		Long: "Writes OUT.gguf: IN.gguf's metadata and tensors, its weight matrices converted to TYPE\n" +
			"with llama-quantize's rules (Q4_K_M: Q4_K with Q6_K for output.weight and for attn_v and\n" +
			"ffn_down in the layers llama.cpp's use_more_bits picks; norms and other vectors stay as\n" +
			"they are). general.file_type is set as llama.cpp numbers it.\n" +
			"Types: " + strings.Join(names, ", ") + " (Q4_K and Q5_K mean Q4_K_M and Q5_K_M).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runQuantize(f, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.in, "file", "f", "", "input GGUF file (the first shard of a split model)")
	fl.StringVarP(&f.out, "output", "o", "", "output GGUF file")
	fl.StringVar(&f.typ, "type", "", "target type: "+strings.Join(names, ", "))
	fl.BoolVar(&f.allowRequantize, "allow-requantize", false, "requantize tensors that are already quantized (to another quantized type)")
	return cmd
}

func isFloatType(t kernels.Type) bool {
	return t == kernels.F32 || t == kernels.F16 || t == kernels.BF16
}

func runQuantize(f *quantizeFlags, stderr io.Writer) (err error) {
	start := time.Now()
	if f.typ == "" {
		return fmt.Errorf("--type is required (one of Q4_K_M, Q5_K_M, Q6_K, Q8_0, Q4_0, ...)")
	}
	s, err := loader.ParseScheme(f.typ)
	if err != nil {
		return err
	}
	if f.in == "" || f.out == "" {
		return fmt.Errorf("quantize needs an input file (-f) and an output file (-o)")
	}
	if ai, err1 := filepath.Abs(f.in); err1 == nil {
		if ao, err2 := filepath.Abs(f.out); err2 == nil && ai == ao {
			return fmt.Errorf("-o %s: the output must not be the input file", f.out)
		}
	}
	in, err := gguf.Open(f.in)
	if err != nil {
		return err
	}
	defer in.Close()
	// The output is written to a temporary file beside it, renamed into
	// place when complete: made first, so that an unwritable output fails
	// before any work, and removed on any error.
	tmp, err := os.CreateTemp(filepath.Dir(f.out), "."+filepath.Base(f.out)+".tmp-*")
	if err != nil {
		return fmt.Errorf("-o %s: %v", f.out, unwrapPath(err))
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// The tensors are read from the mapping: a file cut short meanwhile is
	// an error naming it, not a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if v := recover(); v != nil {
			if err = gguf.Fault(v); err == nil {
				panic(v)
			}
		}
	}()

	plan := s.Plan(in)
	var convs []loader.Conversion
	var inBytes int64
	for i, to := range plan {
		t := &in.Tensors[i]
		inBytes += int64(len(t.Data))
		if to == t.Type {
			continue
		}
		if !t.Type.Supported() {
			return fmt.Errorf("%s: tensor %s: cannot decode type %s", f.in, t.Name, t.Type)
		}
		if !isFloatType(t.Type) && !isFloatType(to) && !f.allowRequantize {
			return fmt.Errorf("%s: tensor %s is already %s; requantizing it to %s needs --allow-requantize", f.in, t.Name, t.Type, to)
		}
		convs = append(convs, loader.Conversion{Index: i, To: to})
	}
	progress := loader.NewProgress(stderr, "quantize "+s.Name)
	data, err := loader.ConvertTensors(in, convs, runtime.GOMAXPROCS(0), progress.Update)
	progress.Finish()
	if err != nil {
		return err
	}

	w := gguf.NewWriter()
	for _, kv := range in.KV {
		if !strings.HasPrefix(kv.Key, "split.") {
			w.AddKV(kv.Key, kv.Value)
		}
	}
	w.AddKV("general.quantization_version", uint32(2))
	w.AddKV("general.file_type", s.FileType)
	newData := make([][]byte, len(in.Tensors))
	newType := make([]kernels.Type, len(in.Tensors))
	for i := range in.Tensors {
		newData[i], newType[i] = in.Tensors[i].Data, in.Tensors[i].Type
	}
	counts := map[string]int{}
	for k, c := range convs {
		newData[c.Index], newType[c.Index] = data[k], c.To
		counts[c.To.String()]++
	}
	var outBytes int64
	for i := range in.Tensors {
		t := &in.Tensors[i]
		if err := w.AddTensor(t.Name, newType[i], t.Dims, newData[i]); err != nil {
			return fmt.Errorf("%s: %v", f.in, err)
		}
		outBytes += int64(len(newData[i]))
	}
	_, err = w.WriteTo(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.out)
	}
	if err != nil {
		return fmt.Errorf("-o %s: %v", f.out, unwrapPath(err))
	}
	tmp = nil
	var types []string
	for t, n := range counts {
		types = append(types, fmt.Sprintf("%d %s", n, t))
	}
	sort.Strings(types)
	fmt.Fprintf(stderr, "quantize %s: %s -> %s: %d tensors converted (%s), %d kept; %.1f MiB -> %.1f MiB in %.2fs\n",
		s.Name, f.in, f.out, len(convs), strings.Join(types, ", "), len(in.Tensors)-len(convs),
		float64(inBytes)/(1<<20), float64(outBytes)/(1<<20), time.Since(start).Seconds())
	return nil
}

// unwrapPath drops the path of an *os.PathError or *os.LinkError, which
// the caller names.
func unwrapPath(err error) error {
	switch e := err.(type) {
	case *os.PathError:
		return e.Err
	case *os.LinkError:
		return e.Err
	}
	return err
}
