// Package schematest is the conformance suite of [schema.Store]: every
// implementation runs [Run].
package schematest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/promethean/promlib/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Run runs the suite; newStore returns an empty store per call.
func Run(t *testing.T, newStore func(t *testing.T) schema.Store) {
	t.Run("AddAndList", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		for _, v := range []schema.Version{
			{Topic: "b.t", Version: 1, Schema: json.RawMessage(`{"type":"string"}`), Rule: schema.RuleNone, Created: created},
			{Topic: "a.t", Version: 2, Schema: json.RawMessage(`{"type":"integer"}`), Rule: schema.RuleFull, Created: created},
			{Topic: "a.t", Version: 1, Schema: json.RawMessage(`true`), Rule: schema.RuleBackward, Created: created},
		} {
			require.NoError(t, s.Add(ctx, v))
		}
		vs, err := s.Versions(ctx, "a.t")
		require.NoError(t, err)
		require.Len(t, vs, 2)
		assert.Equal(t, 1, vs[0].Version)
		assert.Equal(t, 2, vs[1].Version)
		assert.JSONEq(t, `{"type":"integer"}`, string(vs[1].Schema))
		assert.Equal(t, schema.RuleFull, vs[1].Rule)
		assert.True(t, created.Equal(vs[1].Created), "created %v", vs[1].Created)

		none, err := s.Versions(ctx, "c.t")
		require.NoError(t, err)
		assert.Empty(t, none)

		all, err := s.All(ctx)
		require.NoError(t, err)
		var got []string
		for _, v := range all {
			got = append(got, v.Topic+"/"+string(rune('0'+v.Version)))
		}
		assert.Equal(t, []string{"a.t/1", "a.t/2", "b.t/1"}, got)
	})
	t.Run("VersionExists", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		v := schema.Version{Topic: "t", Version: 1, Schema: json.RawMessage(`true`), Rule: schema.RuleNone, Created: time.Now().UTC()}
		require.NoError(t, s.Add(ctx, v))
		v.Schema = json.RawMessage(`false`)
		assert.ErrorIs(t, s.Add(ctx, v), schema.ErrVersionExists)
		vs, err := s.Versions(ctx, "t")
		require.NoError(t, err)
		require.Len(t, vs, 1)
		assert.Equal(t, "true", string(vs[0].Schema), "the refused add changed nothing")
	})
	t.Run("ConcurrentAddOneWins", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		const n = 4
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = s.Add(ctx, schema.Version{Topic: "t", Version: 1, Schema: json.RawMessage(`true`), Rule: schema.RuleNone, Created: time.Now().UTC()})
			})
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			if err == nil {
				wins++
			} else {
				assert.ErrorIs(t, err, schema.ErrVersionExists)
			}
		}
		assert.Equal(t, 1, wins)
	})
	t.Run("RegistryOverStore", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		r1, err := schema.NewRegistry(ctx, schema.Config{Store: s})
		require.NoError(t, err)
		v, err := r1.Register(ctx, "orders", json.RawMessage(`{"type":"object","required":["id"]}`), schema.RuleBackward)
		require.NoError(t, err)
		assert.Equal(t, 1, v.Version)
		// A second registry (another process) sees it, and registers
		// after it.
		r2, err := schema.NewRegistry(ctx, schema.Config{Store: s})
		require.NoError(t, err)
		cur, err := r2.Current("orders")
		require.NoError(t, err)
		assert.Equal(t, 1, cur.Version)
		v2, err := r2.Register(ctx, "orders", json.RawMessage(`{"type":"object"}`), "")
		require.NoError(t, err)
		assert.Equal(t, 2, v2.Version)
		assert.Equal(t, schema.RuleBackward, v2.Rule)
		// r1 has not refreshed; a register there checks against v2 anyway.
		_, err = r1.Register(ctx, "orders", json.RawMessage(`{"type":"object","required":["x"]}`), "")
		assert.ErrorIs(t, err, schema.ErrIncompatible)
		require.NoError(t, r1.Refresh(ctx))
		cur, err = r1.Current("orders")
		require.NoError(t, err)
		assert.Equal(t, 2, cur.Version)
	})
}
