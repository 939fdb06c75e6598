// Command smartgo is SmartGo's one binary: registry, broker, MQTT bridge,
// all three in one process (standalone), the admin CLI and the benchmark
// tool. It only maps flags and configuration onto each package's Options,
// starts things, waits for a signal and shuts down; the logic lives in the
// packages.
//
// Exit codes: 0 success, 1 runtime failure, 2 bad usage or configuration,
// 3 the subcommand's subsystem is not implemented yet.
package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

const (
	exitOK             = 0
	exitFailure        = 1
	exitUsage          = 2
	exitNotImplemented = 3
)

// command is one subcommand. Each lives in its own file and adds itself
// to the table with register from an init function, so a new command is a
// new file and no edit elsewhere.
type command struct {
	name    string
	summary string // one line for `smartgo -h`
	server  bool   // a long-running process (listed under "Servers")
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commandTable holds every command by name; written only by init functions.
var commandTable = map[string]command{}

// register adds a command; a duplicate name is a programming error.
func register(c command) {
	if _, dup := commandTable[c.name]; dup {
		panic("smartgo: command registered twice: " + c.name)
	}
	commandTable[c.name] = c
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, a second one kills the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch {
	case args[0] == "help" && len(args) > 1:
		// smartgo help <command> [sub-command...] = smartgo <command> ... -h
		return run(ctx, append(args[1:len(args):len(args)], "-h"), stdout, stderr)
	case isHelp(args[0]):
		usage(stdout)
		return exitOK
	case args[0] == "--version" || args[0] == "-version":
		return runVersion(ctx, args[1:], stdout, stderr)
	}
	cmd, ok := commandTable[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "smartgo: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "SmartGo %s: a RocketMQ-compatible message middleware with an MQTT bridge.\n\n", version)
	fmt.Fprintln(w, "Usage: smartgo <command> [flags]")
	names := slices.Sorted(maps.Keys(commandTable))
	for _, server := range []bool{true, false} {
		if server {
			fmt.Fprintln(w, "\nServers (run until SIGINT or SIGTERM):")
		} else {
			fmt.Fprintln(w, "\nTools:")
		}
		for _, n := range names {
			if c := commandTable[n]; c.server == server {
				fmt.Fprintf(w, "  %-11s %s\n", n, c.summary)
			}
		}
	}
	fmt.Fprintln(w, "\nRun 'smartgo <command> -h' (or 'smartgo help <command>') for a command's flags and")
	fmt.Fprintln(w, "examples; 'smartgo --version' for the version.")
}

// notImplemented reports, in one line, a subcommand whose subsystem does not
// exist yet. It never pretends to work.
func notImplemented(stderr io.Writer, what string) int {
	fmt.Fprintf(stderr, "smartgo %s: not implemented yet\n", what)
	return exitNotImplemented
}
