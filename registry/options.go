package registry

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Options configure a registry Server. Zero values take the defaults
// shown by DefaultOptions.
type Options struct {
	// Addr is the listen address. Default "0.0.0.0:9876".
	Addr string
	// KVConfigPath is the KV config file (e.g. ORDER_TOPIC_CONFIG).
	// DefaultOptions has DefaultKVConfigPath; empty keeps the KV config in
	// memory only.
	KVConfigPath string
	// ScanInterval is the period of the scan for silent brokers. Default
	// 10 s.
	ScanInterval time.Duration
	// BrokerExpiry removes a broker not heard from for this long. Default
	// 120 s.
	BrokerExpiry time.Duration
	// IdleTimeout closes connections without a frame for this long.
	// Default 120 s.
	IdleTimeout time.Duration
	// MaxFrameSize is the largest accepted frame. Default 16 MiB.
	MaxFrameSize int64
	// Logger receives events; nil discards.
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultAddr         = "0.0.0.0:9876"
	DefaultKVConfigPath = "data/registry/kvConfig.json"
	DefaultScanInterval = 10 * time.Second
	DefaultBrokerExpiry = 120 * time.Second
	DefaultIdleTimeout  = 120 * time.Second
)

// DefaultOptions returns Options with every default filled in.
func DefaultOptions() Options {
	o := Options{KVConfigPath: DefaultKVConfigPath}
	o.fill()
	return o
}

func (o *Options) fill() {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.ScanInterval == 0 {
		o.ScanInterval = DefaultScanInterval
	}
	if o.BrokerExpiry == 0 {
		o.BrokerExpiry = DefaultBrokerExpiry
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = protocol.DefaultMaxFrameSize
	}
}

// Validate reports the first invalid setting; zero values are valid.
func (o *Options) Validate() error {
	switch {
	case o.ScanInterval < 0:
		return fmt.Errorf("%w: negative ScanInterval", ErrBadOptions)
	case o.BrokerExpiry < 0:
		return fmt.Errorf("%w: negative BrokerExpiry", ErrBadOptions)
	case o.IdleTimeout < 0:
		return fmt.Errorf("%w: negative IdleTimeout", ErrBadOptions)
	case o.MaxFrameSize < 0 || (o.MaxFrameSize > 0 && o.MaxFrameSize < 1024) || o.MaxFrameSize > 1<<30:
		return fmt.Errorf("%w: MaxFrameSize %d outside [1 KiB, 1 GiB]", ErrBadOptions, o.MaxFrameSize)
	case o.BrokerExpiry > 0 && o.ScanInterval > o.BrokerExpiry:
		return fmt.Errorf("%w: ScanInterval %v longer than BrokerExpiry %v", ErrBadOptions, o.ScanInterval, o.BrokerExpiry)
	}
	return nil
}
