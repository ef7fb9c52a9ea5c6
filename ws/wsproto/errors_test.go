package wsproto_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/promethean/promlib/ws/wsproto"
	"github.com/stretchr/testify/assert"
)

func TestErrorMatchesByCode(t *testing.T) {
	t.Parallel()
	cause := errors.New("store down")
	err := fmt.Errorf("publish: %w", wsproto.NewError(wsproto.CodePublishFailed, cause, "topic %q", "orders"))
	assert.ErrorIs(t, err, wsproto.ErrPublishFailed)
	assert.NotErrorIs(t, err, wsproto.ErrForbidden)
	assert.ErrorIs(t, err, cause, "the cause is unwrapped")
	assert.EqualError(t, err, `publish: ws: publish_failed: topic "orders"`)

	// An error decoded from an ERR frame (no cause) matches alike.
	var pe *wsproto.Error
	assert.ErrorAs(t, &wsproto.Error{Code: wsproto.CodeForbidden}, &pe)
	assert.ErrorIs(t, pe, wsproto.ErrForbidden)
	assert.EqualError(t, wsproto.ErrForbidden, "ws: forbidden")
}

func ExampleError() {
	// What the gateway answers and what the client returns are one type.
	err := error(&wsproto.Error{Code: wsproto.CodeRateLimited, Msg: "publish rate"})
	fmt.Println(errors.Is(err, wsproto.ErrRateLimited), err)
	// Output: true ws: rate_limited: publish rate
}
