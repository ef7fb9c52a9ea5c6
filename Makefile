GO ?= go

.PHONY: test test-all check bench

# NESTED are the nested modules (adapters with dependencies of their own,
# kept out of the library's go.mod); test-all and check run them too.
NESTED := contrib/watermill contrib/otel

# test starts the bundled MongoDB-compatible test server (or uses MONGO_URL
# when it is set), runs every test with the race detector, and stops it.
test:
	tools/mongotest/with-mongo.sh $(MAKE) --no-print-directory test-all

# Packages run in parallel: each test has its own database on the test
# server, and lease and deadline tests move an injected clock instead of
# waiting on the wall clock. The test server's own tests and the nested
# modules' tests run beside them.
test-all:
	@log=$$(mktemp); (cd tools/mongotest && $(GO) test -count=1 ./...) >$$log 2>&1 & pid=$$!; \
	nlog=$$(mktemp); (rc=0; for m in $(NESTED); do echo "cd $$m && $(GO) test -race -count=1 ./..."; \
		(cd $$m && $(GO) test -race -count=1 ./...) || rc=1; done; exit $$rc) >$$nlog 2>&1 & npid=$$!; \
	echo "$(GO) test -race -count=1 ./..."; $(GO) test -race -count=1 ./...; rc=$$?; \
	wait $$pid; rc2=$$?; echo "cd tools/mongotest && $(GO) test -count=1 ./..."; cat $$log; rm -f $$log; \
	wait $$npid; rc3=$$?; cat $$nlog; rm -f $$nlog; \
	[ $$rc -eq 0 ] && [ $$rc2 -eq 0 ] && [ $$rc3 -eq 0 ]

# check is what CI runs before the tests: formatting and vet.
check:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd tools/mongotest && $(GO) vet ./...
	for m in $(NESTED); do (cd $$m && $(GO) vet ./...) || exit 1; done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./event/
	$(GO) run ./examples/bench -store memory -n 1000000 -payload 64
