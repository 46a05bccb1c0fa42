package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"mistralrs/internal/chat"
	"mistralrs/internal/config"
	"mistralrs/internal/demo"
	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
	"mistralrs/internal/sampler"
	"mistralrs/internal/server/gen"
)

type runFlags struct {
	file         string
	chatTemplate string
	prompt       string
	raw          bool
	maxTokens    int
	temperature  float32
	topK         int
	topP         float32
	minP         float32
	repeatPen    float32
	threads      int
	system       string
	isq          string   // in-situ quantization type; "": none
	mmproj       string   // vision projector; "": the one found beside the model, if any
	images       []string // image files sent with the first user turn (--image)
	hub          hubModelFlags
}

// defaultRunFlags are run's defaults (llama.cpp's sampling defaults), shared
// by its flags and by from-config's command = "run".
func defaultRunFlags() runFlags {
	return runFlags{maxTokens: 512, temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, repeatPen: 1}
}

func newRunCmd(g *config.GlobalConfig) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run [-f model.gguf]",
		Short: "Chat with a model in the terminal, or answer one --prompt",
		Long: "Chat with a model in the terminal, or answer one --prompt and exit.\n" +
			"The generated text goes to stdout alone; load progress and speed go to stderr.\n" +
			"Without -f, the embedded demo model is used (stories260K: it writes short children's stories).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd, g, f)
		},
	}
	d := defaultRunFlags()
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", d.file, "GGUF model file (first shard of a split model)")
	fl.StringVarP(&f.chatTemplate, "chat-template", "c", d.chatTemplate, "chat template file (.jinja, or tokenizer_config .json)")
	fl.StringVar(&f.prompt, "prompt", d.prompt, "answer this prompt once and exit")
	fl.BoolVar(&f.raw, "raw", d.raw, "send the prompt as is, without the chat template")
	fl.StringVar(&f.system, "system", d.system, "system message for chat mode")
	fl.IntVarP(&f.maxTokens, "max-tokens", "n", d.maxTokens, "maximum tokens to generate per answer (0: up to the context length)")
	fl.Float32Var(&f.temperature, "temperature", d.temperature, "sampling temperature (0: greedy)")
	fl.IntVar(&f.topK, "top-k", d.topK, "top-k sampling (0: off)")
	fl.Float32Var(&f.topP, "top-p", d.topP, "top-p (nucleus) sampling (1: off)")
	fl.Float32Var(&f.minP, "min-p", d.minP, "min-p sampling (0: off)")
	fl.Float32Var(&f.repeatPen, "repeat-penalty", d.repeatPen, "repetition penalty (1: off)")
	fl.IntVarP(&f.threads, "threads", "t", d.threads, "threads for the forward pass (0: one per core)")
	addHubModelFlags(fl, &f.hub)
	fl.StringVar(&f.isq, "isq", "", "in-situ quantization: quantize the weights at load to q4_0, q4_1, q5_0, q5_1, q8_0, q4k, q5k or q6k")
	fl.StringVar(&f.mmproj, "mmproj", "", "vision projector (llama.cpp mmproj GGUF) of the model; default: the one *mmproj*.gguf beside it, if any (inside the -m directory or repository unless absolute)")
	fl.StringArrayVar(&f.images, "image", nil, "image (PNG, JPEG, WebP, GIF) sent with the first user turn, or before the --raw prompt; repeat for several (needs a vision projector)")
	return cmd
}

// loadModel loads a GGUF file, or the demo model when path is empty, showing
// load progress on stderr.
func loadModel(path, chatTemplate string, stderr io.Writer) (*loader.Model, error) {
	return loadModelWith(path, loader.Options{ChatTemplatePath: chatTemplate}, stderr)
}

// loadModelWith is loadModel with opts (in-situ quantization, a vision
// projector), the progress and ISQ summary on stderr.
func loadModelWith(path string, opts loader.Options, stderr io.Writer) (*loader.Model, error) {
	if path == "" {
		if opts.ISQ != "" {
			return nil, fmt.Errorf("--isq needs a model (-f or -m); the embedded demo model is not quantized")
		}
		fmt.Fprintln(stderr, demo.Warning)
		return demo.Load()
	}
	if opts.ISQ != "" {
		opts.ISQStatus = stderr
	}
	if fd, ok := stderr.(*os.File); ok && term.IsTerminal(int(fd.Fd())) {
		var bar *progressbar.ProgressBar
		opts.Progress = func(done, total int64) {
			if bar == nil {
				bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(stderr),
					progressbar.OptionSetDescription("loading "+path), progressbar.OptionShowBytes(true),
					progressbar.OptionClearOnFinish())
			}
			bar.Set64(done)
		}
	}
	return loader.Load(path, opts)
}

func runRun(cmd *cobra.Command, g *config.GlobalConfig, f *runFlags) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	for _, arg := range []struct{ name, val string }{{"--prompt", f.prompt}, {"--system", f.system}} {
		if err := checkUTF8(arg.name, arg.val); err != nil {
			return err
		}
	}
	if err := f.hub.apply(cmd, &f.file, &f.mmproj, g.TokenSource); err != nil {
		return err
	}
	m, err := loadModelWith(f.file, loader.Options{ChatTemplatePath: f.chatTemplate, ISQ: f.isq, MMProj: f.mmproj}, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	if m.Vision != nil {
		fmt.Fprintf(stderr, "vision projector %s (%s)\n", m.Vision.Path(), m.Vision.Type())
	}
	o := config.DefaultEngineOptions()
	o.Threads = f.threads
	eng, err := engine.New(m, o)
	if err != nil {
		return err
	}
	defer eng.Close()

	params := sampler.Params{
		Temperature: f.temperature, TopK: f.topK, TopP: f.topP, MinP: f.minP,
		RepetitionPenalty: f.repeatPen,
	}
	if g.Seed != nil {
		seed := *g.Seed
		params.Seed = &seed
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var imgs *runImages
	if len(f.images) > 0 {
		if imgs, err = newRunImages(f.images, m, eng); err != nil {
			return err
		}
	}
	answer := func(msgs []chat.Message, rawText string) (string, error) {
		var req *engine.Request
		if imgs != nil {
			var raw *string
			if f.raw {
				raw = &rawText
			}
			r, release, err := imgs.request(ctx, msgs, raw, &gen.Settings{Params: params, MaxTokens: f.maxTokens})
			if err != nil {
				return "", err
			}
			defer release()
			req = r
		} else {
			var prompt []int32
			if f.raw {
				prompt = m.Tok.Encode(rawText, true, false)
			} else {
				text, err := m.Template.Render(msgs, true, nil)
				if err != nil {
					return "", err
				}
				// The template writes BOS itself where the model wants it.
				prompt = m.Tok.Encode(text, false, true)
			}
			req = &engine.Request{Prompt: prompt, Sampling: params, MaxTokens: f.maxTokens, Continuation: f.raw}
		}
		res, err := eng.Generate(ctx, req, func(o engine.Output) error {
			_, err := io.WriteString(stdout, o.Text)
			return err
		})
		if err != nil {
			return "", err
		}
		fmt.Fprintf(stderr, "\n%s\n", speedLine(res))
		return res.Text, nil
	}

	if cmd.Flags().Changed("prompt") {
		var msgs []chat.Message
		if f.system != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: f.system})
		}
		msgs = append(msgs, withImages(imgs, chat.Message{Role: "user", Content: f.prompt}))
		_, err := answer(msgs, f.prompt)
		return err
	}

	// Interactive chat: one line per user turn; the conversation is kept,
	// the images in its first turn.
	var msgs []chat.Message
	imagesSent := false
	if f.system != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: f.system})
	}
	in := bufio.NewScanner(cmd.InOrStdin())
	in.Buffer(make([]byte, 1<<20), 1<<24)
	for {
		fmt.Fprint(stderr, "> ")
		if !in.Scan() {
			fmt.Fprintln(stderr)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		if line == "/exit" || line == "/quit" {
			return nil
		}
		if err := checkUTF8("input", line); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			continue
		}
		msg := chat.Message{Role: "user", Content: line}
		if !imagesSent {
			msg, imagesSent = withImages(imgs, msg), true
		}
		msgs = append(msgs, msg)
		reply, err := answer(msgs, line)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		msgs = append(msgs, chat.Message{Role: "assistant", Content: reply})
	}
}

// withImages is msg with the images before its text (as it is without
// images).
func withImages(imgs *runImages, msg chat.Message) chat.Message {
	if imgs == nil {
		return msg
	}
	return imgs.attach(msg)
}

// checkUTF8 refuses text that is not UTF-8: a tokenizer would silently turn
// the bad bytes into replacement characters.
func checkUTF8(what, s string) error {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Errorf("%s is not valid UTF-8 (byte 0x%02x at offset %d)", what, s[i], i)
		}
		i += n
	}
	return nil
}

func speedLine(r *engine.Result) string {
	rate := func(n int, d float64) float64 {
		if d <= 0 {
			return 0
		}
		return float64(n) / d
	}
	return fmt.Sprintf("prompt: %d tokens, %.2f tok/s | decode: %d tokens, %.2f tok/s | finish: %s",
		r.PromptTokens, rate(r.PromptTokens, r.PromptTime.Seconds()),
		r.CompletionTokens, rate(r.CompletionTokens-1, r.DecodeTime.Seconds()), r.FinishReason)
}
