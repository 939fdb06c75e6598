package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Log entry format (see doc.go for the diagram). FROZEN once entries are
// on disk: a change needs a new entryFormat and a decoder for the old one.
const (
	entryMagic  = 0x53 // 'S'
	entryFormat = 1

	// maxFieldLen bounds every length-prefixed field of entries and
	// snapshots (256 MiB).
	maxFieldLen = 1 << 28
)

// entry ops.
const (
	opSet    = 1
	opDel    = 2
	opVDel   = 3
	opExpire = 4 // time passes: expire what is due, nothing else
)

// entry flags.
const (
	flagNX    = 0x01
	flagNEX   = 0x02
	flagPX    = 0x04
	flagFT    = 0x08
	flagDedup = 0x10
	flagsAll  = flagNX | flagNEX | flagPX | flagFT | flagDedup
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// logEntry is a decoded log entry: a mutation with everything Apply needs
// to decide it the same way on every replica.
type logEntry struct {
	op       uint8
	cond     Condition
	version  HLC    // assigned by Prepare; changes get versions >= it
	expiryMs int64  // PX in ms; 0 = none
	ft       HLC    // fencing token; zero = none
	key      []byte // SET, DEL, VDEL
	value    []byte // SET, VDEL
	dedup    []byte // response cache key; nil = none
	dedupTTL int64  // ms the cached reply lives, > 0 when dedup is set
}

func (e *logEntry) size() int {
	n := 4 + hlcSize(e.version) + 4
	if e.expiryMs > 0 {
		n += 8
	}
	if !e.ft.IsZero() {
		n += hlcSize(e.ft)
	}
	if e.op != opExpire {
		n += 4 + len(e.key)
	}
	if e.op == opSet || e.op == opVDel {
		n += 4 + len(e.value)
	}
	if e.dedup != nil {
		n += 4 + len(e.dedup) + 8
	}
	return n
}

// appendTo appends the encoded entry to dst.
func (e *logEntry) appendTo(dst []byte) []byte {
	start := len(dst)
	var flags byte
	switch e.cond {
	case CondNX:
		flags |= flagNX
	case CondNEX:
		flags |= flagNEX
	}
	if e.expiryMs > 0 {
		flags |= flagPX
	}
	if !e.ft.IsZero() {
		flags |= flagFT
	}
	if e.dedup != nil {
		flags |= flagDedup
	}
	dst = append(dst, entryMagic, entryFormat, e.op, flags)
	dst = appendHLC(dst, e.version)
	if e.expiryMs > 0 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.expiryMs))
	}
	if !e.ft.IsZero() {
		dst = appendHLC(dst, e.ft)
	}
	if e.op != opExpire {
		dst = appendField(dst, e.key)
	}
	if e.op == opSet || e.op == opVDel {
		dst = appendField(dst, e.value)
	}
	if e.dedup != nil {
		dst = appendField(dst, e.dedup)
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.dedupTTL))
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// decodeEntry parses and checks an entry (its checksum only when crc).
// The slices alias b; a node id equal to intern shares that string.
// Errors wrap ErrCorrupt or ErrUnsupportedFormat.
func decodeEntry(b []byte, intern string, crc bool) (logEntry, error) {
	var e logEntry
	if len(b) < 8 {
		return e, corruptf("entry of %d bytes is too short", len(b))
	}
	if b[0] != entryMagic {
		return e, corruptf("entry magic 0x%02x, want 0x%02x", b[0], entryMagic)
	}
	if b[1] != entryFormat {
		return e, fmt.Errorf("%w: entry format %d", ErrUnsupportedFormat, b[1])
	}
	body := b[:len(b)-4]
	if crc {
		if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
			return e, corruptf("entry checksum 0x%08x, want 0x%08x", got, want)
		}
	}

	e.op = b[2]
	flags := b[3]
	if e.op < opSet || e.op > opExpire {
		return e, corruptf("entry op %d", e.op)
	}
	if flags&^flagsAll != 0 {
		return e, corruptf("entry flags 0x%02x", flags)
	}
	if flags&(flagNX|flagNEX) != 0 || flags&flagPX != 0 {
		if e.op != opSet || flags&(flagNX|flagNEX) == flagNX|flagNEX {
			return e, corruptf("entry flags 0x%02x do not fit op %d", flags, e.op)
		}
	}
	if flags&flagFT != 0 && e.op == opExpire {
		return e, corruptf("expire entry with a fencing token")
	}
	switch {
	case flags&flagNX != 0:
		e.cond = CondNX
	case flags&flagNEX != 0:
		e.cond = CondNEX
	}
	d := decoder{b: body, pos: 4, intern: intern}
	e.version = d.hlc("VERSION")
	if flags&flagPX != 0 {
		e.expiryMs = d.int64("PX")
		if d.err == nil && (e.expiryMs <= 0 || e.expiryMs > maxExpiryMs) {
			d.fail("PX %d out of range", e.expiryMs)
		}
	}
	if flags&flagFT != 0 {
		e.ft = d.hlc("FT")
	}
	if e.op != opExpire {
		e.key = d.field("KEY")
		if d.err == nil && len(e.key) == 0 {
			d.fail("empty key")
		}
	}
	if e.op == opSet || e.op == opVDel {
		e.value = d.field("VALUE")
	}
	if flags&flagDedup != 0 {
		e.dedup = d.field("DEDUP")
		e.dedupTTL = d.int64("DEDUPTTL")
		if d.err == nil && e.dedupTTL <= 0 {
			d.fail("DEDUPTTL %d is not positive", e.dedupTTL)
		}
	}
	if d.err == nil && d.pos != len(body) {
		d.fail("%d bytes after the last field", len(body)-d.pos)
	}
	if d.err != nil {
		return logEntry{}, fmt.Errorf("entry: %w", d.err)
	}
	return e, nil
}

// hlcSize is the encoded size of an HLC: WALL(8) COUNTER(8) NODELEN(1) NODE.
func hlcSize(h HLC) int { return 17 + len(h.Node) }

func appendHLC(dst []byte, h HLC) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.Wall))
	dst = binary.BigEndian.AppendUint64(dst, h.Counter)
	dst = append(dst, byte(len(h.Node)))
	return append(dst, h.Node...)
}

func appendField(dst, f []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(f)))
	return append(dst, f...)
}

// decoder reads big-endian fields from a byte slice, remembering the first
// error (after which every read returns zero values).
type decoder struct {
	b      []byte
	pos    int
	err    error
	intern string // a node id expected often (the engine's own)
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = corruptf("at offset %d: %s", d.pos, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.pos {
		d.fail("%s needs %d bytes, %d left", what, n, len(d.b)-d.pos)
		return nil
	}
	p := d.b[d.pos : d.pos+n : d.pos+n]
	d.pos += n
	return p
}

func (d *decoder) uint8(what string) uint8 {
	p := d.take(1, what)
	if p == nil {
		return 0
	}
	return p[0]
}

func (d *decoder) uint32(what string) uint32 {
	p := d.take(4, what)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint32(p)
}

func (d *decoder) uint64(what string) uint64 {
	p := d.take(8, what)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint64(p)
}

func (d *decoder) int64(what string) int64 { return int64(d.uint64(what)) }

func (d *decoder) field(what string) []byte {
	n := d.uint32(what)
	if d.err == nil && n > maxFieldLen {
		d.fail("%s length %d exceeds %d", what, n, maxFieldLen)
	}
	return d.take(int(n), what)
}

// hlc reads an HLC and checks it is a value ParseHLC could have produced.
// A node id equal to d.intern reuses that string instead of allocating.
func (d *decoder) hlc(what string) HLC {
	wall := d.int64(what)
	counter := d.uint64(what)
	n := d.uint8(what)
	node := d.take(int(n), what)
	if d.err != nil {
		return HLC{}
	}
	if wall < 0 || n == 0 || bytes.IndexByte(node, ':') >= 0 {
		d.fail("%s is not a valid HLC", what)
		return HLC{}
	}
	h := HLC{Wall: wall, Counter: counter, Node: d.intern}
	if string(node) != d.intern {
		h.Node = string(node)
	}
	return h
}
