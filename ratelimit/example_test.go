package ratelimit_test

import (
	"fmt"
	"time"

	"github.com/promethean/promlib/ratelimit"
)

// A publish must pass its connection's bucket and its topic's bucket; a
// refusal by either charges neither.
func ExampleAllOrNone() {
	conn := ratelimit.NewLimiter(ratelimit.Limit{Rate: 100, Burst: 2})
	topics, _ := ratelimit.NewKeyed(ratelimit.KeyedConfig{Limit: ratelimit.Limit{Rate: 1, Burst: 1}})

	now := time.Now()
	for i := 0; i < 3; i++ {
		ok := ratelimit.AllOrNone(now, ratelimit.Reserve(now, conn), topics.ReserveAt(now, "orders"))
		fmt.Println(ok)
	}
	// Output:
	// true
	// false
	// false
}
