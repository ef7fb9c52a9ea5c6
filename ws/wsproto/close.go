package wsproto

// Close codes the gateway ends a connection with. The 4xxx codes are in the
// range RFC 6455 leaves to applications; their last three digits follow the
// HTTP status of the same meaning.
const (
	// CloseGoingAway (1001): the gateway is shutting down, or its Bus was
	// closed (whichever comes first).
	CloseGoingAway = 1001
	// CloseInvalidUTF8 (1007): a text frame was not valid UTF-8.
	CloseInvalidUTF8 = 1007
	// CloseWriteTimeout (1008): the client did not read what the gateway
	// wrote within the gateway's write timeout. Its socket is full, so no
	// close frame can reach it: the socket is dropped and the gateway's
	// observer gets this code.
	CloseWriteTimeout = 1008
	// CloseTooLarge (1009): a frame was over the gateway's read limit.
	CloseTooLarge = 1009
	// CloseTokenExpired (4401): the token expired and no AUTH refreshed it.
	CloseTokenExpired = 4401
	// CloseTooManyFailedAuth (4403): too many AUTH frames in a row were
	// refused.
	CloseTooManyFailedAuth = 4403
	// CloseAuthTimeout (4408): no successful AUTH within the gateway's
	// auth timeout.
	CloseAuthTimeout = 4408
	// CloseSlowSubscriber (4429): a live subscription with slow "close"
	// (the default) had more frames waiting than the connection's live
	// queue holds. The client reconnects and resumes with since.
	CloseSlowSubscriber = 4429
	// ClosePingTimeout (4504): the client did not answer a ping in time (a
	// dead peer, or one that stopped reading). The socket is dropped
	// without a close handshake; the gateway's observer gets this code.
	ClosePingTimeout = 4504
)
