package mongostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
)

// Group settings ([event.GroupStore]) are documents of the groupsettings
// collection, one per group that has settings:
//
//	{_id: "<topic>/<group>", topic, group, config: "<JSON>",
//	 createdAt: date, active: date}
//
// config is the JSON text of the [event.GroupConfig] (its MarshalJSON,
// durations in ms): the event package owns the format, so a field it adds
// needs no change here, and a text keeps every value exact (a start seq
// beyond int64, a number an operator wrote as a double in a shell).
// Nothing queries inside it. active is the latest time the settings
// showed the group in use: their creation, a CreateGroup that found them
// (a Subscribe), and the expiry of a member that joined (see Heartbeat);
// it is raised with $max, and ExpireGroup deletes the document on
// condition that it is still before its cut-off.
//
// They are not in the groups collection: its documents are per topic
// (the names of its groups, see summary.go), group names hold '.' (so a
// group cannot be a field path of its topic's document), and one document
// would take the settings and activity writes of all the topic's groups.
// A document per group read by _id, and by the _id range
// ["<topic>/", "<topic>0") for ListGroups (topic names hold no '/'; '0'
// follows it), needs no index beyond _id.
//
// CreateGroup is atomic by the unique _id: an update of the document
// (found: the settings are returned), else an insert of it (inserted:
// this call created them; a duplicate key: another call inserted it
// first, and it is read again). Of concurrent creators, in one process or
// several, exactly one insert succeeds. Documents are never updated to
// have no settings (only deleted), so a duplicate key always means the
// settings exist, unless DeleteGroup or ExpireGroup deleted them
// meanwhile: then the round runs again. (FerretDB 1.24 reports a
// duplicate key without naming the index; this collection has only the
// one of _id.)

const (
	fConfig    = "config"
	fCreatedAt = "createdAt"
	fActive    = "active"
)

var _ event.GroupStore = (*Store)(nil)

// groupSettingsDoc is a document of the groupsettings collection.
type groupSettingsDoc struct {
	ID     string    `bson:"_id"`
	Group  string    `bson:"group"`
	Config string    `bson:"config"`
	Active time.Time `bson:"active"`
}

func groupID(topic, group string) string { return topic + "/" + group }

func checkGroupNames(topic, group string) error {
	return errors.Join(event.ValidateTopic(topic), event.ValidateGroup(group))
}

// decode returns the settings the document holds.
func (d *groupSettingsDoc) decode() (event.GroupConfig, error) {
	var cfg event.GroupConfig
	if d.Config == "" {
		return cfg, fmt.Errorf("%w: group settings %q: no config", ErrBadDocument, d.ID)
	}
	if err := json.Unmarshal([]byte(d.Config), &cfg); err != nil {
		return cfg, fmt.Errorf("%w: group settings %q: config: %v", ErrBadDocument, d.ID, err)
	}
	return cfg, nil
}

// CreateGroup implements [event.GroupStore] (see above).
func (s *Store) CreateGroup(ctx context.Context, topic, group string, cfg event.GroupConfig) (event.GroupConfig, bool, error) {
	if err := checkGroupNames(topic, group); err != nil {
		return event.GroupConfig{}, false, err
	}
	if err := cfg.Validate(); err != nil {
		return event.GroupConfig{}, false, err
	}
	text, err := json.Marshal(cfg)
	if err != nil {
		return event.GroupConfig{}, false, fmt.Errorf("mongostore: create group %q of %q: %w", group, topic, err)
	}
	id := groupID(topic, group)
	for range createTopicTries {
		now := s.cfg.Clock.Now()
		var d groupSettingsDoc
		err := s.gsettings.FindOneAndUpdate(ctx, bson.D{{Key: fID, Value: id}},
			bson.D{{Key: "$max", Value: bson.D{{Key: fActive, Value: now}}}}).Decode(&d)
		if err == nil {
			stored, err := d.decode()
			return stored, false, err
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return event.GroupConfig{}, false, fmt.Errorf("mongostore: create group %q of %q: %w", group, topic, err)
		}
		_, err = s.gsettings.InsertOne(ctx, bson.D{
			{Key: fID, Value: id}, {Key: "topic", Value: topic}, {Key: "group", Value: group},
			{Key: fConfig, Value: string(text)}, {Key: fCreatedAt, Value: now}, {Key: fActive, Value: now},
		})
		if err == nil {
			return cfg, true, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return event.GroupConfig{}, false, fmt.Errorf("mongostore: create group %q of %q: %w", group, topic, err)
		}
		// Another call created them first: read them.
	}
	return event.GroupConfig{}, false, fmt.Errorf("mongostore: create group %q of %q: lost %d races for the group's settings in a row", group, topic, createTopicTries)
}

// GroupConfig implements [event.GroupStore] with a read by _id.
func (s *Store) GroupConfig(ctx context.Context, topic, group string) (event.GroupConfig, error) {
	if err := checkGroupNames(topic, group); err != nil {
		return event.GroupConfig{}, err
	}
	var d groupSettingsDoc
	err := s.gsettings.FindOne(ctx, bson.D{{Key: fID, Value: groupID(topic, group)}},
		options.FindOne().SetProjection(bson.D{{Key: fConfig, Value: 1}})).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return event.GroupConfig{}, fmt.Errorf("%w: settings of group %q on topic %q", event.ErrNotFound, group, topic)
	}
	if err != nil {
		return event.GroupConfig{}, fmt.Errorf("mongostore: settings of group %q on %q: %w", group, topic, err)
	}
	return d.decode()
}

// UpdateGroup implements [event.GroupStore] with one update by _id,
// which creates nothing: no match is a group without settings.
func (s *Store) UpdateGroup(ctx context.Context, topic, group string, cfg event.GroupConfig) error {
	if err := checkGroupNames(topic, group); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	text, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("mongostore: update group %q of %q: %w", group, topic, err)
	}
	r, err := s.gsettings.UpdateOne(ctx, bson.D{{Key: fID, Value: groupID(topic, group)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: fConfig, Value: string(text)}}}})
	if err != nil {
		return fmt.Errorf("mongostore: update group %q of %q: %w", group, topic, err)
	}
	if r.MatchedCount == 0 {
		return fmt.Errorf("%w: settings of group %q on topic %q", event.ErrNotFound, group, topic)
	}
	return nil
}

// groupSettings returns the settings documents of topic's groups, by
// group.
func (s *Store) groupSettings(ctx context.Context, topic string) (map[string]*groupSettingsDoc, error) {
	var docs []groupSettingsDoc
	err := findAll(ctx, s.gsettings, bson.D{{Key: fID, Value: bson.D{
		{Key: "$gte", Value: topic + "/"}, {Key: "$lt", Value: topic + "0"},
	}}}, &docs)
	if err != nil {
		return nil, fmt.Errorf("mongostore: group settings of %q: %w", topic, err)
	}
	out := make(map[string]*groupSettingsDoc, len(docs))
	for i := range docs {
		d := &docs[i]
		if d.Group == "" || d.ID != groupID(topic, d.Group) {
			return nil, fmt.Errorf("%w: group settings %q: group %q", ErrBadDocument, d.ID, d.Group)
		}
		out[d.Group] = d
	}
	return out, nil
}

// touchGroup raises the active field of the group's settings to t, if the
// group has settings. A failure is logged: the caller's write stands, and
// the group's LastActive still shows it (from the members).
func (s *Store) touchGroup(ctx context.Context, topic, group string, t time.Time) {
	_, err := s.gsettings.UpdateOne(ctx, bson.D{{Key: fID, Value: groupID(topic, group)}},
		bson.D{{Key: "$max", Value: bson.D{{Key: fActive, Value: t}}}})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("mongostore: raise the activity of a group failed", "topic", topic, "group", group, "err", err)
	}
}

// later raises *ms (Unix ms) to t, unless t is unset.
func later(ms *int64, t time.Time) {
	if !t.IsZero() && t.UnixMilli() > *ms {
		*ms = t.UnixMilli()
	}
}
