package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDelay(t *testing.T) {
	t.Parallel()
	p := Policy{Initial: 100 * time.Millisecond, Max: time.Second}
	tests := []struct {
		failure int
		want    time.Duration
	}{
		{0, 100 * time.Millisecond},
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, time.Second},
		{1000, time.Second},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, p.Delay(tt.failure), "failure %d", tt.failure)
	}
	assert.Equal(t, time.Duration(0), Policy{}.Delay(3))
}

func TestDelayJitterStaysInRange(t *testing.T) {
	t.Parallel()
	p := Policy{Initial: time.Second, Max: time.Second, Jitter: 0.25}
	for range 1000 {
		d := p.Delay(1)
		assert.GreaterOrEqual(t, d, 750*time.Millisecond)
		assert.LessOrEqual(t, d, time.Second)
	}
}
