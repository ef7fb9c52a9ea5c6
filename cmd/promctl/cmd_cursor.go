package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/promethean/promlib/event"
)

func init() {
	register(&command{
		Name:     "cursor",
		Synopsis: "reset TOPIC GROUP -to earliest|latest|seq:N|ts:MS [-force] [-o table|json]",
		Summary:  "move a consumer group's cursor in every partition",
		Help: `POST /ops/cursor. -to is where the group goes on from:

  earliest   the whole topic again
  latest     only what is published from now on
  seq:N      the record of seq N next (the cursor becomes N-1)
  ts:MS      the first record with ts at or after MS (Unix ms, or an RFC
             3339 time)

What the group knew of the records above its cursors (settled out of
order, attempts) is forgotten. A group with live members is refused
(conflict, naming them) unless -force: then the members are moved
wherever they run and go on from the new cursor. Needs admin on the
topic.`,
		Run: runCursor,
	})
}

func runCursor(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
	e.outputFlag(fs)
	to := fs.String("to", "", "the new position: earliest, latest, seq:N or ts:MS (required)")
	force := fs.Bool("force", false, "move the group's live members too")
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argCount(pos, 3, 3, "the action (reset)", "TOPIC", "GROUP"); err != nil {
		return err
	}
	if pos[0] != "reset" {
		return usagef("unknown action %q, want reset", pos[0])
	}
	topic, group := pos[1], pos[2]
	if err := topicArg(topic); err != nil {
		return err
	}
	if err := groupArg(group); err != nil {
		return err
	}
	if *to == "" {
		return usagef("-to: required: earliest, latest, seq:N or ts:MS")
	}
	p, err := parsePosition("to", *to)
	if err != nil {
		return err
	}
	body := map[string]any{"topic": topic, "group": group, "to": p.kind}
	switch p.kind {
	case "seq":
		// The hub's seq is the new cursor: the group resumes after it.
		body["seq"] = p.seq - 1
	case "ts":
		body["ts"] = p.ts
	}
	if *force {
		body["force"] = "true"
	}
	var res event.ResetResult
	var raw []byte
	if err := e.hub.postJSON(ctx, "/ops/cursor", body, &res, &raw); err != nil {
		return err
	}
	if e.json() {
		return printJSON(e.stdout, raw)
	}
	fmt.Fprintf(e.stdout, "group %s of %s reset to %s: cursor %d, next record seq %d", group, topic, res.To, res.Seq, res.Seq+1)
	if len(res.Members) > 0 {
		fmt.Fprintf(e.stdout, "; members moved: %s", strings.Join(res.Members, ", "))
	}
	fmt.Fprintln(e.stdout)
	return nil
}
