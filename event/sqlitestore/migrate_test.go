package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"
)

// A file made before promlib_topics counted records and their bytes gets
// its counts on open, and counts on from there.
func TestOpenCountsAnOlderFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openStore(t, path)
	_, err := s.Append(ctx, "t", []event.Record{{ID: "a", Topic: "t", Payload: []byte(`1`)}, {ID: "b", Topic: "t", Payload: []byte(`2`)}})
	require.NoError(t, err)
	require.NoError(t, s.Close(ctx))
	db, err := sqlitestore.OpenDB(path, sqlitestore.Config{})
	require.NoError(t, err)
	w, r := db.Write, db.Read
	_, err = w.ExecContext(ctx, `ALTER TABLE promlib_topics DROP COLUMN events`)
	require.NoError(t, err)
	_, err = w.ExecContext(ctx, `ALTER TABLE promlib_topics DROP COLUMN bytes`)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, r.Close())

	s = openStore(t, path)
	_, err = s.Append(ctx, "t", []event.Record{{ID: "c", Topic: "t", Payload: []byte(`3`)}})
	require.NoError(t, err)
	ts, err := s.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	assert.Equal(t, int64(3), ts[0].Events)
	assert.Equal(t, int64(3), ts[0].Bytes, "the payloads' bytes")
}

// A file made before leases had tokens gets the column on open, also when
// several stores open it at once. Its lease rows have token 0, which no
// fence matches, not even the holder's; the holder's next grant gives it a
// real token, and a take-over a greater one.
func TestOpenGivesLeasesOfAnOlderFileTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	onClock := func(c *sqlitestore.Config) { c.Clock = clk }
	p := event.PartitionRef{Topic: "t", Group: "g", Partition: 0}
	const ttl = 10 * time.Second
	s := openStore(t, path, onClock)
	_, ok, err := s.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Close(ctx))
	db, err := sqlitestore.OpenDB(path, sqlitestore.Config{})
	require.NoError(t, err)
	w, r := db.Write, db.Read
	_, err = w.ExecContext(ctx, `ALTER TABLE promlib_leases DROP COLUMN token`)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, r.Close())

	// Processes opening the old file together: one adds the column, the
	// others find it.
	opened := make(chan error, 4)
	for range cap(opened) {
		go func() {
			s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{Clock: clk})
			if err == nil {
				err = s.Close(ctx)
			}
			opened <- err
		}()
	}
	for range cap(opened) {
		require.NoError(t, <-opened)
	}

	s = openStore(t, path, onClock)
	for _, f := range []event.Fence{{Member: "a", Token: 0}, {Member: "a", Token: 1}} {
		assert.ErrorIs(t, s.CommitCursor(ctx, p, 1, f), event.ErrLeaseLost, "a lease row of the old file matches no fence (%v)", f)
	}
	ta, ok, err := s.AcquireLease(ctx, p, "a", ttl)
	require.NoError(t, err)
	require.True(t, ok, "the holder renews its lease")
	assert.Equal(t, uint64(1), ta, "its token 0 is raised")
	require.NoError(t, s.CommitCursor(ctx, p, 2, event.Fence{Member: "a", Token: ta}))

	clk.Advance(ttl + time.Second)
	tb, ok, err := s.AcquireLease(ctx, p, "b", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, tb, ta)
	assert.ErrorIs(t, s.CommitCursor(ctx, p, 3, event.Fence{Member: "a", Token: ta}), event.ErrLeaseLost)
	require.NoError(t, s.CommitCursor(ctx, p, 3, event.Fence{Member: "b", Token: tb}))
	c, err := s.Cursors(ctx, p.Topic, p.Group)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), c[p.Partition])
}

// A file made before topics had settings gets the partitions column on
// open, its topics without settings. CreateTopic gives such a topic the
// count its records and cursors show, once, also when several stores
// create it at once: exactly one of them creates it, and all get the same
// count.
func TestOpenGivesTopicsOfAnOlderFileTheirPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openStore(t, path)
	for p := range 6 {
		_, err := s.Append(ctx, "t", []event.Record{{ID: fmt.Sprint("r", p), Topic: "t", Partition: p, Payload: []byte(`1`)}})
		require.NoError(t, err)
	}
	for _, p := range []event.PartitionRef{{Topic: "t", Group: "g", Partition: 3}, {Topic: "t", Group: "g", Partition: 7}, {Topic: "t", Group: "h", Partition: 1}} {
		require.NoError(t, s.SetCursor(ctx, p, 1))
	}
	// Another topic's records and cursors count for that topic only.
	_, err := s.Append(ctx, "u", []event.Record{{ID: "x", Topic: "u", Partition: 9, Payload: []byte(`1`)}})
	require.NoError(t, err)
	require.NoError(t, s.SetCursor(ctx, event.PartitionRef{Topic: "v", Group: "g", Partition: 20}, 0))
	require.NoError(t, s.Close(ctx))
	db, err := sqlitestore.OpenDB(path, sqlitestore.Config{})
	require.NoError(t, err)
	w, r := db.Write, db.Read
	_, err = w.ExecContext(ctx, `ALTER TABLE promlib_topics DROP COLUMN partitions`)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, r.Close())

	type answer struct {
		cfg     event.TopicConfig
		created bool
		err     error
	}
	answers := make(chan answer, 4)
	for range cap(answers) {
		go func() {
			s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
			if err != nil {
				answers <- answer{err: err}
				return
			}
			var a answer
			a.cfg, a.created, a.err = s.CreateTopic(ctx, "t", event.TopicConfig{Partitions: 1})
			a.err = errors.Join(a.err, s.Close(ctx))
			answers <- a
		}()
	}
	created := 0
	for range cap(answers) {
		a := <-answers
		require.NoError(t, a.err)
		assert.Equal(t, 8, a.cfg.Partitions, "one more than the highest partition of a record (5) or a cursor (7)")
		if a.created {
			created++
		}
	}
	assert.Equal(t, 1, created, "exactly one store creates the settings")

	s = openStore(t, path)
	got, err := s.Topic(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, 8, got.Partitions)
	_, err = s.Topic(ctx, "u")
	assert.ErrorIs(t, err, event.ErrNotFound, "a topic of the old file has no settings before CreateTopic")
	got, created2, err := s.CreateTopic(ctx, "u", event.TopicConfig{Partitions: 12})
	require.NoError(t, err)
	assert.True(t, created2)
	assert.Equal(t, 12, got.Partitions, "the asked count, higher than the records show")
	got, _, err = s.CreateTopic(ctx, "v", event.TopicConfig{Partitions: 2})
	require.NoError(t, err)
	assert.Equal(t, 21, got.Partitions, "a topic with cursors and no records")
	ts, err := s.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 2, "the topics with records, not v")
	assert.Equal(t, int64(6), ts[0].Events)

	// Records appended after the settings exist are counted on as before.
	_, err = s.Append(ctx, "t", []event.Record{{ID: "late", Topic: "t", Partition: 2, Payload: []byte(`1`)}})
	require.NoError(t, err)
	h, err := s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(7), h)
}

// Stores creating a new topic together: exactly one creates it, with its
// count, and every store gets that count. A topic created without records
// has head 0 and is not listed; its first append starts at seq 1.
func TestCreateTopicConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	stores := make([]*sqlitestore.Store, 4)
	for i := range stores {
		stores[i] = openStore(t, path)
	}
	type answer struct {
		asked, got int
		created    bool
		err        error
	}
	for round := range 5 {
		topic := fmt.Sprint("new", round)
		answers := make(chan answer, len(stores))
		start := make(chan struct{})
		for i, s := range stores {
			go func() {
				<-start
				c, created, err := s.CreateTopic(ctx, topic, event.TopicConfig{Partitions: i + 2})
				answers <- answer{asked: i + 2, got: c.Partitions, created: created, err: err}
			}()
		}
		close(start)
		var winner *answer
		var all []answer
		for range stores {
			a := <-answers
			require.NoError(t, a.err)
			all = append(all, a)
			if a.created {
				require.Nil(t, winner, "two stores created %q", topic)
				winner = &a
			}
		}
		require.NotNil(t, winner, "no store created %q", topic)
		assert.Equal(t, winner.asked, winner.got)
		for _, a := range all {
			assert.Equal(t, winner.got, a.got, "every store gets the created count")
		}
	}
	s := stores[0]
	ts, err := s.ListTopics(ctx)
	require.NoError(t, err)
	assert.Empty(t, ts, "topics without records are not listed")
	h, err := s.Head(ctx, "new0")
	require.NoError(t, err)
	assert.Zero(t, h)
	recs, err := s.Append(ctx, "new0", []event.Record{{ID: "a", Topic: "new0", Payload: []byte(`1`)}})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), recs[0].Seq)
	ts, err = s.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	assert.Equal(t, int64(1), ts[0].Events)

	err = s.AddPartitions(ctx, "new0", 1)
	assert.ErrorIs(t, err, event.ErrInvalid)
	assert.ErrorContains(t, err, "sqlitestore: ")
	assert.ErrorContains(t, err, "cannot be removed")
	_, _, err = s.CreateTopic(ctx, "bad topic", event.TopicConfig{Partitions: 1})
	assert.ErrorIs(t, err, event.ErrInvalid)
}

// A file made before groups had settings and cursors recorded the time of
// their changes gets the columns on open, also when several stores open
// it at once. Its groups have no settings until CreateGroup, and count the
// migration as activity: none is expired for having been idle before it.
func TestOpenGivesGroupsOfAnOlderFileSettingsAndActivity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	onClock := func(c *sqlitestore.Config) { c.Clock = clk }
	g := event.PartitionRef{Topic: "t", Group: "g", Partition: 1}
	h := event.PartitionRef{Topic: "t", Group: "h", Partition: 0}
	s := openStore(t, path, onClock)
	require.NoError(t, s.SetCursor(ctx, g, 3))
	require.NoError(t, s.SetCursor(ctx, h, 1))
	require.NoError(t, s.Close(ctx))
	db, err := sqlitestore.OpenDB(path, sqlitestore.Config{})
	require.NoError(t, err)
	w, r := db.Write, db.Read
	for _, stmt := range []string{
		`ALTER TABLE promlib_groups DROP COLUMN config`,
		`ALTER TABLE promlib_groups DROP COLUMN at`,
		`ALTER TABLE promlib_cursors DROP COLUMN at`,
	} {
		_, err = w.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, w.Close())
	require.NoError(t, r.Close())

	clk.Advance(72 * time.Hour)
	migrated := clk.Now().UnixMilli()
	opened := make(chan error, 4)
	for range cap(opened) {
		go func() {
			s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{Clock: clk})
			if err == nil {
				err = s.Close(ctx)
			}
			opened <- err
		}()
	}
	for range cap(opened) {
		require.NoError(t, <-opened)
	}

	s = openStore(t, path, onClock)
	clk.Advance(time.Hour)
	gis, err := s.ListGroups(ctx, "t")
	require.NoError(t, err)
	require.Len(t, gis, 2)
	for _, gi := range gis {
		assert.Nil(t, gi.Config, "group %s of the old file has no settings", gi.Group)
		assert.Equal(t, migrated, gi.LastActive, "group %s: the migration counts as activity", gi.Group)
	}
	assert.Equal(t, uint64(3), gis[0].Partitions[0].Cursor)
	_, err = s.GroupConfig(ctx, "t", "g")
	assert.ErrorIs(t, err, event.ErrNotFound)
	assert.ErrorIs(t, s.UpdateGroup(ctx, "t", "g", event.GroupConfig{MaxAttempts: 2}), event.ErrNotFound)
	done, err := s.ExpireGroup(ctx, "t", "g", migrated)
	require.NoError(t, err)
	assert.False(t, done, "a group is not expired for having been idle before the migration")

	cfg, created, err := s.CreateGroup(ctx, "t", "g", event.GroupConfig{MaxAttempts: 3})
	require.NoError(t, err)
	assert.True(t, created, "the settings of a group of the old file are created")
	assert.Equal(t, 3, cfg.MaxAttempts)
	gis, err = s.ListGroups(ctx, "t")
	require.NoError(t, err)
	require.NotNil(t, gis[0].Config)
	assert.Equal(t, 3, gis[0].Config.MaxAttempts)
	assert.Equal(t, clk.Now().UnixMilli(), gis[0].LastActive, "creating the settings is activity")
	assert.Equal(t, migrated, gis[1].LastActive)

	done, err = s.ExpireGroup(ctx, "t", "h", migrated+1)
	require.NoError(t, err)
	assert.True(t, done)
	done, err = s.ExpireGroup(ctx, "t", "g", migrated+1)
	require.NoError(t, err)
	assert.False(t, done, "g's settings are newer")
	gis, err = s.ListGroups(ctx, "t")
	require.NoError(t, err)
	require.Len(t, gis, 1)
	assert.Equal(t, "g", gis[0].Group)

	// A cursor written after the migration records its time.
	clk.Advance(time.Hour)
	require.NoError(t, s.CommitCursor(ctx, g, 4, event.Fence{}))
	gis, err = s.ListGroups(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, clk.Now().UnixMilli(), gis[0].LastActive)
}

// Stores creating a group's settings together: exactly one creates them,
// and every store gets them.
func TestCreateGroupConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	stores := make([]*sqlitestore.Store, 4)
	for i := range stores {
		stores[i] = openStore(t, path)
	}
	// Group g1 has a row already (a cursor of an older release's member).
	require.NoError(t, stores[0].SetCursor(ctx, event.PartitionRef{Topic: "t", Group: "g1"}, 0))
	for round := range 5 {
		group := fmt.Sprint("g", round)
		type answer struct {
			asked   int
			got     event.GroupConfig
			created bool
			err     error
		}
		answers := make(chan answer, len(stores))
		start := make(chan struct{})
		for i, s := range stores {
			go func() {
				<-start
				c, created, err := s.CreateGroup(ctx, "t", group, event.GroupConfig{MaxAttempts: i + 2})
				answers <- answer{asked: i + 2, got: c, created: created, err: err}
			}()
		}
		close(start)
		var winner *answer
		var all []answer
		for range stores {
			a := <-answers
			require.NoError(t, a.err)
			all = append(all, a)
			if a.created {
				require.Nil(t, winner, "two stores created %q", group)
				winner = &a
			}
		}
		require.NotNil(t, winner, "no store created %q", group)
		assert.Equal(t, winner.asked, winner.got.MaxAttempts)
		for _, a := range all {
			assert.Equal(t, winner.got, a.got, "every store gets the created settings")
		}
	}
}
