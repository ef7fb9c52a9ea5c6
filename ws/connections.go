package ws

import (
	"cmp"
	"slices"
	"time"
)

// ConnInfo describes one connection of a [Gateway], for an operator.
type ConnInfo struct {
	// ID numbers the connection in this Gateway.
	ID uint64 `json:"id"`
	// Principal is the subject of its token, "" before AUTH.
	Principal  string    `json:"principal"`
	RemoteAddr string    `json:"remote_addr"`
	Opened     time.Time `json:"opened"`
	// Subscriptions are "topic/group" of each subscription of a group, and
	// "topic" of each live subscription, sorted.
	Subscriptions []string `json:"subscriptions"`
	// Subs describe the same subscriptions, in the same order, with their
	// kind.
	Subs []SubInfo `json:"subs"`
	// Queued counts the frames waiting to be written to the client.
	Queued int `json:"queued"`
}

// Kinds of subscription ([SubInfo].Kind).
const (
	KindGroup = "group" // SUBSCRIBE with a group: a durable consumer group
	KindLive  = "live"  // SUBSCRIBE without group: a live subscription
)

// SubInfo describes one subscription of a connection.
type SubInfo struct {
	// Kind is KindGroup or KindLive.
	Kind  string `json:"kind"`
	Topic string `json:"topic"`
	// Group is "" for a live subscription.
	Group string `json:"group,omitempty"`
}

// Connections lists the open connections, oldest first. It takes each
// connection's locks briefly, as [Gateway.Stats] does.
func (g *Gateway) Connections() []ConnInfo {
	conns := g.connsSnapshot()
	out := make([]ConnInfo, 0, len(conns))
	for _, c := range conns {
		ci := ConnInfo{ID: c.id, RemoteAddr: c.remote, Opened: c.opened, Queued: c.queued(), Subscriptions: []string{}, Subs: []SubInfo{}}
		if p := c.principal.Load(); p != nil {
			ci.Principal = p.Subject
		}
		for _, s := range c.subsSnapshot() {
			ci.Subs = append(ci.Subs, SubInfo{Kind: KindGroup, Topic: s.topic, Group: s.group})
		}
		for _, s := range c.liveSnapshot() {
			ci.Subs = append(ci.Subs, SubInfo{Kind: KindLive, Topic: s.topic})
		}
		slices.SortFunc(ci.Subs, func(a, b SubInfo) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Group, b.Group))
		})
		for _, s := range ci.Subs {
			if s.Kind == KindLive {
				ci.Subscriptions = append(ci.Subscriptions, s.Topic)
			} else {
				ci.Subscriptions = append(ci.Subscriptions, s.Topic+"/"+s.Group)
			}
		}
		out = append(out, ci)
	}
	slices.SortFunc(out, func(a, b ConnInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
