package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

func init() {
	register(&command{
		Name:     "export",
		Synopsis: "TOPIC [-from-ts MS] [-to-ts MS] > FILE.ndjson",
		Summary:  "write a topic's records to stdout, one JSON record a line (import reads them back)",
		Help: `Streams GET /export?topic=TOPIC: every record of the topic, in seq order,
up to its head as the request arrives, each with its id, seq, ts, key,
headers, tags and payload (a binary payload in base64). -from-ts and
-to-ts keep the records whose ts is within them (Unix ms or RFC 3339,
both inclusive). Needs replay on the topic. A transfer that breaks off
is an error, never a short file that looks complete.

Example:
  promctl export orders > orders.ndjson`,
		Run: runExport,
	})
}

func runExport(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
	fromTS := fs.String("from-ts", "", "only records with ts at or after this (Unix ms or RFC 3339)")
	toTS := fs.String("to-ts", "", "only records with ts at or before this (Unix ms or RFC 3339)")
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
	q := url.Values{"topic": {topic}}
	for name, v := range map[string]string{"from-ts": *fromTS, "to-ts": *toTS} {
		if v == "" {
			continue
		}
		p, err := parsePosition(name, "ts:"+v)
		if err != nil {
			return usagef("-%s: %q, want Unix ms or an RFC 3339 time", name, v)
		}
		q.Set(map[string]string{"from-ts": "fromTs", "to-ts": "toTs"}[name], strconv.FormatInt(p.ts, 10))
	}
	resp, err := e.hub.do(ctx, http.MethodGet, "/export", q, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(e.stdout, resp.Body)
	if err != nil {
		return fmt.Errorf("the export of %s broke off after %d bytes: %w", topic, n, err)
	}
	return nil
}
