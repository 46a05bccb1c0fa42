package loader

import "mistralrs/internal/kernels"

// Packed is the memory of the weights copied at load into the kernels'
// packed layout and the instruction-set path they were packed for (the one
// in use, kernels.Path); 0 and "" when none was. It spares the server an
// import of kernels.
func (m *Model) Packed() (bytes int64, path string) {
	if m == nil || m.Net == nil || m.Net.Config.PackedBytes == 0 {
		return 0, ""
	}
	return m.Net.Config.PackedBytes, kernels.Path()
}
