package ws

import (
	"encoding/json"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
)

// Pipelined PUBLISH. The reader goroutine hands each PUBLISH to the
// connection's event.Publisher and reads on; the Publisher stores the
// publishes of consecutive frames in batches. Answers still leave in the
// order of the frames: while a publish is not answered, the answers after
// it wait in line behind it (c.answers), and an answerer goroutine, which
// runs only while the line is not empty, queues them for the writer as
// their publishes finish. A frame other than PUBLISH waits until the
// publishes before it are stored and answered, so that its effect and its
// answer (and the EVENTs a SUBSCRIBE starts) follow theirs, as when each
// PUBLISH was answered before the next frame was read.

// answer is an answer in line: a frame ready to send, or the outcome of a
// publish (res) to turn into OK or ERR.
type answer struct {
	f     *outFrame
	res   *event.PublishFuture
	corr  json.RawMessage
	topic string
	start time.Time
}

// publisher returns the connection's Publisher, made at its first PUBLISH.
// Called by the reader goroutine only.
func (c *conn) publisher() (*event.Publisher, error) {
	if p := c.pub.Load(); p != nil {
		return p, nil
	}
	p, err := c.g.bus.NewPublisher(event.PublisherConfig{MaxPending: c.g.cfg.PublishWindow})
	if err != nil {
		return nil, err
	}
	c.pub.Store(p)
	return p, nil
}

// answerLater puts the outcome of a publish in line.
func (c *conn) answerLater(corr json.RawMessage, topic string, res *event.PublishFuture, start time.Time) {
	c.amu.Lock()
	c.answers = append(c.answers, answer{res: res, corr: corr, topic: topic, start: start})
	if !c.answering {
		c.answering = true
		c.answered = make(chan struct{})
		c.wg.Add(1)
		go c.answerLoop()
	}
	c.amu.Unlock()
}

// answer queues f for the writer, behind the answers in line if any.
func (c *conn) answer(f *outFrame) {
	c.amu.Lock()
	if c.answering {
		c.answers = append(c.answers, answer{f: f})
		c.amu.Unlock()
		return
	}
	c.amu.Unlock()
	c.enqueue(c.ctx, f)
}

// settlePublishes waits until the publishes handed over so far are
// stored and answered. Called by the reader goroutine before a frame other
// than PUBLISH.
func (c *conn) settlePublishes() {
	c.amu.Lock()
	answering, answered := c.answering, c.answered
	c.amu.Unlock()
	if !answering {
		return
	}
	select {
	case <-answered:
	case <-c.ctx.Done():
	}
}

// answerLoop sends the answers in line, in order, each once it is known,
// and ends when the line is empty.
func (c *conn) answerLoop() {
	defer c.wg.Done()
	for {
		c.amu.Lock()
		if c.ahead == len(c.answers) || c.ctx.Err() != nil {
			for _, a := range c.answers[c.ahead:] {
				if a.f != nil {
					*a.f = outFrame{}
					framePool.Put(a.f)
				}
			}
			clear(c.answers)
			c.answers, c.ahead = nil, 0
			c.answering = false
			close(c.answered)
			c.amu.Unlock()
			return
		}
		a := c.answers[c.ahead]
		c.answers[c.ahead] = answer{}
		if c.ahead++; c.ahead == len(c.answers) {
			c.answers, c.ahead = c.answers[:0], 0
		}
		c.amu.Unlock()
		f := a.f
		if a.res != nil {
			if f = c.publishAnswer(a); f == nil {
				continue
			}
		}
		c.enqueue(c.ctx, f)
	}
}

// publishAnswer waits for a publish and makes its answer; nil when the
// connection ended first.
func (c *conn) publishAnswer(a answer) *outFrame {
	rec, err := a.res.Get(c.ctx)
	if c.ctx.Err() != nil {
		return nil // the connection ended; nobody to answer
	}
	f := framePool.Get().(*outFrame)
	if err != nil {
		c.g.log.Warn("ws: publish failed", "conn", c.id, "topic", a.topic, "err", err)
		e := errorOf(err, wsproto.CodePublishFailed)
		f.op, f.corr, f.code, f.msg = wsproto.OpErr, a.corr, e.Code, e.Msg
		c.g.obs.Handled(wsproto.OpPublish, e.Code, time.Since(a.start))
		return f
	}
	f.op, f.corr, f.id, f.seq = wsproto.OpOK, a.corr, rec.ID, rec.Seq
	c.g.obs.Handled(wsproto.OpPublish, "", time.Since(a.start))
	return f
}
