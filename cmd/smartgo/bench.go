package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/smartgo/smartgo/benchmark"
	"github.com/smartgo/smartgo/client/admin"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench", "produce|consume|e2e [flags]", `
Generates load against a SmartGo cluster (loopback by default) and reports
msgs/s, MB/s and latency percentiles: produce (send latency), consume
(latency from the time stamp in each body), or e2e (both at once, end-to-end
latency). A progress line goes to stderr every second; the summary to
stdout. Every run is bounded in count and time.`, stderr)
	registry := fs.String("registry", "127.0.0.1:9876", "registry `address` (comma-separated for several)")
	size := fs.Int("size", 128, "message body size in `bytes` (>= 8)")
	count := fs.Int64("count", 100000, "messages to send (0 = until -duration)")
	duration := fs.Duration("duration", 0, "stop after this long (0 = until -count)")
	concurrency := fs.Int("concurrency", 1, "parallel producers or consumers")
	topic := fs.String("topic", "BenchTopic", "`topic` (auto-created)")
	group := fs.String("group", "bench_group", "consumer `group`")
	queues := fs.Int("queues", 8, "queues of the auto-created topic")
	async := fs.Bool("async", false, "send asynchronously")
	window := fs.Int("window", 64, "async sends in flight per producer")
	rate := fs.Float64("rate", 0, "limit sends per `second` (0 = unlimited)")
	jsonOut := fs.Bool("json", false, "print the summary as JSON")
	var words []string
	for {
		if code, ok := parseFlags(fs, args); !ok {
			return code
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		words, args = append(words, rest[0]), rest[1:]
	}
	if len(words) != 1 {
		fmt.Fprintln(stderr, "smartgo bench: want exactly one of produce, consume, e2e")
		fs.Usage()
		return exitUsage
	}
	if *count == 0 && *duration == 0 {
		fmt.Fprintln(stderr, "smartgo bench: set -count or -duration")
		return exitUsage
	}
	cfg := benchmark.Config{Mode: benchmark.Mode(words[0]), Registries: admin.ParseRegistries(*registry), Topic: *topic, Group: *group,
		Size: *size, Count: *count, Duration: *duration, Concurrency: *concurrency, Async: *async, Window: *window,
		Queues: int32(*queues), Rate: *rate, Progress: stderr}
	r, err := benchmark.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "smartgo bench: %v\n", err)
		if r.Sent == 0 && r.Received == 0 {
			return exitFailure
		}
	}
	if *jsonOut {
		b, _ := json.MarshalIndent(r, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintln(stdout, r.String())
	}
	if r.Errors > 0 && r.Sent == 0 {
		return exitFailure
	}
	return exitOK
}
