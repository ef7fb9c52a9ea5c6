// Package archtest checks promlib's import rules (docs/ARCHITECTURE.md):
// [Rules] is the table, [Check] applies it to the packages `go list -deps
// -json` describes, and the package's test runs it on the module.
//
//	pkgs, err := archtest.List(ctx, moduleDir, "./...")
//	for _, v := range archtest.Check(module, pkgs, archtest.Rules) {
//		t.Error(v) // "metrics imports ops (metrics -> ops): metrics must not import ops"
//	}
//
// # Guarantees
//
// A rule holds for the transitive imports of every package it applies
// to, and a violation names the package, the forbidden import and the
// chain of imports that reaches it. A rule that applies to no package
// (a package not written yet) passes.
//
// # Why internal/
//
// It is in internal/ because it is test infrastructure of the whole
// module: its test lists and checks every package.
package archtest
