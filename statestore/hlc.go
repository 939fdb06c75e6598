package statestore

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// HLC is a hybrid logical clock value as the state store protocol writes
// it: "{ms}:{counter}:{node id}", for example
// "001696374425000:00001:StateStore". Versions of keys, the __ts and __ft
// user properties, and resume points of watches are HLCs.
//
// Values are ordered by Wall, then Counter, then a byte-wise comparison
// of Node. The zero HLC (no node) never parses and means "none".
type HLC struct {
	Wall    int64  // milliseconds since the Unix epoch, >= 0
	Counter uint64 // logical counter within one Wall millisecond
	Node    string // node id: non-empty, no ':', at most MaxNodeIDLen bytes
}

const (
	// MaxNodeIDLen is the longest node id ParseHLC accepts (bytes). The
	// SDKs use 36-byte UUID strings.
	MaxNodeIDLen = 255

	// MaxIssuedCounter bounds the counters the engine itself issues, so
	// that every SDK can parse its versions (.NET reads the counter as an
	// int32). When a counter would pass it, the engine moves to the next
	// millisecond with counter 0 instead. Counters in requests may be
	// larger (any uint64).
	MaxIssuedCounter = math.MaxInt32
)

// ParseHLC parses the string form of an HLC strictly: exactly three
// ':'-separated parts; the first two are non-empty runs of ASCII digits
// (zero padding allowed, never required; no sign) fitting int64 and
// uint64; the node id is non-empty and at most MaxNodeIDLen bytes.
// Errors wrap ErrBadHLC.
func ParseHLC(s string) (HLC, error) {
	i := strings.IndexByte(s, ':')
	if i < 0 {
		return HLC{}, fmt.Errorf("%w: %q has no ':'", ErrBadHLC, clip(s))
	}
	j := strings.IndexByte(s[i+1:], ':')
	if j < 0 {
		return HLC{}, fmt.Errorf("%w: %q has one ':', want two", ErrBadHLC, clip(s))
	}
	j += i + 1
	wall, ok := parseDigits(s[:i], math.MaxInt64)
	if !ok {
		return HLC{}, fmt.Errorf("%w: bad milliseconds %q", ErrBadHLC, clip(s[:i]))
	}
	counter, ok := parseDigits(s[i+1:j], math.MaxUint64)
	if !ok {
		return HLC{}, fmt.Errorf("%w: bad counter %q", ErrBadHLC, clip(s[i+1:j]))
	}
	node := s[j+1:]
	switch {
	case node == "":
		return HLC{}, fmt.Errorf("%w: empty node id", ErrBadHLC)
	case len(node) > MaxNodeIDLen:
		return HLC{}, fmt.Errorf("%w: node id of %d bytes exceeds %d", ErrBadHLC, len(node), MaxNodeIDLen)
	case strings.IndexByte(node, ':') >= 0:
		return HLC{}, fmt.Errorf("%w: node id %q holds ':'", ErrBadHLC, clip(node))
	}
	return HLC{Wall: int64(wall), Counter: counter, Node: node}, nil
}

// parseDigits parses a non-empty run of ASCII digits no greater than max.
func parseDigits(s string, max uint64) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (max-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// String returns the protocol form: Wall zero-padded to 15 digits, Counter
// to 5 (both minimum widths), then the node id.
func (h HLC) String() string {
	return string(h.AppendText(make([]byte, 0, 22+len(h.Node))))
}

// AppendText appends the String form to b.
func (h HLC) AppendText(b []byte) []byte {
	b = appendPadded(b, uint64(h.Wall), 15)
	b = append(b, ':')
	b = appendPadded(b, h.Counter, 5)
	b = append(b, ':')
	return append(b, h.Node...)
}

// appendPadded appends v in decimal, zero-padded to width digits (at
// most 20, a uint64's): the digits are written from the end of a
// 20-byte field of zeros, which is then appended from where the padded
// number starts, in one copy (every SET formats its version's 15 + 5
// digits: strconv's, then a zero appended at a time, cost twice this).
func appendPadded(b []byte, v uint64, width int) []byte {
	tmp := [20]byte{'0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0'}
	i := len(tmp)
	for v >= 10 {
		i--
		q := v / 10
		tmp[i] = byte('0' + v - q*10)
		v = q
	}
	i--
	tmp[i] = byte('0' + v)
	return append(b, tmp[min(i, len(tmp)-width):]...)
}

// IsZero reports whether h is the zero HLC ("no version").
func (h HLC) IsZero() bool { return h.Wall == 0 && h.Counter == 0 && h.Node == "" }

// Compare returns -1, 0 or +1 as h is older than, equal to or newer than
// o: by Wall, then Counter, then byte-wise Node.
func (h HLC) Compare(o HLC) int {
	switch {
	case h.Wall < o.Wall:
		return -1
	case h.Wall > o.Wall:
		return 1
	case h.Counter < o.Counter:
		return -1
	case h.Counter > o.Counter:
		return 1
	}
	return strings.Compare(h.Node, o.Node)
}

// Time returns the wall part as a time.Time.
func (h HLC) Time() time.Time { return time.UnixMilli(h.Wall) }

// tick returns the smallest issued-style successor of h: the next counter
// in the same millisecond, or the next millisecond once the counter would
// pass MaxIssuedCounter.
func (h HLC) tick(node string) HLC {
	if h.Counter >= MaxIssuedCounter {
		return HLC{Wall: h.Wall + 1, Node: node}
	}
	return HLC{Wall: h.Wall, Counter: h.Counter + 1, Node: node}
}

// hlcUpdate is the HLC receive rule of the SDKs (Go Update, Rust update),
// used by the store to version a change: local is the store's clock,
// remote the request's __ts (zero when absent), wall the store's wall
// clock in ms. If wall is ahead of both, the result is (wall, 0);
// otherwise the larger timestamp with the counter one past the counter(s)
// at that timestamp. The result is always greater than local and remote.
func hlcUpdate(local, remote HLC, wall int64, node string) HLC {
	if wall > local.Wall && wall > remote.Wall {
		return HLC{Wall: wall, Node: node}
	}
	var base HLC
	switch {
	case local.Wall == remote.Wall:
		base = local
		if remote.Counter > base.Counter {
			base = remote
		}
	case local.Wall > remote.Wall:
		base = local
	default:
		base = remote
	}
	return base.tick(node)
}
