// Package proctest runs the helper processes of tests that kill a
// process: the test binary started again, with settings in its
// environment, reporting what it does as JSON lines on its stdout.
//
// The test side starts a helper with [Start] and reads its reports, of a
// type L of the test's own, with [Proc.Lines], [Proc.Count], [Proc.Has]
// and [Proc.WaitFor]; it ends it with [Proc.Kill] (SIGKILL), [Proc.Stop]
// (SIGTERM, a clean exit required) or [Proc.Wait]. The helper side (its
// TestMain, told apart by an environment variable of the test's choice)
// writes its reports with a [Writer], one write(2) per line, so that a
// killed process leaves whole lines, and reads its settings with
// [EnvInt].
//
// A helper still running when its test ends is killed, and its stderr is
// logged when the test failed.
//
// # Why internal/
//
// It is in internal/ because it is test infrastructure of two layers:
// the event stores' process tests (event/storetest) and the transaction
// runners' (txn/internal/sqltxtest).
package proctest
