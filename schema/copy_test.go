package schema_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/schema"
)

func TestCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := schema.NewMemoryStore()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	vs := []schema.Version{
		{Topic: "orders", Version: 1, Schema: json.RawMessage(`{"type":"object"}`), Rule: schema.RuleBackward, Created: at},
		{Topic: "orders", Version: 2, Schema: json.RawMessage(`{"type":"object","required":["id"]}`), Rule: schema.RuleBackward, Created: at.Add(time.Hour)},
		{Topic: "users", Version: 1, Schema: json.RawMessage(`{"type":"string"}`), Rule: schema.RuleNone, Created: at},
	}
	for _, v := range vs {
		require.NoError(t, src.Add(ctx, v))
	}
	dst := schema.NewMemoryStore()
	// An interrupted copy left the first version, spaced otherwise.
	first := vs[0]
	first.Schema = json.RawMessage(`{ "type": "object" }`)
	require.NoError(t, dst.Add(ctx, first))

	rep, err := schema.Copy(ctx, dst, src)
	require.NoError(t, err)
	assert.Equal(t, schema.CopyReport{Copied: 2, Verified: 1}, rep)
	all, err := dst.All(ctx)
	require.NoError(t, err)
	require.Len(t, all, 3)
	for i := 1; i < 3; i++ {
		assert.Equal(t, vs[i], all[i], "version as in the source, creation time too")
	}
	rep, err = schema.Copy(ctx, dst, src)
	require.NoError(t, err)
	assert.Equal(t, schema.CopyReport{Verified: 3}, rep, "a second copy adds nothing")

	other := schema.NewMemoryStore()
	require.NoError(t, other.Add(ctx, schema.Version{Topic: "orders", Version: 2, Schema: json.RawMessage(`{}`), Rule: schema.RuleBackward}))
	_, err = schema.Copy(ctx, other, src)
	require.ErrorIs(t, err, schema.ErrCopyConflict)
	assert.Contains(t, err.Error(), `topic "orders" version 2 has another schema`)
	ruled := schema.NewMemoryStore()
	require.NoError(t, ruled.Add(ctx, schema.Version{Topic: "users", Version: 1, Schema: vs[2].Schema, Rule: schema.RuleFull}))
	_, err = schema.Copy(ctx, ruled, src)
	require.ErrorIs(t, err, schema.ErrCopyConflict)
	assert.Contains(t, err.Error(), `topic "users" version 1 has rule "full" in the destination, "none" in the source`)
}
