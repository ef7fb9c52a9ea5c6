package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/promethean/promlib/acl"
)

// SchemaVersion is one version of a topic's schema, as /ops/schemas shows
// it.
type SchemaVersion struct {
	Topic   string          `json:"topic"`
	Version int             `json:"version"`
	Schema  json.RawMessage `json:"schema"`
	Rule    string          `json:"rule"`
	Created time.Time       `json:"created"`
}

// Schemas is a schema registry as ops sees it: the schema module's
// schemaops.New adapts its Registry. A refused registration returns an
// error wrapping [ErrInvalid], whose message says why (400).
type Schemas interface {
	// SchemaTopics returns the topics with a schema.
	SchemaTopics(ctx context.Context) ([]string, error)
	// SchemaVersions returns a topic's versions, oldest first.
	SchemaVersions(ctx context.Context, topic string) ([]SchemaVersion, error)
	// RegisterSchema adds doc as the topic's next version under rule
	// ("" keeps the topic's).
	RegisterSchema(ctx context.Context, topic string, doc json.RawMessage, rule string) (SchemaVersion, error)
}

// errNoSchemas answers /ops/schemas on a Handler without Config.Schemas.
var errNoSchemas = fmt.Errorf("%w: no schema registry here (ops.Config.Schemas is not set; the schema module's schemaops.New gives one)", ErrNotSupported)

// topicSchemas is a topic's entry in GET /ops/schemas.
type topicSchemas struct {
	Topic    string          `json:"topic"`
	Current  int             `json:"current"`
	Rule     string          `json:"rule"`
	Versions []SchemaVersion `json:"versions"`
}

// schemasEndpoint serves GET /ops/schemas[?topic=t]: every version of
// every topic the principal may inspect, or of one topic.
func (h *Handler) schemasEndpoint(r *http.Request, p params) (any, error) {
	topic, err := p.topic("topic", false)
	if err != nil {
		return nil, err
	}
	if err := p.done(); err != nil {
		return nil, err
	}
	if h.cfg.Schemas == nil {
		return nil, errNoSchemas
	}
	if err := h.check(r, acl.Inspect, topic, ""); err != nil {
		return nil, err
	}
	ctx := r.Context()
	topics := []string{topic}
	if topic == "" {
		all, err := h.cfg.Schemas.SchemaTopics(ctx)
		if err != nil {
			return nil, err
		}
		see := inspectable(ctx)
		topics = topics[:0]
		for _, t := range all {
			if see(t, "") {
				topics = append(topics, t)
			}
		}
	}
	out := make([]topicSchemas, 0, len(topics))
	for _, t := range topics {
		vs, err := h.cfg.Schemas.SchemaVersions(ctx, t)
		if err != nil {
			return nil, err
		}
		if len(vs) == 0 {
			continue
		}
		last := vs[len(vs)-1]
		out = append(out, topicSchemas{Topic: t, Current: last.Version, Rule: last.Rule, Versions: vs})
	}
	return map[string]any{"schemas": out}, nil
}

// registerSchemaEndpoint serves POST /ops/schemas with topic, schema (the
// document, as a JSON string) and rule (optional): the admin action that
// registers a new version.
func (h *Handler) registerSchemaEndpoint(r *http.Request, p params) (any, error) {
	topic, err := p.topic("topic", true)
	if err != nil {
		return nil, err
	}
	doc := p.str("schema")
	if doc == "" {
		return nil, invalid("schema", "required: the schema document as a JSON string")
	}
	if !json.Valid([]byte(doc)) {
		return nil, invalid("schema", "not JSON")
	}
	rule := p.str("rule")
	if err := p.done(); err != nil {
		return nil, err
	}
	if h.cfg.Schemas == nil {
		return nil, errNoSchemas
	}
	if err := h.check(r, acl.Admin, topic, ""); err != nil {
		return nil, err
	}
	if err := h.writable(); err != nil {
		return nil, err
	}
	v, err := h.cfg.Schemas.RegisterSchema(r.Context(), topic, json.RawMessage(doc), rule)
	h.audit(r, "schema_register", topic, "", err, "version", v.Version, "rule", v.Rule)
	return v, err
}
