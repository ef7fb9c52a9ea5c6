package event

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Redrive: a dead-lettered record belongs to the group that failed it
// (the x-dlq-group header), and is redriven to that group only, through
// the group's redrive topic ([RedriveTopic]). A subscription of the group
// also consumes that topic, as the same group, and its handler gets each
// redriven record as it was in its topic: with the topic, id and seq of
// the original (the x-redrive-* headers tell that it is a redrive). The
// topic's other groups never see it.

// Headers of a redriven record.
const (
	// HeaderRedriveID is the id of the original record.
	HeaderRedriveID = "x-redrive-id"
	// HeaderRedriveSeq is its seq in its topic.
	HeaderRedriveSeq = "x-redrive-seq"
	// HeaderRedriveTopic is its topic.
	HeaderRedriveTopic = "x-redrive-topic"
	// HeaderRedriveGroup is the group it is redriven to.
	HeaderRedriveGroup = "x-redrive-group"
	// HeaderRedriveFrom is the id of the dead-lettered record it was
	// redriven from.
	HeaderRedriveFrom = "x-redrive-from"
)

// redriveInfix joins a topic and a group into the name of the group's
// redrive topic.
const redriveInfix = ".redrive."

// RedriveTopic returns the topic that holds the records redriven to group
// of topic: topic + ".redrive." + group.
func RedriveTopic(topic, group string) string { return topic + redriveInfix + group }

var redriveNamespace = uuid.MustParse("3d0c4f3e-8f7b-4c59-9a0e-2b1f6a7d5c21")

// Redrive delivers dead-lettered records again to the group that failed
// them, and to no other group of their topic: each record of dead (records
// of a dead-letter topic, with the x-dlq-* headers the Bus set) is stored
// in [RedriveTopic] of its topic and group, and the group's subscriptions
// in this Bus start consuming that topic if they did not yet (a
// subscription made later, here or in another process, consumes it from
// its start). The record stored for a dead-lettered one has an id derived
// from it, so redriving a record twice stores it once. It returns the
// stored records.
func (b *Bus) Redrive(ctx context.Context, dead []Record) ([]Record, error) {
	byTopic := make(map[string][]Record)
	var order []string
	for i := range dead {
		r, err := b.redriveRecord(&dead[i])
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		if _, ok := byTopic[r.Topic]; !ok {
			order = append(order, r.Topic)
		}
		byTopic[r.Topic] = append(byTopic[r.Topic], r)
	}
	var out []Record
	for _, t := range order {
		recs, err := b.publish(ctx, t, byTopic[t])
		if err != nil {
			return out, err
		}
		out = append(out, recs...)
		topic, group := byTopic[t][0].Headers[HeaderRedriveTopic], byTopic[t][0].Headers[HeaderRedriveGroup]
		if err := b.consumeRedrives(ctx, topic, group); err != nil {
			return out, err
		}
	}
	return out, nil
}

// DeadLetterOrigin returns the topic, group, id and seq of the record that
// the dead-lettered record d was made of; for a record dead-lettered after
// a redrive, those of the original.
func DeadLetterOrigin(d *Record) (topic, group, id string, seq uint64, err error) {
	h := d.Headers
	topic, group, id = h[HeaderDLQTopic], h[HeaderDLQGroup], h[HeaderDLQID]
	seqs := h[HeaderDLQSeq]
	if h[HeaderRedriveID] != "" {
		topic, id, seqs = h[HeaderRedriveTopic], h[HeaderRedriveID], h[HeaderRedriveSeq]
	}
	if topic == "" || group == "" || id == "" {
		return "", "", "", 0, invalid("record", "id %q has no %s, %s and %s headers: not dead-lettered by a Bus", d.ID, HeaderDLQTopic, HeaderDLQGroup, HeaderDLQID)
	}
	seq, perr := strconv.ParseUint(seqs, 10, 64)
	if perr != nil {
		return "", "", "", 0, invalid("record", "id %q: seq header %q is not a number", d.ID, seqs)
	}
	return topic, group, id, seq, nil
}

func (b *Bus) redriveRecord(d *Record) (Record, error) {
	topic, group, id, seq, err := DeadLetterOrigin(d)
	if err != nil {
		return Record{}, err
	}
	rt := RedriveTopic(topic, group)
	if err := ValidateTopic(rt); err != nil {
		return Record{}, fmt.Errorf("redrive topic of %q and group %q: %w", topic, group, err)
	}
	h := make(map[string]string, len(d.Headers)+5)
	for k, v := range d.Headers {
		if !strings.HasPrefix(k, "x-dlq-") && !strings.HasPrefix(k, "x-redrive-") {
			h[k] = v
		}
	}
	h[HeaderRedriveID] = id
	h[HeaderRedriveSeq] = strconv.FormatUint(seq, 10)
	h[HeaderRedriveTopic] = topic
	h[HeaderRedriveGroup] = group
	h[HeaderRedriveFrom] = d.ID
	r := Record{
		ID: uuid.NewSHA1(redriveNamespace, []byte(d.Topic+"\x00"+d.ID)).String(), TS: b.clk.Now().UnixMilli(), Topic: rt,
		Key: d.Key, Headers: h, Payload: d.Payload, ContentType: d.ContentType, CausedBy: []string{d.ID}, Tags: d.Tags, SID: d.SID,
	}
	r.Partition = PartitionOf(r.Key, r.ID, b.cfg.Partitions)
	return r, nil
}

// consumeRedrives makes the subscriptions of group on topic in this Bus
// consume the group's redrive topic.
func (b *Bus) consumeRedrives(ctx context.Context, topic, group string) error {
	b.mu.Lock()
	g := b.groups[groupKey{topic, group}]
	b.mu.Unlock()
	if g == nil {
		return nil
	}
	for _, s := range g.subsSnapshot() {
		if err := s.consumeRedrives(ctx); err != nil {
			return err
		}
	}
	return nil
}

// consumeRedrives starts the companion subscription of s on its group's
// redrive topic, if it has none.
func (s *Subscription) consumeRedrives(ctx context.Context) error {
	if s.redriveOf != "" {
		return nil // s is a companion
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.redrive != nil || s.rclosed {
		return nil
	}
	topic, group := s.g.topic, s.g.name
	o := s.opts
	o.Start = StartEarliest
	o.Filter = nil
	h := s.h
	c, err := s.g.b.join(ctx, RedriveTopic(topic, group), group, func(ctx context.Context, d *Delivery) error {
		orig := *d
		orig.Topic = topic
		if id := d.Headers[HeaderRedriveID]; id != "" {
			orig.ID = id
		}
		if seq, err := strconv.ParseUint(d.Headers[HeaderRedriveSeq], 10, 64); err == nil {
			orig.Seq = seq
		}
		return h(ctx, &orig)
	}, o, topic)
	if err != nil {
		return fmt.Errorf("event: consume the redrives of group %q on %q: %w", group, topic, err)
	}
	s.redrive = c
	return nil
}
