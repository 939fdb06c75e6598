package main

import (
	"context"
	"io"
)

func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("admin", "<command> [-registry ADDR] [-o table|json] ...", `
Administers a SmartGo cluster through its registries and brokers: topics,
clusters, consumer group progress, message lookup by id and key, offsets,
broker runtime statistics.`, stderr)
	fs.String("registry", "127.0.0.1:9876", "registry `address` (comma-separated for several)")
	fs.String("o", "table", "output `format`: table or json")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	return notImplemented(stderr, "admin")
}
