package schema_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/schema"
)

// A topic with a schema: a good payload is stored with the schema version
// in its header, a bad one is refused with the pointer and the reason, and
// a new version that breaks the backward rule is refused.
func Example() {
	ctx := context.Background()
	reg, _ := schema.NewRegistry(ctx, schema.Config{Store: schema.NewMemoryStore()})
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{
		PublishInterceptors: []event.PublishInterceptor{reg.Interceptor()},
	})
	defer bus.Close(ctx)

	v, _ := reg.Register(ctx, "orders", []byte(`{
		"type": "object",
		"properties": {"id": {"type": "string"}, "total": {"type": "number", "minimum": 0}},
		"required": ["id"]
	}`), schema.RuleBackward)
	fmt.Println("registered version", v.Version)

	rec, _ := bus.Publish(ctx, "orders", []byte(`{"id":"o-1","total":42}`))
	fmt.Println("stored with schema-version", rec.Headers["schema-version"])

	_, err := bus.Publish(ctx, "orders", []byte(`{"id":"o-2","total":-1}`))
	var ve *schema.ValidationError
	if errors.As(err, &ve) {
		fmt.Printf("refused at %s: %s\n", ve.Pointer, ve.Reason)
	}

	_, err = reg.Register(ctx, "orders", []byte(`{"type":"object","required":["id","currency"]}`), "")
	fmt.Println("incompatible:", errors.Is(err, schema.ErrIncompatible))
	// Output:
	// registered version 1
	// stored with schema-version 1
	// refused at /total: minimum: got -1, want 0
	// incompatible: true
}
