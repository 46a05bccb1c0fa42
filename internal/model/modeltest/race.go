//go:build race

package modeltest

// RaceEnabled: the tests run under -race (which checks the model code,
// not the kernels): they take fewer cases.
const RaceEnabled = true
