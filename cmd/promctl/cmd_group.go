package main

import (
	"context"
	"fmt"

	"github.com/promethean/promlib/ops"
)

func init() {
	register(&command{
		Name:     "group",
		Synopsis: "delete TOPIC GROUP [-force] [-o table|json]",
		Summary:  "delete a consumer group: its cursors, state, leases, members and settings",
		Help: `POST /ops/groups/delete. The group's dead letters stay. A group with live
members is refused (conflict, naming them) unless -force, which first
takes the partitions from them; a member still running takes them again
at its next lease renewal and brings the group back, so close the
subscriptions to delete a group for good. Needs admin on the topic.`,
		Run: runGroup,
	})
}

func runGroup(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
	e.outputFlag(fs)
	force := fs.Bool("force", false, "delete the group although it has live members")
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argCount(pos, 3, 3, "the action (delete)", "TOPIC", "GROUP"); err != nil {
		return err
	}
	if pos[0] != "delete" {
		return usagef("unknown action %q, want delete", pos[0])
	}
	topic, group := pos[1], pos[2]
	if err := topicArg(topic); err != nil {
		return err
	}
	if err := groupArg(group); err != nil {
		return err
	}
	body := map[string]any{"topic": topic, "group": group}
	if *force {
		body["force"] = "true"
	}
	var res ops.DeleteGroupResult
	var raw []byte
	if err := e.hub.postJSON(ctx, "/ops/groups/delete", body, &res, &raw); err != nil {
		return err
	}
	if e.json() {
		return printJSON(e.stdout, raw)
	}
	fmt.Fprintf(e.stdout, "group %s of %s deleted\n", group, topic)
	return nil
}
