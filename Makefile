GO ?= go

# GOTOOLCHAIN: every go command of make runs the toolchain go.mod names
# (its toolchain line: the release with the standard library's security
# fixes govulncheck asks for), downloaded by the go command when the
# installed one is older. A GOTOOLCHAIN of your own is kept.
export GOTOOLCHAIN ?= $(shell sed -n 's/^toolchain //p' go.mod)+auto

.PHONY: test test-race test-all test-ts check vulncheck bench bench-go soak

# NESTED are the nested modules (adapters with dependencies of their own,
# kept out of the library's go.mod); test-all and check run them too.
NESTED := contrib/watermill contrib/otel schema

# test starts the bundled MongoDB-compatible test server (or uses MONGO_URL
# when it is set) and a throwaway PostgreSQL cluster (or uses PG_URL), runs
# every test, and stops them. test-race does the same with every test built
# with the race detector (RACE=-race): the detector multiplies the tests'
# CPU time by about 2.5, which would put test past its three minutes on a
# two-core machine; CI (.ci/run) runs both. A few heavy tests run fewer
# records under the detector (files with the race build tag).
RACE ?=
test:
	tools/mongotest/with-mongo.sh tools/pgtest/with-postgres.sh $(MAKE) --no-print-directory test-all

# RACE_TEST_P is test-race's TEST_P: the instrumented binaries use the
# cores themselves, and more at once would stretch the tests that kill,
# stop and time processes.
RACE_TEST_P ?= 2
test-race:
	tools/mongotest/with-mongo.sh tools/pgtest/with-postgres.sh $(MAKE) --no-print-directory test-all RACE=-race TEST_P=$(RACE_TEST_P)

# TEST_TIMEOUT bounds each test binary: well above a slow CI machine's
# run, so that it fails on a real hang with every goroutine's stack, not
# on go test's default of 10 minutes.
TEST_TIMEOUT ?= 15m

# Packages run in parallel: each test has its own database on the test
# server, and lease and deadline tests move an injected clock instead of
# waiting on the wall clock. The test server's own tests, the nested
# modules' tests and the TypeScript client's (test-ts) run beside them.
#
# TEST_P test binaries run at once (go test -p; its default is the number
# of cores): many of them spend most of their time waiting for a database
# server or a child process, so more than two keep a two-core machine
# busy. The MongoDB store's package is named first so that it starts
# first: it is the longest, held back by the test server's speed.
TEST_P ?= 3
test-all:
	@log=$$(mktemp); (cd tools/mongotest && $(GO) test -timeout $(TEST_TIMEOUT) -count=1 ./...) >$$log 2>&1 & pid=$$!; \
	nlog=$$(mktemp); (rc=0; for m in $(NESTED); do echo "cd $$m && $(GO) test $(RACE) -timeout $(TEST_TIMEOUT) -count=1 ./..."; \
		(cd $$m && $(GO) test $(RACE) -timeout $(TEST_TIMEOUT) -count=1 ./...) || rc=1; done; exit $$rc) >$$nlog 2>&1 & npid=$$!; \
	tslog=$$(mktemp); $(MAKE) --no-print-directory test-ts >$$tslog 2>&1 & tspid=$$!; \
	echo "$(GO) test $(RACE) -p $(TEST_P) -timeout $(TEST_TIMEOUT) -count=1 ./event/mongostore ./..."; $(GO) test $(RACE) -p $(TEST_P) -timeout $(TEST_TIMEOUT) -count=1 ./event/mongostore ./...; rc=$$?; \
	wait $$pid; rc2=$$?; echo "cd tools/mongotest && $(GO) test -timeout $(TEST_TIMEOUT) -count=1 ./..."; cat $$log; rm -f $$log; \
	wait $$npid; rc3=$$?; cat $$nlog; rm -f $$nlog; \
	wait $$tspid; rc4=$$?; echo "make test-ts"; cat $$tslog; rm -f $$tslog; \
	[ $$rc -eq 0 ] && [ $$rc2 -eq 0 ] && [ $$rc3 -eq 0 ] && [ $$rc4 -eq 0 ]

# test-ts builds the TypeScript client (clients/ts) from its lockfile and
# runs its tests against the hub, in Node and in headless Chromium. Under
# CI=true a missing node or npm fails; elsewhere it is skipped, said loudly.
test-ts:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		if [ "$$CI" = true ]; then echo "test-ts: node and npm are needed (CI=true)"; exit 1; fi; \
		echo "test-ts: SKIPPED: node or npm is not on PATH"; exit 0; \
	fi; \
	cd clients/ts && npm ci --no-audit --no-fund --loglevel=error && npm test

# check is what CI runs before the tests: formatting, vet, staticcheck
# and govulncheck (pinned versions, run with go run, over every module).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
check:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd tools/mongotest && $(GO) vet ./...
	for m in $(NESTED) examples/bench/peers; do (cd $$m && $(GO) vet ./...) || exit 1; done
	$(GO) run $(STATICCHECK) ./...
	for m in $(NESTED) examples/bench/peers tools/mongotest; do (cd $$m && $(GO) run $(STATICCHECK) ./...) || exit 1; done
	$(MAKE) --no-print-directory vulncheck

# vulncheck runs govulncheck (a pinned version, with go run) over every
# module but the test server's (tools/mongotest: FerretDB 1.24 and its
# dependencies, run by the tests only, never part of a build of promlib),
# against the Go vulnerability database as of VULNDB: the
# database's reports come with the golang.org/x/vulndb module (through the
# module proxy, like every other module), and its own indexdb command
# makes the database govulncheck reads from them, in a temporary
# directory, so no other host is needed.
GOVULNCHECK ?= golang.org/x/vuln/cmd/govulncheck@v1.9.0
VULNDB ?= v0.0.0-20261105234957-e22db6528018
vulncheck:
	@d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	src=$$($(GO) mod download -json golang.org/x/vulndb@$(VULNDB) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	[ -d "$$src/data/osv" ] || { echo "vulncheck: no reports in golang.org/x/vulndb@$(VULNDB)"; exit 1; }; \
	$(GO) run golang.org/x/vulndb/cmd/indexdb@$(VULNDB) -vulns "$$src/data/osv" -out "$$d/db" || exit 1; \
	for m in . $(NESTED) examples/bench/peers; do \
		echo "govulncheck $$m"; (cd $$m && $(GO) run $(GOVULNCHECK) -db "file://$$d/db" ./...) || exit 1; \
	done

# bench prints one JSON line per run (events/s, p50/p99 publish to
# handler, lost, duplicates, peak RSS): the memory bus pipelined and
# synchronous, the Mongo store on the bundled test server against raw
# InsertMany, SQLite (a file in a temporary directory) and PostgreSQL (a throwaway
# cluster) against raw multi-row INSERTs (-store in the hub's grammar; their -sync
# rows with 64 waiting publishers, against as many each committing its own row:
# raw_commit_each_per_s), the WebSocket gateway against a raw echo and its cost per
# idle connection (on the memory store, then BENCH_IDLE_CONNS on SQLite, the hub's
# default store: sharing one group, then with a group each), its fan-out of one topic to BENCH_FANOUT_CONNS connections at
# BENCH_FANOUT_RATE events/s (live subscribers, the same against the centrifuge peer
# right after, then a consumer group per connection), and the peers
# (examples/bench/peers, a module of its own). docs/PERFORMANCE.md has the figures
# of this machine.
BENCH_N ?= 1000000
# BENCH_RATE is the offered load of the paced memory run: its p99 is the
# bus's latency at that throughput, where the unpaced runs' p99 is that of
# a machine kept busy by the publisher and its consumers. Where chrt may
# set a real-time policy, the pipelined and paced memory runs are run
# again under it ("sched": "rr" in their lines): no other thread, the
# Go runtime's own included, preempts them there, which on a small
# machine is most of the difference in their p99.
BENCH_RATE ?= 600000
BENCH_MONGO_N ?= 20000
BENCH_SQL_N ?= 30000
BENCH_WS_N ?= 100000
BENCH_WS_CONNS ?= 2000
BENCH_IDLE_CONNS ?= 10000
BENCH_FANOUT_CONNS ?= 1000
BENCH_FANOUT_RATE ?= 10
BENCH_FANOUT_DURATION ?= 10s
bench:
	@d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; b=$$d/bench; p=$$d/peers; \
	$(GO) build -o $$b ./examples/bench && (cd examples/bench/peers && $(GO) build -o $$p .) && \
	$$b -store memory -n $(BENCH_N) -payload 64 && \
	$$b -store memory -n $(BENCH_N) -payload 64 -sync && \
	$$b -store memory -n $(BENCH_N) -payload 64 -rate $(BENCH_RATE) && \
	if chrt -r 10 true 2>/dev/null; then \
		chrt -r 10 $$b -store memory -n $(BENCH_N) -payload 64 && \
		chrt -r 10 $$b -store memory -n $(BENCH_N) -payload 64 -rate $(BENCH_RATE); \
	else echo "bench: chrt -r 10 not permitted here: no real-time rows" >&2; fi && \
	tools/mongotest/with-mongo.sh sh -c "$$b -store \"\$$MONGO_URL\" -n $(BENCH_MONGO_N) -payload 64 -publishers 16 && \
		$$b -store \"\$$MONGO_URL\" -n $(BENCH_MONGO_N) -payload 64 -publishers 64 -sync" && \
	$$b -store sqlite:$$d/bench.db -n $(BENCH_SQL_N) -payload 64 -publishers 16 && \
	$$b -store sqlite:$$d/bench.db -n $(BENCH_SQL_N) -payload 64 -publishers 64 -sync && \
	tools/pgtest/with-postgres.sh sh -c "$$b -store \"\$$PG_URL\" -n $(BENCH_SQL_N) -payload 64 -publishers 16 && \
		$$b -store \"\$$PG_URL\" -n $(BENCH_SQL_N) -payload 64 -publishers 64 -sync" && \
	$$b -mode ws -n $(BENCH_WS_N) -payload 64 && \
	$$b -mode ws-idle -conns $(BENCH_WS_CONNS) && \
	$$b -mode ws-idle -store sqlite:$$d/idle.db -conns $(BENCH_IDLE_CONNS) && \
	$$b -mode ws-idle -store sqlite:$$d/idle-groups.db -conns $(BENCH_IDLE_CONNS) -group-per-conn && \
	$$b -mode fanout -conns $(BENCH_FANOUT_CONNS) -rate $(BENCH_FANOUT_RATE) -duration $(BENCH_FANOUT_DURATION) && \
	$$p -peer centrifuge -conns $(BENCH_FANOUT_CONNS) -rate $(BENCH_FANOUT_RATE) -duration $(BENCH_FANOUT_DURATION) && \
	$$b -mode fanout -conns $(BENCH_FANOUT_CONNS) -rate $(BENCH_FANOUT_RATE) -duration $(BENCH_FANOUT_DURATION) -group-per-conn && \
	for peer in watermill jetstream handoff; do $$p -peer $$peer -n $(BENCH_N) -payload 64 || exit 1; done

# bench-go runs the Go benchmarks of the event core, with allocations.
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./event/

# soak runs the simulation of the group protocol (event/storetest, sim.go)
# with many seeds on every store: SOAK_SCHEDULES schedules on the memory
# store (a tenth of a second each), a tenth of them on SQLite and on
# PostgreSQL (a round trip per store call), a fortieth on the bundled
# MongoDB test server. A failure prints its seed; replay it with
#   go test ./event/ -run 'Conformance/Bus/GroupProtocolSimulation' -seed N
SOAK_SCHEDULES ?= 2000
soak:
	$(GO) test -race -timeout 60m -count=1 -run 'Conformance/Bus/GroupProtocolSimulation' ./event/ -schedules $(SOAK_SCHEDULES)
	$(GO) test -race -timeout 60m -count=1 -run 'Conformance/Bus/GroupProtocolSimulation' ./event/sqlitestore/ -schedules $$(($(SOAK_SCHEDULES) / 10))
	tools/pgtest/with-postgres.sh $(GO) test -race -timeout 60m -count=1 -run 'Conformance/Bus/GroupProtocolSimulation' ./event/pgstore/ -schedules $$(($(SOAK_SCHEDULES) / 10))
	tools/mongotest/with-mongo.sh $(GO) test -race -timeout 60m -count=1 -run 'Conformance/Bus/GroupProtocolSimulation' ./event/mongostore/ -schedules $$(($(SOAK_SCHEDULES) / 40))

# faults runs the fault harness (tools/faults, see its README) over both
# SQL stores, for each seed of FAULTS_SEEDS: publishers and consumers as
# processes, killed and restarted, stalled past their leases, cut off from
# PostgreSQL and through immediate server restarts (on a cluster the
# harness starts, so PG_URL is unset for it). One JSON line per run; it
# fails if any run lost, invented or doubled a record, or did not drain.
# make test runs a short run of each store (TestShortRun).
.PHONY: faults
FAULTS_SEEDS ?= 1 2 3
FAULTS_DURATION ?= 30s
faults:
	@d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; $(GO) build -o $$d/faults ./tools/faults || exit 1; rc=0; \
	for seed in $(FAULTS_SEEDS); do for store in sqlite postgres; do \
		env -u PG_URL $$d/faults -store $$store -seed $$seed -duration $(FAULTS_DURATION) || rc=1; \
	done; done; exit $$rc
