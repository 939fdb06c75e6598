package record

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

const hexUpper = "0123456789ABCDEF"

// Message id widths (frozen; protocol section 3.6), in hex characters.
const (
	OffsetMessageIDLenV4 = 2 * (4 + 4 + 8)          // 32: IPv4 + port + physical offset
	OffsetMessageIDLenV6 = 2 * (16 + 4 + 8)         // 56: IPv6 + port + physical offset
	UniqueIDLenV4        = 2 * (4 + 2 + 4 + 4 + 2)  // 32: IPv4 + pid + class-loader hash + ms + counter
	UniqueIDLenV6        = 2 * (16 + 2 + 4 + 4 + 2) // 56: IPv6 + pid + class-loader hash + ms + counter
)

func appendHex(dst, b []byte) []byte {
	for _, c := range b {
		dst = append(dst, hexUpper[c>>4], hexUpper[c&0xF])
	}
	return dst
}

// decodeHex decodes the case-insensitive hex string s into dst
// (len(dst) == len(s)/2).
func decodeHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := unhex(s[2*i])
		lo, ok2 := unhex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// putIP writes a as 4 bytes (IPv4, or the zero Addr as 0.0.0.0) or 16 bytes
// (IPv6) and returns the width.
func putIP(b []byte, a netip.Addr) int {
	switch {
	case a.Is6():
		ip := a.As16()
		return copy(b, ip[:])
	case a.Is4():
		ip := a.As4()
		return copy(b, ip[:])
	default:
		clear(b[:4])
		return 4
	}
}

// AppendOffsetMessageID appends the offset message id of a record: the store
// host IP (4 or 16 bytes), its port as a 4-byte int and the record's
// physical offset (8 bytes), as uppercase hex (32 or 56 characters). The
// zero AddrPort is written as 0.0.0.0:0. It does not allocate beyond growing
// dst.
func AppendOffsetMessageID(dst []byte, storeHost netip.AddrPort, physicalOffset int64) []byte {
	var buf [28]byte
	n := putIP(buf[:], storeHost.Addr())
	be.PutUint32(buf[n:], uint32(storeHost.Port()))
	be.PutUint64(buf[n+4:], uint64(physicalOffset))
	return appendHex(dst, buf[:n+12])
}

// OffsetMessageID returns AppendOffsetMessageID(nil, ...) as a string.
func OffsetMessageID(storeHost netip.AddrPort, physicalOffset int64) string {
	var buf [OffsetMessageIDLenV6]byte
	return string(AppendOffsetMessageID(buf[:0], storeHost, physicalOffset))
}

// ParseOffsetMessageID decodes an offset message id (hex in either case; the
// IP width follows from the length: 32 characters IPv4, 56 IPv6). Errors
// wrap ErrBadMessageID.
func ParseOffsetMessageID(id string) (netip.AddrPort, int64, error) {
	var buf [28]byte
	var ipLen int
	switch len(id) {
	case OffsetMessageIDLenV4:
		ipLen = 4
	case OffsetMessageIDLenV6:
		ipLen = 16
	default:
		return netip.AddrPort{}, 0, fmt.Errorf("%w: offset id %q has %d characters, want %d or %d",
			ErrBadMessageID, id, len(id), OffsetMessageIDLenV4, OffsetMessageIDLenV6)
	}
	b := buf[:ipLen+12]
	if !decodeHex(b, id) {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: offset id %q is not hex", ErrBadMessageID, id)
	}
	var a netip.Addr
	if ipLen == 4 {
		a = netip.AddrFrom4([4]byte(b[:4]))
	} else {
		a = netip.AddrFrom16([16]byte(b[:16]))
	}
	port := be.Uint32(b[ipLen:])
	if port > math.MaxUint16 {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: offset id %q has port %d", ErrBadMessageID, id, port)
	}
	return netip.AddrPortFrom(a, uint16(port)), int64(be.Uint64(b[ipLen+4:])), nil
}

// UniqueIDGenerator makes client message ids (the UNIQ_KEY property) with
// the layout of Java's MessageClientIDSetter: IP (4, or 16 for IPv6) + pid
// (2) + class-loader hash (4; a random value fixed per generator) + ms since
// the start of the current month in local time (4) + counter (2, wraps),
// rendered as uppercase hex. Next is safe for concurrent use.
type UniqueIDGenerator struct {
	prefix    [2 * 22]byte // hex of IP + pid + class-loader hash
	prefixLen int
	counter   atomic.Uint32
	now       func() time.Time

	mu         sync.Mutex   // serialises month roll-over
	monthStart atomic.Int64 // ms; written under mu
	nextMonth  atomic.Int64 // ms; written under mu
}

// NewUniqueIDGenerator returns a generator for a host address and process id
// (truncated to 16 bits, as Java does). An invalid ip is replaced by 4
// random bytes (Java falls back to a fake IP too); an IPv4-mapped address is
// used as IPv4.
func NewUniqueIDGenerator(ip netip.Addr, pid int) *UniqueIDGenerator {
	return newUniqueIDGenerator(ip, pid, rand.Uint32(), time.Now)
}

func newUniqueIDGenerator(ip netip.Addr, pid int, loaderHash uint32, now func() time.Time) *UniqueIDGenerator {
	var raw [22]byte
	ip = ip.Unmap()
	if !ip.IsValid() {
		ip = netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, rand.Uint32())))
	}
	n := putIP(raw[:], ip)
	be.PutUint16(raw[n:], uint16(pid))
	be.PutUint32(raw[n+2:], loaderHash)
	g := &UniqueIDGenerator{now: now}
	g.prefixLen = len(appendHex(g.prefix[:0], raw[:n+6]))
	g.rollMonth(now())
	return g
}

// rollMonth sets the month window containing t (local time).
func (g *UniqueIDGenerator) rollMonth(t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := t.UnixMilli()
	if ms >= g.monthStart.Load() && ms < g.nextMonth.Load() {
		return // another caller already rolled
	}
	start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, t.Location())
	g.monthStart.Store(start.UnixMilli())
	g.nextMonth.Store(start.AddDate(0, 1, 0).UnixMilli())
}

// AppendNext appends the next id to dst. It does not allocate beyond growing
// dst.
func (g *UniqueIDGenerator) AppendNext(dst []byte) []byte {
	t := g.now()
	ms := t.UnixMilli()
	if ms >= g.nextMonth.Load() {
		g.rollMonth(t)
	}
	diff := ms - g.monthStart.Load()
	if diff < 0 {
		diff = 0 // clock stepped back across a month boundary
	}
	var tail [6]byte
	be.PutUint32(tail[:], uint32(diff))
	be.PutUint16(tail[4:], uint16(g.counter.Add(1)-1))
	dst = append(dst, g.prefix[:g.prefixLen]...)
	return appendHex(dst, tail[:])
}

// Next returns the next id.
func (g *UniqueIDGenerator) Next() string {
	var buf [UniqueIDLenV6]byte
	return string(g.AppendNext(buf[:0]))
}

// ParseUniqueID decodes a unique message id (hex in either case; 32
// characters for IPv4, 56 for IPv6). ms is the time since the start of the
// producer's month. Errors wrap ErrBadMessageID.
func ParseUniqueID(id string) (ip netip.Addr, pid uint16, ms int64, counter uint16, err error) {
	var buf [28]byte
	var ipLen int
	switch len(id) {
	case UniqueIDLenV4:
		ipLen = 4
	case UniqueIDLenV6:
		ipLen = 16
	default:
		return ip, 0, 0, 0, fmt.Errorf("%w: unique id %q has %d characters, want %d or %d",
			ErrBadMessageID, id, len(id), UniqueIDLenV4, UniqueIDLenV6)
	}
	b := buf[:ipLen+12]
	if !decodeHex(b, id) {
		return ip, 0, 0, 0, fmt.Errorf("%w: unique id %q is not hex", ErrBadMessageID, id)
	}
	if ipLen == 4 {
		ip = netip.AddrFrom4([4]byte(b[:4]))
	} else {
		ip = netip.AddrFrom16([16]byte(b[:16]))
	}
	pid = be.Uint16(b[ipLen:])
	ms = int64(be.Uint32(b[ipLen+6:]))
	counter = be.Uint16(b[ipLen+10:])
	return ip, pid, ms, counter, nil
}
