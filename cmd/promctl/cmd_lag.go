package main

import (
	"context"
	"net/url"

	"github.com/promethean/promlib/event"
)

func init() {
	register(&command{
		Name:     "lag",
		Synopsis: "[TOPIC [GROUP]] [-o table|json]",
		Summary:  "show how far each consumer group is behind: records not settled and the age of the oldest",
		Help: `Reads the groups of GET /ops/topics, of GET /ops/groups?topic=TOPIC, or
GET /ops/lag?topic=TOPIC&group=GROUP for one group. Cursors are committed
every second or so: an ack shows in the lag after that.`,
		Run: runLag,
	})
}

func runLag(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
	e.outputFlag(fs)
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argCount(pos, 0, 2, "TOPIC", "GROUP"); err != nil {
		return err
	}
	var groups []event.GroupStatus
	switch len(pos) {
	case 0:
		if groups, err = allGroups(ctx, e.hub); err != nil {
			return err
		}
	case 1, 2:
		if err := topicArg(pos[0]); err != nil {
			return err
		}
		q := url.Values{"topic": {pos[0]}}
		var raw []byte
		if len(pos) == 2 {
			if err := groupArg(pos[1]); err != nil {
				return err
			}
			q.Set("group", pos[1])
			var st event.GroupStatus
			if err := e.hub.getJSON(ctx, "/ops/lag", q, &st, &raw); err != nil {
				return err
			}
			groups = []event.GroupStatus{st}
		} else {
			var resp struct {
				Groups []event.GroupStatus `json:"groups"`
			}
			if err := e.hub.getJSON(ctx, "/ops/groups", q, &resp, &raw); err != nil {
				return err
			}
			groups = resp.Groups
		}
		if e.json() {
			return printJSON(e.stdout, raw)
		}
	}
	if e.json() {
		return marshalJSON(e.stdout, map[string]any{"groups": groups})
	}
	t := newTable(e.stdout)
	t.row("TOPIC", "GROUP", "LAG", "OLDEST", "OLDEST_SEQ", "COMMITTED", "HEAD")
	for _, g := range groups {
		oldest := "-"
		if g.Oldest != nil {
			oldest = uitoa(g.Oldest.Seq)
		}
		t.row(g.Topic, g.Group, g.Lag, age(g.LagMs), oldest, g.Committed, g.Head)
	}
	return t.flush()
}
