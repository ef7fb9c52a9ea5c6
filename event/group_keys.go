package event

// Key order ([SubscribeOptions.KeyOrdered]). A key-ordered group keeps,
// for each key with records read and not settled, the key's head (the
// one record of the key that may be delivered: fresh, in flight, backing
// off, due again or being dead-lettered) and the records held behind it,
// in seq order. When the head is settled (or given up with its
// partition) the next held record becomes the head and is due at once.
// The records held count as waiting (nHeld), so against MaxInFlight; a
// key holds at most maxPerKey records, and its later ones wait in the read
// buffer without holding back the records of other keys behind them.
//
// A key's records all fall in one partition (the hash of the key), read
// and served by the member that owns it, so this member's order is the
// key's order. Held records are never settled, so the partition's cursor
// stays below them and a restart delivers them again.

// keyState is a key of a key-ordered group with records read and not
// settled.
type keyState struct {
	head *entry
	held []*entry // behind head, in seq order
	part *partState
}

// keyGate is what a fresh record of a key-ordered group may do now.
type keyGate uint8

const (
	keyFree keyGate = iota // it is its key's head: deliver it
	keyHeld                // taken off the read buffer, held behind its key's head
	keyFull                // its key holds maxPerKey records: it stays in the read buffer
)

// gate decides what fresh e of a keyed record does now; called with g.mu
// held, only for a key-ordered group.
func (g *group) gate(e *entry) keyGate {
	k := e.d.Key
	ks := g.keys[k]
	switch {
	case ks == nil:
		g.keys[k] = &keyState{head: e, part: e.part}
		return keyFree
	case ks.head == e:
		return keyFree
	case 1+len(ks.held) >= g.maxPerKey:
		return keyFull
	}
	ks.held = append(ks.held, e)
	g.nHeld++
	g.nKeyHeld++
	return keyHeld
}

// keyDone is called when e is settled or given up: if e heads its key, the
// next record held behind it becomes the head, due at once. Called with
// g.mu held.
func (g *group) keyDone(e *entry) {
	ks := g.keys[e.d.Key]
	if ks == nil || ks.head != e {
		return
	}
	if len(ks.held) == 0 {
		delete(g.keys, e.d.Key)
		return
	}
	next := ks.held[0]
	ks.held[0] = nil
	ks.held = ks.held[1:]
	ks.head = next
	g.nKeyHeld-- // still waiting: nHeld counts it in the retry heap
	next.state = stRetry
	g.retry.push(next)
	g.keyMoved = true
}

// dropKeys gives up the records held behind the keys of p, which is being
// handed over, and forgets its keys. Called with g.mu held.
func (g *group) dropKeys(p *partState) {
	for k, ks := range g.keys {
		if ks.part != p {
			continue
		}
		delete(g.keys, k)
		for _, e := range ks.held {
			g.nHeld--
			g.nKeyHeld--
			g.drop(e)
		}
	}
}

// setMaxPerKey sets how many records of one key the group holds in this
// Bus: the group's MaxPerKey, or a tenth of the MaxInFlight of its
// subscriptions here (at least 1), never more than that MaxInFlight.
// Called with g.mu held.
func (g *group) setMaxPerKey() {
	n := g.policy().MaxPerKey
	if n == 0 {
		n = g.maxInFlight / 10
	}
	g.maxPerKey = max(1, min(n, g.maxInFlight))
}
