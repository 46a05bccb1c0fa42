package vision_test

import (
	"mistralrs/internal/engine"
	"mistralrs/internal/vision"
)

// An encoding is what the engine runs in slices (vision does not import
// the engine; this test pins the method set to its interface).
var _ engine.Encoder = (*vision.Encoding)(nil)
