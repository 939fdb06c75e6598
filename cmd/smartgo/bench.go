package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/smartgo/smartgo/benchmark"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
)

func init() {
	register(command{name: "bench", summary: "load generators: produce, consume, e2e, devices", run: runBench})
}

// benchModes are the bench modes with their own help pages.
var benchModes = []struct {
	mode     benchmark.Mode
	summary  string
	synopsis string
	about    string
	examples []string
}{
	{benchmark.Produce, "send messages; latency is the send round trip",
		"[-count N] [-duration D] [-size B] [-async] [-rate R] ...", `
Sends messages to a topic (created with -queues queues if it is missing) and
reports msgs/s, MB/s and the send latency percentiles. Stops after -count
messages or -duration, whichever comes first.`,
		[]string{"smartgo bench produce -count 100000 -size 1024 -async",
			"smartgo bench produce -duration 30s -rate 5000 -concurrency 4 -o json"}},
	{benchmark.Consume, "consume a topic; latency from the time stamp in each body",
		"[-count N] [-duration D] [-idle D] [-group G] ...", `
Consumes a topic with a push consumer group and reports msgs/s and the
latency from the send time stamp in each body (as 'bench produce' writes
it) to its arrival. Stops after -count messages, after -duration, or when
no message arrived for -idle (an empty or drained topic), whichever comes
first; exit 1 when nothing arrived at all.`,
		[]string{"smartgo bench consume -group g1 -count 100000",
			"smartgo bench consume -topic Orders -idle 5s -o json"}},
	{benchmark.E2E, "produce and consume at once; end-to-end latency",
		"[-count N] [-duration D] [-size B] [-async] [-rate R] [-idle D] ...", `
Sends and consumes at once and reports the end-to-end latency (send time
stamp to arrival at the consumer). Stops sending after -count messages or
-duration; then waits for the consumer to catch up, at most -idle without a
new arrival.`,
		[]string{"smartgo bench e2e -count 50000 -async",
			"smartgo bench e2e -duration 1m -rate 2000 -size 512 -o json"}},
}

const benchAbout = `
Generates load against a SmartGo cluster (loopback by default) and reports
msgs/s, MB/s and latency percentiles. A progress line (rates and the
latency percentiles so far) goes to stderr every second; the summary to
stdout (-o json: latencies and times in milliseconds, keys ending in Ms).
Every run is bounded in count, time, and (consume) idle time.`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var modes strings.Builder
	for _, m := range benchModes {
		fmt.Fprintf(&modes, "\n  %-8s %s", m.mode, m.summary)
	}
	fmt.Fprintf(&modes, "\n  %-8s %s", "devices", "a fleet of MQTT devices: connect rate, drops, round trips")
	top := newCmdFlags("bench", "<mode> [flags]", benchAbout+"\n\nModes ('smartgo bench <mode> -h' for each one's flags and examples):"+modes.String(), stdout, stderr)
	top.example("smartgo bench produce -count 100000 -async", "smartgo bench e2e -h")
	if len(args) == 0 {
		return top.misuse("missing mode")
	}
	if isHelp(args[0]) {
		top.printUsage(stdout)
		return exitOK
	}
	if args[0] == "devices" {
		return runBenchDevices(ctx, args[1:], stdout, stderr)
	}
	for _, m := range benchModes {
		if args[0] == string(m.mode) {
			return runBenchMode(ctx, m.mode, m.synopsis, m.about, m.examples, args[1:], stdout, stderr)
		}
	}
	if strings.HasPrefix(args[0], "-") {
		return top.misuse("the mode comes first: smartgo bench <mode> %s", strings.Join(args, " "))
	}
	return top.misuse("unknown mode %q", args[0])
}

func runBenchMode(ctx context.Context, mode benchmark.Mode, synopsis, about string, examples []string, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("bench "+string(mode), synopsis, strings.TrimSpace(about)+"\n"+benchAbout, stdout, stderr)
	fs.example(examples...)
	registry := fs.String("registry", "127.0.0.1:9876", "registry `address` (comma-separated for several)")
	topic := fs.String("topic", "BenchTopic", "`topic`")
	count := fs.Int64("count", 100000, "messages to send (consume: to receive); 0 = until -duration")
	duration := fs.Duration("duration", 0, "stop after this long (0 = until -count)")
	concurrency := fs.Int("concurrency", 1, "parallel producers or consumers")
	queues := fs.Int("queues", 8, "queues of the topic when it is created")
	format := outputFlag(fs, "text")
	jsonOut := fs.Bool("json", false, "same as -o json")
	fs.hide("json")
	cfg := benchmark.Config{Mode: mode, Progress: stderr}
	if mode != benchmark.Consume {
		fs.IntVar(&cfg.Size, "size", 128, "message body size in `bytes` (>= 8)")
		fs.BoolVar(&cfg.Async, "async", false, "send asynchronously")
		fs.IntVar(&cfg.Window, "window", 64, "async sends in flight per producer")
		fs.Float64Var(&cfg.Rate, "rate", 0, "limit sends per `second` (0 = unlimited)")
	}
	if mode != benchmark.Produce {
		fs.StringVar(&cfg.Group, "group", "bench_group", "consumer `group`")
		fs.DurationVar(&cfg.Idle, "idle", benchmark.DefaultIdle, "stop when no message arrived for this `duration`")
	}
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *jsonOut {
		*format = "json"
	}
	if *format != "text" && *format != "json" {
		return fs.misuse("-o must be text or json, not %q", *format)
	}
	if *count < 0 || *duration < 0 || cfg.Idle < 0 {
		return fs.misuse("-count, -duration and -idle must not be negative")
	}
	if err := client.ValidateTopic(*topic); err != nil {
		return fs.misuse("-topic: %v", err)
	}
	if *count == 0 && *duration == 0 {
		return fs.misuse("set -count or -duration")
	}
	if mode != benchmark.Consume && cfg.Size < 8 {
		return fs.misuse("-size must be at least 8 (the body carries a time stamp), not %d", cfg.Size)
	}
	if *concurrency < 1 || *queues < 1 {
		return fs.misuse("-concurrency and -queues must be at least 1")
	}
	cfg.Registries, cfg.Topic, cfg.Count, cfg.Duration = admin.ParseRegistries(*registry), *topic, *count, *duration
	cfg.Concurrency, cfg.Queues = *concurrency, int32(*queues)
	r, err := benchmark.Run(ctx, cfg)
	code := exitOK
	if err != nil {
		fmt.Fprintf(stderr, "smartgo bench %s: %v\n", mode, err)
		if r.Sent == 0 && r.Received == 0 {
			code = exitFailure
		}
		if errors.Is(err, benchmark.ErrIdle) {
			code = exitFailure
		}
	}
	if r.Mode == "" {
		return code
	}
	if *format == "json" {
		b, _ := json.MarshalIndent(r, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintln(stdout, r.String())
	}
	if r.Errors > 0 && r.Sent == 0 {
		code = exitFailure
	}
	return code
}
