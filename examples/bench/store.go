package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promethean/promlib/examples/internal/cli"
	"github.com/promethean/promlib/storeurl"
)

// parseStore reads -store in the hub's grammar (package storeurl) and
// checks, before anything is opened or created, that a SQLite file can be
// made where it names: its directory exists and the file does not (the
// bench measures a new file and removes it at the end).
func (o *Options) parseStore() error {
	loc, err := storeurl.Parse(o.Store)
	if err != nil {
		var pe *storeurl.ParseError
		if errors.As(err, &pe) {
			return cli.Usagef("-store: %s", pe.Msg)
		}
		return cli.Usagef("-store: %v", err)
	}
	if loc.Kind == storeurl.KindSQLite {
		dir := filepath.Dir(loc.Path)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return cli.Usagef("-store: %s: the directory %s does not exist", loc, dir)
		}
		if _, err := os.Lstat(loc.Path); !errors.Is(err, os.ErrNotExist) {
			return cli.Usagef("-store: %s: the file exists; the bench writes a new file there and removes it at the end", loc)
		}
	}
	o.Location = loc
	return nil
}

// openBackend opens the store of -store. One process writes and reads:
// its own appends wake its consumers, so the poll for other processes'
// appends is turned down (on the bundled MongoDB test server every poll
// scans the collection). PostgreSQL and MongoDB runs work in a schema or
// database of their own, dropped when the bench ends.
func openBackend(ctx context.Context, o *Options) (Backend, error) {
	var cfg storeurl.Config
	cfg.SQLite.Store.PollInterval = time.Hour
	cfg.Postgres.Store.PollInterval = time.Hour
	cfg.MongoDB.Store.PollInterval = time.Hour
	switch o.Location.Kind {
	case storeurl.KindSQLite:
		return openSQLite(ctx, o.Location, cfg)
	case storeurl.KindPostgres:
		cfg.Postgres.Schema = "promlib_bench_" + randomHex()
		return openPostgres(ctx, o.Location, cfg)
	case storeurl.KindMongoDB:
		cfg.MongoDB.Database = "promlib_bench_" + randomHex()
		return openMongo(ctx, o.Location, cfg)
	}
	return openMemory(ctx, o)
}

// RawEach is the result of a commit-each baseline: rows per second and
// the 99th percentile of one insert's call, in ms.
type RawEach struct {
	PerS  float64
	P99Ms float64
}

// commitEach runs insert for each of rows 0..n-1 from o.Publishers
// goroutines, each over its share (as publishAll splits the events), one
// row at a time, and returns the rows per second and the p99 of a call.
// The first error stops every goroutine and is returned.
func commitEach(o *Options, insert func(i int) error) (RawEach, error) {
	var (
		wg     sync.WaitGroup
		failed atomic.Bool
		errs   = make(chan error, o.Publishers)
		calls  = newCallTimes(o.N)
	)
	per := (o.N + o.Publishers - 1) / o.Publishers
	start := time.Now()
	for p := range o.Publishers {
		lo, hi := p*per, min((p+1)*per, o.N)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi && !failed.Load(); i++ {
				t0 := time.Now()
				if err := insert(i); err != nil {
					failed.Store(true)
					errs <- fmt.Errorf("insert row %d: %w", i, err)
					return
				}
				calls.set(i, time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return RawEach{}, err
	}
	return RawEach{PerS: float64(o.N) / elapsed.Seconds(), P99Ms: calls.p99()}, nil
}

// callTimes holds how long each of n calls took (each index written by
// one goroutine).
type callTimes []float64

func newCallTimes(n int) callTimes { return make(callTimes, n) }

func (c callTimes) set(i int, d time.Duration) { c[i] = float64(d) / float64(time.Millisecond) }

// p99 returns the 99th percentile in ms; it sorts c.
func (c callTimes) p99() float64 {
	sortFloats(c)
	return percentile(c, 99)
}
