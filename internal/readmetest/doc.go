// Package readmetest holds the test that builds every Go snippet of the
// README, so that the README cannot rot: each ```go block is a whole
// program (package main with its imports), built and vetted against the
// module in the working tree. It has no code of its own.
//
// # Why internal/
//
// It is in internal/ because it is test infrastructure of the whole
// module: the README shows every layer.
package readmetest
