package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"mistralrs/internal/gguf"
	"mistralrs/internal/tokenizer"
)

func newTokenizeCmd() *cobra.Command {
	var file string
	var special bool
	cmd := &cobra.Command{
		Use:   "tokenize -f FILE",
		Short: "Print the token ids of the text read from stdin",
		Long: "Reads text from stdin and prints its token ids on one line, separated by spaces.\n" +
			"Works on vocab-only GGUF files. BOS/EOS are added only with --special, as the model says.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := gguf.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			tok, err := tokenizer.FromGGUF(f)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			text, err := io.ReadAll(cmd.InOrStdin())
			if err != nil {
				return fmt.Errorf("reading stdin: %w", err)
			}
			ids := tok.Encode(string(text), special, special)
			w := bufio.NewWriter(cmd.OutOrStdout())
			for i, id := range ids {
				if i > 0 {
					w.WriteByte(' ')
				}
				w.WriteString(strconv.Itoa(int(id)))
			}
			w.WriteByte('\n')
			return w.Flush()
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "GGUF file holding the tokenizer (vocab-only files work)")
	cmd.Flags().BoolVar(&special, "special", false, "add BOS/EOS as the model says and parse special-token texts")
	cmd.MarkFlagRequired("file")
	return cmd
}
