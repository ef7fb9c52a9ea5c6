// Package examples holds promlib's example programs (hub, process,
// bench) and the test that runs each of them with bad flags: every
// program refuses a bad command line with exit status 2 and one line
// that names the flag and what it allows, and describes itself with -h.
package examples
