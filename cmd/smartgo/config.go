package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/smartgo/smartgo/conf"
)

// configFlags are the flags every daemon subcommand shares: a config file
// and any number of -set key=value overrides, applied after the file.
type configFlags struct {
	file string
	sets setList
	// named holds overrides from named flags (-listen, -data ...), applied
	// after -set so the specific flag wins.
	named []keyValue
}

type keyValue struct{ key, value string }

type setList []keyValue

func (s *setList) String() string {
	parts := make([]string, len(*s))
	for i, kv := range *s {
		parts[i] = kv.key + "=" + kv.value
	}
	return strings.Join(parts, ",")
}

func (s *setList) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, e.g. store.flush=sync")
	}
	*s = append(*s, keyValue{strings.TrimSpace(k), val})
	return nil
}

func (c *configFlags) register(fs *cmdFlags) {
	fs.StringVar(&c.file, "c", "", "TOML configuration `file` (see conf/standalone.toml); defaults apply without one")
	fs.Var(&c.sets, "set", "override one configuration `key=value` (repeatable), e.g. -set store.flush=sync;\n"+
		"a list takes a,b or TOML's [\"a\",\"b\"], e.g. -set 'broker.registries=[\"h1:9876\",\"h2:9876\"]'")
}

// stringFlag registers a flag that, when given, overrides the config key.
func (c *configFlags) stringFlag(fs *cmdFlags, name, key, usage string) {
	fs.Func(name, usage+" (config key "+key+")", func(v string) error {
		c.named = append(c.named, keyValue{key, v})
		return nil
	})
}

// load reads the file, applies overrides in order and validates the result.
func (c *configFlags) load() (conf.File, error) {
	f, err := conf.Load(c.file)
	if err != nil {
		return f, err
	}
	for _, kv := range append(append([]keyValue{}, c.sets...), c.named...) {
		if err := f.Set(kv.key, kv.value); err != nil {
			return f, fmt.Errorf("command line: %w", err)
		}
	}
	if err := f.Validate(); err != nil {
		return f, fmt.Errorf("command line: %w", err)
	}
	return f, nil
}

// newLogger builds the process logger from [log].
func newLogger(l conf.Log, w io.Writer) *slog.Logger {
	level := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}[l.Level]
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(newComponentHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(newComponentHandler(slog.NewTextHandler(w, opts)))
}

// loadOrExit loads the configuration, printing the error and returning a
// non-zero code when it is bad.
func loadOrExit(c *configFlags, stderr io.Writer, name string) (conf.File, int, bool) {
	f, err := c.load()
	if err != nil {
		fmt.Fprintf(stderr, "smartgo %s: %v\n", name, err)
		return f, exitUsage, false
	}
	return f, 0, true
}

// startFailed reports a component that did not start: when a signal ended
// the start-up wait, that is a requested stop (exit 0), else a failure.
func startFailed(ctx context.Context, log *slog.Logger, what string, err error) int {
	if ctx.Err() != nil {
		log.Info(what+" start-up interrupted", "reason", "signal", "err", err)
		return exitOK
	}
	log.Error(what+" failed to start", "err", err)
	return exitFailure
}

// componentHandler keeps one "component" key per record: a logger made
// With("component", x) from one that already has a component names the
// inner part x instead of adding a second key (which JSON readers take as
// a duplicate, keeping either value). Attributes inside a group pass
// through unchanged.
type componentHandler struct {
	base slog.Handler // without the component
	comp slog.Attr    // the innermost component (empty key: none)
	full slog.Handler // base with comp
}

func newComponentHandler(h slog.Handler) *componentHandler {
	return &componentHandler{base: h, full: h}
}

func (h *componentHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.base.Enabled(ctx, l)
}

func (h *componentHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.full.Handle(ctx, r)
}

func (h *componentHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := &componentHandler{base: h.base, comp: h.comp}
	others := make([]slog.Attr, 0, len(attrs))
	for _, a := range attrs {
		if a.Key == "component" {
			n.comp = a
		} else {
			others = append(others, a)
		}
	}
	if len(others) > 0 {
		n.base = n.base.WithAttrs(others)
	}
	n.full = n.base
	if n.comp.Key != "" {
		n.full = n.base.WithAttrs([]slog.Attr{n.comp})
	}
	return n
}

func (h *componentHandler) WithGroup(name string) slog.Handler { return h.full.WithGroup(name) }
