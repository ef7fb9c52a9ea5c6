package mongostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
)

var _ event.GroupCommitter = (*Store)(nil)

// GroupCommits implements [event.GroupCommitter]: concurrent appends to a
// topic are written together (see Append).
func (s *Store) GroupCommits() bool { return true }

// Append implements [event.Store].
//
// Concurrent calls for one topic are written together: the first call
// starts a write at once, and calls that arrive while it runs are combined
// into the next InsertMany (group commit, with no timer). The write runs
// in the store's own context, bounded by Config.WriteTimeout, so it is not
// part of a transaction that ctx may carry. When ctx ends before the
// write, Append returns ctx's error; the records may then have been stored
// or not, and appending them again is safe (append is idempotent by id).
func (s *Store) Append(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
	if err := event.ValidateTopic(topic); err != nil {
		return nil, err
	}
	for i := range recs {
		r := &recs[i]
		if r.Topic != topic {
			return nil, fmt.Errorf("%w: topic: record %d has topic %q in an append to %q", event.ErrInvalid, i, r.Topic, topic)
		}
		if r.ID == "" {
			return nil, fmt.Errorf("%w: id: record %d has no id", event.ErrInvalid, i)
		}
		if !r.IsBinary() && !json.Valid(r.Payload) {
			return nil, fmt.Errorf("%w: payload: record %d (id %q) is not one JSON value", event.ErrInvalid, i, r.ID)
		}
		if r.Partition < 0 || r.Partition > 1<<31-1 {
			return nil, fmt.Errorf("%w: partition: record %d has partition %d", event.ErrInvalid, i, r.Partition)
		}
	}
	if len(recs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The writer reads the records from its own slice: an Append whose
	// ctx ends returns while they may still be written, and the caller
	// may then reuse its slice (a Publisher does).
	req := &appendReq{recs: slices.Clone(recs), done: make(chan struct{})}
	for i := range recs {
		req.bytes += recordSize(&recs[i])
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	a := s.appenders[topic]
	if a == nil {
		a = &appender{s: s, topic: topic}
		s.appenders[topic] = a
	}
	a.queue = append(a.queue, req)
	if !a.running {
		a.running = true
		s.wg.Add(1)
		go a.run()
	}
	s.mu.Unlock()

	select {
	case <-req.done:
		return req.out, req.err
	case <-ctx.Done():
	}
	s.mu.Lock()
	if !req.taken {
		for i, q := range a.queue {
			if q == req {
				a.queue = append(a.queue[:i], a.queue[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
		return nil, ctx.Err()
	}
	s.mu.Unlock()
	return nil, fmt.Errorf("mongostore: append to %q: %w (the records may have been stored: appending them again is safe)", topic, ctx.Err())
}

type appendReq struct {
	recs  []event.Record
	bytes int // about what the records take as documents
	out   []event.Record
	err   error
	taken bool // guarded by Store.mu
	done  chan struct{}
}

// appender is the group commit of one topic. Its fields are guarded by
// Store.mu, except head, which only the running writer touches.
type appender struct {
	s       *Store
	topic   string
	queue   []*appendReq
	running bool

	head      uint64 // the topic's highest seq as last seen by this writer
	headKnown bool
	headAt    time.Time    // when head was learnt (taken before the request that told it)
	summary   summaryDelta // what the batch being written inserted
}

// run writes queued requests until the queue is empty.
func (a *appender) run() {
	defer a.s.wg.Done()
	for {
		a.s.mu.Lock()
		if len(a.queue) == 0 {
			a.running = false
			a.s.mu.Unlock()
			return
		}
		// A batch takes requests in order up to MaxBatch records and
		// MaxBatchBytes; its first request goes whatever its size.
		n, size, k := 0, 0, 0
		for k < len(a.queue) && (k == 0 || (n+len(a.queue[k].recs) <= a.s.cfg.MaxBatch &&
			size+a.queue[k].bytes <= a.s.cfg.MaxBatchBytes)) {
			a.queue[k].taken = true
			n += len(a.queue[k].recs)
			size += a.queue[k].bytes
			k++
		}
		batch := make([]*appendReq, k)
		copy(batch, a.queue)
		a.queue = append(a.queue[:0], a.queue[k:]...)
		a.s.mu.Unlock()

		ctx, cancel := context.WithTimeout(a.s.ctx, a.s.cfg.WriteTimeout)
		w := a.write(ctx, batch)
		if a.headKnown {
			a.s.announce(a.topic, a.head)
		}
		a.s.summarise(a.topic, &a.summary)
		if !w.keyed() {
			cancel()
			w.finish()
			continue
		}
		// The latest entries are raised off the writer's path, so that
		// the next insert goes out at once, with a fresh head; the
		// Appends return once their entries are raised.
		a.s.wg.Add(1)
		go func() {
			defer a.s.wg.Done()
			defer cancel()
			a.raiseLatest(ctx, w.slots)
			w.finish()
		}()
	}
}

// written is a batch whose records were inserted (or failed).
type written struct {
	reqs  []*appendReq
	slots []*slot
	refs  [][]*slot // the slot of each record of each request
}

// keyed reports whether records with keys were stored.
func (w *written) keyed() bool {
	for _, sl := range w.slots {
		if sl.done && sl.err == nil && sl.stored.Key != "" {
			return true
		}
	}
	return false
}

// finish sets the results of the requests and releases their callers. A
// request whose records all failed for one reason gets that error; one
// with some records stored and others refused gets an
// [event.RecordErrors] with the stored records.
func (w *written) finish() {
	for i, r := range w.reqs {
		out := make([]event.Record, len(r.recs))
		var errs []error
		failed := 0
		for j, sl := range w.refs[i] {
			if sl.err != nil {
				if errs == nil {
					errs = make([]error, len(r.recs))
				}
				errs[j] = sl.err
				failed++
				continue
			}
			out[j] = sl.stored
		}
		switch {
		case failed == 0:
			r.out = out
		case failed == len(r.recs) && sameErrors(errs):
			r.err = errs[0]
		default:
			r.out, r.err = out, &event.RecordErrors{Errs: errs}
		}
		close(r.done)
	}
}

// sameErrors reports whether errs holds one error only, repeated.
func sameErrors(errs []error) bool {
	for _, err := range errs[1:] {
		if err != errs[0] {
			return false
		}
	}
	return true
}

// slot is one distinct record id of a batch.
type slot struct {
	rec    *event.Record
	req    *appendReq
	stored event.Record // the record as stored, once known
	done   bool
	err    error
}

// write stores the records of reqs. See the package documentation for how
// seqs are assigned.
func (a *appender) write(ctx context.Context, reqs []*appendReq) *written {
	// One slot per distinct id; a repeated id, also across requests, gets
	// the result of its first occurrence.
	var slots []*slot
	byID := make(map[string]*slot)
	refs := make([][]*slot, len(reqs))
	for i, r := range reqs {
		refs[i] = make([]*slot, len(r.recs))
		for j := range r.recs {
			id := r.recs[j].ID
			sl := byID[id]
			if sl == nil {
				sl = &slot{rec: &r.recs[j], req: r}
				byID[id] = sl
				slots = append(slots, sl)
			}
			refs[i][j] = sl
		}
	}

	// A record too large for a document fails alone, before the insert,
	// so that it cannot fail the records of the batch's other requests.
	ok := slots[:0:0]
	for _, sl := range slots {
		if err := checkDocSize(sl.rec); err != nil {
			sl.err = fmt.Errorf("mongostore: append to %q: %w", a.topic, err)
			continue
		}
		ok = append(ok, sl)
	}
	if err := a.insert(ctx, ok); err != nil {
		a.headKnown = false
		for _, sl := range slots {
			if !sl.done && sl.err == nil {
				sl.err = err
			}
		}
	}
	return &written{reqs: reqs, slots: slots, refs: refs}
}

// insert stores the slots in order under the unique (topic, seq) and
// (topic, id) indexes, retrying after seq conflicts.
func (a *appender) insert(ctx context.Context, slots []*slot) error {
	pending := slots
	conflicts := 0
	for len(pending) > 0 {
		if a.headKnown && a.s.cfg.TombstoneTTL > 0 && a.s.cfg.Clock.Now().Sub(a.headAt) > a.s.cfg.TombstoneTTL/4 {
			// Tombstones older than TombstoneTTL may be gone, and with
			// them the proof that their seqs are taken: refresh.
			a.headKnown = false
		}
		if !a.headKnown {
			if err := a.s.checkIndexes(ctx); err != nil {
				return err
			}
			start := a.s.cfg.Clock.Now()
			h, err := a.s.head(ctx, a.topic)
			if err != nil {
				return fmt.Errorf("mongostore: append to %q: read head: %w", a.topic, err)
			}
			a.head, a.headKnown, a.headAt = h, true, start
		}
		docs := make([]any, len(pending))
		for i, sl := range pending {
			docs[i] = encodeRecord(sl.rec, a.head+1+uint64(i))
		}
		start := a.s.cfg.Clock.Now()
		_, err := a.s.events.InsertMany(ctx, docs, options.InsertMany().SetOrdered(true))
		if err == nil {
			for i, sl := range pending {
				a.stored(sl, a.head+1+uint64(i))
			}
			a.cache(pending)
			a.head += uint64(len(pending))
			a.headAt = start
			return nil
		}
		var bwe mongo.BulkWriteException
		if !errors.As(err, &bwe) || len(bwe.WriteErrors) == 0 || bwe.WriteConcernError != nil {
			return fmt.Errorf("mongostore: append to %q: %w", a.topic, err)
		}
		// Ordered: the documents before the first error are stored, none
		// after it was tried.
		we := bwe.WriteErrors[0]
		k := min(max(we.Index, 0), len(pending))
		for i, sl := range pending[:k] {
			a.stored(sl, a.head+1+uint64(i))
		}
		a.cache(pending[:k])
		a.head += uint64(k)
		if k > 0 {
			a.headAt = start
		}
		pending = pending[k:]
		if len(pending) == 0 {
			return nil
		}
		if !isDuplicateKey(we.Code) {
			// This record cannot be stored: it fails alone, and the
			// insert goes on with the records after it.
			pending[0].err = fmt.Errorf("mongostore: append to %q: record id %q: %w", a.topic, pending[0].rec.ID, we)
			pending = pending[1:]
			continue
		}
		// A duplicate key: the id is stored already, or another writer
		// took the seq. MongoDB names the index in the error; otherwise
		// look the seq up by _id, and only if that does not tell, look the
		// ids up.
		first := pending[0]
		index := dupIndex(we.WriteError)
		taken := index == idxTopicSeq
		if index == "" {
			holder, found, err := a.s.idAt(ctx, a.topic, a.head+1)
			if err != nil {
				return fmt.Errorf("mongostore: append to %q: %w", a.topic, err)
			}
			taken = found && holder != first.rec.ID
		}
		// A server that does not name the index leaves two causes open, and
		// a seq another writer holds does not prove that the id is new: on
		// a topic others keep appending to, a writer re-publishing stored
		// ids would find head+1 taken every round and never learn that its
		// ids are stored. So after a lost round, look the ids up as well.
		if !taken || (index == "" && conflicts > 0) {
			// Look all pending ids up at once: a batch retried after a
			// crash has many that are stored.
			var (
				freed bool
				err2  error
			)
			if pending, freed, err2 = a.resolveExisting(ctx, pending); err2 != nil {
				return err2
			}
			if first.done || first.err != nil || freed {
				continue
			}
		}
		// The seq was taken, so it is stored: find the head from there
		// and retry after it. Back off a little when other writers keep
		// winning.
		conflicts++
		start = a.s.cfg.Clock.Now()
		var h uint64
		if conflicts <= 2 {
			h, err = a.s.headFrom(ctx, a.topic, a.head+1)
		} else {
			// Losing again and again: galloping takes several round trips,
			// in which the others append more. Read the head in one.
			h, err = a.s.head(ctx, a.topic)
		}
		if err != nil {
			return fmt.Errorf("mongostore: append to %q: %w", a.topic, err)
		}
		a.head, a.headAt = max(h, a.head+1), start
		if conflicts > 3 {
			d := time.Duration(rand.IntN(1<<min(conflicts, 8))) * time.Millisecond / 4
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return fmt.Errorf("mongostore: append to %q: %w", a.topic, ctx.Err())
			}
		}
	}
	return nil
}

// cache adds the records just inserted at head+1.. to the store's cache:
// the insert succeeded, so no other writer holds those seqs.
func (a *appender) cache(inserted []*slot) {
	a.summary.add(inserted, a.head)
	if len(inserted) == 0 || a.s.cfg.CacheRecords < 0 {
		return
	}
	recs := make([]event.Record, len(inserted))
	for i, sl := range inserted {
		recs[i] = cloneRecord(&sl.stored)
	}
	a.s.cacheAdd(a.topic, a.head, a.head+uint64(len(inserted)), recs)
}

func (a *appender) stored(sl *slot, seq uint64) {
	sl.stored = *sl.rec
	sl.stored.Seq = seq
	sl.done = true
}

// resolveExisting finds which pending ids the topic already holds, gives
// those slots the stored record and returns the others. An id held by a
// tombstone is freed (the tombstone's id becomes its seq) and freed is
// set: the insert can be tried again.
func (a *appender) resolveExisting(ctx context.Context, pending []*slot) (_ []*slot, freed bool, _ error) {
	ids := make([]string, len(pending))
	for i, sl := range pending {
		ids[i] = sl.rec.ID
	}
	cur, err := a.s.events.Find(ctx, topicFilter(a.topic, bson.E{Key: fRecID, Value: bson.D{{Key: "$in", Value: ids}}}))
	if err != nil {
		return nil, false, fmt.Errorf("mongostore: append to %q: look up ids: %w", a.topic, err)
	}
	defer cur.Close(ctx)
	found := make(map[string]event.Record)
	var decodeErrs map[string]error
	var gone []bson.Raw
	for cur.Next(ctx) {
		if isTombstone(cur.Current) {
			gone = append(gone, slices.Clone(cur.Current))
			continue
		}
		rec, derr := decodeRecord(a.topic, cur.Current)
		if derr != nil {
			id, _ := cur.Current.Lookup(fRecID).StringValueOK()
			if decodeErrs == nil {
				decodeErrs = make(map[string]error)
			}
			decodeErrs[id] = derr
			continue
		}
		found[rec.ID] = rec
	}
	if err := cur.Err(); err != nil {
		return nil, false, fmt.Errorf("mongostore: append to %q: look up ids: %w", a.topic, err)
	}
	for _, raw := range gone {
		if err := a.s.freeID(ctx, raw); err != nil {
			return nil, false, fmt.Errorf("mongostore: append to %q: %w", a.topic, err)
		}
	}
	keep := pending[:0]
	for _, sl := range pending {
		if rec, ok := found[sl.rec.ID]; ok {
			sl.stored, sl.done = rec, true
			continue
		}
		if derr, ok := decodeErrs[sl.rec.ID]; ok {
			sl.err = fmt.Errorf("mongostore: append to %q: id %q is held by a document that does not decode: %w", a.topic, sl.rec.ID, derr)
			continue
		}
		keep = append(keep, sl)
	}
	return keep, len(gone) > 0, nil
}

// freeID frees the record id a tombstone holds, so that the id can be
// stored again: the tombstone's id becomes its seq, an integer, which no
// record id is. The filter is the _id alone: a tombstone never changes
// back, and a filter of _id alone is the cheapest on every server.
func (s *Store) freeID(ctx context.Context, tomb bson.Raw) error {
	id := tomb.Lookup(fID)
	var newID any = id // unique too, if the seq is unusable
	if n, ok := intValue(tomb.Lookup(fSeq)); ok {
		newID = n
	}
	_, err := s.events.UpdateOne(ctx, bson.D{{Key: fID, Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: fRecID, Value: newID}}}})
	if err != nil {
		return fmt.Errorf("free the id of tombstone %s: %w", extJSON(id), err)
	}
	return nil
}

// dupIndex returns the name of the index a duplicate-key error names, or
// "" when the server does not say (FerretDB).
func dupIndex(we mongo.WriteError) string {
	for _, name := range []string{idxTopicSeq, idxTopicID} {
		if strings.Contains(we.Message, "index: "+name+" ") {
			return name
		}
	}
	if kp, ok := we.Raw.Lookup("keyPattern").DocumentOK(); ok {
		if _, err := kp.LookupErr(fSeq); err == nil {
			return idxTopicSeq
		}
		if _, err := kp.LookupErr(fRecID); err == nil {
			return idxTopicID
		}
	}
	return ""
}

// isDuplicateKey reports whether code is a duplicate key error.
func isDuplicateKey(code int) bool { return code == 11000 || code == 11001 || code == 12582 }

// idAt returns the record id of the document of seq in topic, looked up by
// its _id.
func (s *Store) idAt(ctx context.Context, topic string, seq uint64) (string, bool, error) {
	raw, err := s.events.FindOne(ctx, bson.D{{Key: fID, Value: docID(topic, seq)}},
		options.FindOne().SetProjection(bson.D{{Key: fRecID, Value: 1}})).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("look up seq %d: %w", seq, err)
	}
	id, _ := raw.Lookup(fRecID).StringValueOK()
	return id, true, nil
}

// exists reports whether the document of seq in topic exists.
func (s *Store) exists(ctx context.Context, topic string, seq uint64) (bool, error) {
	_, found, err := s.idAt(ctx, topic, seq)
	return found, err
}

// headFrom returns the head of topic given that seq known is stored: seqs
// are contiguous, so it gallops forward by _id lookups and then bisects.
// A result that is too low only costs another conflict.
func (s *Store) headFrom(ctx context.Context, topic string, known uint64) (uint64, error) {
	lo, hi := known, uint64(0) // lo exists, hi (if set) does not
	for step := uint64(1); hi == 0; step *= 2 {
		ok, err := s.exists(ctx, topic, lo+step)
		if err != nil {
			return 0, err
		}
		if ok {
			lo += step
		} else {
			hi = lo + step
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := s.exists(ctx, topic, mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// maxDocBytes is the largest document MongoDB stores (16 MiB).
const maxDocBytes = 16 << 20

// recordSize is about what r takes as a document: its fields' bytes and
// the fixed fields' share.
func recordSize(r *event.Record) int {
	n := 128 + 2*len(r.Topic) + len(r.ID) + len(r.Key) + len(r.SID) + len(r.Payload)
	for k, v := range r.Headers {
		n += 16 + len(k) + len(v)
	}
	for _, s := range r.CausedBy {
		n += 16 + len(s)
	}
	for _, s := range r.Tags {
		n += 16 + len(s)
	}
	return n
}

// checkDocSize returns an error wrapping event.ErrInvalid if r does not
// fit in a document. Only records near the limit are encoded to tell.
func checkDocSize(r *event.Record) error {
	if recordSize(r) < maxDocBytes-64<<10 {
		return nil
	}
	b, err := bson.Marshal(encodeRecord(r, 1<<62))
	if err != nil {
		return fmt.Errorf("%w: record id %q: %v", event.ErrInvalid, r.ID, err)
	}
	if len(b) > maxDocBytes {
		return fmt.Errorf("%w: record id %q: %d bytes as a document, more than MongoDB's %d", event.ErrInvalid, r.ID, len(b), maxDocBytes)
	}
	return nil
}
