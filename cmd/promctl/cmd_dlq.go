package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/promethean/promlib/event"
)

func init() {
	register(&command{
		Name:     "dlq",
		Synopsis: "list|redrive|purge TOPIC GROUP [-ids ID,...] [-limit N] [-after SEQ] [-o table|json]",
		Summary:  "list a group's dead letters, redrive them to that group, or purge them",
		Help: `A dead letter belongs to the group that failed it.

  list     the group's dead letters, oldest first (GET /ops/dlq): -limit
           per page (the hub's default is 100), -after SEQ for the page after
           the one that ended at SEQ (the "next" of -o json)
  redrive  deliver them again to GROUP only (POST /ops/dlq/redrive)
  purge    drop them without delivering them (POST /ops/dlq/purge)

redrive and purge take the dead letters of -ids (their ids in the
dead-letter topic, as list shows them), or else the oldest -limit ones
(the hub's maximum, 1000 by default, when -limit is not given). They need
admin on the topic; a hub run with -ops-read-only refuses them.`,
		Run: runDLQ,
	})
}

func runDLQ(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
	e.outputFlag(fs)
	ids := fs.String("ids", "", "comma-separated ids of dead letters (redrive, purge)")
	limit := fs.Int("limit", 0, "most dead letters to list, redrive or purge (0: the hub's default)")
	after := fs.Uint64("after", 0, "list the dead letters after this seq of the dead-letter topic (list)")
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argCount(pos, 3, 3, "the action (list, redrive or purge)", "TOPIC", "GROUP"); err != nil {
		return err
	}
	action, topic, group := pos[0], pos[1], pos[2]
	switch action {
	case "list", "redrive", "purge":
	default:
		return usagef("unknown action %q, want list, redrive or purge", action)
	}
	if err := topicArg(topic); err != nil {
		return err
	}
	if err := groupArg(group); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("-limit: %d, want 1 or more (0: the hub's default)", *limit)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if action == "list" {
		if given["ids"] {
			return usagef("-ids: only with redrive or purge")
		}
		return dlqList(ctx, e, topic, group, *limit, *after)
	}
	if given["after"] {
		return usagef("-after: only with list")
	}
	body := map[string]any{"topic": topic, "group": group}
	if *limit > 0 {
		body["limit"] = *limit
	}
	if given["ids"] {
		var list []string
		for _, id := range strings.Split(*ids, ",") {
			if id = strings.TrimSpace(id); id == "" {
				return usagef("-ids: %q has an empty id, want ID,ID,...", *ids)
			}
			list = append(list, id)
		}
		body["ids"] = strings.Join(list, ",")
	}
	var res event.DeadLetterResult
	var raw []byte
	if err := e.hub.postJSON(ctx, "/ops/dlq/"+action, body, &res, &raw); err != nil {
		return err
	}
	if e.json() {
		return printJSON(e.stdout, raw)
	}
	done := map[string]string{"redrive": "redriven to", "purge": "purged from"}[action]
	fmt.Fprintf(e.stdout, "%d dead letters %s group %s of %s\n", len(res.IDs), done, group, topic)
	for _, id := range res.IDs {
		fmt.Fprintf(e.stdout, "  %s\n", id)
	}
	return nil
}

func dlqList(ctx context.Context, e *env, topic, group string, limit int, after uint64) error {
	q := url.Values{"topic": {topic}, "group": {group}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	var page event.DeadLetterPage
	var raw []byte
	if err := e.hub.getJSON(ctx, "/ops/dlq", q, &page, &raw); err != nil {
		return err
	}
	if e.json() {
		return printJSON(e.stdout, raw)
	}
	t := newTable(e.stdout)
	t.row("SEQ", "ID", "ORIGINAL_SEQ", "ATTEMPTS", "TIME", "REASON")
	for i := range page.Records {
		r := &page.Records[i]
		h := r.Headers
		t.row(r.Seq, r.ID, h[event.HeaderDLQSeq], h[event.HeaderDLQAttempt], stamp(r.TS), h[event.HeaderDLQReason])
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s dead letters of group %s in %s", count(page.DeadLetters.Pending, page.DeadLetters.More), group, page.DeadLetters.Topic)
	if page.Next > 0 {
		fmt.Fprintf(e.stdout, "; more after seq %d (-after %d)", page.Next, page.Next)
	}
	fmt.Fprintln(e.stdout)
	return nil
}
