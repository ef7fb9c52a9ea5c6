// Command faults is a fault harness for promlib's shared SQL stores:
// publishers and consumers run as separate processes over one SQLite file
// or one PostgreSQL database, while the harness kills them (SIGKILL and
// restart), stalls them past their leases (SIGSTOP, then SIGCONT), cuts
// their database connections (pg_terminate_backend) and restarts the
// PostgreSQL server (pg_ctl restart -m immediate, when it started the
// server itself). Then it stops the faults, lets the consumer group drain,
// reads the store back and prints one JSON line: what was published, what
// was stored, what was delivered, and what went wrong (lost, unexpected,
// stored twice, duplicates by cause, order violations).
//
//	go run ./tools/faults -store sqlite -duration 60s -seed 1
//	go run ./tools/faults -store postgres -duration 60s -seed 1
//
// The program runs itself again as each child process (-role publisher or
// -role consumer); the children report every acknowledged publish and
// every delivery to the harness over their standard output, one line per
// event written before the publish is counted or the delivery acked, so a
// killed child never makes a record look lost. README.md says what each
// field of the JSON line means. The exit status is 1 when a run lost,
// skipped or invented a record, stored one twice, or did not drain.
package main
