// Package sqltxtest tests the transactional forms of the SQL outbox and
// dedupe stores over a real database, the same for SQLite (txn/sqltxn)
// and PostgreSQL (txn/pgtxn): an outbox row and the caller's own row
// commit together or not at all, and SubscribeExactlyOnceTx commits a
// handler's effect with its dedupe mark, in one process ([Run]) and
// across a process killed with SIGKILL between the effect and the ack
// ([RunProcesses]); and outbox drainers in two processes over one outbox,
// the leader killed between a publish and its mark.
package sqltxtest
