package mongostore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
)

// The multi-process tests run this test binary again as a helper process:
// MONGOSTORE_TEST_HELPER names its role, other variables its settings, and
// it reports on stdout in JSON lines.
const helperEnv = "MONGOSTORE_TEST_HELPER"

// helperLine is one report of a helper process.
type helperLine struct {
	// publish: a publish was acknowledged.
	Acked string `json:"acked,omitempty"`
	// consume: a delivery; commit: a cursor commit.
	Member    string `json:"member,omitempty"`
	ID        string `json:"id,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	Key       string `json:"key,omitempty"`
	Partition int    `json:"partition"`
	Attempt   int    `json:"attempt,omitempty"`
	Commit    bool   `json:"commit,omitempty"`
	Ready     bool   `json:"ready,omitempty"`
}

type lineWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *lineWriter) write(l helperLine) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(l) // one write(2) per line: a killed process leaves whole lines
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func runHelper(role string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	s, err := mongostore.Connect(ctx, os.Getenv("MONGO_URL"), mongostore.Config{
		Database:     os.Getenv("HELPER_DB"),
		PollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	defer s.Close(context.Background())
	if err := s.EnsureIndexes(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	out := &lineWriter{enc: json.NewEncoder(os.Stdout)}
	switch role {
	case "publish":
		err = helperPublish(ctx, s, out)
	case "consume":
		err = helperConsume(ctx, s, out)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// helperPublish publishes HELPER_N records with ids HELPER_PREFIX-i for i
// from HELPER_FROM (default 0) and keys k<i mod HELPER_KEYS> from
// HELPER_PUBLISHERS goroutines, each pausing HELPER_PAUSE_MS after every
// publish, printing each acknowledged id.
func helperPublish(ctx context.Context, s *mongostore.Store, out *lineWriter) error {
	topic := os.Getenv("HELPER_TOPIC")
	n, keys, pubs := envInt("HELPER_N", 100), envInt("HELPER_KEYS", 10), envInt("HELPER_PUBLISHERS", 1)
	prefix, from := os.Getenv("HELPER_PREFIX"), envInt("HELPER_FROM", 0)
	pause := time.Duration(envInt("HELPER_PAUSE_MS", 0)) * time.Millisecond
	b, err := event.NewBus(s, event.Config{Partitions: envInt("HELPER_PARTITIONS", 1)})
	if err != nil {
		return err
	}
	defer b.Close(context.Background())
	next := make(chan int)
	errs := make(chan error, pubs)
	var wg sync.WaitGroup
	for range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				id := prefix + "-" + strconv.Itoa(i)
				// A publisher retries a failed publish with the same id, as
				// real ones should: publishing is idempotent by id, so a
				// slow server costs time, not a record or a duplicate.
				var err error
				for attempt := range 5 {
					if attempt > 0 {
						time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
					}
					_, err = b.Publish(ctx, topic, []byte(`{"i":`+strconv.Itoa(i)+`}`),
						event.WithID(id), event.WithKey("k"+strconv.Itoa(i%keys)))
					if err == nil || ctx.Err() != nil {
						break
					}
				}
				if err != nil {
					errs <- err
					return
				}
				out.write(helperLine{Acked: id})
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		}()
	}
	var ferr error
feed:
	for i := from; i < from+n; i++ {
		select {
		case next <- i:
		case ferr = <-errs:
			break feed
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return ferr
}

// commitPrinter reports cursor commits.
type commitPrinter struct {
	event.NopObserver
	out    *lineWriter
	member string
}

func (c commitPrinter) Committed(topic, group string, partition int, seq uint64) {
	c.out.write(helperLine{Commit: true, Member: c.member, Partition: partition, Seq: seq})
}

// helperConsume consumes HELPER_TOPIC in group HELPER_GROUP with
// MaxInFlight 1 until SIGTERM, printing every delivery and commit.
func helperConsume(ctx context.Context, s *mongostore.Store, out *lineWriter) error {
	member := os.Getenv("HELPER_MEMBER")
	b, err := event.NewBus(s, event.Config{
		Partitions:     envInt("HELPER_PARTITIONS", 1),
		LeaseTTL:       time.Duration(envInt("HELPER_LEASE_MS", 1000)) * time.Millisecond,
		CommitInterval: 20 * time.Millisecond,
		MemberID:       member,
		Observer:       commitPrinter{out: out, member: member},
	})
	if err != nil {
		return err
	}
	_, err = b.Subscribe(ctx, os.Getenv("HELPER_TOPIC"), os.Getenv("HELPER_GROUP"), func(ctx context.Context, d *event.Delivery) error {
		out.write(helperLine{Member: member, ID: d.ID, Seq: d.Seq, Key: d.Key, Partition: d.Partition, Attempt: d.Attempt})
		time.Sleep(time.Millisecond)
		return nil
	}, event.FromEarliest(), event.WithMaxInFlight(1))
	if err != nil {
		return err
	}
	out.write(helperLine{Ready: true, Member: member})
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return b.Close(cctx)
}
