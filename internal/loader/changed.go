package loader

import (
	"errors"

	"mistralrs/internal/gguf"
)

// AsChanged reports whether err says that a loaded model's file was changed
// in place (a *gguf.ChangedError), and its message: the server answers it
// with 503 and loads the model again, without importing gguf itself.
func AsChanged(err error) (string, bool) {
	var ce *gguf.ChangedError
	if errors.As(err, &ce) {
		return ce.Error(), true
	}
	return "", false
}
