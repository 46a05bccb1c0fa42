// Package archtest holds the tests that keep docs/architecture.md true to
// the code: TestMustNotImport checks its package table's "must not import"
// column against the packages' imports.
package archtest
