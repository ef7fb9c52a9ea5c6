package ws

import (
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ratelimit"
)

// Defaults of [Config].
const (
	DefaultAckTimeout       = 30 * time.Second
	DefaultMaxInFlight      = 100
	DefaultMaxSubscriptions = 100
	DefaultReadLimit        = 1 << 20
	DefaultAuthTimeout      = 10 * time.Second
	DefaultSendQueue        = 256
	DefaultPingInterval     = 20 * time.Second
	DefaultWriteTimeout     = 10 * time.Second
	DefaultMaxFailedAuth    = 3
	DefaultPublishWindow    = 256
	DefaultMaxBatchEvents   = 1000
	DefaultMaxBatchBytes    = 8 << 20
	DefaultLiveQueueEvents  = 1024
	DefaultLiveQueueBytes   = 1 << 20
	DefaultLivePollInterval = event.DefaultPollInterval
	// DefaultFailedAuthRate and DefaultFailedAuthBurst make the default
	// [Config.FailedAuthLimit]: 10 refused AUTH per second per client
	// address, in bursts of up to 20.
	DefaultFailedAuthRate  = 10
	DefaultFailedAuthBurst = 20
)

// RateLimits are the gateway's token buckets; a zero Limit means none.
type RateLimits struct {
	// Publish limits the PUBLISH frames of each connection.
	Publish ratelimit.Limit
	// TopicPublish limits the publishes to each topic, shared by all
	// connections and by HTTP publish.
	TopicPublish ratelimit.Limit
	// Deliver paces the EVENT frames sent to each connection; deliveries
	// wait for a token (they are never dropped).
	Deliver ratelimit.Limit
	// MaxTopics bounds the topic buckets kept (default
	// ratelimit.DefaultMaxKeys).
	MaxTopics int
}

// Config configures a [Gateway]. The zero value of each field means its
// default; Bus and Verifier are required.
type Config struct {
	// Bus publishes and delivers.
	Bus *event.Bus
	// Verifier checks AUTH tokens (and HTTP publish bearer tokens):
	// [auth.JWTVerifier], [auth.StaticTokens], [auth.OpenAccess] or your
	// own. The principal's policy decides PUBLISH and SUBSCRIBE
	// ([acl.Publish], [acl.Subscribe]); a connection ends at its Expiry.
	// A Verifier that takes the empty token (OpenAccess) authenticates
	// each connection as it opens, so that no AUTH is needed.
	// Required: give auth.OpenAccess() explicitly for no authentication.
	Verifier auth.Verifier
	// AckTimeout is the lease of a delivery in a group created by a
	// SUBSCRIBE that gives no ackTimeoutMs (default 30s). The lease is a
	// setting of the group ([event.GroupConfig].AckTimeout), stored when
	// the group is created: a SUBSCRIBE without ackTimeoutMs joins an
	// existing group with its stored lease, whatever this says.
	AckTimeout time.Duration
	// MaxInFlight bounds the un-acked EVENTs of one subscription; a
	// SUBSCRIBE asking for more (or for none) gets this (default 100).
	MaxInFlight int
	// MaxSubscriptions bounds the subscriptions of one connection, live
	// ones included; one more is answered rate_limited (default 100).
	MaxSubscriptions int
	// ReadLimit is the largest client frame in bytes; a larger one closes
	// the connection with wsproto.CloseTooLarge (default 1 MiB).
	ReadLimit int64
	// MaxPayload is the largest PUBLISH payload (and HTTP publish body) in
	// bytes; a larger one is answered too_large (default: ReadLimit).
	MaxPayload int64
	// MaxBatchEvents bounds the events of one batch HTTP publish; a batch
	// with more is refused with 413 too_large (default 1000).
	MaxBatchEvents int
	// MaxBatchBytes bounds the body of one batch HTTP publish; a larger
	// one is refused with 413 too_large (default 8 MiB). Each event's
	// payload is bounded by MaxPayload too.
	MaxBatchBytes int64
	// AuthTimeout is how long a new connection has to AUTH successfully
	// before it is closed with wsproto.CloseAuthTimeout (default 10s).
	AuthTimeout time.Duration
	// MaxFailedAuth is how many AUTH frames in a row a connection may have
	// refused (auth_failed, token_expired or rate_limited) before it is
	// closed with wsproto.CloseTooManyFailedAuth, without an answer to the last
	// one (default 3). A successful AUTH starts the count again.
	MaxFailedAuth int
	// FailedAuthLimit is the token bucket of refused AUTH per client
	// address, over all its connections (default 10/s, burst 20). While an address has no token left, its AUTH
	// frames are answered rate_limited without their token being checked.
	// An AUTH that could not be checked (internal) costs nothing. IPv6
	// clients are counted per /64 network.
	FailedAuthLimit ratelimit.Limit
	// TrustedProxies are the proxies (CIDR prefixes) whose Forwarded or
	// X-Forwarded-For header tells the client address. By default there
	// are none: the client address is the TCP peer's, and those headers,
	// which any client can write, are ignored.
	TrustedProxies []netip.Prefix
	// PublishWindow bounds the PUBLISH frames of one connection that are
	// being stored at once (default 256). The gateway reads PUBLISH frames
	// on while earlier ones are stored, stores consecutive ones in batches
	// (an event.Publisher per connection) and answers in the order of the
	// frames; at the bound it reads no more frames of that connection
	// until one is stored.
	PublishWindow int
	// SendQueue bounds the frames waiting to be written to one connection
	// (default 256). When it is full, deliveries wait for room.
	SendQueue int
	// LiveQueueEvents and LiveQueueBytes bound the frames of live
	// subscriptions (SUBSCRIBE without group) waiting to be written to one
	// connection, in frames and in bytes (defaults 1024 and 1 MiB; a frame
	// larger than LiveQueueBytes still fits an empty queue). Nothing waits
	// for room: a frame that does not fit closes the connection with
	// [wsproto.CloseSlowSubscriber], or, for a subscription with slow "skip",
	// drops its queued frames for a GAP with reason "slow".
	LiveQueueEvents int
	LiveQueueBytes  int
	// MaxLiveSubscribers bounds the live subscribers of one topic on this
	// gateway; one more is answered rate_limited (default 0: no bound).
	MaxLiveSubscribers int
	// LivePollInterval is how often the reader of a topic with live
	// subscribers reads the store when nothing woke it: Bus.Watch wakes it
	// for appends through the Bus and, over a store that is an
	// event.Notifier, of every process; polling finds the others (default
	// 500ms, on Clock).
	LivePollInterval time.Duration
	// OriginPatterns lists the origins, besides the request's own host,
	// that browsers may connect from (see websocket.AcceptOptions).
	OriginPatterns []string
	// PingInterval is how often the gateway pings each connection; a
	// client that does not answer within PingTimeout is closed with
	// wsproto.ClosePingTimeout (default 20s; negative disables pings).
	PingInterval time.Duration
	// PingTimeout defaults to PingInterval.
	PingTimeout time.Duration
	// WriteTimeout bounds every write to a connection: a client that does
	// not read what is written within it is closed with wsproto.CloseWriteTimeout,
	// and its in-flight events go back to their groups at once (default
	// 10s). It is a deadline of the socket, on the system clock.
	WriteTimeout time.Duration
	// RateLimits are the token buckets (default: none).
	RateLimits RateLimits
	// Logger receives connection errors at debug level and failures at
	// warn level; nil discards them.
	Logger *slog.Logger
	// Observer receives metrics events; nil means none.
	Observer Observer
	// Clock tells the time of the auth timeout, pings, token expiry,
	// lease deadlines and rate limits; nil means the system clock. Give
	// it the clock of the Bus (event.Config.Clock) and of the verifier.
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxSubscriptions == 0 {
		c.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if c.ReadLimit == 0 {
		c.ReadLimit = DefaultReadLimit
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = c.ReadLimit
	}
	if c.MaxBatchEvents == 0 {
		c.MaxBatchEvents = DefaultMaxBatchEvents
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.AuthTimeout == 0 {
		c.AuthTimeout = DefaultAuthTimeout
	}
	if c.MaxFailedAuth == 0 {
		c.MaxFailedAuth = DefaultMaxFailedAuth
	}
	if c.FailedAuthLimit == (ratelimit.Limit{}) {
		c.FailedAuthLimit = ratelimit.Limit{Rate: DefaultFailedAuthRate, Burst: DefaultFailedAuthBurst}
	}
	if c.SendQueue == 0 {
		c.SendQueue = DefaultSendQueue
	}
	if c.PublishWindow == 0 {
		c.PublishWindow = DefaultPublishWindow
	}
	if c.LiveQueueEvents == 0 {
		c.LiveQueueEvents = DefaultLiveQueueEvents
	}
	if c.LiveQueueBytes == 0 {
		c.LiveQueueBytes = DefaultLiveQueueBytes
	}
	if c.LivePollInterval == 0 {
		c.LivePollInterval = DefaultLivePollInterval
	}
	if c.PingInterval == 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.PingTimeout == 0 && c.PingInterval > 0 {
		c.PingTimeout = c.PingInterval
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
	c.Clock = clock.Or(c.Clock)
}

// Validate reports every problem of c, joined.
func (c *Config) Validate() error {
	var errs []error
	if c.Bus == nil {
		errs = append(errs, invalid("Bus", "nil"))
	}
	if c.Verifier == nil {
		errs = append(errs, invalid("Verifier", "nil; use auth.StaticTokens or auth.NewJWTVerifier, or auth.OpenAccess for no authentication"))
	}
	if c.AckTimeout < 0 {
		errs = append(errs, invalid("AckTimeout", "%v is negative", c.AckTimeout))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, invalid("MaxInFlight", "%d is negative", c.MaxInFlight))
	}
	if c.MaxSubscriptions < 0 {
		errs = append(errs, invalid("MaxSubscriptions", "%d is negative", c.MaxSubscriptions))
	}
	if c.ReadLimit < 0 {
		errs = append(errs, invalid("ReadLimit", "%d is negative", c.ReadLimit))
	}
	if c.MaxPayload < 0 {
		errs = append(errs, invalid("MaxPayload", "%d is negative", c.MaxPayload))
	}
	if c.MaxBatchEvents < 0 {
		errs = append(errs, invalid("MaxBatchEvents", "%d is negative", c.MaxBatchEvents))
	}
	if c.MaxBatchBytes < 0 {
		errs = append(errs, invalid("MaxBatchBytes", "%d is negative", c.MaxBatchBytes))
	}
	if c.AuthTimeout < 0 {
		errs = append(errs, invalid("AuthTimeout", "%v is negative", c.AuthTimeout))
	}
	if c.MaxFailedAuth < 0 {
		errs = append(errs, invalid("MaxFailedAuth", "%d is negative", c.MaxFailedAuth))
	}
	if err := c.FailedAuthLimit.Validate(); err != nil {
		errs = append(errs, invalid("FailedAuthLimit", "%v", err))
	} else if c.FailedAuthLimit.Rate == 0 && c.FailedAuthLimit.Burst > 0 {
		errs = append(errs, invalid("FailedAuthLimit", "burst %d with rate 0; give a rate above 0", c.FailedAuthLimit.Burst))
	}
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			errs = append(errs, invalid("TrustedProxies", "[%d] is not a valid prefix", i))
		}
	}
	if c.PublishWindow < 0 {
		errs = append(errs, invalid("PublishWindow", "%d is negative", c.PublishWindow))
	}
	if c.SendQueue < 0 {
		errs = append(errs, invalid("SendQueue", "%d is negative", c.SendQueue))
	}
	if c.LiveQueueEvents < 0 {
		errs = append(errs, invalid("LiveQueueEvents", "%d is negative", c.LiveQueueEvents))
	}
	if c.LiveQueueBytes < 0 {
		errs = append(errs, invalid("LiveQueueBytes", "%d is negative", c.LiveQueueBytes))
	}
	if c.MaxLiveSubscribers < 0 {
		errs = append(errs, invalid("MaxLiveSubscribers", "%d is negative", c.MaxLiveSubscribers))
	}
	if c.LivePollInterval < 0 {
		errs = append(errs, invalid("LivePollInterval", "%v is negative", c.LivePollInterval))
	}
	if c.WriteTimeout < 0 {
		errs = append(errs, invalid("WriteTimeout", "%v is negative", c.WriteTimeout))
	}
	if c.PingTimeout < 0 {
		errs = append(errs, invalid("PingTimeout", "%v is negative", c.PingTimeout))
	}
	for _, l := range []struct {
		name string
		l    ratelimit.Limit
	}{
		{"RateLimits.Publish", c.RateLimits.Publish},
		{"RateLimits.TopicPublish", c.RateLimits.TopicPublish},
		{"RateLimits.Deliver", c.RateLimits.Deliver},
	} {
		if err := l.l.Validate(); err != nil {
			errs = append(errs, invalid(l.name, "%v", err))
		}
	}
	if c.RateLimits.MaxTopics < 0 {
		errs = append(errs, invalid("RateLimits.MaxTopics", "%d is negative", c.RateLimits.MaxTopics))
	}
	return errors.Join(errs...)
}
