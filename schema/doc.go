// Package schema is a schema registry: per-topic JSON Schemas (draft
// 2020-12) with versions kept in a [Store], evolution rules checked on
// register, and a publish interceptor that refuses payloads that do not
// match.
//
// It is a module of its own (github.com/promethean/promlib/schema), so that
// the library's go.mod does not take its validator,
// github.com/santhosh-tekuri/jsonschema/v6. The core event imports no
// schema code: validation enters a Bus through [Registry.Interceptor].
//
//	reg, err := schema.NewRegistry(ctx, schema.Config{Store: schema.NewMemoryStore()})
//	bus, err := event.NewBus(store, event.Config{PublishInterceptors: []event.PublishInterceptor{reg.Interceptor()}})
//	_, err = reg.Register(ctx, "orders", []byte(`{"type":"object","required":["id"]}`), schema.RuleBackward)
//
// # Publishing
//
// A record of a topic with a schema is validated against the topic's
// current version; a record that does not match is refused alone with a
// [*ValidationError] (JSON pointer and reason), which the gateway answers
// ERR schema_invalid and HTTP publish 422. A stored record carries the
// version it was validated against in the "schema-version" header
// ([Config.Header]). Tombstones (a null payload) pass; a binary payload on
// a topic with a schema is refused. A topic without a schema costs one map
// lookup.
//
// # Evolution rules
//
// Each version records the rule the next one is checked under:
// [RuleNone], [RuleBackward] (the new version accepts every payload the
// previous one accepts), [RuleForward] (the reverse) and [RuleFull]
// (both). Deciding this for arbitrary schemas is undecidable, so
// [Compatible] works over a declared subset of keywords ([Keywords]):
//
//   - assertions: type, enum, const, properties, required,
//     additionalProperties, items, minItems, maxItems, minimum, maximum,
//     exclusiveMinimum, exclusiveMaximum, minLength, maxLength, pattern
//     (patterns compare as equal text only);
//   - annotations, ignored: $schema, $id, $comment, title, description,
//     default, examples, deprecated, readOnly, writeOnly, format (not
//     asserted by the validator).
//
// Under a rule other than none, a schema using any other keyword is
// refused with a [*KeywordError] naming it and where it is. The check is
// sound, not complete: what it cannot prove it refuses, with the reason.
//
// # Stores and processes
//
// [MemoryStore] keeps versions in memory; mongoschema keeps them in
// MongoDB, one document per version keyed by _id, and sqlschema in a
// PostgreSQL or SQLite table keyed by (topic, version), so two processes
// registering at once cannot both take a version. A Registry keeps the
// current versions in memory: [Registry.Run] (or [Registry.Refresh])
// picks up versions other processes registered. [schematest.Run] is the
// conformance suite of a Store. schemaops shows the registry in the ops
// endpoints (GET /ops/schemas, and POST /ops/schemas as an admin action).
package schema
