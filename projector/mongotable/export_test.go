package mongotable

// SetFail sets the crash hook of t's writes.
func (t *Table) SetFail(f func(point int) error) { t.fail = f }
