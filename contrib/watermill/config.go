package watermill

import (
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/promethean/promlib/event"
)

// Defaults of the configs.
const (
	DefaultConsumerGroup = "watermill"
	// DefaultNackBackoff is how long a nacked message waits before it is
	// delivered again: a fixed delay, as Watermill's own Pub/Subs resend
	// after a nack (their NackResendSleep), not one that grows; use
	// Watermill's Retry middleware for backoff.
	DefaultNackBackoff = 100 * time.Millisecond
)

// Config configures a [Publisher]. The zero value of a field means its
// default.
type Config struct {
	// ContentType is the content type of the published records (default
	// application/octet-stream: payloads are bytes).
	ContentType string
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.ContentType == "" {
		c.ContentType = event.ContentTypeBinary
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem of c, joined.
func (c *Config) Validate() error {
	var o event.PublishOptions
	event.WithContentType(c.ContentType)(&o)
	if err := o.Validate(); err != nil {
		return errors.Join(errors.New("watermill: ContentType"), err)
	}
	return nil
}

// SubscriberConfig configures a [Subscriber]. The zero value of a field
// means its default.
type SubscriberConfig struct {
	// ConsumerGroup is the group every subscription joins (default
	// "watermill").
	ConsumerGroup string
	// SubscribeOptions are applied after the adapter's own (start at the
	// earliest record, MaxInFlight 1, redelivery until acked, a fixed nack
	// backoff of 100ms); they may override any of them, but
	// a MaxInFlight above 1 gives up Watermill's ordering. The start,
	// MaxAttempts and backoff are settings of the consumer group
	// ([event.GroupConfig]): the first subscription creates the group with
	// them, and a later one asking for other values (other options, or
	// a group created outside the adapter with other settings) is refused
	// with an [*event.GroupConfigError]; change a group's settings with
	// [event.Bus.UpdateGroup].
	SubscribeOptions []event.SubscribeOption
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

func (c *SubscriberConfig) setDefaults() {
	if c.ConsumerGroup == "" {
		c.ConsumerGroup = DefaultConsumerGroup
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem of c, joined.
func (c *SubscriberConfig) Validate() error {
	var errs []error
	if c.ConsumerGroup != "" {
		if err := event.ValidateGroup(c.ConsumerGroup); err != nil {
			errs = append(errs, err)
		}
	}
	o := c.subscribeOptions()
	if err := o.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// subscribeOptions resolves the adapter's defaults and c's options.
func (c *SubscriberConfig) subscribeOptions() event.SubscribeOptions {
	o := event.SubscribeOptions{
		// The group settings a subscription asks for: a new group is
		// created with them, and an existing group must have them (or
		// Subscribe fails with an *event.GroupConfigError).
		Group: event.GroupConfig{
			Start:       event.Earliest(),
			MaxAttempts: math.MaxInt32,
			Backoff:     DefaultNackBackoff,
			MaxBackoff:  DefaultNackBackoff,
		},
		MaxInFlight: 1,
	}
	for _, opt := range c.SubscribeOptions {
		opt(&o)
	}
	return o
}
