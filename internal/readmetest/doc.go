// Package readmetest holds the test that builds every Go snippet of the
// README, so that the README cannot rot: each ```go block is a whole
// program (package main with its imports), built and vetted against the
// module in the working tree. It has no code of its own.
package readmetest
