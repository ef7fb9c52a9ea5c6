// Package changelog is what the changelog tables of promlib share
// (projector/mongotable, projector/sqltable): the [Consumer] that reads a
// topic in batches and acks a batch after it is written, [Newest], which
// picks each key's newest record of a batch, [IsTombstone], and [Replay],
// which reads a topic from a seq on for a rebuild. Each table writes
// batches to its database with a seq guard of its own.
package changelog
