package main

import (
	"context"
	"io"
)

func init() {
	register(command{name: "broker", summary: "a broker (master or slave by its configuration), port 10911 by default", server: true, run: runBroker})
}

func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cf configFlags
	fs := newCmdFlags("broker", "[-c FILE] [-listen ADDR] [-data DIR] [-registries ADDRS] [-set key=value ...]", `
Runs a broker: a master (id 0) or a slave (id > 0, role = "slave") of the
broker group named in [broker]. It stores messages under [store].root,
registers with every registry in broker.registries, and serves producers,
consumers and admin tools on broker.listen. Reads [log], [broker], [store].
Stops cleanly on SIGINT or SIGTERM (offsets persisted, store flushed).`, stdout, stderr)
	fs.example("smartgo broker -c conf/broker-a.toml",
		"smartgo broker -c conf/broker-a-s.toml -set store.flush=sync",
		"smartgo broker -registries 10.0.0.1:9876,10.0.0.2:9876 -data /var/lib/smartgo")
	cf.register(fs)
	cf.stringFlag(fs, "listen", "broker.listen", "listen `address`")
	cf.stringFlag(fs, "data", "store.root", "store root `directory`")
	cf.stringFlag(fs, "registries", "broker.registries", "registry `addresses`: a,b or [\"a\",\"b\"]")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	f, code, ok := loadOrExit(&cf, stderr, "broker")
	if !ok {
		return code
	}
	log := newLogger(f.Log, stderr)
	logStart(log, "broker")
	mon, err := startMonitor(f.Metrics, log)
	if err != nil {
		log.Error("metrics failed to start", "err", err)
		return exitFailure
	}
	defer mon.Close()
	mon.expect(brokerParts...) // /readyz names them while the store recovers
	b, err := startBrokerNode(ctx, f, log)
	if err != nil {
		return startFailed(ctx, log, "broker", err)
	}
	b.monitor(mon)
	<-ctx.Done()
	log.Info("shutting down", "reason", "signal")
	if err := b.Close(); err != nil {
		log.Error("broker shutdown", "err", err)
		return exitFailure
	}
	return exitOK
}
