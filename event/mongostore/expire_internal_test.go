package mongostore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// ExpireGroup checks the members and the group's activity, then deletes
// the settings on condition that they show no activity since: a member
// that joins, or a Subscribe that reads the settings, between the two
// keeps the group whole.
func TestExpireGroupKeepsAGroupJoinedAfterItsCheck(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	for _, tc := range []struct {
		name string
		join func(t *testing.T, s *Store)
	}{
		{"heartbeat", func(t *testing.T, s *Store) {
			_, err := s.Heartbeat(context.Background(), "t", "g", "late", ttl)
			require.NoError(t, err)
		}},
		{"subscribe", func(t *testing.T, s *Store) {
			_, created, err := s.CreateGroup(context.Background(), "t", "g", event.GroupConfig{})
			require.NoError(t, err)
			require.False(t, created)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			s := fakeStore(t, clk)
			ctx := context.Background()
			_, _, err := s.CreateGroup(ctx, "t", "g", event.GroupConfig{MaxAttempts: 3})
			require.NoError(t, err)
			require.NoError(t, s.CommitCursor(ctx, event.PartitionRef{Topic: "t", Group: "g"}, 4, event.Fence{}))
			_, err = s.Heartbeat(ctx, "t", "g", "m", ttl)
			require.NoError(t, err)
			clk.Advance(time.Hour)
			cut := clk.Now().Add(-time.Minute).UnixMilli()

			s.afterExpireCheck = func() {
				s.afterExpireCheck = nil
				tc.join(t, s)
			}
			done, err := s.ExpireGroup(ctx, "t", "g", cut)
			require.NoError(t, err)
			assert.False(t, done, "a group joined after the check is kept")
			cfg, err := s.GroupConfig(ctx, "t", "g")
			require.NoError(t, err, "and its settings")
			assert.Equal(t, 3, cfg.MaxAttempts)
			c, err := s.Cursors(ctx, "t", "g")
			require.NoError(t, err)
			assert.Equal(t, map[int]uint64{0: 4}, c, "and its cursors")

			// Without a join, the same call expires it.
			clk.Advance(time.Hour)
			done, err = s.ExpireGroup(ctx, "t", "g", clk.Now().Add(-time.Minute).UnixMilli())
			require.NoError(t, err)
			assert.True(t, done)
			_, err = s.GroupConfig(ctx, "t", "g")
			assert.ErrorIs(t, err, event.ErrNotFound)
		})
	}
}

// A member's renewals do not write the group's settings; its join does.
func TestHeartbeatRaisesGroupActivityOnJoinOnly(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := fakeStore(t, clk)
	ctx := context.Background()
	const ttl = 10 * time.Second
	active := func() time.Time {
		t.Helper()
		var d groupSettingsDoc
		require.NoError(t, s.gsettings.FindOne(ctx, bson.D{{Key: fID, Value: groupID("t", "g")}}).Decode(&d))
		return d.Active
	}
	_, _, err := s.CreateGroup(ctx, "t", "g", event.GroupConfig{})
	require.NoError(t, err)
	assert.True(t, active().Equal(clk.Now()), "created now")

	_, err = s.Heartbeat(ctx, "t", "g", "m", ttl)
	require.NoError(t, err)
	assert.True(t, active().Equal(clk.Now().Add(ttl)), "a join raises it to the member's expiry")
	joined := clk.Now()

	clk.Advance(time.Second)
	_, err = s.Heartbeat(ctx, "t", "g", "m", ttl)
	require.NoError(t, err)
	assert.True(t, active().Equal(joined.Add(ttl)), "a renewal leaves it")

	clk.Advance(time.Minute) // the member's heartbeat ran out
	_, err = s.Heartbeat(ctx, "t", "g", "m", ttl)
	require.NoError(t, err)
	assert.True(t, active().Equal(clk.Now().Add(ttl)), "a member that comes back joins again")

	require.NoError(t, s.Leave(ctx, "t", "g", "m"))
	clk.Advance(time.Second)
	_, err = s.Heartbeat(ctx, "t", "g", "m", ttl)
	require.NoError(t, err)
	assert.True(t, active().Equal(clk.Now().Add(ttl)), "and so does one that left")
}
