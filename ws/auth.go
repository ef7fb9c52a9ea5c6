package ws

import (
	"context"
	"errors"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/auth"
)

// authError maps an error of the gateway's [auth.Verifier] to a protocol
// error: a protocol [*wsproto.Error] keeps its code; an expired token
// ([auth.ErrTokenExpired], or an error wrapping [wsproto.ErrTokenExpired]) is
// token_expired; any other rejection of the token auth_failed, with the
// verifier's reason, which holds no key material; signing keys that cannot
// be fetched ([auth.ErrKeysUnavailable]), a closed verifier or a check that
// did not finish in time are internal, since the token may well be good:
// try again later.
func authError(err error) *wsproto.Error {
	var pe *wsproto.Error
	switch {
	case errors.As(err, &pe) && pe.Code != "":
		msg := pe.Msg
		if msg == "" {
			msg = err.Error()
		}
		return wsproto.NewError(pe.Code, err, "%s", msg)
	case errors.Is(err, auth.ErrTokenExpired):
		return wsproto.NewError(wsproto.CodeTokenExpired, err, "%v", err)
	case errors.Is(err, auth.ErrInvalidToken):
		return wsproto.NewError(wsproto.CodeAuthFailed, err, "%v", err)
	case errors.Is(err, auth.ErrKeysUnavailable):
		return wsproto.NewError(wsproto.CodeInternal, err, "tokens cannot be checked now: the signing keys are unavailable; try again later")
	case errors.Is(err, auth.ErrClosed):
		return wsproto.NewError(wsproto.CodeInternal, err, "tokens cannot be checked now: the verifier is closed")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return wsproto.NewError(wsproto.CodeInternal, err, "the token check did not finish in time; try again later")
	}
	return wsproto.NewError(wsproto.CodeAuthFailed, err, "%v", err)
}

// authNoToken authenticates c as it opens when the gateway's Verifier
// takes an empty token ([auth.OpenAccess] does), as HTTP publish does for
// a request without a bearer token: such a connection may PUBLISH and
// SUBSCRIBE at once, with no AUTH, and an AUTH it sends later still works
// (with a token of any subject, since no token named none). A Verifier
// that refuses the empty token leaves c to send AUTH first, within
// Config.AuthTimeout; that refusal is not a failed AUTH. It runs on the
// reader goroutine before the first frame is read.
func (c *conn) authNoToken() bool {
	p, perr := c.g.authenticate(c.ctx, "")
	if perr != nil {
		return false
	}
	c.principal.Store(p)
	c.noToken = true
	if !p.Expiry.IsZero() {
		c.g.schedule(c, dueExpiry, p.Expiry)
	}
	return true
}
