package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "", "Prints the SmartGo version, the Go version and the platform.", stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fmt.Fprintf(stdout, "smartgo %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}
