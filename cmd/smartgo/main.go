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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

const (
	exitOK             = 0
	exitFailure        = 1
	exitUsage          = 2
	exitNotImplemented = 3
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"standalone": {"registry + broker + MQTT bridge in one process, data under ./data", runStandalone},
		"registry":   {"a registry (name server), port 9876 by default", runRegistry},
		"broker":     {"a broker (master or slave by its configuration)", runBroker},
		"bridge":     {"an MQTT 3.1.1/5 bridge node, port 1883 by default", runBridge},
		"admin":      {"topics, clusters, consumer progress, message lookup, stats", runAdmin},
		"bench":      {"load generators: produce, consume, e2e", runBench},
		"version":    {"print the version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, ok := commands()[args[0]]
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
	fmt.Fprintln(w, "\nCommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'smartgo <command> -h' for a command's flags.")
}

// newFlagSet returns a flag set whose -h output starts with the command's
// usage line and description.
func newFlagSet(name, synopsis, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("smartgo "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: smartgo %s %s\n\n%s\n\nFlags:\n", name, synopsis, strings.TrimSpace(description))
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and maps flag.ErrHelp to exit code 0.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

// notImplemented reports, in one line, a subcommand whose subsystem does not
// exist yet. It never pretends to work.
func notImplemented(stderr io.Writer, what string) int {
	fmt.Fprintf(stderr, "smartgo %s: not implemented yet\n", what)
	return exitNotImplemented
}
