package dedupe

import (
	"context"
	"errors"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/txn"
)

// TxStore is a [Store] that can write a done mark in the caller's
// transaction, for [SubscribeExactlyOnceTx].
type TxStore interface {
	Store
	// MarkDone marks key done by owner until now+ttl in the transaction
	// ctx carries, replacing an expired mark. When key holds a live mark
	// or claim it fails with an error wrapping [ErrDone]; the transaction
	// must then roll back.
	MarkDone(ctx context.Context, key, owner string, ttl time.Duration) error
}

// TxConfig configures [SubscribeExactlyOnceTx].
type TxConfig struct {
	Bus   *event.Bus
	Topic string
	Group string
	// Store holds the marks; it must be of the database Tx runs
	// transactions in.
	Store TxStore
	// Tx runs each delivery's transaction.
	Tx txn.Runner
	// Handler runs in the transaction: its writes with the ctx it gets
	// commit together with the mark, or not at all.
	Handler event.Handler
	// Options are those of [SubscribeExactlyOnce]; PollInterval and Clock
	// are unused.
	Options Options
}

// Validate reports every problem of c, joined.
func (c *TxConfig) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		nil  bool
	}{{"Bus", c.Bus == nil}, {"Store", c.Store == nil}, {"Tx", c.Tx == nil}, {"Handler", c.Handler == nil}} {
		if f.nil {
			errs = append(errs, invalid(f.name, "nil"))
		}
	}
	return errors.Join(errs...)
}

// SubscribeExactlyOnceTx subscribes cfg.Handler so that its writes happen
// exactly once per event id: each delivery runs in a transaction of
// cfg.Tx that first writes the id's done mark (cfg.Store.MarkDone) and
// then calls the handler with the transaction's context. A redelivered id
// finds its mark and is acked without running the handler; two concurrent
// deliveries of one id conflict on the mark and one of them rolls back.
// This holds for the handler's writes through ctx to the database of the
// store; its other effects get the guarantees of [SubscribeExactlyOnce].
func SubscribeExactlyOnceTx(ctx context.Context, cfg TxConfig) (*event.Subscription, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pol, err := subscribePolicy(ctx, cfg.Bus, cfg.Topic, cfg.Group, cfg.Options)
	if err != nil {
		return nil, err
	}
	store, h := cfg.Store, cfg.Handler
	return cfg.Bus.Subscribe(ctx, cfg.Topic, cfg.Group, func(ctx context.Context, d *event.Delivery) error {
		key := Key(cfg.Topic, cfg.Group, d.ID)
		if seen, err := store.Seen(ctx, key); err != nil {
			return err
		} else if seen {
			return nil
		}
		ttl := pol.now(ctx).ttl
		err := cfg.Tx.InTx(ctx, func(ctx context.Context) error {
			if err := store.MarkDone(ctx, key, d.ID, ttl); err != nil {
				return err
			}
			return h(ctx, d)
		})
		if errors.Is(err, ErrDone) {
			return nil // done by another delivery
		}
		return err
	}, pol.opts.Subscribe...)
}
