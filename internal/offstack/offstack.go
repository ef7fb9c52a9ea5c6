// Package offstack runs a call on a goroutine of its own, so that the
// stack it needs is not kept by a goroutine that lives on after it.
//
// A goroutine keeps the stack of the deepest call it made until garbage
// collections shrink it, halving it at most once each. The SQLite
// library, translated to Go, runs its virtual machine on its caller's
// stack, so a long-lived goroutine that once waited for a statement (a
// consumer group's run loop renewing its leases) would hold tens of
// kilobytes for as long as it is idle. Run gives the call a goroutine
// that ends with it, whose stack goes back to the runtime.
//
// It costs a goroutine and two switches, about a microsecond: for calls
// made now and then (an idle group's renewal every few seconds), not for
// each event.
package offstack

// Run calls f on a new goroutine and returns when f has returned. A panic
// in f is not recovered: it ends the program, as it would have where Run
// was called.
func Run(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}
