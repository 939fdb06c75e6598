package main

import (
	"context"
	"io"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench", "produce|consume|e2e [flags]", `
Generates load against a SmartGo cluster (loopback by default) and reports
msgs/s, MB/s and latency percentiles: produce, consume, or e2e (both, with
end-to-end latency). Every run is bounded in count and time.`, stderr)
	fs.String("registry", "127.0.0.1:9876", "registry `address`")
	fs.Int("size", 128, "message body size in `bytes`")
	fs.Int("count", 100000, "messages to send (0 = until -duration)")
	fs.Duration("duration", 0, "stop after this long")
	fs.Int("concurrency", 1, "parallel producers or consumers")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	return notImplemented(stderr, "bench")
}
