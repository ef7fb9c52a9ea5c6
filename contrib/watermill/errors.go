package watermill

import "errors"

var (
	// ErrClosed is returned by a Publisher or Subscriber after Close.
	ErrClosed = errors.New("watermill: closed")
	// ErrNacked is the reason a nacked message is redelivered.
	ErrNacked = errors.New("watermill: message nacked")
	// errSubscriptionEnded gives back a message whose subscription ended
	// before it was settled.
	errSubscriptionEnded = errors.New("watermill: subscription ended before the message was settled")
)
