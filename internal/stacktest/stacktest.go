// Package stacktest gives tests a call that needs a deep stack, as the
// calls of the SQLite library do: it is C translated to Go and runs its
// virtual machine on its caller's stack. Tests of what a long-lived
// goroutine keeps after such a call (package offstack, a group's run
// loop, a connection's reader) make it through a store wrapper.
package stacktest

// Deep calls itself n times below its own frame, each frame holding 1 KB,
// so that its goroutine's stack grows past n KB; it returns a byte made
// of every frame, so that none is left out.
//
//go:noinline
func Deep(n int) byte {
	var buf [1024]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return buf[0]
	}
	return Deep(n-1) + buf[n%len(buf)]
}
