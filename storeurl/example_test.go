package storeurl_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/storeurl"
)

// A program takes its store as one string, here a SQLite file; the same
// code runs on memory, postgres://... or mongodb://....
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "storeurl")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := storeurl.Open(ctx, "sqlite:"+filepath.Join(dir, "events.db"), storeurl.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close(ctx)
	fmt.Println("events are kept in", db.Kind().Name())

	bus, err := event.NewBus(db.Store(), event.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer bus.Close(ctx)
	rec, err := bus.Publish(ctx, "greetings", []byte(`{"hello":"world"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("published seq", rec.Seq)
	// Output:
	// events are kept in SQLite
	// published seq 1
}

// A bad string names the problem; a program puts its flag's name before
// the message.
func ExampleParse() {
	for _, s := range []string{"memory", "postgres://app:secret@db.internal/events", "events.db", "redis://cache:6379"} {
		loc, err := storeurl.Parse(s)
		var pe *storeurl.ParseError
		switch {
		case errors.As(err, &pe):
			fmt.Println("-store: " + pe.Msg)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Println(loc.Kind.Name(), loc)
		}
	}
	// Output:
	// memory memory
	// PostgreSQL postgres://app:xxxxx@db.internal/events
	// -store: "events.db" has no scheme, want memory, sqlite:PATH, postgres://..., postgresql://..., mongodb://... or mongodb+srv://... (a SQLite file is sqlite:events.db)
	// -store: unknown scheme "redis", want memory, sqlite:PATH, postgres://..., postgresql://..., mongodb://... or mongodb+srv://...
}
