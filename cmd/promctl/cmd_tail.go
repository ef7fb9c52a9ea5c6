package main

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/replay"
	"github.com/promethean/promlib/ws/wsclient"
)

func init() {
	register(&command{
		Name:     "tail",
		Synopsis: "TOPIC [-from earliest|latest|seq:N|ts:MS] [-group G] [-n COUNT] [-o table|json]",
		Summary:  "follow a topic live; with -group, as a member of that group, acking what it prints",
		Help: `Prints each event as it comes, until interrupted or after -n events.

Without -group, tail is a live viewer (a subscription without a group,
over the WebSocket API): it changes no cursor and no group sees it.
-from says where it starts: latest (the default: what is published from
now), earliest, seq:N (the record of seq N first) or ts:MS (the first
record with ts at or after MS, Unix ms or an RFC 3339 time).

With -group G, tail joins group G and acks each event once printed (it
is then settled for the group: the group's other members do not get
it). -from is the group's start when G is new; a group that has a
cursor goes on from it. With -n, events delivered beyond the count are
not acked: they go back to the group when tail ends.

Output: "#SEQ TIME [key=K] [h=v...] PAYLOAD" a line, or with -o json each
record as one JSON line (as export writes them).`,
		Run: runTail,
	})
}

func runTail(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
	e.outputFlag(fs)
	from := fs.String("from", "latest", "where to start: earliest, latest, seq:N or ts:MS")
	group := fs.String("group", "", "join this consumer group and ack each event printed")
	n := fs.Int("n", 0, "stop after this many events (0: follow until interrupted)")
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argCount(pos, 1, 1, "TOPIC"); err != nil {
		return err
	}
	topic := pos[0]
	if err := topicArg(topic); err != nil {
		return err
	}
	start, err := parsePosition("from", *from)
	if err != nil {
		return err
	}
	if *n < 0 {
		return usagef("-n: %d, want 0 (follow until interrupted) or more", *n)
	}
	if *group != "" {
		if err := event.ValidateGroup(*group); err != nil {
			return usagef("-group: %s", fieldMsg(err))
		}
	}

	t := &tailer{e: e, max: *n, done: make(chan struct{})}
	var since *uint64
	if *group == "" && start.kind != "latest" {
		s, err := liveSince(ctx, e.hub, topic, start)
		if err != nil {
			return err
		}
		since = &s
	}
	c, err := e.dial(ctx, true)
	if err != nil {
		return err
	}
	defer c.Close()

	var subDone <-chan struct{}
	var subErr func() error
	var closeSub func() error
	if *group == "" {
		opts := []wsclient.LiveOption{wsclient.WithOnGap(t.gap)}
		if since != nil {
			opts = append(opts, wsclient.WithSince(*since))
		}
		live, err := c.SubscribeLive(ctx, topic, t.live, opts...)
		if err != nil {
			return wsErr(err)
		}
		subDone, subErr, closeSub = live.Done(), live.Err, live.Close
	} else {
		opts := []event.SubscribeOption{event.WithManualAck(), startOption(start)}
		sub, err := c.Subscribe(ctx, topic, *group, t.member, opts...)
		if err != nil {
			return wsErr(err)
		}
		subDone, subErr, closeSub = sub.Done(), sub.Err, sub.Close
	}
	select {
	case <-ctx.Done():
		_ = closeSub()
		return t.err()
	case <-t.done:
		if err := closeSub(); err != nil {
			return wsErr(err)
		}
		return t.err()
	case <-subDone:
		if err := subErr(); err != nil {
			return wsErr(err)
		}
		return t.err()
	}
}

// startOption is the start of a new group at p.
func startOption(p position) event.SubscribeOption {
	switch p.kind {
	case "earliest":
		return event.FromEarliest()
	case "seq":
		return event.FromSeq(p.seq)
	case "ts":
		return event.FromTS(p.ts)
	}
	return event.FromLatest()
}

// liveSince returns the last seq a live subscription starting at p has
// seen: p's seq - 1, or for a time the seq before the first record at or
// after it (GET /replay?from=ts), or the head when there is none.
func liveSince(ctx context.Context, h *hubClient, topic string, p position) (uint64, error) {
	switch p.kind {
	case "earliest":
		return 0, nil
	case "seq":
		return p.seq - 1, nil
	}
	var page replay.ReplayPage
	q := url.Values{"topic": {topic}, "from": {"ts"}, "ts": {strconv.FormatInt(p.ts, 10)}, "limit": {"1"}}
	if err := h.getJSON(ctx, "/replay", q, &page, nil); err != nil {
		return 0, err
	}
	if len(page.Events) > 0 {
		return page.Events[0].Seq - 1, nil
	}
	return page.NextSeq - 1, nil
}

// tailer prints the events of a tail.
type tailer struct {
	e    *env
	max  int
	mu   sync.Mutex
	seen int
	done chan struct{} // closed by stop
	once sync.Once
	fail error
}

// stop ends the tail: the count is reached or stdout failed.
func (t *tailer) stop() { t.once.Do(func() { close(t.done) }) }

// take reports whether m is to be printed (the count is not reached),
// and counts it.
func (t *tailer) take() (ok, last bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fail != nil || (t.max > 0 && t.seen >= t.max) {
		return false, false
	}
	t.seen++
	return true, t.max > 0 && t.seen == t.max
}

func (t *tailer) live(_ context.Context, m *wsclient.Message) error {
	ok, last := t.take()
	if !ok {
		return nil
	}
	if t.print(&m.Record) && last {
		t.stop()
	}
	return nil
}

// member prints m, then acks it; past the count it leaves m unacked, so
// that it goes back to the group when the subscription ends.
func (t *tailer) member(ctx context.Context, m *wsclient.Message) error {
	ok, last := t.take()
	if !ok {
		return nil
	}
	if !t.print(&m.Record) {
		return nil
	}
	if err := m.Ack(ctx); err != nil {
		fmt.Fprintf(t.e.stderr, "promctl: tail: ack of seq %d refused (it will be delivered again): %v\n", m.Seq, wsErr(err))
	}
	if last {
		t.stop()
	}
	return nil
}

func (t *tailer) gap(from, to uint64, reason string) {
	fmt.Fprintf(t.e.stderr, "promctl: tail: seqs %d to %d not delivered: %s\n", from, to, reason)
}

// print writes r to stdout; a failed write stops the tail.
func (t *tailer) print(r *event.Record) bool {
	var line []byte
	if t.e.json() {
		line = event.AppendRecordJSON(nil, r)
	} else {
		line = []byte(recordLine(r))
	}
	line = append(line, '\n')
	if _, err := t.e.stdout.Write(line); err != nil {
		t.mu.Lock()
		t.fail = err
		t.mu.Unlock()
		t.stop()
		return false
	}
	return true
}

func (t *tailer) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fail != nil {
		return fmt.Errorf("writing to stdout: %w", t.fail)
	}
	return nil
}

// recordLine is a record on one line for people: "#SEQ TIME [key=K]
// [h=v...] PAYLOAD".
func recordLine(r *event.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s", r.Seq, stamp(r.TS))
	if r.Key != "" {
		fmt.Fprintf(&b, " key=%s", r.Key)
	}
	keys := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, r.Headers[k])
	}
	if r.IsBinary() {
		fmt.Fprintf(&b, " (%d bytes of %s)", len(r.Payload), r.ContentType)
	} else {
		b.WriteByte(' ')
		b.Write(r.Payload)
	}
	return cell(b.String())
}
