package txchain

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeDB records what a runner did with its transactions, numbered from
// 1 in the order they began.
type fakeDB struct {
	began, committed, rolledBack []int
	beginErr                     error
	commitErr                    []error // of each commit in turn, nil when out
}

func (db *fakeDB) driver() Driver[int] {
	return Driver[int]{
		Name: "fake",
		Begin: func(ctx context.Context) (int, error) {
			if db.beginErr != nil {
				return 0, db.beginErr
			}
			db.began = append(db.began, len(db.began)+1)
			return len(db.began), nil
		},
		Commit: func(_ context.Context, tx int) error {
			if len(db.commitErr) > 0 {
				err := db.commitErr[0]
				db.commitErr = db.commitErr[1:]
				if err != nil {
					return err
				}
			}
			db.committed = append(db.committed, tx)
			return nil
		},
		Rollback: func(_ context.Context, tx int) { db.rolledBack = append(db.rolledBack, tx) },
	}
}

func TestInTx(t *testing.T) {
	t.Parallel()
	errT, errP := errors.New("transient"), errors.New("permanent")
	transient := func(err error) bool { return errors.Is(err, errT) }
	c := New[*fakeDB, int]()
	ctx := context.Background()

	t.Run("commits and runs the hooks after", func(t *testing.T) {
		db := &fakeDB{}
		var ran []string
		err := c.InTx(ctx, db, db.driver(), 3, transient, func(ctx context.Context) error {
			tx, ok := c.Innermost(ctx)
			require.True(t, ok)
			assert.Equal(t, 1, tx)
			assert.True(t, c.AfterCommit(ctx, db, func() { ran = append(ran, "hook") }))
			// An InTx inside joins: no second transaction.
			return c.InTx(ctx, db, db.driver(), 3, transient, func(inner context.Context) error {
				tx, found, _ := c.Lookup(inner, db)
				assert.True(t, found)
				assert.Equal(t, 1, tx)
				assert.Empty(t, ran, "no hook before the commit")
				return nil
			})
		})
		require.NoError(t, err)
		assert.Equal(t, []int{1}, db.began)
		assert.Equal(t, []int{1}, db.committed)
		assert.Empty(t, db.rolledBack)
		assert.Equal(t, []string{"hook"}, ran)
	})
	t.Run("an error rolls back, no hooks", func(t *testing.T) {
		db := &fakeDB{}
		ran := false
		err := c.InTx(ctx, db, db.driver(), 3, transient, func(ctx context.Context) error {
			c.AfterCommit(ctx, db, func() { ran = true })
			return errP
		})
		assert.ErrorIs(t, err, errP)
		assert.Equal(t, []int{1}, db.rolledBack)
		assert.Empty(t, db.committed)
		assert.False(t, ran)
	})
	t.Run("a ctx ended before the commit rolls back", func(t *testing.T) {
		db := &fakeDB{}
		cctx, cancel := context.WithCancel(ctx)
		err := c.InTx(cctx, db, db.driver(), 3, transient, func(context.Context) error { cancel(); return nil })
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, []int{1}, db.rolledBack)
		assert.Empty(t, db.committed)
	})
	t.Run("a transient failure runs fn again in a new transaction", func(t *testing.T) {
		db := &fakeDB{}
		runs := 0
		err := c.InTx(ctx, db, db.driver(), 3, transient, func(context.Context) error {
			runs++
			if runs == 1 {
				return errT
			}
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, 2, runs)
		assert.Equal(t, []int{1}, db.rolledBack)
		assert.Equal(t, []int{2}, db.committed)
	})
	t.Run("a transient commit failure too, up to max runs", func(t *testing.T) {
		db := &fakeDB{commitErr: []error{errT, errT, errT}}
		runs := 0
		err := c.InTx(ctx, db, db.driver(), 3, transient, func(context.Context) error { runs++; return nil })
		assert.ErrorIs(t, err, errT)
		assert.EqualError(t, err, "fake: commit: transient")
		assert.Equal(t, 3, runs)
		assert.Empty(t, db.committed)
	})
	t.Run("begin fails", func(t *testing.T) {
		db := &fakeDB{beginErr: errP}
		err := c.InTx(ctx, db, db.driver(), 3, transient, func(context.Context) error {
			t.Error("fn runs without a transaction")
			return nil
		})
		assert.EqualError(t, err, "fake: begin: permanent")
	})
}

func TestFrom(t *testing.T) {
	t.Parallel()
	errOther := errors.New("other")
	c := New[string, int]()
	ctx := context.Background()
	tx, err := c.From(ctx, "db1", errOther)
	assert.NoError(t, err)
	assert.Zero(t, tx, "no transaction")
	ctx = c.With(ctx, "db1", 7, nil)
	tx, err = c.From(ctx, "db1", errOther)
	assert.NoError(t, err)
	assert.Equal(t, 7, tx)
	_, err = c.From(ctx, "db2", errOther)
	assert.ErrorIs(t, err, errOther, "transactions of other handles only")
}
