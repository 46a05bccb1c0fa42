package gguf

// Parse decodes a GGUF file held in memory (an embedded or generated model);
// name is used in errors. Tensor data aliases b, so b must not change.
func Parse(name string, b []byte) (*File, error) { return parse(name, b) }
