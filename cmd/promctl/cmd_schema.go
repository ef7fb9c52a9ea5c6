package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/promethean/promlib/ops"
)

func init() {
	register(&command{
		Name:     "schema",
		Synopsis: "get [TOPIC] [-version N] [-o table|json] | register TOPIC [FILE] [-rule R]",
		Summary:  "show the topics' JSON Schemas, or register a topic's next schema version",
		Help: `  get               the topics with a schema: current version, rule, versions
  get TOPIC         the topic's current schema document (-version N: that
                    version; -o json: every version with its rule and time)
  register TOPIC    register the JSON Schema of FILE (or of stdin, or FILE
                    "-") as the topic's next version; -rule sets the topic's
                    evolution rule (none, backward, forward or full; default:
                    the topic's). A schema that breaks the rule is refused
                    with the reason. Needs admin on the topic.

Reads and writes GET/POST /ops/schemas of a hub that mounts a schema
registry (ops.Config.Schemas: schemaops.New of the schema module, a
module of its own). The stock hub (examples/hub) mounts none: it
answers not_supported (HTTP 501), and promctl exits 1.`,
		Run: runSchema,
	})
}

// topicSchemas is a topic's entry in GET /ops/schemas.
type topicSchemas struct {
	Topic    string              `json:"topic"`
	Current  int                 `json:"current"`
	Rule     string              `json:"rule"`
	Versions []ops.SchemaVersion `json:"versions"`
}

func runSchema(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
	e.outputFlag(fs)
	version := fs.Int("version", 0, "get: this version instead of the current one")
	rule := fs.String("rule", "", "register: the topic's evolution rule (none, backward, forward or full)")
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("missing the action (get or register)")
	}
	action := pos[0]
	switch action {
	case "get":
		if err := argCount(pos, 1, 2, "the action", "TOPIC"); err != nil {
			return err
		}
		if *rule != "" {
			return usagef("-rule: only with register")
		}
		if *version < 0 || (*version > 0 && len(pos) < 2) {
			return usagef("-version: %d, want a version from 1 of a TOPIC given", *version)
		}
		return schemaGet(ctx, e, pos[1:], *version)
	case "register":
		if err := argCount(pos, 2, 3, "the action", "TOPIC", "FILE"); err != nil {
			return err
		}
		if *version != 0 {
			return usagef("-version: only with get")
		}
		switch *rule {
		case "", "none", "backward", "forward", "full":
		default:
			return usagef("-rule: %q, want none, backward, forward or full", *rule)
		}
		return schemaRegister(ctx, e, pos[1:], *rule)
	}
	return usagef("unknown action %q, want get or register", action)
}

func schemaGet(ctx context.Context, e *env, pos []string, version int) error {
	q := url.Values{}
	if len(pos) == 1 {
		if err := topicArg(pos[0]); err != nil {
			return err
		}
		q.Set("topic", pos[0])
	}
	var resp struct {
		Schemas []topicSchemas `json:"schemas"`
	}
	var raw []byte
	if err := e.hub.getJSON(ctx, "/ops/schemas", q, &resp, &raw); err != nil {
		return err
	}
	if e.json() {
		return printJSON(e.stdout, raw)
	}
	if len(pos) == 0 {
		t := newTable(e.stdout)
		t.row("TOPIC", "CURRENT", "RULE", "VERSIONS")
		for _, s := range resp.Schemas {
			t.row(s.Topic, s.Current, s.Rule, len(s.Versions))
		}
		return t.flush()
	}
	topic := pos[0]
	if len(resp.Schemas) == 0 || len(resp.Schemas[0].Versions) == 0 {
		return &hubError{Code: "not_found", Msg: fmt.Sprintf("topic %q has no schema", topic)}
	}
	s := resp.Schemas[0]
	if version == 0 {
		version = s.Current
	}
	for _, v := range s.Versions {
		if v.Version == version {
			return printJSON(e.stdout, v.Schema)
		}
	}
	return &hubError{Code: "not_found", Msg: fmt.Sprintf("topic %q has no schema version %d (its versions are 1 to %d)", topic, version, s.Current)}
}

func schemaRegister(ctx context.Context, e *env, pos []string, rule string) error {
	topic := pos[0]
	if err := topicArg(topic); err != nil {
		return err
	}
	var doc []byte
	var err error
	name := "stdin"
	if len(pos) == 2 && pos[1] != "-" {
		name = pos[1]
		doc, err = os.ReadFile(pos[1])
	} else {
		doc, err = io.ReadAll(io.LimitReader(e.stdin, maxSchema+1))
	}
	if err != nil {
		return err
	}
	doc = bytes.TrimSpace(doc)
	switch {
	case len(doc) > maxSchema:
		return fmt.Errorf("%s: more than %d bytes", name, maxSchema)
	case len(doc) == 0:
		return fmt.Errorf("%s: empty, want a JSON Schema", name)
	case !json.Valid(doc):
		return fmt.Errorf("%s: not JSON", name)
	}
	body := map[string]any{"topic": topic, "schema": string(doc)}
	if rule != "" {
		body["rule"] = rule
	}
	var v ops.SchemaVersion
	var raw []byte
	if err := e.hub.postJSON(ctx, "/ops/schemas", body, &v, &raw); err != nil {
		return err
	}
	if e.json() {
		return printJSON(e.stdout, raw)
	}
	fmt.Fprintf(e.stdout, "registered version %d of the schema of %s (rule %s)\n", v.Version, v.Topic, v.Rule)
	return nil
}

// maxSchema bounds a schema document: the ops endpoints take a body of
// at most 64 KiB, the schema in it escaped as a string.
const maxSchema = 60 << 10
