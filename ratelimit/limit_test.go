package ratelimit

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimitValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		l       Limit
		wantErr error
	}{
		{name: "zero", l: Limit{}},
		{name: "rate", l: Limit{Rate: 10}},
		{name: "negative rate", l: Limit{Rate: -1}, wantErr: ErrInvalid},
		{name: "NaN rate", l: Limit{Rate: math.NaN()}, wantErr: ErrInvalid},
		{name: "negative burst", l: Limit{Rate: 1, Burst: -1}, wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.l.Validate()
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.wantErr)
		})
	}
	err := Limit{Rate: -1, Burst: -1}.Validate()
	assert.ErrorContains(t, err, "Rate")
	assert.ErrorContains(t, err, "Burst")
}

func TestNewLimiterDisabledIsNil(t *testing.T) {
	t.Parallel()
	assert.Nil(t, NewLimiter(Limit{}))
	assert.Nil(t, Reserve(time.Now(), nil))
	assert.True(t, AllOrNone(time.Now(), nil, nil))
	l := NewLimiter(Limit{Rate: 2.5})
	require.NotNil(t, l)
	assert.Equal(t, 3, l.Burst(), "default burst is the rate rounded up")
}

// TestAcceptedRate drives a bucket with a simulated clock far faster than
// its rate and counts what passes: rate*elapsed + burst.
func TestAcceptedRate(t *testing.T) {
	t.Parallel()
	l := NewLimiter(Limit{Rate: 100, Burst: 10})
	start := time.Unix(1_000_000, 0)
	accepted := 0
	for i := 0; i < 10_000; i++ { // 10 s at 1,000 attempts/s
		if AllOrNone(start.Add(time.Duration(i)*time.Millisecond), Reserve(start.Add(time.Duration(i)*time.Millisecond), l)) {
			accepted++
		}
	}
	assert.InDelta(t, 100*10+10, accepted, 2)
}

// TestAllOrNoneChargesNothingOnRefusal: a refused second bucket gives the
// first its token back.
func TestAllOrNoneChargesNothingOnRefusal(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	conn := NewLimiter(Limit{Rate: 1, Burst: 5})
	topic := NewLimiter(Limit{Rate: 1, Burst: 1})
	require.True(t, AllOrNone(now, Reserve(now, conn), Reserve(now, topic)))
	for i := 0; i < 3; i++ {
		assert.False(t, AllOrNone(now, Reserve(now, conn), Reserve(now, topic)))
	}
	assert.InDelta(t, 4, conn.TokensAt(now), 1e-9, "the refused publishes cost the connection nothing")
}

func TestErrInvalidNamesField(t *testing.T) {
	t.Parallel()
	_, err := NewKeyed(KeyedConfig{MaxKeys: -1})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrInvalid))
	assert.ErrorContains(t, err, "MaxKeys")
}
