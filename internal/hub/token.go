package hub

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"mistralrs/internal/smallfile"
)

// DefaultTokenSource is mistral.rs's default --token-source.
const DefaultTokenSource = "cache"

// CheckTokenSource checks the syntax of a token source (mistral.rs's
// --token-source): "cache", "none", "literal:TOKEN", "env:VAR" or
// "path:FILE". "" means cache.
func CheckTokenSource(src string) error {
	switch {
	case src == "", src == "cache", src == "none":
		return nil
	case strings.HasPrefix(src, "literal:"), strings.HasPrefix(src, "env:"), strings.HasPrefix(src, "path:"):
		if i := strings.IndexByte(src, ':'); src[i+1:] == "" {
			return fmt.Errorf("%q names nothing after the colon", src[:i+1])
		}
		return nil
	}
	shown := src
	if i := strings.IndexByte(src, ':'); i >= 0 {
		shown = src[:i+1] + "…" // never echo what may be a token
	}
	return fmt.Errorf("unknown token source %q: want cache, none, literal:TOKEN, env:VAR or path:FILE", shown)
}

// Token reads the token a source names; getenv nil means os.Getenv.
// "cache" (the default) is $HF_TOKEN when set, else the token file
// huggingface-cli login writes ($HF_TOKEN_PATH, else $HF_HOME/token, else
// $XDG_CACHE_HOME/huggingface/token, else ~/.cache/huggingface/token), else
// no token. from says where the token came from, for messages; it never
// holds the token.
func Token(src string, getenv func(string) string) (token, from string, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if err := CheckTokenSource(src); err != nil {
		return "", "", err
	}
	readFile := func(p string) (string, error) {
		b, err := smallfile.Read(p, smallfile.Token)
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	}
	switch {
	case src == "none":
		return "", "", nil
	case strings.HasPrefix(src, "literal:"):
		return strings.TrimSpace(strings.TrimPrefix(src, "literal:")), "--token-source literal:…", nil
	case strings.HasPrefix(src, "env:"):
		v := strings.TrimPrefix(src, "env:")
		t := strings.TrimSpace(getenv(v))
		if t == "" {
			return "", "", fmt.Errorf("token source env:%s: %s is not set", v, v)
		}
		return t, "$" + v, nil
	case strings.HasPrefix(src, "path:"):
		p := strings.TrimPrefix(src, "path:")
		t, err := readFile(p)
		if smallfile.Refused(err) { // its message starts with p
			return "", "", fmt.Errorf("token source path:%w", err)
		}
		if err != nil {
			return "", "", fmt.Errorf("token source path:%s: %w", p, err)
		}
		if t == "" {
			return "", "", fmt.Errorf("token source path:%s: the file is empty", p)
		}
		return t, p, nil
	}
	// cache
	if t := strings.TrimSpace(getenv("HF_TOKEN")); t != "" {
		return t, "$HF_TOKEN", nil
	}
	p := TokenPath(getenv)
	t, err := readFile(p)
	if err != nil || t == "" {
		return "", "", nil // not logged in: no token
	}
	return t, p, nil
}

// TokenPath is where huggingface-cli login keeps the token.
func TokenPath(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if p := getenv("HF_TOKEN_PATH"); p != "" {
		return p
	}
	return filepath.Join(Home(getenv), "token")
}

// Home is huggingface_hub's home folder: $HF_HOME, else
// $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface (getenv nil:
// the process's environment).
func Home(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if d := getenv("HF_HOME"); d != "" {
		return d
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".cache", "huggingface")
}
