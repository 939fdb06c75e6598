package statestore

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"
	"strings"
)

// Snapshot format (see doc.go). FROZEN once written: a change needs a new
// snapshotFormat and a reader for the old one.
const (
	snapshotMagic  = "SGSTATE\x00"
	snapshotFormat = 1
)

// Snapshot writes the engine's replicated state (keys, the applied clock,
// the change history and the response cache; not the KEYNOTIFY
// registrations) to w in the snapshot format. Equal states give equal
// bytes. It is Freeze then WriteTo: the engine lock is held only while the
// state is copied.
func (e *Engine) Snapshot(w io.Writer) error {
	_, err := e.Freeze().WriteTo(w)
	return err
}

// Frozen is the engine's replicated state as of one instant (Freeze),
// ready to be written as a snapshot without the engine's lock.
type Frozen struct {
	applied, floor HLC
	keys           []frozenKey
	hist           []histEvent
	cache          []dedupEntry // live entries, in insertion order
	cacheLen       int
}

type frozenKey struct {
	key      string
	value    []byte
	version  HLC
	expireAt int64
	token    HLC
}

// Freeze copies the engine's replicated state under its lock, which it
// holds only for the copy: the keys' values, the history's and the
// cache's replies are never modified in place, so the copy shares them.
// Sorting, encoding and checksumming happen in WriteTo, while requests go
// on (an owner that must pair the snapshot with a log position takes both
// under the lock that orders its entries, then writes after releasing
// it).
func (e *Engine) Freeze() *Frozen {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.st
	f := &Frozen{applied: s.applied, floor: s.hist.floor, keys: make([]frozenKey, 0, len(s.keys)),
		hist: make([]histEvent, s.hist.len()), cacheLen: s.cache.len(), cache: make([]dedupEntry, 0, s.cache.len())}
	for _, it := range s.keys {
		f.keys = append(f.keys, frozenKey{key: it.key, value: it.value(), version: it.version, expireAt: it.expireAt, token: it.fenced()})
	}
	for i := range f.hist {
		f.hist[i] = *s.hist.at(i)
	}
	for i := 0; i < s.cache.n; i++ {
		if d := s.cache.at(i); !d.dead {
			f.cache = append(f.cache, *d) // a copy: the dead flag may change later
		}
	}
	return f
}

// WriteTo writes the frozen state in the snapshot format (io.WriterTo).
func (f *Frozen) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	sw := snapWriter{w: bufio.NewWriterSize(cw, 64<<10), crc: crc32.New(castagnoli)}
	sw.bytes([]byte(snapshotMagic))
	sw.u32(snapshotFormat)
	sw.hlc(f.applied)
	sw.hlc(f.floor)

	slices.SortFunc(f.keys, func(a, b frozenKey) int { return strings.Compare(a.key, b.key) })
	sw.u64(uint64(len(f.keys)))
	for i := range f.keys {
		it := &f.keys[i]
		sw.fieldString(it.key)
		sw.field(it.value)
		sw.hlc(it.version)
		sw.u64(uint64(it.expireAt))
		sw.hlc(it.token)
	}

	sw.u64(uint64(len(f.hist)))
	for i := range f.hist {
		ev := &f.hist[i]
		sw.hlc(ev.version)
		sw.bytes([]byte{byte(ev.op)})
		sw.fieldString(ev.key)
		if ev.op == OpSet {
			sw.field(ev.value())
		}
	}

	sw.u64(uint64(f.cacheLen))
	for i := range f.cache {
		d := &f.cache[i]
		id := d.id.field()
		sw.field(id[:])
		sw.u64(uint64(d.expireAt))
		sw.hlc(d.reply.Version)
		sw.field(d.reply.Payload)
	}
	if sw.err == nil {
		var sum [4]byte
		binary.BigEndian.PutUint32(sum[:], sw.crc.Sum32())
		_, sw.err = sw.w.Write(sum[:])
	}
	if sw.err == nil {
		sw.err = sw.w.Flush()
	}
	if sw.err != nil {
		return cw.n, fmt.Errorf("statestore: write snapshot: %w", sw.err)
	}
	return cw.n, nil
}

// countWriter counts what reaches w.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type snapWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	err error
	tmp [17]byte
	str []byte // a string's bytes (fieldString, hlc), reused
}

func (w *snapWriter) bytes(p []byte) {
	if w.err != nil {
		return
	}
	w.crc.Write(p)
	_, w.err = w.w.Write(p)
}

func (w *snapWriter) u32(v uint32) { w.bytes(binary.BigEndian.AppendUint32(w.tmp[:0], v)) }
func (w *snapWriter) u64(v uint64) { w.bytes(binary.BigEndian.AppendUint64(w.tmp[:0], v)) }

func (w *snapWriter) field(p []byte) {
	w.u32(uint32(len(p)))
	w.bytes(p)
}

// fieldString is field of a string's bytes, without converting it.
func (w *snapWriter) fieldString(s string) {
	w.u32(uint32(len(s)))
	w.str = append(w.str[:0], s...)
	w.bytes(w.str)
}

// hlc writes an HLC; the zero HLC is 17 zero bytes.
func (w *snapWriter) hlc(h HLC) {
	w.u64(uint64(h.Wall))
	w.u64(h.Counter)
	w.str = append(append(w.str[:0], byte(len(h.Node))), h.Node...)
	w.bytes(w.str)
}

// Restore replaces the engine's replicated state with a snapshot read from
// r, which must end where the snapshot ends. KEYNOTIFY registrations are
// kept. On any error (wrapping ErrCorrupt, ErrUnsupportedFormat, or the
// reader's error) the engine is unchanged.
func (e *Engine) Restore(r io.Reader) error {
	sr := &snapReader{r: bufio.NewReaderSize(r, 64<<10), crc: crc32.New(castagnoli)}
	st, err := sr.read(&e.opts)
	if err != nil {
		return fmt.Errorf("statestore: restore snapshot: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st = st
	e.issued = st.applied
	e.log.Info("statestore: restored snapshot", "keys", len(st.keys), "bytes", st.bytes,
		"history", st.hist.len(), "applied", st.applied.String())
	return nil
}

type snapReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	off int64
	tmp [17]byte
}

// fill reads len(p) bytes; a short read is corruption (truncation).
func (r *snapReader) fill(p []byte, what string) error {
	n, err := io.ReadFull(r.r, p)
	r.crc.Write(p[:n])
	r.off += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return corruptf("snapshot truncated in %s at offset %d", what, r.off)
		}
		return err
	}
	return nil
}

func (r *snapReader) u64(what string) (uint64, error) {
	if err := r.fill(r.tmp[:8], what); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(r.tmp[:8]), nil
}

// field reads a length-prefixed byte string, allocating as data arrives
// rather than trusting the length.
func (r *snapReader) field(what string) ([]byte, error) {
	if err := r.fill(r.tmp[:4], what); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(r.tmp[:4]))
	if n > maxFieldLen {
		return nil, corruptf("snapshot %s length %d at offset %d exceeds %d", what, n, r.off-4, maxFieldLen)
	}
	const chunk = 64 << 10
	p := make([]byte, 0, min(n, chunk))
	for len(p) < n {
		m := min(n-len(p), chunk)
		p = append(p, make([]byte, m)...)
		if err := r.fill(p[len(p)-m:], what); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (r *snapReader) hlc(what string, optional bool) (HLC, error) {
	if err := r.fill(r.tmp[:17], what); err != nil {
		return HLC{}, err
	}
	h := HLC{Wall: int64(binary.BigEndian.Uint64(r.tmp[:8])), Counter: binary.BigEndian.Uint64(r.tmp[8:16])}
	node := make([]byte, r.tmp[16])
	if err := r.fill(node, what); err != nil {
		return HLC{}, err
	}
	h.Node = string(node)
	switch {
	case h.IsZero() && optional:
	case h.Wall < 0 || h.Node == "" || bytes.IndexByte(node, ':') >= 0:
		return HLC{}, corruptf("snapshot %s at offset %d is not a valid HLC", what, r.off)
	}
	return h, nil
}

func (r *snapReader) read(o *Options) (state, error) {
	st := newState(o)
	var head [12]byte
	if err := r.fill(head[:], "header"); err != nil {
		return st, err
	}
	if string(head[:8]) != snapshotMagic {
		return st, corruptf("snapshot magic %q", head[:8])
	}
	if f := binary.BigEndian.Uint32(head[8:]); f != snapshotFormat {
		return st, fmt.Errorf("%w: snapshot format %d", ErrUnsupportedFormat, f)
	}
	var err error
	if st.applied, err = r.hlc("APPLIED", true); err != nil {
		return st, err
	}
	if st.hist.floor, err = r.hlc("HISTFLOOR", true); err != nil {
		return st, err
	}
	newer := func(h HLC, what string) error {
		if h.Compare(st.applied) > 0 {
			return corruptf("snapshot %s %s is newer than APPLIED %s", what, h, st.applied)
		}
		return nil
	}
	if err := newer(st.hist.floor, "HISTFLOOR"); err != nil {
		return st, err
	}

	n, err := r.u64("NKEYS")
	if err != nil {
		return st, err
	}
	prev := ""
	for i := uint64(0); i < n; i++ {
		k, err := r.field("KEY")
		if err != nil {
			return st, err
		}
		if len(k) == 0 || (i > 0 && string(k) <= prev) {
			return st, corruptf("snapshot key %d at offset %d is empty or out of order", i, r.off)
		}
		it := newItem(k)
		prev = it.key
		value, err := r.field("VALUE")
		if err != nil {
			return st, err
		}
		if it.version, err = r.hlc("VERSION", false); err != nil {
			return st, err
		}
		if err := newer(it.version, "VERSION"); err != nil {
			return st, err
		}
		exp, err := r.u64("EXPIREAT")
		if err != nil {
			return st, err
		}
		it.expireAt = int64(exp)
		token, err := r.hlc("TOKEN", true)
		if err != nil {
			return st, err
		}
		if !token.IsZero() {
			it.token = &token
		}
		it.setReply(value)
		st.keys[it.key] = it
		st.bytes += int64(len(it.key) + len(value))
		if it.expireAt != 0 {
			it.heapIdx = len(st.exp)
			st.exp = append(st.exp, it)
		}
	}
	heap.Init(&st.exp)

	if n, err = r.u64("NHIST"); err != nil {
		return st, err
	}
	last := st.hist.floor
	for i := uint64(0); i < n; i++ {
		var ev histEvent
		if ev.version, err = r.hlc("EVENT VERSION", false); err != nil {
			return st, err
		}
		if ev.version.Compare(last) <= 0 {
			return st, corruptf("snapshot history event %d version %s is not after %s", i, ev.version, last)
		}
		if err := newer(ev.version, "EVENT VERSION"); err != nil {
			return st, err
		}
		last = ev.version
		var op [1]byte
		if err := r.fill(op[:], "EVENT OP"); err != nil {
			return st, err
		}
		ev.op = Op(op[0])
		if ev.op != OpSet && ev.op != OpDelete {
			return st, corruptf("snapshot history event %d op %d", i, op[0])
		}
		k, err := r.field("EVENT KEY")
		if err != nil {
			return st, err
		}
		ev.key = string(k)
		if ev.op == OpSet {
			v, err := r.field("EVENT VALUE")
			if err != nil {
				return st, err
			}
			ev = newHistEvent(ev.version, ev.op, ev.key, v)
		}
		st.hist.push(ev)
	}

	if n, err = r.u64("NCACHE"); err != nil {
		return st, err
	}
	for i := uint64(0); i < n; i++ {
		k, err := r.field("CACHE KEY")
		if err != nil {
			return st, err
		}
		id := dedupIDOfField(k)
		tag := st.cache.tagOf(&id)
		if st.cache.find(&id, tag) != nil {
			return st, corruptf("snapshot cache key %d repeated", i)
		}
		exp, err := r.u64("CACHE EXPIREAT")
		if err != nil {
			return st, err
		}
		var reply Reply
		if reply.Version, err = r.hlc("CACHE VERSION", true); err != nil {
			return st, err
		}
		if reply.Payload, err = r.field("CACHE PAYLOAD"); err != nil {
			return st, err
		}
		st.cache.add(nil, &id, tag, reply, int64(exp))
	}

	want := r.crc.Sum32()
	var sum [4]byte
	if err := r.fill(sum[:], "CRC"); err != nil {
		return st, err
	}
	if got := binary.BigEndian.Uint32(sum[:]); got != want {
		return st, corruptf("snapshot checksum 0x%08x, want 0x%08x", got, want)
	}
	if _, err := r.r.ReadByte(); err != io.EOF {
		if err != nil {
			return st, err
		}
		return st, corruptf("snapshot has bytes after its checksum at offset %d", r.off)
	}
	return st, nil
}
