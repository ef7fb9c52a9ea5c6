package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/ws"
)

func init() {
	register(&command{
		Name:     "publish",
		Synopsis: "TOPIC [PAYLOAD] [-key K] [-header k=v]... [-o table|json]",
		Summary:  "publish events: PAYLOAD, or one JSON event a line on stdin",
		Help: `Each payload is one JSON value. Without PAYLOAD, every non-blank line of
stdin is one event; they are sent in batches (POST /publish/TOPIC with an
application/x-ndjson body) and stored in their order. Every event gets
the key of -key and the headers of -header. Prints the seq and id of each
event stored (-o json: {"id","seq"} a line). An event the hub refuses
(bad JSON, a schema, a limit) stops the command with its line number.

Examples:
  promctl publish orders '{"id":"o-1","total":12.5}' -key o-1
  promctl publish orders -header source=backfill < orders.ndjson`,
		Run: runPublish,
	})
}

// publishBatch bounds the events and bytes of one publish request, well
// within the hub's defaults (ws.DefaultMaxBatchEvents, MaxBatchBytes).
const (
	publishBatch      = 500
	publishBatchBytes = 4 << 20
	// maxLine is the longest line read from stdin.
	maxLine = 16 << 20
)

// headerFlag collects -header k=v.
type headerFlag map[string]string

func (h headerFlag) String() string { return "" }

func (h headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	switch {
	case !ok:
		return fmt.Errorf("%q, want k=v", v)
	case k == "":
		return fmt.Errorf("%q has an empty name, want k=v", v)
	}
	if _, dup := h[k]; dup {
		return fmt.Errorf("%q given twice", k)
	}
	h[k] = val
	return nil
}

func runPublish(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
	e.outputFlag(fs)
	key := fs.String("key", "", "the key of every event (its partition and, on compacted topics, its identity)")
	headers := headerFlag{}
	fs.Var(headers, "header", "a header `k=v` of every event (repeatable)")
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argCount(pos, 1, 2, "TOPIC", "PAYLOAD"); err != nil {
		return err
	}
	topic := pos[0]
	if err := topicArg(topic); err != nil {
		return err
	}
	item := ws.BatchItem{Key: *key}
	if len(headers) > 0 {
		item.Headers = headers
	}
	p := &publisher{e: e, topic: topic, item: item}
	if len(pos) == 2 {
		if !json.Valid([]byte(pos[1])) {
			return usagef("PAYLOAD: not JSON (one JSON value, such as '{\"a\":1}' or '\"text\"')")
		}
		if err := p.add(ctx, 0, []byte(pos[1])); err != nil {
			return err
		}
		return p.flush(ctx)
	}
	sc := bufio.NewScanner(e.stdin)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if !json.Valid(b) {
			return fmt.Errorf("stdin line %d: not JSON (%d events published before it)", line, p.stored)
		}
		if err := p.add(ctx, line, b); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("stdin line %d: longer than %d bytes (%d events published before it)", line+1, maxLine, p.stored)
		}
		return fmt.Errorf("stdin: %w", err)
	}
	if err := p.flush(ctx); err != nil {
		return err
	}
	if p.stored == 0 {
		return errors.New("no events: give PAYLOAD, or JSON lines on stdin")
	}
	return nil
}

// publisher sends events in NDJSON batches.
type publisher struct {
	e      *env
	topic  string
	item   ws.BatchItem // key and headers of every event
	body   bytes.Buffer
	lines  []int // the stdin line of each event of body
	stored int
}

func (p *publisher) add(ctx context.Context, line int, payload []byte) error {
	it := p.item
	it.Payload = payload
	b, err := json.Marshal(it)
	if err != nil {
		return err
	}
	if len(p.lines) > 0 && (len(p.lines) == publishBatch || p.body.Len()+len(b) > publishBatchBytes) {
		if err := p.flush(ctx); err != nil {
			return err
		}
	}
	p.body.Write(b)
	p.body.WriteByte('\n')
	p.lines = append(p.lines, line)
	return nil
}

// flush publishes the events of body and prints what was stored; the
// first event refused ends it with an error naming its line.
func (p *publisher) flush(ctx context.Context) error {
	if len(p.lines) == 0 {
		return nil
	}
	lines := p.lines
	p.lines = nil
	resp, err := p.e.hub.do(ctx, http.MethodPost, "/publish/"+p.topic, nil, "application/x-ndjson", bytes.NewReader(p.body.Bytes()))
	p.body.Reset()
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res ws.BatchResult
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&res); err != nil {
		return fmt.Errorf("POST /publish/%s: the answer is not a batch result: %w", p.topic, err)
	}
	var first error
	for i, r := range res.Results {
		if r.Error != nil {
			if first == nil {
				where := "PAYLOAD"
				if i < len(lines) && lines[i] > 0 {
					where = fmt.Sprintf("stdin line %d", lines[i])
				}
				first = fmt.Errorf("%s: %w", where, &hubError{Code: string(r.Error.Code), Msg: r.Error.Msg})
			}
			continue
		}
		p.stored++
		if p.e.json() {
			b, _ := json.Marshal(wsproto.Published{ID: r.ID, Seq: r.Seq})
			fmt.Fprintf(p.e.stdout, "%s\n", b)
		} else {
			fmt.Fprintf(p.e.stdout, "%s seq %d id %s\n", p.topic, r.Seq, r.ID)
		}
	}
	if first != nil {
		return fmt.Errorf("%w (%d events published in all)", first, p.stored)
	}
	return nil
}
