// Package schemaops shows a [schema.Registry] in the ops endpoints:
// [New] adapts it to [ops.Schemas], for ops.Config.Schemas.
//
//	h, err := ops.NewHandler(ops.Config{Bus: bus, Schemas: schemaops.New(reg)})
//
// GET /ops/schemas lists every version of every topic with a schema (the
// topics the principal may inspect), and POST /ops/schemas with topic,
// schema (the document as a JSON string) and rule registers a new version,
// an admin action on the topic.
package schemaops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/promethean/promlib/ops"
	"github.com/promethean/promlib/schema"
)

// New returns reg as ops sees it.
func New(reg *schema.Registry) ops.Schemas { return adapter{reg} }

type adapter struct{ reg *schema.Registry }

func (a adapter) SchemaTopics(context.Context) ([]string, error) { return a.reg.Topics(), nil }

func (a adapter) SchemaVersions(ctx context.Context, topic string) ([]ops.SchemaVersion, error) {
	vs, err := a.reg.Versions(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make([]ops.SchemaVersion, len(vs))
	for i, v := range vs {
		out[i] = opsVersion(v)
	}
	return out, nil
}

func (a adapter) RegisterSchema(ctx context.Context, topic string, doc json.RawMessage, rule string) (ops.SchemaVersion, error) {
	v, err := a.reg.Register(ctx, topic, doc, schema.Rule(rule))
	if err != nil {
		for _, refusal := range []error{schema.ErrInvalid, schema.ErrBadSchema, schema.ErrIncompatible, schema.ErrUnsupportedKeyword} {
			if errors.Is(err, refusal) {
				return ops.SchemaVersion{}, fmt.Errorf("%w: %w", ops.ErrInvalid, err)
			}
		}
		return ops.SchemaVersion{}, err
	}
	return opsVersion(v), nil
}

func opsVersion(v schema.Version) ops.SchemaVersion {
	return ops.SchemaVersion{Topic: v.Topic, Version: v.Version, Schema: v.Schema, Rule: string(v.Rule), Created: v.Created}
}
