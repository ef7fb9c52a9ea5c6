// Package wsclient is the Go client of the WebSocket protocol of
// docs/PROTOCOL.md, as served by a ws.Gateway.
//
//	c, err := wsclient.Dial(ctx, "wss://example.com/ws", &wsclient.Options{Token: token})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	sub, err := wsclient.SubscribeJSON(ctx, c, "orders", "billing",
//		func(ctx context.Context, o Order, m *wsclient.Message) error {
//			return bill(ctx, o) // nil acks, an error nacks
//		})
//	res, err := wsclient.PublishJSON(ctx, c, "orders", Order{ID: "o-1"})
//
// A live subscription ([Client.SubscribeLive]) follows a topic without a
// consumer group, for viewers:
//
//	live, err := c.SubscribeLive(ctx, "process.state", func(ctx context.Context, m *wsclient.Message) error {
//		render(m.Payload)
//		return nil
//	}, wsclient.WithOnGap(func(from, to uint64, reason string) { refresh() }))
//
// Guarantees: a lost connection is dialled again with backoff, then
// authenticated and subscribed again (durable groups mean nothing is
// lost; live subscriptions resume after their Position, so that nothing
// the topic still holds is missed or handled twice); a Publish cut off by a lost connection is sent again with the
// same id, so it is stored once; a message is acked or nacked exactly
// once, on the connection it came on; protocol errors are *wsproto.Error
// (package ws/wsproto, the gateway's too) and match its Err* sentinels
// with errors.Is.
package wsclient
