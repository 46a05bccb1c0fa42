package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"mistralrs/internal/config"
)

// hubModelFlags are run's and bench's -m, --hf-revision and --hf-cache: a
// model named as serve names it (a local directory, or a Hugging Face id
// downloaded into the Hugging Face cache when missing), -f then naming files
// inside it.
type hubModelFlags struct {
	modelID  string
	revision string
	cache    string
	kind     string // the model's kind (config.KindAuto…), not a flag: from-config's; "": auto
}

func addHubModelFlags(fl *pflag.FlagSet, h *hubModelFlags) {
	fl.StringVarP(&h.modelID, "model-id", "m", "", "model: a local directory or a Hugging Face id (org/name, downloaded when missing); -f then names a file inside it")
	fl.StringVar(&h.revision, "hf-revision", "main", "revision (branch, tag or commit) of a Hugging Face model id")
	fl.StringVar(&h.cache, "hf-cache", "", "Hugging Face hub cache directory (default $HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub)")
}

// apply turns -m (and -f inside it) into the path of the model's first
// file in *file, fetching a Hugging Face model first, and finds its vision
// projector as `serve auto` does: *mmproj as given (inside the -m
// directory or repository unless absolute), else the one *mmproj*.gguf
// beside the model, else the one the Hugging Face repository offers; ""
// when none. Without -m, *file is left as given.
func (h *hubModelFlags) apply(cmd *cobra.Command, file, mmproj *string, tokenSource string) error {
	m := config.DefaultModel()
	if h.kind != "" {
		m.Kind = h.kind
	}
	if *mmproj != "" {
		if err := m.Format.MMProj.Set(*mmproj); err != nil {
			return fmt.Errorf("--mmproj: %w", err)
		}
		if err := config.CheckProjectors(m.Format.MMProj); err != nil {
			return fmt.Errorf("invalid value %q for --mmproj: %w", *mmproj, err)
		}
	}
	if h.modelID == "" {
		if *file == "" {
			if *mmproj != "" {
				return fmt.Errorf("--mmproj needs a model (-f or -m); the embedded demo model takes no images")
			}
			return nil
		}
		p, err := config.Projector(m, "", *file)
		*mmproj = p
		return textOnly(cmd, err)
	}
	m.ModelID = h.modelID
	m.HFRevision = h.revision
	m.Device.HFCache = h.cache
	if *file != "" {
		if err := m.Format.QuantizedFile.Set(*file); err != nil {
			return err
		}
	}
	if err := config.FetchModel(cmd.Context(), &m, tokenSource, config.FetchOptions{Progress: cmd.ErrOrStderr()}); err != nil {
		return err
	}
	src, err := config.ResolveModel(m, nil)
	if several, ok := errors.AsType[*config.SeveralProjectorsError](err); ok {
		// The model alone, then: its files, without a projector.
		m.Kind = config.KindText
		src, err = config.ResolveModel(m, nil)
		if err == nil {
			err = textOnly(cmd, several)
		}
	}
	if err != nil {
		return err
	}
	*file, *mmproj = src.Files[0], src.MMProj
	return nil
}

// textOnly turns Projector's several-projectors error into a note: run and
// bench then use the model without images. Other errors stay.
func textOnly(cmd *cobra.Command, err error) error {
	several, ok := errors.AsType[*config.SeveralProjectorsError](err)
	if !ok {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "note: several vision projectors beside %s (%s): none is loaded; name one with --mmproj\n",
		several.Model, strings.Join(several.Found, ", "))
	return nil
}
