//go:build race

package nn

// raceEnabled: sync.Pool drops its items at random under -race, so the
// kernels' pooled jobs allocate; the allocation checks skip.
const raceEnabled = true
