package clock_test

import (
	"fmt"
	"time"

	"github.com/promethean/promlib/clock"
)

// A Fake clock stands still until the test moves it; a timer fires when
// the clock passes its time, not before.
func ExampleFake() {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	lease := clk.NewTimer(30 * time.Second)
	defer lease.Stop()

	clk.Advance(29 * time.Second)
	select {
	case <-lease.C():
		fmt.Println("fired early")
	default:
		fmt.Println("after 29s:", clk.Now().Format(time.TimeOnly), "armed timers:", clk.Timers())
	}
	clk.Advance(time.Second)
	at := <-lease.C()
	fmt.Println("lease ended at", at.Format(time.TimeOnly), "armed timers:", clk.Timers())
	// Output:
	// after 29s: 03:04:34 armed timers: 1
	// lease ended at 03:04:35 armed timers: 0
}

// Or gives the system clock for a nil Clock: what every promlib Config
// does with a Clock it was not given.
func ExampleOr() {
	var configured clock.Clock // a Config's Clock left unset
	clk := clock.Or(configured)
	fmt.Println(clk == clock.System(), clock.Since(clk, clk.Now()) < time.Minute)
	// Output: true true
}
