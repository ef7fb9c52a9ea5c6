package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/promethean/promlib/ops"
)

func init() {
	register(&command{
		Name:     "backup",
		Synopsis: "[-name FILE] [-o table|json]",
		Summary:  "back the hub's SQLite store up while it runs, into a new file beside it",
		Help: `POST /ops/backup: the hub writes a copy of its store, as it was when the
backup began (every publish acknowledged before it), into FILE in the
directory of the store's file (default <store>-backup-<UTC time>.db),
while publishes and consumers go on. FILE must not exist. Restore: start
a hub on the backup (hub -store sqlite:FILE). Needs admin on every topic
("admin:**"); a hub on PostgreSQL or MongoDB answers not_supported (use
pg_dump or mongodump). The request waits for the backup however long it
takes; interrupt promctl and the hub still finishes it.`,
		Run: runBackup,
	})
}

func runBackup(ctx context.Context, e *env, args []string) error {
	flags := e.flags()
	e.outputFlag(flags)
	name := flags.String("name", "", "the backup's file name, in the directory of the store's file (letters, digits, '.', '_', '-')")
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := argCount(pos, 0, 0); err != nil {
		return err
	}
	body := map[string]string{}
	if *name != "" {
		body["name"] = *name
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	// No request timeout: a large file takes as long as it takes.
	resp, err := e.hub.do(ctx, http.MethodPost, "/ops/backup", nil, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("POST /ops/backup: reading the answer: %w", err)
	}
	var res ops.BackupResponse
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("POST /ops/backup: the answer is not what promctl expects (%v): is %s a promlib hub?", err, e.hub.base)
	}
	if e.json() {
		return printJSON(e.stdout, raw)
	}
	fmt.Fprintf(e.stdout, "backed up to %s (%d bytes in %d ms)\n", res.File, res.Bytes, res.TookMs)
	return nil
}
