package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
)

func init() {
	register(command{name: "version", summary: "print the version and the git commit it was built from", run: runVersion})
}

// version is set at build time with -ldflags "-X main.version=...";
// commit likewise with "-X main.commit=..." (the Makefile sets both).
// Without it, commit comes from the VCS stamp Go embeds in the binary.
var (
	version = "0.1.0-dev"
	commit  = ""
)

// buildInfo describes this binary.
type buildInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`             // "unknown" when neither ldflags nor the VCS stamp say
	Modified bool   `json:"modified,omitempty"` // built from a work tree with uncommitted changes
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if len(b.Commit) > 12 {
		b.Commit = b.Commit[:12]
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

func (b buildInfo) String() string {
	return fmt.Sprintf("smartgo %s (commit %s, %s %s)", b.Version, b.commit(), b.Go, b.Platform)
}

// commit is the commit, "+dirty" when built from a modified work tree.
func (b buildInfo) commit() string {
	if b.Modified {
		return b.Commit + "+dirty"
	}
	return b.Commit
}

// short is the version and commit, as MQTT's $SYS/broker/version gives
// them: "1.2.0 (0123456789ab)".
func (b buildInfo) short() string { return b.Version + " (" + b.commit() + ")" }

// logStart logs the build at the start of a server command, so every log
// says which code produced it.
func logStart(log *slog.Logger, cmd string) {
	b := currentBuild()
	log.Info("smartgo starting", "command", cmd, "version", b.Version, "commit", b.Commit, "modified", b.Modified, "go", b.Go)
}

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("version", "[-o text|json]", `
Prints the SmartGo version, the git commit it was built from (from the
Makefile's -ldflags, else from the VCS stamp Go embeds; "+dirty" when the
work tree had uncommitted changes), the Go version and the platform.
Also: smartgo --version.`, stdout, stderr)
	fs.example("smartgo version", "smartgo version -o json")
	format := outputFlag(fs, "text")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	b := currentBuild()
	switch *format {
	case "json":
		out, _ := json.MarshalIndent(b, "", "  ")
		fmt.Fprintln(stdout, string(out))
	case "text":
		fmt.Fprintln(stdout, b.String())
	default:
		return fs.misuse("-o must be text or json, not %q", *format)
	}
	return exitOK
}
