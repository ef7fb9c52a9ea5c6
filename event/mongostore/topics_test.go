package mongostore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

// A database written before topics had settings: records in partitions 0
// to 5, cursor documents up to partition 7 (as that release wrote them:
// seq only), no partitions anywhere. CreateTopic gives the topic the count
// they show, whatever count it is asked for below it.
func TestTopicSettingsOfAnOlderDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := client(t).Database(testDB(t))
	s := newStoreIn(t, db.Name(), nil)
	var recs []event.Record
	for i := range 12 {
		recs = append(recs, event.Record{ID: fmt.Sprint("r", i), TS: 1, Topic: "old", Partition: i % 6, Payload: []byte(`1`)})
	}
	_, err := s.Append(ctx, "old", recs)
	require.NoError(t, err)
	// Another topic's records and cursors are not the topic's.
	_, err = s.Append(ctx, "other", []event.Record{{ID: "x", TS: 1, Topic: "other", Partition: 40, Payload: []byte(`1`)}})
	require.NoError(t, err)
	cursors := db.Collection(mongostore.CursorsCollection)
	for _, c := range []struct {
		topic, group string
		part         int32
	}{{"old", "g1", 0}, {"old", "g1", 3}, {"old", "g2", 7}, {"old", "g2", 2}, {"other", "g1", 50}} {
		_, err := cursors.InsertOne(ctx, bson.D{
			{Key: "topic", Value: c.topic}, {Key: "group", Value: c.group}, {Key: "partition", Value: c.part}, {Key: "seq", Value: int64(1)},
		})
		require.NoError(t, err)
	}

	_, err = s.Topic(ctx, "old")
	require.ErrorIs(t, err, event.ErrNotFound, "no settings yet")
	got, created, err := s.CreateTopic(ctx, "old", event.TopicConfig{Partitions: 1})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, 8, got.Partitions, "one more than the highest partition of the topic's cursors")
	got, created, err = s.CreateTopic(ctx, "old", event.TopicConfig{Partitions: 2})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, 8, got.Partitions)
	got, err = s.Topic(ctx, "old")
	require.NoError(t, err)
	assert.Equal(t, 8, got.Partitions)

	// Records alone; a count asked above what they show wins.
	_, err = s.Append(ctx, "recs", []event.Record{{ID: "a", TS: 1, Topic: "recs", Partition: 5, Payload: []byte(`1`)}})
	require.NoError(t, err)
	got, _, err = s.CreateTopic(ctx, "recs", event.TopicConfig{Partitions: 2})
	require.NoError(t, err)
	assert.Equal(t, 6, got.Partitions, "one more than the highest partition of the topic's records")
	got, _, err = s.CreateTopic(ctx, "other", event.TopicConfig{Partitions: 60})
	require.NoError(t, err)
	assert.Equal(t, 60, got.Partitions, "the count asked, above what records and cursors show")

	// The settings sit beside the topic's counts, which stay.
	topics, err := s.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, topics, 3)
	assert.Equal(t, "old", topics[0].Topic)
	assert.Equal(t, int64(12), topics[0].Events)
	assert.Equal(t, uint64(12), topics[0].LastSeq)
}

// Concurrent creators of a topic's settings, in two stores on one
// database (as two processes): exactly one is told it created them, and
// all get its count. Also for topics whose document exists already
// without settings (one with records).
func TestCreateTopicRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testDB(t)
	stores := []*mongostore.Store{newStoreIn(t, db, nil), newStoreIn(t, db, nil)}
	_, err := stores[0].Append(ctx, "withrecords", []event.Record{{ID: "a", TS: 1, Topic: "withrecords", Partition: 2, Payload: []byte(`1`)}})
	require.NoError(t, err)
	_, err = stores[0].ListTopics(ctx) // waits for the summary: the topic's document exists
	require.NoError(t, err)
	for _, topic := range []string{"fresh", "withrecords"} {
		t.Run(topic, func(t *testing.T) {
			const callers = 8
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				counts  = map[int]int{}
				created []int
			)
			for i := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, ok, err := stores[i%2].CreateTopic(ctx, topic, event.TopicConfig{Partitions: i + 1})
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					counts[c.Partitions]++
					if ok {
						created = append(created, i+1)
					}
				}()
			}
			wg.Wait()
			require.Len(t, created, 1, "exactly one caller created the settings")
			want := max(created[0], 3)
			if topic == "fresh" {
				want = created[0]
			}
			assert.Equal(t, map[int]int{want: callers}, counts, "every caller got the count the creator stored")
			got, err := stores[1].Topic(ctx, topic)
			require.NoError(t, err)
			assert.Equal(t, want, got.Partitions)
		})
	}
}

// AddPartitions raises the count only, also when callers race; a count
// below the topic's is refused with the message of TopicConfig.CheckGrow,
// and a topic whose document holds only counts has no settings.
func TestAddPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testDB(t)
	a, b := newStoreIn(t, db, nil), newStoreIn(t, db, nil)
	_, err := a.Append(ctx, "t", []event.Record{{ID: "a", TS: 1, Topic: "t", Payload: []byte(`1`)}})
	require.NoError(t, err)
	_, err = a.ListTopics(ctx) // the topic's document exists, without settings
	require.NoError(t, err)
	assert.ErrorIs(t, a.AddPartitions(ctx, "t", 4), event.ErrNotFound)

	_, _, err = a.CreateTopic(ctx, "t", event.TopicConfig{Partitions: 2})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for n := 3; n <= 10; n++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if n%2 == 1 {
				s = b
			}
			err := s.AddPartitions(ctx, "t", n)
			if err != nil {
				// Refused only because a greater count won first.
				assert.ErrorIs(t, err, event.ErrInvalid, "%d", n)
			}
		}()
	}
	wg.Wait()
	got, err := b.Topic(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, 10, got.Partitions, "the highest count stays")

	require.NoError(t, a.AddPartitions(ctx, "t", 10), "the same count")
	err = a.AddPartitions(ctx, "t", 9)
	require.ErrorIs(t, err, event.ErrInvalid)
	assert.Equal(t, event.TopicConfig{Partitions: 10}.CheckGrow("t", 9).Error(), err.Error())
	assert.ErrorIs(t, a.AddPartitions(ctx, "t", 0), event.ErrInvalid)
	assert.ErrorIs(t, a.AddPartitions(ctx, "t", event.MaxPartitions+1), event.ErrInvalid)
	got, err = a.Topic(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, 10, got.Partitions, "refused changes change nothing")

	topics, err := a.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, topics, 1)
	assert.Equal(t, int64(1), topics[0].Events, "the counts stay beside the settings")
}

// A topic with settings and no records is not listed; its first append
// keeps the settings.
func TestTopicSettingsWithoutRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	_, _, err := s.CreateTopic(ctx, "t", event.TopicConfig{Partitions: 3})
	require.NoError(t, err)
	topics, err := s.ListTopics(ctx)
	require.NoError(t, err)
	assert.Empty(t, topics)
	_, err = s.Append(ctx, "t", []event.Record{{ID: "a", TS: 1, Topic: "t", Partition: 1, Payload: []byte(`1`)}})
	require.NoError(t, err)
	topics, err = s.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, topics, 1)
	got, err := s.Topic(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, 3, got.Partitions)
}

// A partitions field that is no count is reported, not taken as none.
func TestTopicSettingsBadDocument(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := client(t).Database(testDB(t))
	s := newStoreIn(t, db.Name(), nil)
	_, err := db.Collection(mongostore.TopicsCollection).InsertOne(ctx, bson.D{{Key: "_id", Value: "t"}, {Key: "partitions", Value: "eight"}})
	require.NoError(t, err)
	_, err = s.Topic(ctx, "t")
	assert.ErrorIs(t, err, mongostore.ErrBadDocument)
	_, _, err = s.CreateTopic(ctx, "t", event.TopicConfig{Partitions: 1})
	assert.ErrorIs(t, err, mongostore.ErrBadDocument)
}
