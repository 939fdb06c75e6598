package twin

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
)

// Snapshot format (see doc.go). FROZEN once written: a change needs a new
// snapshotFormat and a reader for the old one.
const (
	snapshotMagic  = "SGTWIN\x00\x00"
	snapshotFormat = 3 // 2 added MODELID, 3 the C2D ledger; Restore reads 1 and 2 too
)

// Snapshot writes the engine's replicated state (every identity and twin;
// not the index, which Restore rebuilds) to w in the snapshot format.
// Equal states give equal bytes. It holds the read lock while it writes.
func (e *Engine) Snapshot(w io.Writer) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	keys := make([]string, 0, len(e.recs))
	for k := range e.recs {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a device sorts before its modules ("d" < "d/m")
	bw := bufio.NewWriterSize(w, 64<<10)
	crc := crc32.New(castagnoli)
	out := io.MultiWriter(bw, crc)
	var hdr enc
	hdr.b = append(hdr.b, snapshotMagic...)
	hdr.b = binary.BigEndian.AppendUint32(hdr.b, snapshotFormat)
	hdr.u64(uint64(len(keys)))
	if _, err := out.Write(hdr.b); err != nil {
		return fmt.Errorf("twin: snapshot: %w", err)
	}
	var rb enc
	for _, k := range keys {
		rb.b = rb.b[:0]
		encodeRecord(&rb, e.recs[k])
		if _, err := out.Write(rb.b); err != nil {
			return fmt.Errorf("twin: snapshot: %w", err)
		}
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc.Sum32())
	if _, err := bw.Write(sum[:]); err != nil {
		return fmt.Errorf("twin: snapshot: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("twin: snapshot: %w", err)
	}
	return nil
}

func encodeRecord(e *enc, r *record) {
	id := &r.id
	e.str(r.deviceID)
	e.str(r.moduleID)
	e.varint(id.etagVer)
	e.str(id.generationID)
	e.u8(id.status)
	e.str(id.statusReason)
	e.varint(id.statusUpdated)
	e.u8(id.auth)
	e.str(id.primaryKey)
	e.str(id.secondaryKey)
	e.str(id.primaryThumb)
	e.str(id.secondThumb)
	e.boolean(id.iotEdge)
	e.str(id.managedBy)
	e.boolean(id.connected)
	e.str(id.connID)
	e.str(id.modelID)
	e.varint(id.connUpdated)
	e.varint(id.lastActivity)
	e.varint(r.version)
	e.varint(r.desiredVer)
	e.varint(r.reportedVer)
	e.value(&r.tags)
	e.metaValue(&r.desired)
	e.metaValue(&r.reported)
	e.uvarint(uint64(len(r.c2d)))
	for _, it := range r.c2d {
		e.str(it.mid)
		e.varint(it.expiry)
	}
}

// Restore replaces the engine's state with a snapshot's. On any error
// (wrapping ErrCorrupt or ErrUnsupportedFormat, or the reader's) the
// engine is unchanged.
func (e *Engine) Restore(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("twin: restore: %w", err)
	}
	body, err := checkCRC(b)
	if err != nil {
		return fmt.Errorf("twin: snapshot: %w", err)
	}
	if len(body) < 20 || string(body[:8]) != snapshotMagic {
		return corruptf("snapshot: bad magic")
	}
	format := binary.BigEndian.Uint32(body[8:])
	if format < 1 || format > snapshotFormat {
		return fmt.Errorf("%w: snapshot format %d", ErrUnsupportedFormat, format)
	}
	d := dec{b: body, off: 12}
	n := d.u64()
	if n > uint64(len(body)) {
		return corruptf("snapshot: %d records in %d bytes", n, len(body))
	}
	fresh, err := New(e.opts, e.log)
	if err != nil {
		return err
	}
	fresh.rand = e.rand
	prev := ""
	for i := uint64(0); i < n && d.err == nil; i++ {
		r := decodeRecord(&d, format)
		if d.err != nil {
			break
		}
		if r.key <= prev && i > 0 {
			return corruptf("snapshot: record %q out of order", r.key)
		}
		prev = r.key
		if r.isModule() {
			dev := fresh.recs[r.deviceID]
			if dev == nil {
				return corruptf("snapshot: module %q without its device", r.key)
			}
			dev.modules++
			fresh.mods.insert(r.key)
		} else {
			fresh.devs.insert(r.key)
		}
		fresh.recs[r.key] = r
		fresh.idx.add(r, idxAll)
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return fmt.Errorf("twin: snapshot: %w", d.err)
	}
	e.mu.Lock()
	e.recs, e.devs, e.mods, e.idx = fresh.recs, fresh.devs, fresh.mods, fresh.idx
	e.mu.Unlock()
	return nil
}

// decodeRecord reads one record of a snapshot of the given format.
func decodeRecord(d *dec, format uint32) *record {
	r := &record{}
	id := &r.id
	r.deviceID, r.moduleID = d.str(), d.str()
	id.etagVer = d.varint()
	id.generationID = d.str()
	id.status = d.u8()
	id.statusReason = d.str()
	id.statusUpdated = d.varint()
	id.auth = d.u8()
	id.primaryKey, id.secondaryKey = d.str(), d.str()
	id.primaryThumb, id.secondThumb = d.str(), d.str()
	id.iotEdge = d.boolean()
	id.managedBy = d.str()
	id.connected = d.boolean()
	id.connID = d.str()
	if format >= 2 {
		id.modelID = d.str()
	}
	id.connUpdated, id.lastActivity = d.varint(), d.varint()
	r.version, r.desiredVer, r.reportedVer = d.varint(), d.varint(), d.varint()
	r.tags = d.value()
	r.desired = d.metaValue()
	r.reported = d.metaValue()
	if format >= 3 {
		n := d.uvarint()
		if d.err == nil && (n > MaxC2DQueueDepth || n > 0 && r.moduleID != "") {
			d.fail("cloud-to-device ledger too long or on a module")
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			it := c2dItem{mid: d.str(), expiry: d.varint()}
			if d.err == nil && (it.mid == "" || len(it.mid) > MaxC2DMessageIDBytes || it.expiry <= 0) {
				d.fail("cloud-to-device ledger entry out of range")
			}
			r.c2d = append(r.c2d, it)
		}
	}
	if d.err != nil {
		return r
	}
	switch {
	case r.deviceID == "" || id.status > statusDisabled || id.auth > authNone:
		d.fail("record field out of range")
	case r.tags.kind != KindObject || r.desired.kind != KindObject || r.reported.kind != KindObject:
		d.fail("section is not an object")
	}
	r.key = TwinKey(r.deviceID, r.moduleID)
	return r
}
