package mongostore_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

func TestConnectUnreachable(t *testing.T) {
	t.Parallel()
	// A port that nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	start := time.Now()
	_, err = mongostore.Connect(context.Background(), "mongodb://"+addr+"/", mongostore.Config{ConnectTimeout: time.Second})
	assert.ErrorIs(t, err, mongostore.ErrUnreachable)
	assert.Less(t, time.Since(start), 5*time.Second, "the timeout bounds Connect")
}

func TestConnectBadURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "http://localhost", "mongodb://", "mongodb://host:notaport"} {
		_, err := mongostore.Connect(context.Background(), u, mongostore.Config{ConnectTimeout: time.Second})
		assert.ErrorIs(t, err, event.ErrInvalid, "%q", u)
		assert.ErrorContains(t, err, "uri", "%q", u)
	}
}

func TestConnect(t *testing.T) {
	t.Parallel()
	u := mongoURL(t)
	client(t) // skip when unreachable
	db := testDB(t)
	ctx := context.Background()
	s, err := mongostore.Connect(ctx, u, mongostore.Config{Database: db})
	require.NoError(t, err)
	_, err = s.Append(ctx, "t", []event.Record{rec("t", "a")})
	assert.ErrorIs(t, err, mongostore.ErrNoIndexes, "no append without the unique indexes")
	require.NoError(t, s.EnsureIndexes(ctx))
	r, err := s.Append(ctx, "t", []event.Record{rec("t", "a")})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), r[0].Seq)
	require.NoError(t, s.Close(ctx))
	_, err = s.Append(ctx, "t", []event.Record{rec("t", "b")})
	assert.ErrorIs(t, err, mongostore.ErrClosed)
	require.NoError(t, s.Close(ctx), "Close is idempotent")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   mongostore.Config
		field string
	}{
		{"zero", mongostore.Config{}, ""},
		{"dbWithDot", mongostore.Config{Database: "a.b"}, "Database"},
		{"dbTooLong", mongostore.Config{Database: string(make([]byte, 64))}, "Database"},
		{"prefixDollar", mongostore.Config{CollectionPrefix: "$x"}, "CollectionPrefix"},
		{"negativeBatch", mongostore.Config{MaxBatch: -1}, "MaxBatch"},
		{"negativeTimeout", mongostore.Config{WriteTimeout: -time.Second}, "WriteTimeout"},
		{"negativePoll", mongostore.Config{PollInterval: -time.Second}, "PollInterval"},
		{"tombstonesBeforeWrites", mongostore.Config{TombstoneTTL: time.Minute}, "TombstoneTTL"},
		{"tombstonesKept", mongostore.Config{TombstoneTTL: -1}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, event.ErrInvalid)
			assert.ErrorContains(t, err, tc.field)
		})
	}
	err := (&mongostore.Config{MaxBatch: -1, PollInterval: -1}).Validate()
	assert.ErrorContains(t, err, "MaxBatch")
	assert.ErrorContains(t, err, "PollInterval", "all problems are reported")
	_, err = mongostore.New(nil, mongostore.Config{})
	assert.ErrorIs(t, err, event.ErrInvalid)
}
