package txchain

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestChain(t *testing.T) {
	ctx := context.Background()
	a, b := New[string, int](), New[string, int]()
	_, found, any := a.Lookup(ctx, "db1")
	assert.False(t, found)
	assert.False(t, any)

	h := &Hooks{}
	ctx = a.With(ctx, "db1", 1, h)
	ctx = a.With(ctx, "db2", 2, nil)
	tx, ok := a.Innermost(ctx)
	assert.True(t, ok)
	assert.Equal(t, 2, tx)
	tx, found, _ = a.Lookup(ctx, "db1")
	assert.True(t, found)
	assert.Equal(t, 1, tx)
	_, found, any = a.Lookup(ctx, "db3")
	assert.False(t, found)
	assert.True(t, any, "ctx carries other databases' transactions")

	_, ok = b.Innermost(ctx)
	assert.False(t, ok, "each chain has a key of its own")

	var order []int
	assert.True(t, a.AfterCommit(ctx, "db1", func() { order = append(order, 1) }))
	assert.True(t, a.AfterCommit(ctx, "db1", func() { order = append(order, 2) }))
	assert.False(t, a.AfterCommit(ctx, "db2", func() {}), "no hooks for a transaction the application commits")
	assert.False(t, a.AfterCommit(ctx, "db3", func() {}))
	h.Run()
	h.Run()
	assert.Equal(t, []int{1, 2}, order)
}

func TestRetry(t *testing.T) {
	errT, errP := errors.New("transient"), errors.New("permanent")
	transient := func(err error) bool { return errors.Is(err, errT) }
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		results []error
		want    error
		runs    int
	}{
		{"ok", []error{nil}, nil, 1},
		{"retried then ok", []error{errT, nil}, nil, 2},
		{"permanent", []error{errP, nil}, errP, 1},
		{"gives up", []error{errT, errT, errT, nil}, errT, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			err := Retry(ctx, 3, transient, func() error { runs++; return tc.results[runs-1] })
			assert.ErrorIs(t, err, tc.want)
			if tc.want == nil {
				assert.NoError(t, err)
			}
			assert.Equal(t, tc.runs, runs)
		})
	}
	runs := 0
	assert.ErrorIs(t, Retry(ctx, 3, nil, func() error { runs++; return errT }), errT)
	assert.Equal(t, 1, runs, "no transient function: never again")
}
