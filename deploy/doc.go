// Package deploy holds what an operator of the hub deploys beside it: the
// Prometheus alert rules (prometheus/alerts.yml, with their promtool unit
// tests) and the Grafana dashboard (grafana/promlib.json). It has no Go
// API; its tests check those files against the hub.
//
// # Checks
//
//   - promtool check rules and promtool test rules pass on the alert rules
//     and their unit tests; every alert has a case where it fires and one
//     where it does not.
//   - Every query of the dashboard parses (promtool check rules over a
//     rules file made of them).
//   - Every metric named by an alert, a unit test's input series or a
//     dashboard query is one the hub exports: the names are gathered from
//     the collectors the hub registers (examples/hub), on a registry of
//     the test's own, after every series has been made to exist.
//   - The alert rules quoted in docs/METRICS.md are those of alerts.yml;
//     docs/OPERATIONS.md has a section for each alert, and names every
//     flag and environment variable of the hub.
//
// promtool is in Debian's prometheus package. Without it the tests that
// need it are skipped, saying so; with CI=true they fail instead.
//
// What to do when an alert fires: docs/OPERATIONS.md of the repository.
package deploy
