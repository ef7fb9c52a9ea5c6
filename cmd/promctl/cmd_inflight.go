package main

import (
	"context"
	"net/url"
	"time"

	"github.com/promethean/promlib/ops"
)

func init() {
	register(&command{
		Name:     "inflight",
		Synopsis: "[TOPIC [GROUP]] [-o table|json]",
		Summary:  "show the deliveries the hub holds: in flight, waiting, held, buffered per group; with GROUP each record",
		Help: `Reads GET /ops/inflight: the groups with subscribers in the hub (its
gateway's connections), with their deliveries in flight (leased, not
settled), waiting (backoff before a redelivery), held (behind their key)
and buffered. With TOPIC and GROUP, each unsettled record: state,
attempt, lease or backoff end, and the reason of its last nack.`,
		Run: runInflight,
	})
}

func runInflight(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
	e.outputFlag(fs)
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argCount(pos, 0, 2, "TOPIC", "GROUP"); err != nil {
		return err
	}
	q := url.Values{}
	if len(pos) >= 1 {
		if err := topicArg(pos[0]); err != nil {
			return err
		}
		q.Set("topic", pos[0])
	}
	if len(pos) == 2 {
		if err := groupArg(pos[1]); err != nil {
			return err
		}
		q.Set("group", pos[1])
	}
	var resp ops.InflightResponse
	var raw []byte
	if err := e.hub.getJSON(ctx, "/ops/inflight", q, &resp, &raw); err != nil {
		return err
	}
	if e.json() {
		return printJSON(e.stdout, raw)
	}
	if len(pos) < 2 {
		t := newTable(e.stdout)
		t.row("TOPIC", "GROUP", "SUBSCRIBERS", "IN_FLIGHT", "WAITING", "HELD", "BUFFERED", "COMMITTED", "PARTITIONS")
		for _, g := range resp.Groups {
			t.row(g.Topic, g.Group, g.Subscribers, g.InFlight, g.Waiting, g.Held, g.Buffered, g.Committed, len(g.Partitions))
		}
		return t.flush()
	}
	t := newTable(e.stdout)
	t.row("SEQ", "ID", "PARTITION", "STATE", "ATTEMPT", "UNTIL", "REASON")
	for _, d := range resp.Deliveries {
		until := "-"
		if !d.Deadline.IsZero() {
			until = d.Deadline.UTC().Format(time.RFC3339Nano)
		}
		t.row(d.Seq, d.ID, d.Partition, d.State, d.Attempt, until, d.Reason)
	}
	return t.flush()
}
