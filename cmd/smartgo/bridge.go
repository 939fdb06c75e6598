package main

import (
	"context"
	"io"
)

func runBridge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cf configFlags
	fs := newFlagSet("bridge", "[-c FILE] [-listen ADDR] [-set key=value ...]", `
Runs an MQTT 3.1.1/5 bridge node: devices connect to it, their publishes are
stored in the brokers (routed by [[bridge.route]] rules), and messages for
devices are consumed from the brokers and delivered to their sessions.
Reads [log] and [bridge].`, stderr)
	cf.register(fs)
	cf.stringFlag(fs, "listen", "bridge.listen", "MQTT listen `address`")
	cf.stringFlag(fs, "registries", "bridge.registries", "comma-separated registry `addresses`")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if _, code, ok := loadOrExit(&cf, stderr, "bridge"); !ok {
		return code
	}
	return notImplemented(stderr, "bridge")
}
