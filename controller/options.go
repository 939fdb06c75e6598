package controller

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/smartgo/smartgo/remoting"
)

// Defaults.
const (
	DefaultAddr              = "0.0.0.0:9878"
	DefaultRaftAddr          = "0.0.0.0:9880"
	DefaultHeartbeatInterval = 500 * time.Millisecond
	DefaultHeartbeatTimeout  = 3 * time.Second
	DefaultElectionTimeout   = time.Second
	DefaultSnapshotThreshold = 256
)

// Peer is one controller replica: the remoting address brokers and admin
// tools use, and the Raft address replicas use among themselves.
type Peer struct {
	Addr     string
	RaftAddr string
}

// ParsePeer parses "remotingAddr=raftAddr" (e.g.
// "10.0.0.1:9878=10.0.0.1:9880").
func ParsePeer(s string) (Peer, error) {
	a, r, ok := strings.Cut(strings.TrimSpace(s), "=")
	p := Peer{Addr: strings.TrimSpace(a), RaftAddr: strings.TrimSpace(r)}
	if !ok || p.Addr == "" || p.RaftAddr == "" {
		return p, fmt.Errorf("%w: peer %q: want remotingAddr=raftAddr", ErrInvalidOptions, s)
	}
	for _, x := range []string{p.Addr, p.RaftAddr} {
		if _, _, err := net.SplitHostPort(x); err != nil {
			return p, fmt.Errorf("%w: peer %q: %v", ErrInvalidOptions, s, err)
		}
	}
	return p, nil
}

// Options configure a Controller. Zero values take the defaults above.
type Options struct {
	// Addr is the remoting listen address of a controller with its own
	// server (`smartgo controller`). Ignored when Server is set.
	Addr string
	// Server, if set, is an existing remoting server the controller adds
	// its request codes to (the registry's, when the controller runs
	// inside `smartgo registry`); the controller neither starts nor
	// closes it.
	Server *remoting.Server
	// Advertise is this replica's remoting address as brokers and the
	// other replicas know it; it must be one of Peers' Addr. Default: the
	// listen address, with 127.0.0.1 for an unspecified host.
	Advertise string
	// RaftAddr is the Raft transport's listen address (default
	// 0.0.0.0:9880); RaftListener, if set, is used instead (tests).
	RaftAddr     string
	RaftListener net.Listener
	// RaftAdvertise is this replica's Raft address as the others dial it
	// (default: the peer entry of this replica, else the listen address
	// with 127.0.0.1 for an unspecified host).
	RaftAdvertise string
	// Peers lists every replica, this one included (1, 3 or 5 of them);
	// empty runs a single replica.
	Peers []Peer
	// Dir holds the Raft log, its stable state and snapshots (required).
	Dir string
	// HeartbeatInterval is how often brokers heartbeat to every replica
	// (told to them at registration; default 500 ms).
	HeartbeatInterval time.Duration
	// HeartbeatTimeout: a master silent this long is replaced (default
	// 3 s). Brokers derive their master lease from it.
	HeartbeatTimeout time.Duration
	// UncleanElection lets a broker outside the sync state set become
	// master when no member of the set is alive: the group is writable
	// again, but messages only the old master had are lost. Default off.
	UncleanElection bool
	// ElectionTimeout is Raft's heartbeat and election timeout (default
	// 1 s).
	ElectionTimeout time.Duration
	// SnapshotThreshold is the number of Raft entries between snapshots
	// (default 256).
	SnapshotThreshold uint64
	// Logger receives events; nil discards.
	Logger *slog.Logger
}

// DefaultOptions returns the defaults of a single replica keeping its
// state in dir.
func DefaultOptions(dir string) Options {
	o := Options{Dir: dir}
	o.fill()
	o.Logger = nil
	return o
}

func (o *Options) fill() {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.RaftAddr == "" {
		o.RaftAddr = DefaultRaftAddr
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.HeartbeatTimeout == 0 {
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if o.ElectionTimeout == 0 {
		o.ElectionTimeout = DefaultElectionTimeout
	}
	if o.SnapshotThreshold == 0 {
		o.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports the first invalid setting.
func (o *Options) Validate() error {
	switch {
	case o.Dir == "":
		return fmt.Errorf("%w: Dir is required", ErrInvalidOptions)
	case o.HeartbeatInterval < 0 || o.HeartbeatTimeout < 0 || o.ElectionTimeout < 0:
		return fmt.Errorf("%w: negative interval", ErrInvalidOptions)
	case o.HeartbeatInterval > 0 && o.HeartbeatTimeout > 0 && o.HeartbeatTimeout < 3*o.HeartbeatInterval:
		return fmt.Errorf("%w: HeartbeatTimeout %v must be at least 3 heartbeat intervals (%v)", ErrInvalidOptions, o.HeartbeatTimeout, o.HeartbeatInterval)
	case o.HeartbeatTimeout > 0 && o.HeartbeatTimeout < time.Second:
		return fmt.Errorf("%w: HeartbeatTimeout %v below 1s", ErrInvalidOptions, o.HeartbeatTimeout)
	case o.ElectionTimeout > 0 && o.ElectionTimeout < 50*time.Millisecond:
		return fmt.Errorf("%w: ElectionTimeout %v below 50ms", ErrInvalidOptions, o.ElectionTimeout)
	case len(o.Peers) == 2 || len(o.Peers) == 4 || len(o.Peers) > 7:
		return fmt.Errorf("%w: %d peers: use 1, 3 or 5 replicas (an even count tolerates no more failures than one fewer)", ErrInvalidOptions, len(o.Peers))
	}
	seen := map[string]bool{}
	for _, p := range o.Peers {
		if p.Addr == "" || p.RaftAddr == "" {
			return fmt.Errorf("%w: peer %+v needs both addresses", ErrInvalidOptions, p)
		}
		if seen[p.Addr] || seen["raft "+p.RaftAddr] {
			return fmt.Errorf("%w: peer %s listed twice", ErrInvalidOptions, p.Addr)
		}
		seen[p.Addr], seen["raft "+p.RaftAddr] = true, true
	}
	if len(o.Peers) > 0 && o.Advertise != "" && !seen[o.Advertise] {
		return fmt.Errorf("%w: Advertise %s is not one of the peers", ErrInvalidOptions, o.Advertise)
	}
	return nil
}

// LeaseFor returns the master lease a broker derives from the controller's
// heartbeat timeout: a master that heard from no controller replica for
// this long stops acknowledging writes, strictly before a controller that
// lost its heartbeats replaces it (timeout minus a third, at least 500 ms
// of margin).
func LeaseFor(timeout time.Duration) time.Duration {
	return timeout - max(timeout/3, 500*time.Millisecond)
}

// defaultHostAddr replaces an unspecified host of a listen address by
// 127.0.0.1.
func defaultHostAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
