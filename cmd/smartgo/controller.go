package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/controller"
	"github.com/smartgo/smartgo/remoting"
)

func init() {
	register(command{name: "controller", summary: "a controller replica that elects broker masters, port 9878 by default", server: true, run: runController})
}

func runController(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cf configFlags
	fs := newCmdFlags("controller", "[-c FILE] [-listen ADDR] [-data DIR] [-peers LIST] [-set key=value ...]", `
Runs a controller replica: with its peers (1, 3 or 5 replicas, Raft among
them on controller.raft_listen) it keeps each broker group's master, master
epoch and sync state set, and elects a new master from the sync state set
when a master stops heartbeating. Brokers find it through
broker.controllers. A registry can run a replica too (registry.controller
= true). Reads [log] and [controller]. Stops cleanly on SIGINT or SIGTERM.`, stdout, stderr)
	fs.example("smartgo controller",
		"smartgo controller -listen 10.0.0.1:9878 -set controller.raft_listen=10.0.0.1:9880 \\\n"+
			"    -peers 10.0.0.1:9878=10.0.0.1:9880,10.0.0.2:9878=10.0.0.2:9880,10.0.0.3:9878=10.0.0.3:9880")
	cf.register(fs)
	cf.stringFlag(fs, "listen", "controller.listen", "listen `address`")
	cf.stringFlag(fs, "data", "controller.data_dir", "data `directory` (Raft log and snapshots)")
	cf.stringFlag(fs, "peers", "controller.peers", "every replica as `addr=raftAddr`, comma-separated")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	f, code, ok := loadOrExit(&cf, stderr, "controller")
	if !ok {
		return code
	}
	log := newLogger(f.Log, stderr)
	logStart(log, "controller")
	mon, err := startMonitor(f.Metrics, log)
	if err != nil {
		log.Error("metrics failed to start", "err", err)
		return exitFailure
	}
	defer mon.Close()
	opts, err := controllerOptions(f.Controller, nil, log)
	if err != nil {
		fmt.Fprintf(stderr, "smartgo controller: %v\n", err)
		return exitUsage
	}
	c, err := controller.New(opts)
	if err != nil {
		log.Error("controller failed to start", "err", err)
		return exitFailure
	}
	mon.add("controller", c.Collectors(), controllerReady(c))
	log.Info("controller running", "addr", c.Addr(), "raft", c.RaftAddr())
	<-ctx.Done()
	log.Info("shutting down", "reason", "signal")
	if err := c.Close(); err != nil {
		log.Error("controller shutdown", "err", err)
		return exitFailure
	}
	return exitOK
}

// controllerOptions maps [controller] onto controller.Options. srv, when
// set, is the registry's server the replica serves on (listen is then the
// registry's).
func controllerOptions(c conf.Controller, srv *remoting.Server, log *slog.Logger) (controller.Options, error) {
	o := controller.Options{
		Addr: c.Listen, Advertise: c.Advertise, RaftAddr: c.RaftListen, RaftAdvertise: c.RaftAdvertise, Dir: c.DataDir,
		HeartbeatInterval: c.HeartbeatInterval.D(), HeartbeatTimeout: c.HeartbeatTimeout.D(),
		ElectionTimeout: c.ElectionTimeout.D(), UncleanElection: c.UncleanElection,
		SnapshotThreshold: uint64(c.SnapshotThreshold), Server: srv, Logger: log,
	}
	for _, p := range c.Peers {
		peer, err := controller.ParsePeer(p)
		if err != nil {
			return o, err
		}
		o.Peers = append(o.Peers, peer)
	}
	return o, o.Validate()
}
