package main

import (
	"context"
	"fmt"
	"io"

	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/controller"
	"github.com/smartgo/smartgo/registry"
)

func init() {
	register(command{name: "registry", summary: "a registry (name server), port 9876 by default", server: true, run: runRegistry})
}

func runRegistry(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cf configFlags
	fs := newCmdFlags("registry", "[-c FILE] [-listen ADDR] [-set key=value ...]", `
Runs a registry (name server): brokers register their topics with it every
30 s and are dropped after 120 s of silence; producers and consumers ask it
for topic routes. Several registries run side by side with no sync between
them. Reads the [log] and [registry] sections of the configuration; with
registry.controller = true it also runs a controller replica ([controller])
on the registry's port. Stops cleanly on SIGINT or SIGTERM.`, stdout, stderr)
	fs.example("smartgo registry",
		"smartgo registry -c conf/registry.toml -listen 0.0.0.0:9877")
	cf.register(fs)
	cf.stringFlag(fs, "listen", "registry.listen", "listen `address`")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	f, code, ok := loadOrExit(&cf, stderr, "registry")
	if !ok {
		return code
	}
	log := newLogger(f.Log, stderr)
	logStart(log, "registry")
	mon, err := startMonitor(f.Metrics, log)
	if err != nil {
		log.Error("metrics failed to start", "err", err)
		return exitFailure
	}
	defer mon.Close()
	opts := registryOptions(f.Registry)
	opts.Logger = log
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(stderr, "smartgo registry: %v\n", err)
		return exitUsage
	}
	r, err := registry.New(opts)
	if err != nil {
		log.Error("registry failed to start", "err", err)
		return exitFailure
	}
	var ctl *controller.Controller
	if f.Registry.Controller {
		cc := f.Controller
		cc.Listen = f.Registry.Listen // the replica answers on the registry's port
		co, err := controllerOptions(cc, r.Remoting(), log)
		if err != nil {
			fmt.Fprintf(stderr, "smartgo registry: %v\n", err)
			_ = r.Close()
			return exitUsage
		}
		if ctl, err = controller.New(co); err != nil {
			log.Error("controller failed to start", "err", err)
			_ = r.Close()
			return exitFailure
		}
	}
	if err := r.Start(ctx); err != nil {
		log.Error("registry failed to start", "err", err)
		if ctl != nil {
			_ = ctl.Close()
		}
		_ = r.Close()
		return exitFailure
	}
	mon.add("registry", r.Collectors(), r.Ready)
	if ctl != nil {
		mon.add("controller", ctl.Collectors(), controllerReady(ctl))
	}
	log.Info("registry running", "addr", r.Addr().String(), "controller", ctl != nil)
	<-ctx.Done()
	log.Info("shutting down", "reason", "signal")
	if ctl != nil {
		if err := ctl.Close(); err != nil {
			log.Error("controller shutdown", "err", err)
		}
	}
	if err := r.Close(); err != nil {
		log.Error("registry shutdown", "err", err)
		return exitFailure
	}
	return exitOK
}

// registryOptions maps [registry] onto registry.Options (flags were
// already applied to the file values by configFlags).
func registryOptions(r conf.Registry) registry.Options {
	return registry.Options{
		Addr:         r.Listen,
		KVConfigPath: r.KVConfigPath,
		ScanInterval: r.ScanInterval.D(),
		BrokerExpiry: r.BrokerExpiry.D(),
		IdleTimeout:  r.IdleTimeout.D(),
		MaxFrameSize: r.MaxFrameSize.Bytes(),
	}
}
