package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/smartgo/smartgo/benchmark"
)

const benchDevicesAbout = `
Simulates a fleet of MQTT devices from this process: each connects (at most
-rate a second, -inflight waiting for their CONNACK at once), optionally
subscribes to <topic>/<id>/in and publishes QoS 1 telemetry to
<topic>/<id>/out every -publish-every, and sends PINGREQ every three
quarters of -keepalive. Once every device has connected or failed, the
fleet stays connected for -hold (0: until interrupted), then disconnects.
Reports the connect rate, the CONNACK and publish latencies, and every
failure or drop by its reason; exit 1 when a device failed or was dropped.

A device costs this process one socket and about a hundred bytes, no
goroutine (Linux only: epoll). A process may hold only so many open files
(ulimit -n), so a larger fleet is several processes, each with its own
-first and -n; one local address reaches one listener with at most about
28,000 connections, so spread them with -sources (127.0.0.x addresses)
and several -mqtt listeners.`

func runBenchDevices(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("bench devices", "[-n N] [-mqtt ADDRS] [-sources ADDRS] [-hold D] ...", benchDevicesAbout, stdout, stderr)
	fs.example("smartgo bench devices -n 10000 -hold 1m",
		"smartgo bench devices -n 20000 -first 20000 -sources 127.0.0.2-127.0.0.3 -subscribe -publish-every 30s -o json")
	var cfg benchmark.DevicesConfig
	targets := fs.String("mqtt", "127.0.0.1:1883", "MQTT listener `addresses` (comma-separated; devices spread over them)")
	sources := fs.String("sources", "", "local IPv4 `addresses` to connect from: a comma-separated list or a range 127.0.0.2-127.0.0.9 (default: the kernel picks)")
	fs.IntVar(&cfg.Devices, "n", 1000, "`devices` in the fleet")
	fs.IntVar(&cfg.First, "first", 0, "`index` of the first device (client id <prefix><index>)")
	fs.StringVar(&cfg.Prefix, "prefix", benchmark.DefaultDevicesPrefix, "client id `prefix`")
	version := fs.Int("protocol", 5, "MQTT `version`: 4 (3.1.1) or 5")
	fs.DurationVar(&cfg.KeepAlive, "keepalive", benchmark.DefaultDevicesKeepAlive, "each device's keep alive")
	fs.Float64Var(&cfg.Rate, "rate", benchmark.DefaultDevicesRate, "new connections per `second`")
	fs.IntVar(&cfg.InFlight, "inflight", benchmark.DefaultDevicesInFlight, "connections waiting for their CONNACK at once")
	fs.DurationVar(&cfg.ConnectTimeout, "timeout", benchmark.DefaultDevicesTimeout, "a device without a CONNACK after this long fails")
	fs.DurationVar(&cfg.Hold, "hold", 0, "how long the fleet stays connected once connected (0: until interrupted)")
	fs.BoolVar(&cfg.Subscribe, "subscribe", false, "each device subscribes to <topic>/<id>/in at QoS 1")
	fs.DurationVar(&cfg.PublishEvery, "publish-every", 0, "each device publishes QoS 1 to <topic>/<id>/out this often (0: never)")
	fs.IntVar(&cfg.PublishSize, "size", benchmark.DefaultDevicesPayload, "telemetry payload `bytes` (>= 8)")
	fs.StringVar(&cfg.Topic, "topic", benchmark.DefaultDevicesTopic, "first `level` of the devices' topics")
	fs.BoolVar(&cfg.Persistent, "persistent", false, "connect with clean start off (a stored session)")
	expiry := fs.Uint("session-expiry", 0, "MQTT 5 session expiry in `seconds` with -persistent")
	fs.StringVar(&cfg.Username, "username", "", "user `name` to connect with")
	fs.StringVar(&cfg.Password, "password", "", "`password` to connect with")
	fs.IntVar(&cfg.Loops, "loops", 0, "event loops (default: one per CPU)")
	format := outputFlag(fs, "text")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *format != "text" && *format != "json" {
		return fs.misuse("-o must be text or json, not %q", *format)
	}
	cfg.Version, cfg.SessionExpiry = byte(*version), uint32(*expiry)
	for _, t := range strings.Split(*targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			cfg.Targets = append(cfg.Targets, t)
		}
	}
	src, err := parseSources(*sources)
	if err != nil {
		return fs.misuse("-sources: %v", err)
	}
	cfg.Sources = src
	cfg.Progress = stderr
	r, err := benchmark.RunDevices(ctx, cfg)
	if errors.Is(err, benchmark.ErrDevicesUnsupported) {
		fmt.Fprintf(stderr, "smartgo bench devices: %v\n", err)
		return exitFailure
	}
	if r.Devices == 0 && err != nil {
		return fs.misuse("%v", err) // a flag the fleet refused
	}
	if err != nil {
		fmt.Fprintf(stderr, "smartgo bench devices: %v\n", err)
	}
	if *format == "json" {
		b, _ := json.MarshalIndent(r, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintln(stdout, r.String())
	}
	if r.Connected == 0 || r.Failed > 0 || r.Dropped > 0 {
		return exitFailure
	}
	return exitOK
}

// maxSources bounds a -sources range.
const maxSources = 1 << 16

// parseSources reads "a,b,c" or "a-b" (IPv4, the range inclusive).
func parseSources(s string) ([]netip.Addr, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if lo, hi, ok := strings.Cut(s, "-"); ok && !strings.Contains(s, ",") {
		a, err := netip.ParseAddr(strings.TrimSpace(lo))
		if err != nil {
			return nil, err
		}
		b, err := netip.ParseAddr(strings.TrimSpace(hi))
		if err != nil {
			return nil, err
		}
		if !a.Is4() || !b.Is4() || b.Less(a) {
			return nil, fmt.Errorf("%q: an IPv4 range from low to high", s)
		}
		var out []netip.Addr
		for x := a; x.Compare(b) <= 0; x = x.Next() {
			if len(out) == maxSources {
				return nil, fmt.Errorf("%q: more than %d addresses", s, maxSources)
			}
			out = append(out, x)
		}
		return out, nil
	}
	var out []netip.Addr
	for _, f := range strings.Split(s, ",") {
		a, err := netip.ParseAddr(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if !a.Is4() {
			return nil, fmt.Errorf("%v: only IPv4 addresses", a)
		}
		out = append(out, a)
	}
	return out, nil
}
