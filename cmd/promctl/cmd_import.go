package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/replay"
	"github.com/promethean/promlib/ws/wsclient"
)

func init() {
	register(&command{
		Name:     "import",
		Synopsis: "TOPIC < FILE.ndjson",
		Summary:  "publish the records of an export to TOPIC, ids kept: a record the topic holds is not stored again",
		Help: `Reads records from stdin, one JSON record a line (as export writes them),
and publishes each to TOPIC over the WebSocket API with its id, ts, key,
headers, tags, caused_by, sid, content type and payload. The hub stores
a publish whose id the topic already holds as nothing new, so an import
run twice, or again after it was cut off, stores each record once. The
records get new seqs, in the order of the file, after the topic's head.
Needs publish on TOPIC (and replay, to tell new records from those held
already; without it only the total is printed).

Example:
  promctl export orders | promctl -url http://new-hub:8080 import orders`,
		Run: runImport,
	})
}

// importWindow bounds the publishes sent and not answered yet.
const importWindow = 1024

func runImport(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
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
	// The head before: a record stored by this import gets a seq above it,
	// one the topic held already answers with its own seq, below it.
	head, headKnown := uint64(0), false
	var page replay.ReplayPage
	if err := e.hub.getJSON(ctx, "/replay", url.Values{"topic": {topic}, "from": {"latest"}, "limit": {"1"}}, &page, nil); err == nil {
		head, headKnown = page.NextSeq-1, true
	}
	c, err := e.dial(ctx, false)
	if err != nil {
		return err
	}
	defer c.Close()

	type sent struct {
		line int
		id   string
		f    *wsclient.PublishFuture
	}
	var queue []sent
	var total, fresh int
	wait := func(s sent) error {
		res, err := s.f.Get(ctx)
		if err != nil {
			return fmt.Errorf("stdin line %d (id %s): %w (%d records imported before it)", s.line, s.id, wsErr(err), total)
		}
		total++
		if res.Seq > head {
			fresh++
		}
		return nil
	}
	// drain waits for every publish sent, so that the count of an error
	// says what was stored before it.
	drain := func() error {
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			if err := wait(s); err != nil {
				return err
			}
		}
		return nil
	}
	stop := func(format string, args ...any) error {
		if err := drain(); err != nil {
			return err
		}
		return fmt.Errorf(format+" (%d records imported before it)", append(args, total)...)
	}
	sc := bufio.NewScanner(e.stdin)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var r event.Record
		if err := json.Unmarshal(b, &r); err != nil {
			return stop("stdin line %d: not a record: %v", line, err)
		}
		if r.ID == "" {
			return stop("stdin line %d: the record has no id: import keeps ids, so that running it again stores nothing twice", line)
		}
		opts := []event.PublishOption{event.WithID(r.ID), event.WithTS(r.TS), event.WithKey(r.Key), event.WithSID(r.SID)}
		if len(r.Headers) > 0 {
			opts = append(opts, event.WithHeaders(r.Headers))
		}
		if len(r.Tags) > 0 {
			opts = append(opts, event.WithTags(r.Tags...))
		}
		if len(r.CausedBy) > 0 {
			opts = append(opts, event.WithCausedBy(r.CausedBy...))
		}
		if r.ContentType != "" {
			opts = append(opts, event.WithContentType(r.ContentType))
		}
		queue = append(queue, sent{line: line, id: r.ID, f: c.PublishAsync(ctx, topic, r.Payload, opts...)})
		if len(queue) >= importWindow {
			if err := wait(queue[0]); err != nil {
				return err
			}
			queue = queue[1:]
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return stop("stdin line %d: longer than %d bytes", line+1, maxLine)
		}
		return stop("stdin: %v", err)
	}
	if err := drain(); err != nil {
		return err
	}
	if headKnown {
		fmt.Fprintf(e.stdout, "imported %d records into %s: %d new, %d held already\n", total, topic, fresh, total-fresh)
	} else {
		fmt.Fprintf(e.stdout, "imported %d records into %s\n", total, topic)
	}
	return nil
}
