package statestore

import (
	"fmt"
	"strings"
	"time"
)

// Defaults for Options.
const (
	DefaultNodeID              = "StateStore"
	DefaultMaxKeys             = 1_000_000
	DefaultMaxBytes            = 1 << 30 // 1 GiB of keys plus values
	DefaultMaxKeySize          = 64 << 10
	DefaultMaxValueSize        = 3 << 20 // an entry stays below the broker's 4 MiB message limit
	DefaultMaxClockSkew        = time.Minute
	DefaultHistoryLen          = 1000
	DefaultHistoryBytes        = 16 << 20
	DefaultDedupLen            = 10_000
	DefaultMaxWatchesPerClient = 10_000
)

// Options configures an Engine. The zero value is usable: every zero field
// takes the default named beside it.
//
// MaxKeys, MaxBytes, HistoryLen, HistoryBytes and DedupLen shape the state
// that Apply builds, so every replica that applies the same log must use
// the same values for them (they are quota decisions and bounded
// histories, taken while applying). NodeID, MaxKeySize, MaxValueSize,
// MaxClockSkew and MaxWatchesPerClient are only consulted by Prepare and
// may differ.
type Options struct {
	// NodeID is the node id of the versions this engine issues (default
	// "StateStore"): non-empty, no ':', at most MaxNodeIDLen bytes.
	NodeID string

	MaxKeys      int   // most keys held at once (default 1 000 000)
	MaxBytes     int64 // most key plus value bytes held at once (default 1 GiB)
	MaxKeySize   int   // largest key in bytes (default 64 KiB)
	MaxValueSize int   // largest value in bytes (default 3 MiB)

	// MaxClockSkew is how far ahead of the store's clock a __ts or __ft
	// may be (default 1 minute, the protocol's rule).
	MaxClockSkew time.Duration

	// HistoryLen and HistoryBytes bound the change history that resumable
	// watches read (defaults 1000 changes, 16 MiB of keys plus values).
	HistoryLen   int
	HistoryBytes int64

	// DedupLen bounds the response cache for redelivered requests
	// (default 10 000 replies); entries also leave when their time is up.
	DedupLen int

	// MaxWatchesPerClient bounds one client's KEYNOTIFY registrations
	// (default 10 000).
	MaxWatchesPerClient int
}

// DefaultOptions returns Options with every field at its default.
func DefaultOptions() Options {
	var o Options
	o.setDefaults()
	return o
}

func (o *Options) setDefaults() {
	if o.NodeID == "" {
		o.NodeID = DefaultNodeID
	}
	setInt(&o.MaxKeys, DefaultMaxKeys)
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	setInt(&o.MaxKeySize, DefaultMaxKeySize)
	setInt(&o.MaxValueSize, DefaultMaxValueSize)
	if o.MaxClockSkew == 0 {
		o.MaxClockSkew = DefaultMaxClockSkew
	}
	setInt(&o.HistoryLen, DefaultHistoryLen)
	if o.HistoryBytes == 0 {
		o.HistoryBytes = DefaultHistoryBytes
	}
	setInt(&o.DedupLen, DefaultDedupLen)
	setInt(&o.MaxWatchesPerClient, DefaultMaxWatchesPerClient)
}

func setInt(p *int, def int) {
	if *p == 0 {
		*p = def
	}
}

// Validate reports the first invalid field (after defaults are applied to
// a copy). Errors wrap ErrBadOptions.
func (o Options) Validate() error {
	o.setDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case strings.IndexByte(o.NodeID, ':') >= 0:
		return bad("NodeID %q holds ':'", o.NodeID)
	case len(o.NodeID) > MaxNodeIDLen:
		return bad("NodeID is %d bytes, more than %d", len(o.NodeID), MaxNodeIDLen)
	case o.MaxKeys < 0:
		return bad("MaxKeys %d is negative", o.MaxKeys)
	case o.MaxBytes < 0:
		return bad("MaxBytes %d is negative", o.MaxBytes)
	case o.MaxKeySize < 0 || o.MaxKeySize > maxFieldLen:
		return bad("MaxKeySize %d is outside 1..%d", o.MaxKeySize, maxFieldLen)
	case o.MaxValueSize < 0 || o.MaxValueSize > maxFieldLen:
		return bad("MaxValueSize %d is outside 1..%d", o.MaxValueSize, maxFieldLen)
	case o.MaxClockSkew < 0:
		return bad("MaxClockSkew %v is negative", o.MaxClockSkew)
	case o.HistoryLen < 0:
		return bad("HistoryLen %d is negative", o.HistoryLen)
	case o.HistoryBytes < 0:
		return bad("HistoryBytes %d is negative", o.HistoryBytes)
	case o.DedupLen < 0:
		return bad("DedupLen %d is negative", o.DedupLen)
	case o.MaxWatchesPerClient < 0:
		return bad("MaxWatchesPerClient %d is negative", o.MaxWatchesPerClient)
	}
	return nil
}
