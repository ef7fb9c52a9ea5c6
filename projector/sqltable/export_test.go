package sqltable

import (
	"context"

	"github.com/promethean/promlib/event"
)

// SetFail sets the crash hook of t's writes.
func (t *Table) SetFail(f func(point int) error) { t.fail = f }

// HasNULEscape is hasNULEscape, for tests.
var HasNULEscape = hasNULEscape

// Write writes recs as a batch of Run would.
func (t *Table) Write(ctx context.Context, recs []event.Record) error { return t.write(ctx, recs) }
