package offstack_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/promethean/promlib/internal/offstack"
	"github.com/promethean/promlib/internal/stacktest"
)

func TestRunWaitsAndSeesTheCallersMemory(t *testing.T) {
	x := 1
	offstack.Run(func() { x = int(stacktest.Deep(10)) + 41 })
	assert.Equal(t, 55+41, x, "Run returned before f, or f's write was not seen")
}

// The stack a deep call needs goes with the goroutine Run made for it:
// after it, a goroutine that called Run keeps the stack it had. Measured
// as the stacks in use with many such goroutines parked.
func TestRunLeavesTheCallersStackAsItWas(t *testing.T) {
	const n = 200
	stacks := func(viaRun bool) uint64 {
		park := make(chan struct{})
		ready := make(chan struct{}, n)
		for range n {
			go func() {
				if viaRun {
					offstack.Run(func() { stacktest.Deep(64) })
				} else {
					stacktest.Deep(64)
				}
				ready <- struct{}{}
				<-park
			}()
		}
		for range n {
			<-ready
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		close(park)
		return m.StackInuse
	}
	direct := stacks(false)
	viaRun := stacks(true)
	// Each direct goroutine holds a stack of 64 KB or more (64 frames of
	// 1 KB); through Run they hold their first few kilobytes.
	assert.Greater(t, direct, uint64(n)*64<<10, "the direct calls did not grow their stacks: the test measures nothing")
	assert.Less(t, viaRun, direct/4, "goroutines that called through Run kept the deep call's stack")
}
