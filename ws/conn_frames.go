package ws

import (
	"context"
	"errors"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ratelimit"
	"github.com/promethean/promlib/ws/internal/wsframe"
)

// handle decodes and answers one client frame. Frames of a connection are
// handled in order, and answers come in the order of the frames (those
// without corr can be matched by order): a PUBLISH is handed to the
// connection's Publisher and answered when it is stored, and the answers
// after it wait their turn (answers.go).
func (c *conn) handle(data []byte) {
	start := time.Now()
	f, err := wsframe.Decode(data)
	var perr *wsproto.Error
	if err != nil {
		perr = err.(*wsproto.Error)
	} else {
		if f.Op != wsproto.OpPublish {
			c.settlePublishes()
		}
		var later bool
		if perr, later = c.dispatch(f, start); later {
			return // answered when stored
		}
	}
	if perr != nil {
		c.fail(f.Corr, perr)
		c.g.obs.Handled(f.Op, perr.Code, time.Since(start))
		return
	}
	c.g.obs.Handled(f.Op, "", time.Since(start))
}

// dispatch handles a decoded frame; later reports a PUBLISH handed to the
// Publisher, answered when it is stored.
func (c *conn) dispatch(f *wsframe.Frame, start time.Time) (perr *wsproto.Error, later bool) {
	if f.Op == wsproto.OpAuth {
		return c.auth(f), false
	}
	p := c.principal.Load()
	if p == nil {
		return wsproto.NewError(wsproto.CodeUnauthorized, nil, "send AUTH first: this gateway takes no frame before a token"), false
	}
	if p.Expired(c.g.now()) {
		return wsproto.NewError(wsproto.CodeTokenExpired, nil, "the token expired at %s; send AUTH with a new one", p.Expiry.UTC().Format(time.RFC3339)), false
	}
	switch f.Op {
	case wsproto.OpPublish:
		if perr := c.publish(p, f, start); perr != nil {
			return perr, false
		}
		return nil, true
	case wsproto.OpSubscribe:
		if f.Group == "" {
			// Not through subscribe, whose frame (the options of a group)
			// would grow the reader's stack for good.
			return c.subscribeLive(p, f), false
		}
		return c.subscribe(p, f), false
	case wsproto.OpUnsubscribe:
		return c.unsubscribe(f), false
	case wsproto.OpAck, wsproto.OpNack:
		return c.settle(f), false
	case wsproto.OpModAck:
		return c.modAck(f), false
	case wsproto.OpPause, wsproto.OpResume:
		return c.pause(f), false
	}
	return wsproto.NewError(wsproto.CodeBadFrame, nil, "op: unknown op %q", f.Op), false
}

// authenticate checks a token with the gateway's Verifier.
func (g *Gateway) authenticate(ctx context.Context, token string) (*auth.Principal, *wsproto.Error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.AuthTimeout)
	defer cancel()
	p, err := g.cfg.Verifier.Verify(ctx, token)
	switch {
	case err != nil:
		return nil, authError(err)
	case p == nil:
		return nil, wsproto.NewError(wsproto.CodeAuthFailed, nil, "the verifier returned no principal")
	case p.Expired(g.now()):
		return nil, wsproto.NewError(wsproto.CodeTokenExpired, nil, "the token expired at %s", p.Expiry.UTC().Format(time.RFC3339))
	}
	return p, nil
}

// auth handles AUTH under the limits of refused AUTH: while the client
// address has no token in the gateway's failed-AUTH bucket, AUTH is
// answered rate_limited without checking the token; a token refused
// (auth_failed, token_expired) takes one; Config.MaxFailedAuth refusals in
// a row close the connection with wsproto.CloseTooManyFailedAuth.
func (c *conn) auth(f *wsframe.Frame) *wsproto.Error {
	g := c.g
	var perr *wsproto.Error
	if !g.failedAuth.HasTokenAt(g.now(), c.client) {
		l := g.cfg.FailedAuthLimit
		perr = wsproto.NewError(wsproto.CodeRateLimited, nil, "too many failed AUTH from this address (limit %g/s, burst %d); try again later", l.Rate, l.Burst)
	} else if perr = c.authenticate(f); perr == nil {
		c.failures = 0
		return nil
	}
	switch perr.Code {
	case wsproto.CodeAuthFailed, wsproto.CodeTokenExpired:
		g.failedAuth.ChargeAt(g.now(), c.client)
	case wsproto.CodeRateLimited:
	default:
		return perr // the token could not be checked: not the client's failure
	}
	if c.failures++; c.failures >= g.cfg.MaxFailedAuth {
		g.log.Debug("ws: too many failed AUTH", "conn", c.id, "remote", c.remote, "client", c.client, "last", perr.Msg)
		c.closeWith(wsproto.CloseTooManyFailedAuth, "too many failed auth")
	}
	return perr
}

// authenticate handles AUTH, also on an authenticated connection, where
// it refreshes the token: the new principal must have the subject of the
// old one (a token of another subject is refused with auth_failed); it
// replaces the old principal and its expiry, and subscriptions it may not
// hold are ended, each with an ERR forbidden that names its topic and
// group. A refused re-AUTH leaves the previous principal in place. On a
// connection authenticated with no token (authNoToken), AUTH is the same
// refresh, with a token of any subject.
func (c *conn) authenticate(f *wsframe.Frame) *wsproto.Error {
	p, perr := c.g.authenticate(c.ctx, f.Token)
	if perr != nil {
		return perr
	}
	// Only this goroutine stores the principal: no race between the
	// check and the store.
	old := c.principal.Load()
	// The principal of no token names no subject: the first token may
	// name any.
	if old != nil && !c.noToken && old.Subject != p.Subject {
		return wsproto.NewError(wsproto.CodeAuthFailed, nil, "the token is for subject %q but this connection is authenticated as %q; a connection keeps its subject (open another connection for another subject)",
			truncate(p.Subject, 64), truncate(old.Subject, 64))
	}
	c.principal.Store(p)
	c.noToken = false
	if !p.Expiry.IsZero() {
		c.g.schedule(c, dueExpiry, p.Expiry)
	}
	c.ok(f.Corr, "", 0)
	if old == nil {
		c.g.log.Debug("ws: authenticated", "conn", c.id, "subject", p.Subject)
		return nil
	}
	for _, s := range c.subsSnapshot() {
		if err := p.Check(acl.Subscribe, s.topic, s.group); err != nil {
			c.dropSub(s)
			e := wsproto.NewError(wsproto.CodeForbidden, err, "subscription of group %q on topic %q ended after AUTH: %v", s.group, s.topic, err)
			out := framePool.Get().(*outFrame)
			out.op, out.code, out.msg, out.topic, out.group = wsproto.OpErr, e.Code, e.Msg, s.topic, s.group
			c.answer(out) // after the OK of the AUTH

		}
	}
	for _, s := range c.liveSnapshot() {
		if err := p.Check(acl.Subscribe, s.topic, ""); err != nil {
			c.endLiveWithErr(s, wsproto.NewError(wsproto.CodeForbidden, err, "live subscription of topic %q ended after AUTH: %v", s.topic, err))
		}
	}
	return nil
}

// publish checks a PUBLISH and hands it to the connection's Publisher;
// nil means it is answered when stored.
func (c *conn) publish(p *auth.Principal, f *wsframe.Frame, start time.Time) *wsproto.Error {
	if err := event.ValidateTopic(f.Topic); err != nil {
		return wsproto.NewError(wsproto.CodeBadFrame, err, "%v", err)
	}
	if err := p.Check(acl.Publish, f.Topic, ""); err != nil {
		return wsproto.NewError(wsproto.CodeForbidden, err, "publish to %q: %v", f.Topic, err)
	}
	if int64(len(f.Payload)) > c.g.cfg.MaxPayload {
		return wsproto.NewError(wsproto.CodeTooLarge, nil, "payload: %d bytes, more than %d", len(f.Payload), c.g.cfg.MaxPayload)
	}
	now := c.g.now()
	if !ratelimit.AllOrNone(now, ratelimit.Reserve(now, c.pubLim), c.g.topics.ReserveAt(now, f.Topic)) {
		return wsproto.NewError(wsproto.CodeRateLimited, nil, "publish rate of this connection or of topic %q exceeded", f.Topic)
	}
	pub, err := c.publisher()
	if err != nil {
		return errorOf(err, wsproto.CodeInternal)
	}
	// The Publisher waits here while PublishWindow publishes of this
	// connection are being stored: the client is read no further.
	c.answerLater(f.Corr, f.Topic, pub.Publish(c.ctx, f.Topic, f.Payload, f.Opts.PublishOptions()...), start)
	return nil
}

func (c *conn) subscribe(p *auth.Principal, f *wsframe.Frame) *wsproto.Error {
	if err := errors.Join(event.ValidateTopic(f.Topic), event.ValidateGroup(f.Group)); err != nil {
		return wsproto.NewError(wsproto.CodeBadFrame, err, "%v", err)
	}
	key := subKey{f.Topic, f.Group}
	c.mu.Lock()
	_, dup := c.subs[key]
	n := len(c.subs) + len(c.live)
	c.mu.Unlock()
	if dup {
		return wsproto.NewError(wsproto.CodeAlreadySubscribed, nil, "group %q on topic %q is already subscribed on this connection", f.Group, f.Topic)
	}
	if err := p.Check(acl.Subscribe, f.Topic, f.Group); err != nil {
		return wsproto.NewError(wsproto.CodeForbidden, err, "subscribe to %q as group %q: %v", f.Topic, f.Group, err)
	}
	if n >= c.g.cfg.MaxSubscriptions {
		return wsproto.NewError(wsproto.CodeRateLimited, nil, "this connection holds %d subscriptions, the limit", n)
	}

	cfg := &c.g.cfg
	o := f.Opts
	if o == nil {
		o = &wsframe.FrameOpts{}
	}
	maxInFlight := cfg.MaxInFlight
	if o.MaxInFlight > 0 && o.MaxInFlight < maxInFlight {
		maxInFlight = o.MaxInFlight
	}
	opts := []event.SubscribeOption{
		event.WithManualAck(),
		event.WithDeferStart(), // an attempt starts when its EVENT is written
		event.WithMaxInFlight(maxInFlight),
		event.WithDrainTimeout(5 * time.Second),
	}
	// The lease is a group setting: asked for when the client gives one,
	// and otherwise the gateway's default only for a group that has no
	// settings yet (a client asking nothing joins a group as it is).
	if o.AckTimeoutMS > 0 {
		opts = append(opts, event.WithAckTimeout(time.Duration(o.AckTimeoutMS)*time.Millisecond))
	} else if _, err := c.g.bus.GroupConfig(c.ctx, f.Topic, f.Group); errors.Is(err, event.ErrNotFound) {
		opts = append(opts, event.WithAckTimeout(cfg.AckTimeout))
	}
	switch o.From {
	case "earliest":
		opts = append(opts, event.FromEarliest())
	case "ts":
		opts = append(opts, event.FromTS(o.TS))
	case "seq":
		opts = append(opts, event.FromSeq(o.Seq))
	case "afterId":
		opts = append(opts, event.AfterID(o.AfterID))
	}
	if o.MaxAttempts > 0 {
		opts = append(opts, event.WithMaxAttempts(o.MaxAttempts))
	}
	if o.KeyOrdered {
		// The next EVENT of a key is sent once the client settled the
		// one before it; MaxPerKey 0 is the bus's default.
		opts = append(opts, event.WithKeyOrdered(), event.WithMaxPerKey(o.MaxPerKey))
	}

	s := newSubState(c, f.Topic, f.Group, maxInFlight)
	sub, err := c.g.bus.Subscribe(c.ctx, f.Topic, f.Group, s.handle, opts...)
	if err != nil {
		s.cancel()
		if c.ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, event.ErrClosed) {
			return wsproto.NewError(wsproto.CodeInternal, err, "the bus is closed")
		}
		c.g.log.Warn("ws: subscribe failed", "conn", c.id, "topic", f.Topic, "group", f.Group, "err", err)
		return errorOf(err, wsproto.CodeInternal)
	}
	s.sub = sub
	c.mu.Lock()
	c.subs[key] = s
	c.mu.Unlock()
	c.ok(f.Corr, "", 0)
	close(s.ready) // EVENT frames only after the OK
	return nil
}

// subscribeLive handles a SUBSCRIBE without group (live.go): the
// subscribe permission on the topic as for no group (a rule that names
// groups does not grant it), one per topic and connection, counted against
// MaxSubscriptions.
func (c *conn) subscribeLive(p *auth.Principal, f *wsframe.Frame) *wsproto.Error {
	if err := event.ValidateTopic(f.Topic); err != nil {
		return wsproto.NewError(wsproto.CodeBadFrame, err, "%v", err)
	}
	if c.liveSub(f.Topic) != nil {
		return wsproto.NewError(wsproto.CodeAlreadySubscribed, nil, "topic %q has a live subscription on this connection already", f.Topic)
	}
	if err := p.Check(acl.Subscribe, f.Topic, ""); err != nil {
		return wsproto.NewError(wsproto.CodeForbidden, err, "live subscription of %q: %v", f.Topic, err)
	}
	c.mu.Lock()
	n := len(c.subs) + len(c.live)
	c.mu.Unlock()
	if n >= c.g.cfg.MaxSubscriptions {
		return wsproto.NewError(wsproto.CodeRateLimited, nil, "this connection holds %d subscriptions, the limit", n)
	}
	return c.liveSubscribe(f)
}

func (c *conn) sub(f *wsframe.Frame) (*subState, *wsproto.Error) {
	c.mu.Lock()
	s := c.subs[subKey{f.Topic, f.Group}]
	c.mu.Unlock()
	if s == nil {
		return nil, wsproto.NewError(wsproto.CodeNotSubscribed, nil, "group %q on topic %q is not subscribed on this connection", f.Group, f.Topic)
	}
	return s, nil
}

// dropSub ends a subscription: its in-flight events go back to the group
// at once.
func (c *conn) dropSub(s *subState) {
	c.mu.Lock()
	if c.subs[subKey{s.topic, s.group}] == s {
		delete(c.subs, subKey{s.topic, s.group})
	}
	c.mu.Unlock()
	s.close()
}

func (c *conn) unsubscribe(f *wsframe.Frame) *wsproto.Error {
	if f.Group == "" {
		s := c.liveSub(f.Topic)
		if s == nil {
			return wsproto.NewError(wsproto.CodeNotSubscribed, nil, "topic %q has no live subscription on this connection", f.Topic)
		}
		c.dropLive(s)
		c.ok(f.Corr, "", 0)
		return nil
	}
	s, perr := c.sub(f)
	if perr != nil {
		return perr
	}
	c.dropSub(s)
	c.ok(f.Corr, "", 0)
	return nil
}

// settle handles ACK and NACK. An id that is not in flight here any more is
// answered OK (acks are idempotent); an ACK whose lease has ended is
// refused with ack_failed, since the event will be delivered again.
func (c *conn) settle(f *wsframe.Frame) *wsproto.Error {
	s, perr := c.sub(f)
	if perr != nil {
		return perr
	}
	attempt, ok := s.attempt(f.ID, f.Attempt)
	if !ok {
		c.ok(f.Corr, "", 0)
		return nil
	}
	ref := event.AttemptRef{Topic: s.topic, Group: s.group, ID: f.ID, Attempt: attempt}
	var err error
	if f.Op == wsproto.OpAck {
		err = c.g.bus.Ack(c.ctx, ref)
	} else {
		err = c.g.bus.Nack(c.ctx, ref, f.Reason)
	}
	switch {
	case err == nil, errors.Is(err, event.ErrNotInFlight):
		s.forget(f.ID, attempt)
	case errors.Is(err, event.ErrStaleAck):
		s.forget(f.ID, attempt)
		if f.Op == wsproto.OpNack {
			break // the event is being delivered again, as a NACK asks
		}
		return wsproto.NewError(wsproto.CodeAckFailed, err, "id %q: the lease of attempt %d ended before the ACK; the event will be delivered again", f.ID, attempt)
	default:
		return wsproto.NewError(wsproto.CodeAckFailed, err, "id %q: %v", f.ID, err)
	}
	c.ok(f.Corr, "", 0)
	return nil
}

func (c *conn) modAck(f *wsframe.Frame) *wsproto.Error {
	s, perr := c.sub(f)
	if perr != nil {
		return perr
	}
	attempt, ok := s.attempt(f.ID, f.Attempt)
	if !ok {
		return wsproto.NewError(wsproto.CodeUnknownID, nil, "id %q is not in flight on this subscription", f.ID)
	}
	extend := time.Duration(*f.ExtendMS) * time.Millisecond
	err := c.g.bus.ModAck(c.ctx, event.AttemptRef{Topic: s.topic, Group: s.group, ID: f.ID, Attempt: attempt}, extend)
	switch {
	case err == nil:
		s.extend(f.ID, attempt, c.g.now().Add(extend))
	case errors.Is(err, event.ErrNotInFlight), errors.Is(err, event.ErrStaleAck):
		s.forget(f.ID, attempt)
		return wsproto.NewError(wsproto.CodeUnknownID, err, "id %q is not in flight on this subscription (attempt %d ended)", f.ID, attempt)
	default:
		return wsproto.NewError(wsproto.CodeAckFailed, err, "id %q: %v", f.ID, err)
	}
	c.ok(f.Corr, "", 0)
	return nil
}

func (c *conn) pause(f *wsframe.Frame) *wsproto.Error {
	s, perr := c.sub(f)
	if perr != nil {
		return perr
	}
	s.setPaused(f.Op == wsproto.OpPause)
	c.ok(f.Corr, "", 0)
	return nil
}
