GO ?= go

.PHONY: test test-all check bench

# test starts the bundled MongoDB-compatible test server (or uses MONGO_URL
# when it is set), runs every test with the race detector, and stops it.
test:
	tools/mongotest/with-mongo.sh $(MAKE) --no-print-directory test-all

# Packages run in parallel: each test has its own database on the test
# server, and lease and deadline tests move an injected clock instead of
# waiting on the wall clock. The test server's own tests run beside them.
test-all:
	@log=$$(mktemp); (cd tools/mongotest && $(GO) test -count=1 ./...) >$$log 2>&1 & pid=$$!; \
	echo "$(GO) test -race -count=1 ./..."; $(GO) test -race -count=1 ./...; rc=$$?; \
	wait $$pid; rc2=$$?; echo "cd tools/mongotest && $(GO) test -count=1 ./..."; cat $$log; rm -f $$log; \
	[ $$rc -eq 0 ] && [ $$rc2 -eq 0 ]

# check is what CI runs before the tests: formatting and vet.
check:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd tools/mongotest && $(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./event/
	$(GO) run ./examples/bench -store memory -n 1000000 -payload 64
