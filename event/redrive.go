package event

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
// in this Bus start consuming that topic if they did not yet. Those of
// other Buses sharing the store start within their LeaseTTL (see
// [group.watchRedrives]); a subscription made later consumes the topic
// from its start. The record stored for a dead-lettered one has an id derived
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
	for _, s := range g.subscriptions() {
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

// redriveWatch is a group's watch on its redrive topic while the topic
// is empty, kept by the group's run loop (see [group.watchRedrives]): an
// idle group holds no goroutine for it.
type redriveWatch struct {
	mu      sync.Mutex
	started bool // the watch is asked for (followRedrives) or ran
	found   bool // the topic holds records: subscriptions consume it

	// The run loop's own, unlocked.
	on     bool            // the run loop watches
	notify <-chan struct{} // the store's watch of the topic, over a Notifier
	due    bool            // notify fired: look at the head
	next   time.Time       // when to look at the head next
	end    func()          // ends the store's watch
}

// followRedrives makes s consume its group's redrive topic: at once if the
// topic holds records, otherwise as soon as one is stored there, by this
// Bus or by another one sharing the store (see [group.watchRedrives]).
func (s *Subscription) followRedrives(ctx context.Context) error {
	g := s.g
	rt := RedriveTopic(g.topic, g.name)
	if ValidateTopic(rt) != nil {
		return nil // the name is too long: nothing can be redriven to it
	}
	w := &g.redrives
	w.mu.Lock()
	found := w.found
	w.mu.Unlock()
	if !found {
		head, err := g.b.store.Head(ctx, rt)
		if err != nil {
			return fmt.Errorf("event: head of %q: %w", rt, err)
		}
		found = head > 0
	}
	if found {
		return s.consumeRedrives(ctx)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.found:
		// The watch found a record after the look above, and may have
		// missed s.
		return s.consumeRedrives(ctx)
	case w.started:
		return nil
	case g.b.isClosed():
		return ErrClosed
	}
	w.started = true
	g.signal() // the run loop starts the watch
	return nil
}

// watchRedrives is the run loop's turn of the watch on g's redrive topic,
// once a subscription asked for it (followRedrives): it reads the topic's
// head when the watch starts and when it is due, and once the topic holds
// a record it makes g's subscriptions in this Bus consume it, and the
// watch ends; it ends too when g stops (the run loop ends). Over an
// [InProcessStore] that is a [Notifier] (the memory store) the head is
// read when the store tells of an append (the run loop waits on
// w.notify); over any other store, every LeaseTTL: one head read per
// group and period, where a watch would add a poller per redrive topic at
// the store's poll interval (a redrive is an operator's action: seconds
// until it is taken up are fine, and a store whose commands queue, such
// as a loaded test server, feels every read of an idle group). It returns
// when the run loop is to read the head next; zero for none.
func (g *group) watchRedrives(ctx context.Context, now time.Time) time.Time {
	w := &g.redrives
	if !w.on {
		w.mu.Lock()
		start := w.started && !w.found
		w.mu.Unlock()
		if !start {
			return time.Time{}
		}
		w.on, w.due = true, true
		if n, ok := g.local.(Notifier); ok {
			// A record stored between Subscribe's look at the head and
			// the watch is found by the first look below.
			w.notify, w.end = n.Watch(RedriveTopic(g.topic, g.name))
		}
	}
	if !w.due && (w.notify != nil || now.Before(w.next)) {
		return w.nextLook()
	}
	w.due = false
	every := g.b.cfg.LeaseTTL
	w.next = now.Add(every)
	rt := RedriveTopic(g.topic, g.name)
	// With the run loop's context as is, as its other store calls: a
	// context derived from it would leave it a map of children and a
	// channel, some 400 bytes per group, for as long as the group runs.
	head, err := g.b.store.Head(ctx, rt)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			g.b.log.Warn("event: read the head of a redrive topic", "topic", rt, "err", err)
		}
		return w.nextLook()
	case head == 0:
		return w.nextLook()
	}
	w.mu.Lock()
	w.found = true
	w.mu.Unlock()
	w.stop()
	// A subscription that joins from now on consumes the topic on its
	// own; those that joined before are in the snapshot. Joining the
	// redrive topic takes the Bus's lock and store calls: it runs on its
	// own, once, so that this loop's renewals never wait behind it.
	subs := g.subscriptions()
	b := g.b
	b.wg.Add(1) // the run loop holds b.wg: Close waits for this too
	go func() {
		defer b.wg.Done()
		cctx, cancel := context.WithTimeout(context.Background(), every)
		defer cancel()
		for _, s := range subs {
			if err := s.consumeRedrives(cctx); err != nil && !errors.Is(err, ErrClosed) {
				b.log.Warn("event: consume redrives", "topic", rt, "err", err)
			}
		}
	}()
	return time.Time{}
}

// subscriptions returns a copy of g's subscriptions, to go through
// without g.mu: removeSub deletes from g.subs in place, which would
// shift the subscriptions under a reader of the slice itself.
func (g *group) subscriptions() []*Subscription {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.subs)
}

// nextLook returns when the run loop reads the head next: never by the
// clock over a Notifier, which tells of appends.
func (w *redriveWatch) nextLook() time.Time {
	if w.notify != nil {
		return time.Time{}
	}
	return w.next
}

// stop ends the run loop's watch; the run loop calls it.
func (w *redriveWatch) stop() {
	if w.end != nil {
		w.end()
	}
	w.on, w.notify, w.end, w.due = false, nil, nil, false
}

// concludeRedriven settles a redriven delivery that ref names as its
// handler saw it: with the topic and id of the original record (a client
// of the WebSocket gateway acks it so). The delivery is the one of the
// group's redrive topic whose x-redrive-id is ref.ID.
func (b *Bus) concludeRedriven(ref AttemptRef, o outcome) error {
	rt := RedriveTopic(ref.Topic, ref.Group)
	c, err := b.group(rt, ref.Group)
	if err != nil {
		return err
	}
	id, ok := c.redrivenID(ref.ID)
	if !ok {
		return fmt.Errorf("%w: no redrive of id %q in group %q on %q", ErrNotInFlight, ref.ID, ref.Group, rt)
	}
	return c.conclude(&Delivery{Record: Record{ID: id}, DeliveryContext: DeliveryContext{Attempt: ref.Attempt}}, o)
}

// redrivenID returns the id of the unsettled record of g (a group on a
// redrive topic) redriven from the record with id orig.
func (g *group) redrivenID(orig string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.unsettled() {
		if e.d.Headers[HeaderRedriveID] == orig {
			return e.d.ID, true
		}
	}
	return "", false
}
