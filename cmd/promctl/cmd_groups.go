package main

import (
	"context"
	"net/url"
	"strings"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

func init() {
	register(&command{
		Name:     "groups",
		Synopsis: "[TOPIC] [-o table|json]",
		Summary:  "list the consumer groups (of every topic, or of TOPIC): cursor, lag, members, unsettled, dead letters",
		Help: `Reads GET /ops/groups?topic=TOPIC, or the groups of every topic of
GET /ops/topics. The committed cursor is the seq below which every record
is settled; LAG is the head minus it; OLDEST is the age of the oldest
record the group has not settled.`,
		Run: runGroups,
	})
}

func runGroups(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
	e.outputFlag(fs)
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argCount(pos, 0, 1, "TOPIC"); err != nil {
		return err
	}
	var groups []event.GroupStatus
	if len(pos) == 1 {
		if err := topicArg(pos[0]); err != nil {
			return err
		}
		var resp ops.GroupsResponse
		var raw []byte
		if err := e.hub.getJSON(ctx, "/ops/groups", url.Values{"topic": {pos[0]}}, &resp, &raw); err != nil {
			return err
		}
		if e.json() {
			return printJSON(e.stdout, raw)
		}
		groups = resp.Groups
	} else {
		if groups, err = allGroups(ctx, e.hub); err != nil {
			return err
		}
		if e.json() {
			return marshalJSON(e.stdout, map[string]any{"groups": groups})
		}
	}
	t := newTable(e.stdout)
	t.row("TOPIC", "GROUP", "MEMBERS", "COMMITTED", "HEAD", "LAG", "OLDEST", "UNSETTLED", "DEAD_LETTERS")
	for _, g := range groups {
		t.row(g.Topic, g.Group, strings.Join(g.Members, ","), g.Committed, g.Head, g.Lag, age(g.LagMs), g.Unsettled,
			count(g.DeadLetters.Pending, g.DeadLetters.More))
	}
	return t.flush()
}

// allGroups returns the status of every group of every topic the token
// may inspect, from GET /ops/topics.
func allGroups(ctx context.Context, h *hubClient) ([]event.GroupStatus, error) {
	var resp ops.TopicsResponse
	if err := h.getJSON(ctx, "/ops/topics", nil, &resp, nil); err != nil {
		return nil, err
	}
	groups := []event.GroupStatus{}
	for _, ts := range resp.Topics {
		groups = append(groups, ts.Groups...)
	}
	return groups, nil
}
