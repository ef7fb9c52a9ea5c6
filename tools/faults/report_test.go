package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/promethean/promlib/event"
)

// run builds the input of analyse: its lines are stamped a millisecond
// apart, in order, unless a line has its time.
type run struct {
	in    analysisInput
	procs map[string]*proc
	t     int64
}

func newRun() *run {
	o := &Options{Store: "sqlite", Publishers: 1, Consumers: 2, Partitions: 2, Lease: time.Second, MaxInFlight: 4}
	o.setDefaults()
	return &run{in: analysisInput{Options: o, DLQ: map[string]int{}}, procs: map[string]*proc{}}
}

func (r *run) proc(member string) *proc {
	p := r.procs[member]
	if p == nil {
		p = &proc{member: member, stopping: true}
		r.procs[member] = p
		r.in.Procs = append(r.in.Procs, p)
	}
	return p
}

func (r *run) line(member string, l Line) *run {
	r.t += int64(time.Millisecond)
	if l.T == 0 {
		l.T = r.t
	}
	r.in.Lines = append(r.in.Lines, procLine{proc: r.proc(member), Line: l})
	return r
}

// publish has p0.1 publish and store id at seq in partition part.
func (r *run) publish(id string, seq uint64, part int) *run {
	r.line("p0.1", Line{K: "try", ID: id})
	r.line("p0.1", Line{K: "ack", ID: id, Seq: seq, P: part})
	r.in.Records = append(r.in.Records, event.Record{ID: id, Seq: seq, Partition: part})
	return r
}

// deliver has member get id and settle it with op and outcome.
func (r *run) deliver(member, id string, seq uint64, part, attempt int, op, outcome string) *run {
	r.line(member, Line{K: "deliver", ID: id, Seq: seq, P: part, A: attempt})
	if op != "" {
		r.line(member, Line{K: "settle", ID: id, Seq: seq, P: part, A: attempt, Op: op, R: outcome})
	}
	return r
}

// fault records a fault on member ("" for the server) now; a stop lasts
// ten seconds, longer than any test's lines.
func (r *run) fault(kind, member string) *run {
	r.t += int64(time.Millisecond)
	f := &Fault{Kind: kind, Target: member, T: r.t, Until: r.t}
	if kind == faultStop {
		f.Until += int64(10 * time.Second)
	}
	if member != "" {
		f.proc = r.proc(member)
		if kind == faultKill {
			f.proc.killed = true
		}
	}
	r.in.Faults = append(r.in.Faults, f)
	return r
}

func TestAnalyseCounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		build func(r *run)
		check func(t *testing.T, rep *Report)
		ok    bool
	}{
		{
			name: "clean",
			build: func(r *run) {
				r.publish("p0-0", 1, 0).publish("p0-1", 2, 1)
				r.deliver("c0.1", "p0-0", 1, 0, 1, "ack", "ok").deliver("c1.1", "p0-1", 2, 1, 1, "ack", "ok")
			},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, 2, rep.PublishedAcked)
				assert.Equal(t, 2, rep.Stored)
				assert.Equal(t, 2, rep.Delivered)
				assert.Zero(t, rep.Duplicates)
			},
			ok: true,
		},
		{
			name: "lost",
			build: func(r *run) {
				r.publish("p0-0", 1, 0).publish("p0-1", 2, 1)
				r.deliver("c0.1", "p0-0", 1, 0, 1, "ack", "ok")
			},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, 1, rep.Lost)
				assert.Equal(t, 1, rep.NeverDelivered)
				assert.Equal(t, []string{"p0-1"}, rep.Examples["lost"])
			},
		},
		{
			name: "maybe stored and delivered",
			build: func(r *run) {
				r.line("p0.1", Line{K: "try", ID: "p0-0"})
				r.in.Records = append(r.in.Records, event.Record{ID: "p0-0", Seq: 1})
				r.line("p0.1", Line{K: "try", ID: "p0-1"})
				r.deliver("c0.1", "p0-0", 1, 0, 1, "ack", "ok")
			},
			check: func(t *testing.T, rep *Report) {
				assert.Zero(t, rep.PublishedAcked)
				assert.Equal(t, 2, rep.Maybe)
				assert.Equal(t, 1, rep.MaybeStored)
				assert.Zero(t, rep.Lost)
			},
			ok: true,
		},
		{
			name: "a stored maybe never delivered",
			build: func(r *run) {
				r.line("p0.1", Line{K: "try", ID: "p0-0"})
				r.in.Records = append(r.in.Records, event.Record{ID: "p0-0", Seq: 1})
			},
			check: func(t *testing.T, rep *Report) {
				assert.Zero(t, rep.Lost)
				assert.Equal(t, 1, rep.NeverDelivered)
			},
		},
		{
			name: "stored twice, and a hole",
			build: func(r *run) {
				r.publish("p0-0", 1, 0)
				r.in.Records = append(r.in.Records, event.Record{ID: "p0-0", Seq: 3})
				r.deliver("c0.1", "p0-0", 1, 0, 1, "ack", "ok")
				r.deliver("c0.1", "p0-0", 3, 0, 1, "ack", "ok")
			},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, 1, rep.StoredTwice)
				assert.Equal(t, 1, rep.SeqHoles)
				assert.Zero(t, rep.Unexpected)
			},
		},
		{
			name: "unexpected",
			build: func(r *run) {
				r.publish("p0-0", 1, 0)
				r.deliver("c0.1", "p0-0", 1, 0, 1, "ack", "ok")
				r.deliver("c0.1", "x-1", 2, 0, 1, "ack", "ok")                       // nobody published it
				r.deliver("c1.1", "p0-0", 7, 0, 1, "ack", "ok")                      // not where it is stored
				r.in.Records = append(r.in.Records, event.Record{ID: "y-1", Seq: 2}) // nobody published it
			},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, 3, rep.Unexpected)
			},
		},
		{
			name: "settled without an ack",
			build: func(r *run) {
				r.publish("p0-0", 1, 0).publish("p0-1", 2, 0).publish("p0-2", 3, 0)
				r.deliver("c0.1", "p0-0", 1, 0, 1, "nack", "ok") // and never again
				r.deliver("c0.1", "p0-1", 2, 0, 1, "ack", "stale")
				r.deliver("c1.1", "p0-2", 3, 0, 1, "", "") // its outcome died with c1.1
				r.fault(faultKill, "c1.1")
			},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, 2, rep.Unacked)
				assert.Equal(t, []string{"p0-0", "p0-1"}, rep.Examples["unacked"])
				assert.Equal(t, 1, rep.RefusedSettles)
			},
		},
		{
			name: "dead-lettered",
			build: func(r *run) {
				r.publish("p0-0", 1, 0)
				r.deliver("c0.1", "p0-0", 1, 0, 1, "nack", "ok")
				r.in.DLQ["p0-0"] = 1
			},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, 1, rep.DeadLettered)
				assert.Zero(t, rep.Unacked)
			},
			ok: true,
		},
		{
			name: "duplicates by cause",
			build: func(r *run) {
				for i, id := range []string{"n", "k", "s", "l", "r", "c", "u"} {
					r.publish(id, uint64(i+1), 0)
				}
				r.deliver("c0.1", "n", 1, 0, 1, "nack", "ok").deliver("c0.1", "n", 1, 0, 2, "ack", "ok")
				r.deliver("c0.1", "k", 2, 0, 1, "", "")
				r.deliver("c0.1", "s", 3, 0, 1, "", "")
				r.fault(faultKill, "c0.1")
				r.deliver("c1.1", "k", 2, 0, 2, "ack", "ok")
				r.deliver("c1.1", "l", 4, 0, 1, "ack", "stale")
				r.fault(faultStop, "c1.1")
				r.deliver("c1.1", "s", 3, 0, 1, "ack", "stale") // after the kill: prev (c0.1) was killed
				r.deliver("c2.1", "l", 4, 0, 2, "ack", "ok")    // c1.1's ack was refused, then c1.1 was stopped
				r.deliver("c2.1", "r", 5, 0, 1, "ack", "stale")
				r.deliver("c1.1", "r", 5, 0, 2, "ack", "ok") // refused, no fault on c2.1: the lease ended
				r.deliver("c2.1", "c", 6, 0, 1, "ack", "ok")
				r.line("c2.1", Line{K: "commit", P: 0, Seq: 6})
				r.deliver("c1.1", "c", 6, 0, 1, "ack", "ok") // the cursor had passed it
				r.deliver("c2.1", "u", 7, 0, 1, "ack", "ok")
				r.deliver("c1.1", "u", 7, 0, 1, "ack", "ok") // nothing says why
			},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, 7, rep.Duplicates)
				assert.Equal(t, map[string]int{
					causeNack: 1, faultKill: 2, faultStop: 1, causeLeaseLost: 1, causeAfterCommit: 1, causeUnexplained: 1,
				}, rep.DuplicateCauses)
				assert.Len(t, rep.Examples[causeUnexplained], 1)
			},
			ok: true,
		},
		{
			name: "order",
			build: func(r *run) {
				for i := range 8 {
					r.publish("p0-"+string(rune('a'+i)), uint64(i+1), 0)
				}
				r.deliver("c0.1", "p0-b", 2, 0, 1, "ack", "ok")
				r.deliver("c0.1", "p0-a", 1, 0, 1, "ack", "ok") // a violation
				r.line("c0.1", Line{K: "revoke", P: 0}).line("c0.1", Line{K: "assign", P: 0})
				r.deliver("c0.1", "p0-d", 4, 0, 1, "ack", "ok")
				r.deliver("c0.1", "p0-c", 3, 0, 1, "ack", "ok") // a violation
				r.fault(faultStop, "c0.1")
				r.deliver("c0.1", "p0-f", 6, 0, 1, "ack", "ok")
				r.deliver("c0.1", "p0-e", 5, 0, 1, "ack", "ok") // a violation
				r.deliver("c0.1", "p0-h", 8, 0, 1, "nack", "ok")
				r.deliver("c0.1", "p0-g", 7, 0, 2, "ack", "ok") // a redelivery: no violation
				r.deliver("c0.1", "p0-h", 8, 0, 2, "ack", "ok")
				r.deliver("c1.1", "p0-g", 7, 1, 1, "ack", "ok") // another partition
			},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, 3, rep.OrderViolations)
			},
			ok: true,
		},
		{
			name: "a stall between orders nothing",
			build: func(r *run) {
				r.publish("p0-a", 1, 0).publish("p0-b", 2, 0)
				r.deliver("c0.1", "p0-b", 2, 0, 1, "ack", "ok")
				r.fault(faultStop, "c0.1")
				r.deliver("c0.1", "p0-a", 1, 0, 1, "ack", "ok")
			},
			check: func(t *testing.T, rep *Report) {
				assert.Zero(t, rep.OrderViolations)
			},
			ok: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRun()
			tt.build(r)
			rep := analyse(r.in)
			tt.check(t, rep)
			assert.Equal(t, tt.ok, rep.OK, "failures: %v", rep.Failures)
		})
	}
}

// A delivery that began before its process stalled is dated by its
// lease, not by its line: the line written after SIGCONT does not make
// it come after the redelivery another consumer made meanwhile.
func TestDeliveryDatedByLease(t *testing.T) {
	t.Parallel()
	r := newRun()
	r.publish("p0-0", 1, 0)
	ack := r.in.Options.AckTimeout.Nanoseconds()
	r.fault(faultStop, "c0.1")
	r.in.Faults[0].Until = r.t + int64(10*time.Millisecond)
	began := r.t - int64(time.Millisecond) // before the stop
	r.deliver("c1.1", "p0-0", 1, 0, 1, "ack", "ok")
	r.line("c1.1", Line{K: "commit", P: 0, Seq: 1})
	r.t += int64(20 * time.Millisecond)
	r.line("c0.1", Line{K: "deliver", ID: "p0-0", Seq: 1, P: 0, A: 1, DL: began + ack})
	r.line("c0.1", Line{K: "settle", ID: "p0-0", Seq: 1, P: 0, A: 1, Op: "ack", R: "stale"})
	rep := analyse(r.in)
	assert.Equal(t, map[string]int{faultStop: 1}, rep.DuplicateCauses)
	assert.True(t, rep.OK, rep.Failures)
}

// A consumer stalled past its partition lease hands the deliveries it had
// queued before the stall to its handler after SIGCONT, though another
// consumer has delivered and committed them meanwhile: a duplicate of a
// stalled member, not a cursor that went back.
func TestStalledMemberDuplicate(t *testing.T) {
	t.Parallel()
	r := newRun()
	r.line("c0.1", Line{K: "assign", P: 0})
	r.publish("p0-0", 1, 0)
	r.fault(faultStop, "c0.1")
	stop := r.in.Faults[0]
	r.deliver("c1.1", "p0-0", 1, 0, 1, "ack", "ok")
	r.line("c1.1", Line{K: "commit", P: 0, Seq: 1})
	r.t += int64(10 * time.Millisecond)
	stop.Until = r.t
	r.deliver("c0.1", "p0-0", 1, 0, 1, "ack", "ok")
	r.line("c0.1", Line{K: "revoke", P: 0})
	rep := analyse(r.in)
	assert.Equal(t, map[string]int{causeStalled: 1}, rep.DuplicateCauses)
	assert.True(t, rep.OK, rep.Failures)
}

// On SQLite a process stalled while it holds the write lock stalls every
// writer: the member that acked a record cannot renew its lease nor
// commit, and when the stalled process resumes it takes the partition and
// delivers the record again. The stalled process did not hold the
// partition: the duplicate is a lost lease, which its member notices
// after the redelivery.
func TestStalledWriterDuplicate(t *testing.T) {
	t.Parallel()
	r := newRun()
	r.line("c0.1", Line{K: "assign", P: 0})
	r.publish("p0-0", 1, 0)
	r.deliver("c0.1", "p0-0", 1, 0, 1, "ack", "ok")
	r.fault(faultStop, "c1.1")
	stop := r.in.Faults[0]
	r.t += int64(10 * time.Millisecond)
	stop.Until = r.t
	r.line("c1.1", Line{K: "assign", P: 0})
	r.deliver("c1.1", "p0-0", 1, 0, 1, "ack", "ok")
	r.line("c0.1", Line{K: "revoke", P: 0})
	rep := analyse(r.in)
	assert.Equal(t, map[string]int{causeLeaseLost: 1}, rep.DuplicateCauses)
	assert.True(t, rep.OK, rep.Failures)
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	o, err := parse([]string{"-store", "mysql", "-consumers", "0", "-faults", "kill,flood"}, nil)
	assert.NoError(t, err)
	err = o.validate()
	assert.ErrorContains(t, err, "-store")
	assert.ErrorContains(t, err, "-consumers")
	assert.ErrorContains(t, err, `unknown fault "flood"`)
	o, err = parse(nil, nil)
	assert.NoError(t, err)
	assert.NoError(t, o.validate())
	assert.Equal(t, 2*o.Lease, o.AckTimeout)
}
