package benchmark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A fleet of simulated MQTT devices (smartgo bench devices): many
// long-lived connections from one process, each a device that connects,
// optionally subscribes to its own topic and publishes telemetry, and
// keeps its connection alive with PINGREQs. It measures what a fleet
// costs a server: how fast devices connect, whether they stay connected,
// and the round trips of their packets; the server's own memory and CPU
// per device are read from outside (its /proc or /metrics).
//
// A device costs the generator about a hundred bytes and one socket, no
// goroutine: Loops event loops (one per CPU by default) own the sockets,
// each on its own epoll set (Linux only). A process may hold only so many
// open files, so a fleet of a million devices is several processes, each
// with its own First and Devices, spread over listeners (Targets) and
// local addresses (Sources): one local address reaches one listener with
// at most about 28,000 connections (the ephemeral port range).

// DevicesConfig describes a fleet. Zero values take the defaults shown.
type DevicesConfig struct {
	// Targets are the MQTT listeners (host:port); device i connects to
	// Targets[i%len(Targets)]. Default 127.0.0.1:1883.
	Targets []string
	// Sources are local addresses the devices' sockets are bound to, so
	// that more connections reach one listener than one address has
	// ports: device i binds Sources[(i/len(Targets))%len(Sources)]. Empty:
	// the kernel picks.
	Sources []netip.Addr
	// Devices is the fleet's size; First the index of its first device.
	// Device i's client id is Prefix followed by i.
	Devices int
	First   int
	Prefix  string // default "dev-"
	// Version is the MQTT protocol level: 4 (3.1.1) or 5 (default).
	Version byte
	// KeepAlive is each device's keep alive; a device sends PINGREQ every
	// three quarters of it. Default DefaultDevicesKeepAlive.
	KeepAlive time.Duration
	// Rate bounds new connections per second over the fleet (default
	// DefaultDevicesRate), InFlight the connections waiting for their
	// CONNACK at once (default DefaultDevicesInFlight).
	Rate     float64
	InFlight int
	// ConnectTimeout bounds the wait for a CONNACK; a device past it
	// fails with "timeout". Default 10s.
	ConnectTimeout time.Duration
	// Hold is how long the fleet stays connected once every device has
	// connected or failed; 0 keeps it until the context ends.
	Hold time.Duration
	// Subscribe makes each device subscribe to "<Topic>/<id>/in" at QoS 1
	// once connected.
	Subscribe bool
	// PublishEvery makes each device publish a QoS 1 message of
	// PublishSize bytes (default 64, at least 8: the send time) to
	// "<Topic>/<id>/out" this often, one at a time. 0: never.
	PublishEvery time.Duration
	PublishSize  int
	// Topic is the first level of the devices' topics. Default "devices".
	Topic string
	// Persistent connects with clean start off and (MQTT 5) a session
	// expiry of SessionExpiry seconds.
	Persistent    bool
	SessionExpiry uint32
	Username      string
	Password      string
	// Loops is the number of event loops. Default GOMAXPROCS.
	Loops int
	// Progress, if set, gets a line a second while the fleet runs.
	Progress io.Writer
}

// Defaults of a fleet: the one source of truth (cmd/smartgo's flags show
// them).
const (
	DefaultDevicesKeepAlive = 60 * time.Second
	DefaultDevicesRate      = 2000
	DefaultDevicesInFlight  = 512
	DefaultDevicesTimeout   = 10 * time.Second
	DefaultDevicesPrefix    = "dev-"
	DefaultDevicesTopic     = "devices"
	DefaultDevicesPayload   = 64
)

// ErrDevicesUnsupported is returned where the fleet cannot run (it needs
// Linux's epoll).
var ErrDevicesUnsupported = errors.New("bench devices: needs Linux")

// DevicesReport is what a fleet measured.
type DevicesReport struct {
	Devices int `json:"devices"`
	// Connected is the number of devices connected at once at the end of
	// the connect phase; Failed those that never got a CONNACK accepting
	// them (by reason in Errors).
	Connected int64            `json:"connected"`
	Failed    int64            `json:"failed"`
	Errors    map[string]int64 `json:"errors,omitempty"`
	// ConnectSeconds spans the first connect to the last CONNACK;
	// ConnectRate is Connected over it.
	ConnectSeconds float64 `json:"connectSeconds"`
	ConnectRate    float64 `json:"connectRate"`
	// Connect latency: TCP connect to CONNACK.
	ConnectP50 time.Duration `json:"-"`
	ConnectP99 time.Duration `json:"-"`
	ConnectMax time.Duration `json:"-"`
	// Dropped counts connected devices whose connection the server closed
	// (or broke) before the fleet ended it.
	Dropped int64 `json:"dropped"`
	// Subscribed counts SUBACKs granting the subscription.
	Subscribed int64 `json:"subscribed"`
	Pings      int64 `json:"pings"`
	Pongs      int64 `json:"pongs"`
	// Published, Acked: telemetry PUBLISHes sent and their PUBACKs (with
	// the publish round trip's percentiles); Received: PUBLISHes the
	// server delivered to the devices.
	Published  int64         `json:"published"`
	Acked      int64         `json:"acked"`
	PublishP50 time.Duration `json:"-"`
	PublishP99 time.Duration `json:"-"`
	Received   int64         `json:"received"`
	// HeldSeconds is how long the fleet stayed connected after its connect
	// phase.
	HeldSeconds float64 `json:"heldSeconds"`
}

func (r DevicesReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "devices %d: connected %d, failed %d in %.1f s (%.0f/s); CONNACK p50 %v p99 %v max %v\n",
		r.Devices, r.Connected, r.Failed, r.ConnectSeconds, r.ConnectRate,
		roundLatency(r.ConnectP50), roundLatency(r.ConnectP99), roundLatency(r.ConnectMax))
	fmt.Fprintf(&b, "held %.1f s: dropped %d, pings %d, answered %d", r.HeldSeconds, r.Dropped, r.Pings, r.Pongs)
	if r.Subscribed > 0 {
		fmt.Fprintf(&b, ", subscribed %d", r.Subscribed)
	}
	if r.Published > 0 || r.Received > 0 {
		fmt.Fprintf(&b, "\npublished %d, acknowledged %d (p50 %v p99 %v), received %d",
			r.Published, r.Acked, roundLatency(r.PublishP50), roundLatency(r.PublishP99), r.Received)
	}
	if len(r.Errors) > 0 {
		keys := make([]string, 0, len(r.Errors))
		for k := range r.Errors {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString("\nerrors:")
		for _, k := range keys {
			fmt.Fprintf(&b, " %s %d;", k, r.Errors[k])
		}
	}
	return b.String()
}

// MarshalJSON adds the latencies in milliseconds.
func (r DevicesReport) MarshalJSON() ([]byte, error) {
	type plain DevicesReport
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return json.Marshal(struct {
		plain
		ConnectP50Ms float64 `json:"connectP50Ms"`
		ConnectP99Ms float64 `json:"connectP99Ms"`
		ConnectMaxMs float64 `json:"connectMaxMs"`
		PublishP50Ms float64 `json:"publishP50Ms"`
		PublishP99Ms float64 `json:"publishP99Ms"`
	}{plain(r), ms(r.ConnectP50), ms(r.ConnectP99), ms(r.ConnectMax), ms(r.PublishP50), ms(r.PublishP99)})
}

// fill checks c and applies the defaults.
func (c *DevicesConfig) fill() error {
	if c.Devices < 1 {
		return fmt.Errorf("bench devices: %d devices: need at least 1", c.Devices)
	}
	if c.First < 0 {
		return fmt.Errorf("bench devices: first device %d is negative", c.First)
	}
	if len(c.Targets) == 0 {
		c.Targets = []string{"127.0.0.1:1883"}
	}
	for _, s := range c.Sources {
		if !s.Is4() {
			return fmt.Errorf("bench devices: source %v: only IPv4 addresses", s)
		}
	}
	if c.Prefix == "" {
		c.Prefix = DefaultDevicesPrefix
	}
	if c.Topic == "" {
		c.Topic = DefaultDevicesTopic
	}
	switch c.Version {
	case 0:
		c.Version = 5
	case 4, 5:
	default:
		return fmt.Errorf("bench devices: MQTT version %d: 4 (3.1.1) or 5", c.Version)
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = DefaultDevicesKeepAlive
	}
	if c.KeepAlive < time.Second || c.KeepAlive > 65535*time.Second {
		return fmt.Errorf("bench devices: keep alive %v: between 1s and 65535s", c.KeepAlive)
	}
	if c.Rate == 0 {
		c.Rate = DefaultDevicesRate
	}
	if c.Rate < 0 {
		return fmt.Errorf("bench devices: rate %v is negative", c.Rate)
	}
	if c.InFlight == 0 {
		c.InFlight = DefaultDevicesInFlight
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultDevicesTimeout
	}
	if c.InFlight < 0 || c.ConnectTimeout < 0 || c.Hold < 0 || c.PublishEvery < 0 {
		return errors.New("bench devices: in-flight, timeout, hold and publish interval must not be negative")
	}
	if c.PublishSize == 0 {
		c.PublishSize = DefaultDevicesPayload
	}
	if c.PublishSize < 8 {
		return fmt.Errorf("bench devices: payload of %d bytes: at least 8 (the send time)", c.PublishSize)
	}
	if c.Loops <= 0 {
		c.Loops = runtime.GOMAXPROCS(0)
	}
	c.Loops = min(c.Loops, c.Devices)
	return nil
}

// fleetStats are a fleet's counters, shared by its loops.
type fleetStats struct {
	connected, failed, dropped, subscribed atomic.Int64
	connecting                             atomic.Int64
	pings, pongs                           atomic.Int64
	published, acked, received             atomic.Int64
	connectHist, publishHist               Histogram

	mu     sync.Mutex
	errors map[string]int64
	// firstAt and lastAckAt span the connect phase (unix nanoseconds).
	firstAt, lastAckAt atomic.Int64
}

// fail counts a device that did not connect, or a connected one that
// broke (dropped), by reason.
func (s *fleetStats) fail(reason string, wasUp bool) {
	if wasUp {
		s.dropped.Add(1)
		s.connected.Add(-1)
		reason = "dropped: " + reason
	} else {
		s.failed.Add(1)
	}
	s.note(reason)
}

// note counts an error that ends no connection.
func (s *fleetStats) note(reason string) {
	s.mu.Lock()
	if s.errors == nil {
		s.errors = map[string]int64{}
	}
	s.errors[reason]++
	s.mu.Unlock()
}

// progressDevices writes a line a second until done closes.
func progressDevices(w io.Writer, s *fleetStats, start time.Time, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			fmt.Fprintf(w, "%5.0fs connected %d connecting %d failed %d dropped %d published %d acked %d received %d\n",
				now.Sub(start).Seconds(), s.connected.Load(), s.connecting.Load(), s.failed.Load(), s.dropped.Load(),
				s.published.Load(), s.acked.Load(), s.received.Load())
		}
	}
}

// RunDevices runs a fleet until every device has connected or failed and
// then Hold has passed (or ctx ends), disconnects it and reports.
func RunDevices(ctx context.Context, cfg DevicesConfig) (DevicesReport, error) {
	if err := cfg.fill(); err != nil {
		return DevicesReport{}, err
	}
	return runFleet(ctx, cfg)
}

// report turns the counters into a report.
func (s *fleetStats) report(cfg *DevicesConfig, connected int64, held time.Duration) DevicesReport {
	r := DevicesReport{
		Devices: cfg.Devices, Connected: connected, Failed: s.failed.Load(), Dropped: s.dropped.Load(),
		Subscribed: s.subscribed.Load(), Pings: s.pings.Load(), Pongs: s.pongs.Load(),
		Published: s.published.Load(), Acked: s.acked.Load(), Received: s.received.Load(),
		ConnectP50: s.connectHist.Percentile(50), ConnectP99: s.connectHist.Percentile(99), ConnectMax: s.connectHist.Max(),
		PublishP50: s.publishHist.Percentile(50), PublishP99: s.publishHist.Percentile(99),
		HeldSeconds: held.Seconds(),
	}
	if first, last := s.firstAt.Load(), s.lastAckAt.Load(); first > 0 && last > first {
		r.ConnectSeconds = time.Duration(last - first).Seconds()
		r.ConnectRate = float64(connected) / r.ConnectSeconds
	}
	s.mu.Lock()
	if len(s.errors) > 0 {
		r.Errors = maps.Clone(s.errors)
	}
	s.mu.Unlock()
	return r
}
