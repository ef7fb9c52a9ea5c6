// Package ratelimit holds the token buckets of the gateway: a [Limit] says
// how fast and how bursty, [NewLimiter] makes one bucket (per connection),
// and [Keyed] keeps one bucket per key (per topic, shared by every
// connection) with bounded memory.
//
// Buckets are [golang.org/x/time/rate.Limiter] values. A zero [Limit] means
// no limit, and a nil *rate.Limiter allows everything, so callers need no
// special case for "unlimited".
//
// # Several buckets at once
//
// A publish may have to pass a connection bucket and a topic bucket. Taking
// a token from the first and then being refused by the second would charge
// the connection for a publish that never happened; [AllOrNone] takes one
// token from each of several reservations or from none.
//
// # Bounded memory
//
// A [Keyed] set forgets a key whose bucket has filled up again: such a bucket
// holds no state that a new one would not have, so forgetting it changes no
// decision. Sweeps run at most once per [KeyedConfig.SweepInterval], inside
// the calls (no goroutine). When more than [KeyedConfig.MaxKeys] keys are busy
// at once, the least recently used are forgotten too; only then may a
// forgotten key get a fresh burst.
package ratelimit
