package main

import (
	"context"
	"net/url"

	"github.com/promethean/promlib/ops"
)

func init() {
	register(&command{
		Name:     "topics",
		Synopsis: "[TOPIC] [-o table|json]",
		Summary:  "list the hub's topics: partitions, records, first and last seq, bytes, groups, dead letters",
		Help: `Reads GET /ops/topics (needs inspect on the topics; a token sees only the
topics it may inspect). With TOPIC, that topic only.`,
		Run: runTopics,
	})
}

func runTopics(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
	e.outputFlag(fs)
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argCount(pos, 0, 1, "TOPIC"); err != nil {
		return err
	}
	q := url.Values{}
	if len(pos) == 1 {
		if err := topicArg(pos[0]); err != nil {
			return err
		}
		q.Set("topic", pos[0])
	}
	var resp ops.TopicsResponse
	var raw []byte
	if err := e.hub.getJSON(ctx, "/ops/topics", q, &resp, &raw); err != nil {
		return err
	}
	if e.json() {
		return printJSON(e.stdout, raw)
	}
	t := newTable(e.stdout)
	t.row("TOPIC", "PARTITIONS", "EVENTS", "FIRST", "LAST", "LAST_TS", "BYTES", "GROUPS", "DEAD_LETTERS")
	for _, ts := range resp.Topics {
		bytes := "-"
		if ts.Bytes >= 0 {
			bytes = humanBytes(ts.Bytes)
		}
		dlq := "-"
		if ts.DLQ != nil {
			dlq = count(ts.DLQ.Pending, ts.DLQ.More)
		}
		t.row(ts.Topic, ts.Partitions, ts.Events, ts.FirstSeq, ts.LastSeq, stamp(ts.LastTS), bytes, len(ts.Groups), dlq)
	}
	return t.flush()
}
