package main

import (
	"context"
	"io"
)

func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cf configFlags
	fs := newFlagSet("broker", "[-c FILE] [-listen ADDR] [-data DIR] [-set key=value ...]", `
Runs a broker: a master (id 0) or a slave (id > 0, role = "slave") of the
broker group named in [broker]. It stores messages under [store].root,
registers with every registry in broker.registries, and serves producers,
consumers and admin tools on broker.listen. Reads [log], [broker], [store].
Stops cleanly on SIGINT or SIGTERM (offsets persisted, store flushed).`, stderr)
	cf.register(fs)
	cf.stringFlag(fs, "listen", "broker.listen", "listen `address`")
	cf.stringFlag(fs, "data", "store.root", "store root `directory`")
	cf.stringFlag(fs, "registries", "broker.registries", "comma-separated registry `addresses`")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	f, code, ok := loadOrExit(&cf, stderr, "broker")
	if !ok {
		return code
	}
	log := newLogger(f.Log, stderr)
	b, err := startBrokerNode(f, log)
	if err != nil {
		log.Error("broker failed to start", "err", err)
		return exitFailure
	}
	<-ctx.Done()
	log.Info("shutting down", "reason", "signal")
	if err := b.Close(); err != nil {
		log.Error("broker shutdown", "err", err)
		return exitFailure
	}
	return exitOK
}
