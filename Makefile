# SmartGo. `make run` starts SmartGo, `make test` runs the tests.
GO        ?= go
BIN       ?= bin/smartgo
VERSION   ?= 0.1.0-dev
COMMIT    ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
FUZZTIME  ?= 30s
# staticcheck 2026.2.2: the module proxy knows it only by its semver tag.
STATICCHECK_VERSION ?= v0.8.2
PKGS      := ./...
# The compare module's servers are built with the command's profile.
COMPARE_PGO = -pgo=$(CURDIR)/cmd/smartgo/default.pgo

.PHONY: all build run test race short bench fuzz lint staticcheck interop cluster compare scale scale-devices browser failover-long console-overhead iothub-bench compare-cpu compare-amqp pgo clean

all: lint build test

build:
	$(GO) build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o $(BIN) ./cmd/smartgo

# Starts registry + broker + bridge in one process, data under ./data.
run: build
	./$(BIN) standalone

# The default suite: every package, with the race detector. The test
# binaries skip cmd/smartgo/default.pgo (they check behaviour, not speed:
# one build of the packages instead of two); the smartgo binaries the
# real-process tests build use it, as every build of the command does.
test:
	$(GO) test -race -count=1 -pgo=off -timeout 20m $(PKGS)

# The same without the race detector (faster, for quick iterations).
short:
	$(GO) test -count=1 -short $(PKGS)

race: test

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m $(PKGS)

# Runs every Fuzz target for FUZZTIME each (go test allows one target per run).
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
	    echo "== $$pkg $$t ($(FUZZTIME))"; \
	    $(GO) test $$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME); \
	  done; \
	done

lint: staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$$($(GO) env GOPATH)/bin/staticcheck $(PKGS)

staticcheck:
	@test -x $$($(GO) env GOPATH)/bin/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Interop tests against unmodified third-party clients (their own module).
interop:
	cd interop && $(GO) test -p 1 -count=1 -timeout 20m ./...

# What the console and a Prometheus scraper cost a broker under 100k
# msgs/s: alternating phases with and without them, same run (real
# processes; ~8 minutes; not in CI).
console-overhead:
	$(GO) test -tags cluster -run '^$$' -bench BenchmarkClusterConsoleOverhead -benchtime 1x -timeout 30m -v ./internal/cluster/

# The IoT hub at fleet scale against a real standalone process: twin
# PATCH/GET round trips of 1,000 devices next to state store SET/GET, and
# a desired change fanned out to 10,000 devices (~5 minutes; not in CI).
iothub-bench:
	$(GO) test -tags cluster -run '^$$' -bench 'BenchmarkHub' -benchtime 1x -timeout 30m -v ./bridge/iothub/

# The web console in a real headless browser (Debian's chromium through
# chromedp, its own module): every page, screenshots to $(ARTIFACTS).
ARTIFACTS ?= $(CURDIR)/artifacts/console
browser:
	cd browsertest && SMARTGO_ARTIFACTS=$(ARTIFACTS) $(GO) test -count=1 -timeout 10m ./...

# Master/slave tests with real processes (registry, master, slave).
cluster:
	$(GO) test -tags cluster -count=1 -timeout 20m -run 'TestCluster' ./internal/cluster/
	$(GO) test -tags cluster -count=1 -timeout 5m -run 'TestStoreDiskFullRealTmpfs' ./store/

# SmartGo vs NATS JetStream (embedded, same run, loopback): publish rate
# and e2e latency, durable (fsync before ack) and with defaults, runs
# interleaved and repeated (medians); the last run paces SmartGo at 1.5x
# the rate JetStream reached (the issue's target read literally). Its own
# module; not part of `make test`. JetStream with an fsync per message
# manages ~1k msgs/s here, hence the smaller durable count.
compare:
	cd compare && $(GO) run $(COMPARE_PGO) . -durable=true -count 20000 -repeat 2 && \
		$(GO) run $(COMPARE_PGO) . -durable=false -count 300000 -repeat 3 -warmup 20000 && \
		$(GO) run $(COMPARE_PGO) . -durable=false -count 300000 -repeat 3 -warmup 20000 -factor 1.5

# Server CPU per message with single-message SEND_MESSAGE requests (the
# way rocketmq-client-go sends), next to a plain TCP request/response of
# the same bytes and to NATS JetStream driven by nats.go, each server in
# its own process, same run, in slices taken in turn, two rounds
# (compare/cpu_test.go).
# The broker in it is built with cmd/smartgo's profile, as the command is.
compare-cpu:
	cd compare && COMPARE_CPU_ROUNDS=2 $(GO) test $(COMPARE_PGO) -run '^$$' -bench ServerCPUPerMessage -benchtime 100000x -timeout 20m .

# SmartGo's AMQP 0-9-1 next to Debian's rabbitmq-server (a node of its
# own on free ports; its rows skipped, and said so, when it is not
# installed): `smartgo standalone` built from this tree and RabbitMQ, each
# in its own process, driven by the same amqp091-go clients in slices
# taken in turn; msgs/s and server CPU per message for persistent
# publishes with confirms (128 B, 1 KiB), transient ones and a fanout to
# 4 queues, every message checked (compare/amqp_test.go; ~5 minutes).
compare-amqp:
	cd compare && COMPARE_AMQP=200000 $(GO) test -count=1 -run TestAMQPNextToRabbitMQ -v -timeout 30m .

# Regenerates cmd/smartgo/default.pgo, the profile-guided optimisation
# profile every build of cmd/smartgo uses (go build's -pgo=auto): a CPU
# profile of the broker under compare-cpu's load (one message per
# SEND_MESSAGE request, as rocketmq-client-go sends). Why only the
# broker's: docs/performance.md, "Profile-guided optimisation".
pgo:
	mkdir -p bin
	cd compare && COMPARE_CPU_ONLY=smartgo COMPARE_CPU_PROFILE=$(CURDIR)/bin/pgo-%s.pprof \
		$(GO) test $(COMPARE_PGO) -run '^$$' -bench ServerCPUPerMessage -benchtime 3000000x -timeout 20m .
	mv bin/pgo-smartgo.pprof cmd/smartgo/default.pgo

# The master kill loop of the cluster suite with 100 kills instead of 20
# (TestClusterControllerKillLoop): failover time p50/p99, every
# acknowledged message once on every broker, logs byte-identical.
failover-long:
	SMARTGO_FAILOVER_KILLS=100 $(GO) test -tags cluster -count=1 -timeout 60m -run 'TestClusterControllerKillLoop' -v ./internal/cluster/

# Idle connections of a real bridge process vs mosquitto (15,000 clients
# from 3 processes): RSS per connection and connects per second.
scale:
	SMARTGO_SCALE=1 $(GO) test -tags cluster -count=1 -timeout 15m -run 'TestClusterScaleBridgeIdle' -v ./internal/cluster/

# A fleet of MQTT devices against real processes: one registry, one
# broker, a bridge and a `smartgo bench devices` process per 18,000
# devices; connect rate, memory and idle CPU per device (docs/fleet.md;
# a million devices take ~9 GiB and ~30 minutes here; not in CI).
DEVICES ?= 1000000
scale-devices:
	SMARTGO_SCALE_DEVICES=$(DEVICES) $(GO) test -tags cluster -count=1 -timeout 60m -run 'TestClusterScaleDevices' -v ./internal/cluster/

clean:
	rm -rf bin
