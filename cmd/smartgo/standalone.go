package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/smartgo/smartgo/console"
	"github.com/smartgo/smartgo/registry"
)

func init() {
	register(command{name: "standalone", summary: "registry + broker + MQTT bridge in one process, data under ./data", server: true, run: runStandalone})
}

func runStandalone(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cf configFlags
	fs := newCmdFlags("standalone", "[-c FILE] [-data DIR] [-set key=value ...]", `
Runs a registry, one broker and an MQTT bridge in one process, with data
under ./data: the embedded default to start with. No configuration is
needed; -c FILE reads every section (see conf/standalone.toml). The broker
registers with the registry of the same process; clients use
127.0.0.1:9876 as their name server, devices connect to bridge.listen
(1883). Stops cleanly on SIGINT or SIGTERM, in reverse order of start.`, stdout, stderr)
	fs.example("smartgo standalone",
		"smartgo standalone -data /tmp/sg -set bridge.listen=127.0.0.1:1884",
		"smartgo standalone -c conf/standalone.toml")
	cf.register(fs)
	data := fs.String("data", "data", "`directory` for the store and the registry's KV config")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	cf.named = append(cf.named,
		keyValue{"store.root", filepath.Join(*data, "store")},
		keyValue{"registry.kv_config_path", filepath.Join(*data, "registry", "kvConfig.json")})
	f, code, ok := loadOrExit(&cf, stderr, "standalone")
	if !ok {
		return code
	}
	if f.Broker.Role == "slave" {
		// Its broker is the only one of its group: as a slave it would wait
		// for a master that never comes, until its start timeout.
		fmt.Fprintln(stderr, `smartgo standalone: broker.role = "slave": the standalone's broker is the only one of its group `+
			`and must be its master (async_master or sync_master); run a slave with `+"`smartgo broker`"+` beside a master`)
		return exitUsage
	}
	log := newLogger(f.Log, stderr)
	logStart(log, "standalone")
	if f.Registry.Controller {
		// Its registry runs no controller replica: with one broker there
		// is no one to fail over to. Said, but not refused: a file shared
		// with `smartgo registry` may set it, and a standalone that started
		// with it before must still start after an upgrade.
		log.Warn("registry.controller = true is ignored by standalone (one broker, no failover): " +
			"run `smartgo registry` with it, or `smartgo controller`, for brokers of a group set with broker.controllers")
	}
	mon, err := startMonitor(f.Metrics, log)
	if err != nil {
		log.Error("metrics failed to start", "err", err)
		return exitFailure
	}
	defer mon.Close()
	// Not ready until every part is up: the registry answers long before
	// the broker has recovered its store and registered.
	parts := append(append([]string{"registry"}, brokerParts...), "bridge")
	if f.AMQP.Listen != "" {
		parts = append(parts, "amqp")
	}
	if f.Console.Listen != "" {
		parts = append(parts, "console")
	}
	mon.expect(parts...)

	if err := os.MkdirAll(filepath.Dir(f.Registry.KVConfigPath), 0o755); err != nil {
		log.Error("create registry dir", "err", err)
		return exitFailure
	}
	reg, err := registry.New(registry.Options{
		Addr: f.Registry.Listen, KVConfigPath: f.Registry.KVConfigPath, ScanInterval: f.Registry.ScanInterval.D(),
		BrokerExpiry: f.Registry.BrokerExpiry.D(), IdleTimeout: f.Registry.IdleTimeout.D(),
		MaxFrameSize: f.Registry.MaxFrameSize.Bytes(), Logger: log.With("component", "registry"),
	})
	if err == nil {
		err = reg.Start(ctx)
	}
	if err != nil {
		log.Error("registry failed to start", "err", err)
		return exitFailure
	}
	defer reg.Close()
	mon.add("registry", reg.Collectors(), reg.Ready)

	// The broker registers with this process's registry.
	_, port, _ := net.SplitHostPort(reg.Addr().String())
	f.Broker.Registries = []string{net.JoinHostPort("127.0.0.1", port)}
	b, err := startBrokerNode(ctx, f, log.With("component", "broker"))
	if err != nil {
		return startFailed(ctx, log, "broker", err)
	}
	b.monitor(mon)
	// The bridge uses this process's registry too.
	f.Bridge.Registries = f.Broker.Registries
	br, err := startBridge(ctx, f, b, log)
	if err != nil {
		b.Close()
		return startFailed(ctx, log, "bridge", err)
	}
	br.monitor(mon)
	// The console, on by default on 127.0.0.1:8080, uses this process's
	// registry.
	var con *console.Console
	if f.Console.Listen != "" {
		if con, err = startConsole(ctx, f.Console, f.Broker.Registries, log); err != nil {
			br.Close()
			b.Close()
			return startFailed(ctx, log, "console", err)
		}
		mon.add("console", con.Collectors(), con.Ready)
		defer con.Close()
	}
	log.Info("standalone running", "registry", reg.Addr().String(), "broker", b.Addr(),
		"data", *data, "bridge", localAddr(br.Addrs()[0]))
	<-ctx.Done()
	log.Info("shutting down", "reason", "signal")
	code = exitOK
	if con != nil {
		if err := con.Close(); err != nil {
			log.Error("console shutdown", "err", err)
			code = exitFailure
		}
	}
	if err := br.Close(); err != nil {
		log.Error("bridge shutdown", "err", err)
		code = exitFailure
	}
	if err := b.Close(); err != nil {
		log.Error("broker shutdown", "err", err)
		code = exitFailure
	}
	if err := reg.Close(); err != nil {
		log.Error("registry shutdown", "err", err)
		code = exitFailure
	}
	return code
}
