// Command prune deletes the records of a topic older than a time from a
// hub's SQLite file, as a retention policy would, while the hub runs: the
// TypeScript client's live tests run it (go run) to make a live
// subscription resume after records that are gone.
//
//	prune FILE TOPIC BEFORE_MS
//
// It prints how many records it deleted. It is under testdata so that
// ./... leaves it out.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/promethean/promlib/event/sqlitestore"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "prune:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: prune FILE TOPIC BEFORE_MS")
	}
	before, err := strconv.ParseInt(args[2], 10, 64)
	if err != nil {
		return fmt.Errorf("BEFORE_MS: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sqlitestore.Open(ctx, args[0], sqlitestore.Config{})
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	n, err := s.Prune(ctx, args[1], before, false)
	if err != nil {
		return err
	}
	fmt.Println(n)
	return nil
}
