package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff: the delay after the first failure is
// Initial, doubled for each further failure, never over Max.
type Policy struct {
	Initial time.Duration
	Max     time.Duration
	// Jitter in [0, 1] is the share of each delay that is random: 0.2
	// gives a delay in [0.8d, d]. Zero gives exact delays.
	Jitter float64
}

// Delay returns the delay before retrying after the given failure
// (1 for the first). A failure below 1 is taken as 1.
func (p Policy) Delay(failure int) time.Duration {
	d := p.Initial
	for i := 1; i < failure && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	if p.Jitter > 0 && d > 0 {
		j := min(p.Jitter, 1)
		d -= time.Duration(rand.Float64() * j * float64(d))
	}
	return d
}
