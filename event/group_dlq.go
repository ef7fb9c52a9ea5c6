package event

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/promethean/promlib/internal/backoff"
)

// Dead-letter headers set on records moved to the dead-letter topic.
const (
	HeaderDLQReason  = "x-dlq-reason"
	HeaderDLQAttempt = "x-dlq-attempts"
	HeaderDLQTopic   = "x-dlq-topic"
	HeaderDLQGroup   = "x-dlq-group"
	HeaderDLQID      = "x-dlq-id"
	HeaderDLQSeq     = "x-dlq-seq"
)

// deadLetterSuffix ends the name of a dead-letter topic.
const deadLetterSuffix = ".dlq"

// DeadLetterTopic returns the dead-letter topic of topic, as the Bus names
// it by default ([SubscribeOptions].DeadLetterTopic): topic + ".dlq".
func DeadLetterTopic(topic string) string { return topic + deadLetterSuffix }

// IsDeadLetterTopic reports whether topic is named as a dead-letter topic
// ([DeadLetterTopic] of another).
func IsDeadLetterTopic(topic string) bool { return strings.HasSuffix(topic, deadLetterSuffix) }

// toDLQ queues e for the dead-letter topic; the loop publishes it.
func (g *group) toDLQ(e *entry, now time.Time) {
	e.state = stDLQ
	e.deadline = now
	g.dlq = append(g.dlq, e)
	g.nHeld++
	g.signal()
}

var dlqNamespace = uuid.MustParse("6f1c7b52-2f7e-4d0c-9a55-5c4c1e7e9a10")

// dlqRetry spaces the tries of a dead-letter publish that failed.
var dlqRetry = backoff.Policy{Initial: time.Second, Max: 30 * time.Second, Jitter: 0.2}

// deadLetter publishes the queued entries that are due to their
// dead-letter topic and settles them; one whose publish fails is tried
// again after a backoff (1s, doubling up to 30s).
func (g *group) deadLetter(ctx context.Context, now time.Time) {
	g.mu.Lock()
	var due []*entry
	keep := g.dlq[:0]
	for _, e := range g.dlq {
		if e.deadline.After(now) {
			keep = append(keep, e)
		} else {
			due = append(due, e)
		}
	}
	clear(g.dlq[len(keep):])
	g.dlq = keep
	g.mu.Unlock()
	for _, e := range due {
		err := g.publishDLQ(ctx, e)
		g.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				g.b.log.Warn("event: dead-letter failed", "topic", g.topic, "group", g.name, "id", e.d.ID, "err", err)
			}
			e.dlqFail = min(e.dlqFail+1, 30)
			e.deadline = now.Add(dlqRetry.Delay(int(e.dlqFail)))
			g.dlq = append(g.dlq, e)
		} else if e.state == stDLQ {
			g.nHeld--
			g.settle(e)
			g.b.obs.DeadLettered(g.topic, g.name)
			g.dispatch(g.b.clk.Now())
		}
		g.mu.Unlock()
	}
}

func (g *group) publishDLQ(ctx context.Context, e *entry) error {
	r := e.d.Record
	h := make(map[string]string, len(r.Headers)+6)
	for k, v := range r.Headers {
		h[k] = v
	}
	h[HeaderDLQReason] = strings.ToValidUTF8(e.reason, "\uFFFD") // records hold UTF-8 text only
	h[HeaderDLQAttempt] = strconv.Itoa(e.attempt)
	h[HeaderDLQTopic] = g.topic
	h[HeaderDLQGroup] = g.name
	h[HeaderDLQID] = r.ID
	h[HeaderDLQSeq] = strconv.FormatUint(r.Seq, 10)
	id := uuid.NewSHA1(dlqNamespace, []byte(g.topic+"\x00"+g.name+"\x00"+r.ID)).String()
	d := Record{
		ID: id, TS: g.b.clk.Now().UnixMilli(), Topic: g.policy().DeadLetterTopic, Key: r.Key,
		Headers: h, Payload: r.Payload, ContentType: r.ContentType, CausedBy: []string{r.ID}, Tags: r.Tags, SID: r.SID,
	}
	// Not Append: its checks passed when r was stored, and a Bus that is
	// closing still dead-letters what its groups settle.
	_, err := g.b.publish(ctx, d.Topic, []Record{d})
	return err
}
