package main

import (
	"context"
	"io"
)

func runRegistry(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cf configFlags
	fs := newFlagSet("registry", "[-c FILE] [-listen ADDR] [-set key=value ...]", `
Runs a registry (name server): brokers register their topics with it every
30 s and are dropped after 120 s of silence; producers and consumers ask it
for topic routes. Several registries run side by side with no sync between
them. Reads the [log] and [registry] sections of the configuration.`, stderr)
	cf.register(fs)
	cf.stringFlag(fs, "listen", "registry.listen", "listen `address`")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if _, code, ok := loadOrExit(&cf, stderr, "registry"); !ok {
		return code
	}
	return notImplemented(stderr, "registry")
}
