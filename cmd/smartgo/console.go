package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/console"
	"github.com/smartgo/smartgo/mqtt"
)

func init() {
	register(command{name: "console", summary: "the web console and its JSON API, 127.0.0.1:8080 by default", server: true, run: runConsole})
}

func runConsole(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cf configFlags
	fs := newCmdFlags("console", "[-c FILE] [-listen ADDR] [-registries ADDRS] [-set key=value ...]", `
Serves the web console and its JSON API (docs/console.md): cluster, topics,
consumer groups, messages, MQTT clients and sessions, state store keys, and
live charts, all through the same admin calls as 'smartgo admin'. Users log
in with the credentials file of console.credentials_file (the MQTT format,
written by 'smartgo passwd'); console.admin_users may change the cluster,
the others only look. Without a credentials file there is no login and the
console may listen on a loopback address only. Reads [log], [console] and
[metrics]. Stops cleanly on SIGINT or SIGTERM.`, stdout, stderr)
	fs.example("smartgo console -registries 10.0.0.1:9876,10.0.0.2:9876",
		"smartgo console -listen 0.0.0.0:8080 -set console.credentials_file=/etc/smartgo/console.passwd -set console.admin_users=alice")
	cf.register(fs)
	cf.stringFlag(fs, "listen", "console.listen", "listen `address`")
	cf.stringFlag(fs, "registries", "console.registries", "comma-separated registry `addresses`")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	f, code, ok := loadOrExit(&cf, stderr, "console")
	if !ok {
		return code
	}
	if f.Console.Listen == "" {
		fmt.Fprintln(stderr, "smartgo console: console.listen is empty: nothing to serve")
		return exitUsage
	}
	log := newLogger(f.Log, stderr)
	logStart(log, "console")
	mon, err := startMonitor(f.Metrics, log)
	if err != nil {
		log.Error("metrics failed to start", "err", err)
		return exitFailure
	}
	defer mon.Close()
	c, err := startConsole(ctx, f.Console, f.Console.Registries, log)
	if err != nil {
		return startFailed(ctx, log, "console", err)
	}
	mon.add("console", c.Collectors(), c.Ready)
	<-ctx.Done()
	log.Info("shutting down", "reason", "signal")
	if err := c.Close(); err != nil {
		log.Error("console shutdown", "err", err)
		return exitFailure
	}
	return exitOK
}

// consoleOptions maps [console] onto console.Options, loading the
// credentials file (the MQTT format) when one is set.
func consoleOptions(c conf.Console, registries []string, log *slog.Logger) (console.Options, error) {
	o := console.Options{Listen: c.Listen, Registries: registries, AdminUsers: c.AdminUsers,
		SampleInterval: c.SampleInterval.D(), SessionTTL: c.SessionTTL.D(), RequestTimeout: c.RequestTimeout.D(),
		Logger: log.With("component", "console")}
	if c.CredentialsFile != "" {
		creds, err := mqtt.LoadCredentials(c.CredentialsFile)
		if err != nil {
			return o, fmt.Errorf("console.credentials_file: %w", err)
		}
		o.Authenticate = creds.Check
	}
	return o, o.Validate()
}

// startConsole starts the console on registries.
func startConsole(ctx context.Context, c conf.Console, registries []string, log *slog.Logger) (*console.Console, error) {
	o, err := consoleOptions(c, registries, log)
	if err != nil {
		return nil, err
	}
	con, err := console.New(o)
	if err != nil {
		return nil, err
	}
	if err := con.Start(ctx); err != nil {
		_ = con.Close()
		return nil, err
	}
	return con, nil
}
