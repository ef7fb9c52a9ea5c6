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
	// Subscriptions are "topic/group" of each subscription, sorted.
	Subscriptions []string `json:"subscriptions"`
	// Queued counts the frames waiting to be written to the client.
	Queued int `json:"queued"`
}

// Connections lists the open connections, oldest first. It takes each
// connection's locks briefly, as [Gateway.Stats] does.
func (g *Gateway) Connections() []ConnInfo {
	conns := g.connsSnapshot()
	out := make([]ConnInfo, 0, len(conns))
	for _, c := range conns {
		ci := ConnInfo{ID: c.id, RemoteAddr: c.remote, Opened: c.opened, Queued: c.queued(), Subscriptions: []string{}}
		if p := c.principal.Load(); p != nil {
			ci.Principal = p.Subject
		}
		for _, s := range c.subsSnapshot() {
			ci.Subscriptions = append(ci.Subscriptions, s.topic+"/"+s.group)
		}
		slices.Sort(ci.Subscriptions)
		out = append(out, ci)
	}
	slices.SortFunc(out, func(a, b ConnInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
